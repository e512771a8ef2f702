"""Byte-identical archives: one timestamp for every member (atomic writes: ``atomic.py``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import ConfigError
from ..shipped_runtime.environment import SOURCE_DATE_EPOCH

DEFAULT_EPOCH = 1451606400  # 2016-01-01T00:00:00Z, used when SOURCE_DATE_EPOCH is not set
ZIP_MIN_EPOCH = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip entry can hold


def source_date_epoch(environ: Mapping[str, str] = os.environ) -> int | None:
    """``SOURCE_DATE_EPOCH`` from the environment, or None when unset.

    https://reproducible-builds.org/specs/source-date-epoch/
    """
    value = environ.get(SOURCE_DATE_EPOCH, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        message = f"{value!r} is not a whole number of seconds"
        raise ConfigError(message, SOURCE_DATE_EPOCH) from None


def archive_epoch(epoch: int | None, *, for_zip: bool = False) -> int:
    """The timestamp archive members get: ``epoch`` or the default, clamped to what zip can hold."""
    chosen = DEFAULT_EPOCH if epoch is None else epoch
    return max(chosen, ZIP_MIN_EPOCH) if for_zip else max(chosen, 0)

"""Which torch a build may run under: the same major.minor release (2.13.0 and 2.13.1 share
an ABI, 2.14 does not). The editable hook checks it, a wheel's torch pin and import guard
state it."""

from __future__ import annotations

import re


def major_minor(version: str) -> tuple[int, int] | None:
    """``(2, 13)`` of ``2.13.1+cu130`` (or ``v2.13``); None when it names no major.minor."""
    match = re.match(r"\s*v?(\d+)\.(\d+)", str(version))
    return (int(match.group(1)), int(match.group(2))) if match else None


def same_release(version: str, other: str) -> bool:
    return major_minor(version) == major_minor(other)

"""The build record, ``.dist-info/pep517_torch.json``: the torch a wheel's binaries were built
against. ``build_record`` writes its text; ``read_record`` is the one reading of it ``index``
trusts, so a new field is one change here (its check, and its part in ``variant``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

BUILD_RECORD = "pep517_torch.json"
RECORD_LIMIT = 16 * 1024 * 1024  # its operator table is the bulk (ops/table.py's own bound)

_LOCAL_LABEL = re.compile(r"[a-z0-9]+(?:\.[a-z0-9]+)*")
_CUDA = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}")
_CUDA_MAJOR = re.compile(r"[0-9]{1,3}")
VARIANT = re.compile(r"[0-9][0-9a-z.+]*")  # what a page or folder name may hold


class RecordError(ValueError):
    """A build record ``index`` will not use; the message names the field."""


def build_record(torch_version: str, torch_cuda: str | None, cuda: str | None = None, *,
                 ops: Mapping[str, object] | None = None) -> bytes:
    """The text of ``pep517_torch.json``: the torch a wheel's binaries were built against and,
    when they need a CUDA torch, its CUDA major (``"cuda": "13"``); ``ops``: the operators they
    register, as the backend listed them (read back by ``ops/table.py``, not here)."""
    record: dict[str, object] = {"torch": torch_version, "torch_cuda": torch_cuda,
                                 **({"cuda": cuda} if cuda else {})}
    if ops is not None:
        record["ops"] = dict(ops)
    return (json.dumps(record, sort_keys=True) + "\n").encode()


def variant_name(torch_version: str, torch_cuda: str | None, cuda: str | None = None) -> str:
    """``2.13.0+cpu``, ``2.14.1+cu130``: torch's own label, or one made from its CUDA; binaries
    that need CUDA (``cuda``, its major) built beside a CPU torch: ``2.13.0+cu13``."""
    if cuda and not torch_cuda:
        return f"{torch_version.split('+')[0]}+cu{cuda}"
    if "+" in torch_version:
        return torch_version
    return torch_version + (f"+cu{torch_cuda.replace('.', '')}" if torch_cuda else "+cpu")


@dataclass(frozen=True)
class BuildTorch:
    """What a wheel's record says, checked: the torch (a normalised version), its CUDA, and the
    CUDA major the binaries need of a torch (None: none, or any)."""

    torch: str
    torch_cuda: str | None
    cuda: str | None = None

    @property
    def variant(self) -> str:
        """The torch variant the wheel serves: its page ``torch-<variant>.html`` and its simple
        repository ``torch-<variant>/`` are named by it (only ``[0-9a-z.+]``, never a path)."""
        return variant_name(self.torch, self.torch_cuda, self.cuda)


def read_record(data: bytes) -> BuildTorch:
    """The record's text, checked field by field (RecordError names the one at fault)."""
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise RecordError(f"not JSON ({error})") from None
    if not isinstance(record, dict):
        raise RecordError(f"not a JSON object but {type(record).__name__}")
    torch = record.get("torch")
    if not isinstance(torch, str):
        raise RecordError(f"'torch' must be a torch version string, got {torch!r}")
    try:
        version = Version(torch)
    except InvalidVersion:
        raise RecordError(f"'torch' is not a version: {torch!r}") from None
    if version.epoch or (version.local is not None and not _LOCAL_LABEL.fullmatch(
            torch.partition("+")[2])):
        raise RecordError(f"'torch' is not a torch version (local label of [a-z0-9.]): {torch!r}")
    cuda = record.get("torch_cuda")
    if cuda is not None and not (isinstance(cuda, str) and _CUDA.fullmatch(cuda)):
        raise RecordError(f"'torch_cuda' must be MAJOR.MINOR or null, got {cuda!r}")
    needed = record.get("cuda")
    if needed is not None and not (isinstance(needed, str) and _CUDA_MAJOR.fullmatch(needed)):
        raise RecordError(f"'cuda' must be a CUDA major (\"13\") or absent, got {needed!r}")
    checked = BuildTorch(str(version), cuda, needed)
    if not VARIANT.fullmatch(checked.variant):  # a normalised version holds nothing else
        raise RecordError(f"'torch' is not a torch version: {torch!r}")
    return checked

"""CUDA extensions that use torch's CUDA API build only where CUDA is on.

A setup.py that always builds a CUDAExtension (or decides with a probe migrate cannot force)
would make a table that fails on every machine whose torch is a CPU build: torch's CUDA headers
(``ATen/cuda``, ``c10/cuda``) are not there. Such an extension gets ``if = { cuda = true,
torch-cuda = true }``: built where CUDA is on (``cuda = "auto"``: a CUDA build of torch and nvcc)
and never against a CPU torch, not even when an override (``FORCE_CUDA``) turns CUDA on. An
include guarded by ``#ifdef`` and the like does not count: the extension builds without it.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

from ...core import scan
from ...core.spec import CUDA_HEADER_SUFFIXES, CUDA_SUFFIXES
from .metadata import Notes


def _files(root: Path, patterns: list[str]) -> list[Path]:
    found: list[Path] = []
    for pattern in patterns:
        found += [Path(p) for p in sorted(glob.glob(str(root / pattern), recursive=True))]
    return found


def is_cuda_extension(table: dict[str, Any]) -> bool:
    """Whether the table compiles with CUDA wherever it builds (as torch's CUDAExtension does)."""
    suffixes = CUDA_SUFFIXES | CUDA_HEADER_SUFFIXES
    return table.get("with-cuda") is True or (
        table.get("with-cuda", "auto") == "auto"
        and any(Path(s).suffix in suffixes for s in table.get("sources", []))
    )


def torch_cuda_include(table: dict[str, Any], root: Path) -> scan.Include | None:
    """The first include of torch's CUDA API reachable from the table's own sources."""
    dirs = [root / d for d in table.get("include-dirs", [])]
    found = scan.torch_cuda_includes(scan.walk_includes(_files(root, table["sources"]), dirs))
    return found[0] if found else None


def require_cuda(
    extensions: list[dict[str, Any]], conditions: dict[str, dict[str, Any]], root: Path,
    notes: Notes,
) -> list[str]:
    """Add ``cuda = true`` to the condition of each CUDA extension using torch's CUDA API;
    returns their names."""
    conditioned: list[str] = []
    for table in extensions:
        name = table["name"]
        condition = conditions.get(name, {})
        if condition.get("torch-cuda") is True or not is_cuda_extension(table):
            continue
        include = torch_cuda_include(table, root)
        if include is None:
            continue
        file = include.file
        where = f"{file.relative_to(root).as_posix() if file.is_relative_to(root) else file}:" \
            f"{include.line}"
        if condition.get("cuda") is False:
            notes.append((name, f"{where} includes <{include.header}>, which a CPU build of"
                          " torch lacks, yet setup.py builds it without CUDA: review"))
            continue
        conditions[name] = {**condition, "cuda": True, "torch-cuda": True}
        conditioned.append(name)
        notes.append((name, f"{where} includes <{include.header}> (torch's CUDA API): built only"
                      " with a CUDA build of torch and CUDA on"))
    return conditioned

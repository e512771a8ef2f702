"""A light look at sources' ``#include`` lines, before any compiler runs.

It answers three questions cheaply: does a TU start with the header we precompile, does it pull
in torch at all (memory-heavy), and does it need torch's CUDA headers that a CPU torch lacks.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)
_BLOCK_COMMENT = re.compile(rb"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(rb"//[^\n]*")
_TORCH_PREFIXES = ("torch/", "ATen/", "c10/", "caffe2/")
TORCH_CUDA_PREFIXES = ("ATen/cuda/", "c10/cuda/", "torch/csrc/cuda/", "ATen/native/cuda/")


@dataclass(frozen=True)
class Include:
    file: Path
    line: int
    header: str
    angled: bool


def _strip_comments(text: bytes) -> bytes:
    # Keep line numbers: replace block comments by as many newlines as they span.
    text = _BLOCK_COMMENT.sub(lambda m: b"\n" * m.group(0).count(b"\n"), text)
    return _LINE_COMMENT.sub(b"", text)


@functools.lru_cache(maxsize=4096)
def _read_includes(path: Path, mtime_ns: int) -> tuple[tuple[int, str, bool], ...]:
    del mtime_ns
    text = _strip_comments(path.read_bytes())
    found = []
    for match in _INCLUDE.finditer(text):
        line = text.count(b"\n", 0, match.start()) + 1
        header = match.group(2).decode("utf-8", "replace").strip()
        found.append((line, header, match.group(1) == b"<"))
    return tuple(found)


def includes(path: Path) -> list[Include]:
    try:
        entries = _read_includes(path, path.stat().st_mtime_ns)
    except OSError:
        return []
    return [Include(path, line, header, angled) for line, header, angled in entries]


def first_directive_include(path: Path) -> str | None:
    """The header of the file's first line of code when that line is an ``#include``."""
    try:
        text = _strip_comments(path.read_bytes())
    except OSError:
        return None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or re.fullmatch(rb"#\s*pragma\s+once", line):
            continue
        match = _INCLUDE.match(line)
        return match.group(2).decode("utf-8", "replace").strip() if match else None
    return None


def _resolve(include: Include, include_dirs: Sequence[Path]) -> Path | None:
    candidates = [include.file.parent] if not include.angled else []
    for directory in [*candidates, *include_dirs]:
        candidate = directory / include.header
        if candidate.is_file():
            return candidate
    return None


def walk_includes(sources: Iterable[Path], include_dirs: Sequence[Path]) -> list[Include]:
    """Every include reachable from ``sources`` through project headers (not system ones)."""
    seen: set[Path] = set()
    pending = list(sources)
    found: list[Include] = []
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        for include in includes(path):
            found.append(include)
            resolved = _resolve(include, include_dirs)
            if resolved is not None and resolved not in seen:
                pending.append(resolved)
    return found


def uses_torch_headers(found: Iterable[Include]) -> bool:
    return any(i.header.startswith(_TORCH_PREFIXES) for i in found)


def torch_cuda_includes(found: Iterable[Include]) -> list[Include]:
    return [i for i in found if i.header.startswith(TORCH_CUDA_PREFIXES)]

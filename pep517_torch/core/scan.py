"""A light look at sources' ``#include`` lines, before any compiler runs.

It answers three questions cheaply: which torch umbrella header (or project header) a TU
reaches before any other code, so a precompiled one can stand in for it; does it pull in torch at
all (memory-heavy); and does it need torch's CUDA headers that a CPU torch lacks.

An include inside an ``#if``/``#ifdef``/``#ifndef`` block (other than a header's include guard)
is *conditional*: whether it is compiled depends on macros this scan does not evaluate, so it
never makes a build fail before the compiler has had its say.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..shipped_runtime import build_inputs

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)
_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif|define|include)\b(.*)$", re.M)
_GUARD_IF = re.compile(rb"[ \t]*(?:!\s*defined\s*\(?\s*)?(\w+)")
_BLOCK_COMMENT = re.compile(rb"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(rb"//[^\n]*")
_TORCH_PREFIXES = ("torch/", "ATen/", "c10/", "caffe2/")
TORCH_CUDA_PREFIXES = ("ATen/cuda/", "c10/cuda/", "torch/csrc/cuda/", "ATen/native/cuda/")
# The headers a TU reaches torch through, each worth a precompiled header of its own.
TORCH_UMBRELLAS = (
    "torch/extension.h", "torch/all.h", "torch/torch.h", "torch/script.h", "ATen/ATen.h",
    "torch/library.h",
)


@dataclass(frozen=True)
class Include:
    file: Path
    line: int
    header: str
    angled: bool
    conditional: bool = False  # inside an #if block here, or reached only through such includes


def _strip_comments(text: bytes) -> bytes:
    # Keep line numbers: replace block comments by as many newlines as they span.
    text = _BLOCK_COMMENT.sub(lambda m: b"\n" * m.group(0).count(b"\n"), text)
    return _LINE_COMMENT.sub(b"", text)


def _include_guard(directives: list[re.Match[bytes]]) -> re.Match[bytes] | None:
    """The ``#ifndef X`` / ``#define X`` opening a header whose ``#endif`` closes the file."""
    if len(directives) < 3 or directives[0][1] not in (b"ifndef", b"if"):
        return None
    guard = _GUARD_IF.match(directives[0][2])
    if directives[0][1] == b"if" and not directives[0][2].lstrip().startswith(b"!"):
        return None
    defined = directives[1][2].split()
    if guard is None or directives[1][1] != b"define" or defined[:1] != [guard[1]]:
        return None
    depth = 0
    for index, directive in enumerate(directives):
        depth += {b"if": 1, b"ifdef": 1, b"ifndef": 1, b"endif": -1}.get(directive[1], 0)
        if depth == 0:
            return directives[0] if index == len(directives) - 1 else None
    return None


@functools.lru_cache(maxsize=4096)
def _read_includes(path: Path, identity: tuple[int, ...]) -> tuple[tuple[int, str, bool, bool], ...]:
    del identity  # the cache key: the file as it is now
    text = _strip_comments(path.read_bytes())
    directives = list(_DIRECTIVE.finditer(text))
    guard = _include_guard(directives)
    found = []
    depth = 0
    for directive in directives:
        kind = directive[1]
        if kind in (b"if", b"ifdef", b"ifndef"):
            depth += directive is not guard
        elif kind == b"endif":
            depth = max(depth - 1, 0)
        elif kind == b"include":
            match = _INCLUDE.match(text, directive.start())
            if match is None:
                continue  # a computed include (#include MACRO): nothing to read
            line = text.count(b"\n", 0, match.start()) + 1
            header = match.group(2).decode("utf-8", "replace").strip()
            found.append((line, header, match.group(1) == b"<", depth > 0))
    return tuple(found)


def includes(path: Path) -> list[Include]:
    found = build_inputs.identity(path)
    if found is None:
        return []
    try:
        entries = _read_includes(path, tuple(found))
    except OSError:
        return []
    return [Include(path, *entry) for entry in entries]


_PRAGMA_ONCE = re.compile(rb"#\s*pragma\s+once")
_GUARD = re.compile(rb"#\s*(?:ifndef\s+(\w+)|if\s+!\s*defined\s*\(?\s*(\w+)\s*\)?)")
_DEFINE = re.compile(rb"#\s*define\s+(\w+)")


def leading_include(path: Path) -> Include | None:
    """The ``#include`` on the file's first line of code, if that is what it is.

    ``#pragma once`` and an include guard (``#ifndef X`` then ``#define X``, no value) come
    before it harmlessly; any other code, or a ``#define`` that could change what the header
    means, makes the answer None.
    """
    try:
        text = _strip_comments(path.read_bytes())
    except OSError:
        return None
    guard_seen = False
    guard: bytes | None = None  # the guard's name, between its #ifndef and its #define
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or _PRAGMA_ONCE.fullmatch(line):
            continue
        if guard is not None:
            define = _DEFINE.fullmatch(line)
            if define is None or define.group(1) != guard:
                return None
            guard = None  # the guard is complete: the next line of code decides
            continue
        opening = _GUARD.fullmatch(line)
        if opening is not None and not guard_seen:
            guard_seen = True
            guard = opening.group(1) or opening.group(2)
            continue
        match = _INCLUDE.match(line)
        if match is None:
            return None
        header = match.group(2).decode("utf-8", "replace").strip()
        return Include(path, number, header, match.group(1) == b"<")
    return None


def first_directive_include(path: Path) -> str | None:
    """The header of the file's first line of code when that line is an ``#include``."""
    found = leading_include(path)
    return found.header if found else None


def leading_header(
    source: Path, include_dirs: Sequence[Path], wanted: Iterable[str] = TORCH_UMBRELLAS
) -> str | None:
    """The ``wanted`` header ``source`` includes before anything else, directly or through the
    project headers that each start by including the next one (``"ops.h"`` whose first line
    includes ``<torch/extension.h>``); None when other code or a system header comes first."""
    wanted = tuple(wanted)
    seen: set[str] = set()
    current: Path | None = source
    while current is not None and (identity := _identity(current)) not in seen:
        seen.add(identity)
        first = leading_include(current)
        if first is None:
            return None
        if first.header in wanted:
            return first.header
        current = _resolve(first, include_dirs)
    return None


def _resolve(include: Include, include_dirs: Sequence[Path]) -> Path | None:
    candidates = [include.file.parent] if not include.angled else []
    for directory in [*candidates, *include_dirs]:
        candidate = directory / include.header
        try:
            if candidate.is_file():
                return candidate
        except OSError:  # a name too long, a directory that cannot be read: the compiler's to say
            continue
    return None


def _identity(path: Path) -> str:
    """One name per file, however it is reached: ``detail/../detail/x.inl`` (glm's headers
    include their siblings as ``"../detail/x.inl"``) and a path through a symlink to ``.`` are
    the file they name, or a walk through them would never end."""
    return os.path.realpath(path)


def _tidy(path: Path, identity: str) -> Path:
    """``path`` without its ``..`` steps where that still names the same file (no symlink
    before them), as it is otherwise."""
    tidy = os.path.normpath(path)
    return Path(tidy) if tidy == str(path) or os.path.realpath(tidy) == identity else path


def walk_includes(sources: Iterable[Path], include_dirs: Sequence[Path]) -> list[Include]:
    """Every include reachable from ``sources`` through project headers (not system ones).

    An include is conditional when it is, or when every way to its file is."""
    only_conditionally = _reach(sources, include_dirs)
    return [
        dataclasses.replace(include, conditional=True) if conditional else include
        for path, conditional in only_conditionally.items()
        for include in includes(path)
    ]


def reached_files(sources: Iterable[Path], include_dirs: Sequence[Path]) -> list[Path]:
    """``sources`` and every project header they reach (found on disk, not system ones)."""
    return list(_reach(sources, include_dirs))


def _reach(sources: Iterable[Path], include_dirs: Sequence[Path]) -> dict[Path, bool]:
    """Each file reached from ``sources``: whether only through conditional includes."""
    only_conditionally: dict[Path, bool] = {}
    pending = [(path, False) for path in sources]
    # each file under the path it was first reached by (a source as it was given); identities
    # are asked once per path (a header many files include is reached by one path many times)
    identities: dict[Path, str] = {}
    first_reached = {_identity(path): path for path, _ in reversed(pending)}
    while pending:
        reached, conditional = pending.pop()
        key = identities.get(reached) or identities.setdefault(reached, _identity(reached))
        path = first_reached.setdefault(key, _tidy(reached, key))
        known = only_conditionally.get(path)
        if known is False or (known is True and conditional):
            continue
        only_conditionally[path] = conditional
        for include in includes(path):
            resolved = _resolve(include, include_dirs)
            if resolved is not None:
                pending.append((resolved, conditional or include.conditional))
    return only_conditionally


def uses_torch_headers(found: Iterable[Include]) -> bool:
    return any(i.header.startswith(_TORCH_PREFIXES) for i in found)


# What a TU parses of torch, by the widest header it reaches: the whole C++ API, ATen's, or a
# few headers (torch/library.h, one ATen/ops/ header): its weight against a TU of no torch (1).
_WHOLE_TORCH = ("torch/extension.h", "torch/all.h", "torch/torch.h", "torch/script.h",
                "torch/python.h")


def torch_weight(found: Iterable[Include]) -> int:
    """How much of torch a TU parses, for ordering (the slowest start first): 8 for the whole
    C++ API, 5 for ATen/ATen.h, 3 for fewer of torch's headers, 1 for none."""
    headers = {i.header for i in found}
    if headers & set(_WHOLE_TORCH):
        return 8
    if "ATen/ATen.h" in headers:
        return 5
    return 3 if any(h.startswith(_TORCH_PREFIXES) for h in headers) else 1


def torch_cuda_includes(found: Iterable[Include]) -> list[Include]:
    """Unconditional includes of torch's CUDA headers: a CPU build of torch cannot compile them.
    A guarded one (``#ifdef WITH_CUDA``) is left to the compiler."""
    return [i for i in found if i.header.startswith(TORCH_CUDA_PREFIXES) and not i.conditional]

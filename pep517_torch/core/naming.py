"""What a build names its files: each artifact (its package path and Python suffix), each
object in the build directory, each source as messages show it. The config layer imports it
to know where an artifact lands; the ninja writer (graph.py) to write the edges."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from .spec import ExtensionSpec, Kind
from .toolchain.tools import ext_suffix

_UNSAFE = re.compile(r"[^A-Za-z0-9._+/-]")


def artifact_name(spec: ExtensionSpec) -> str:
    """``myops/_C.cpython-311-x86_64-linux-gnu.so`` for ``myops._C``; a POSIX relative path."""
    *package, last = spec.name.split(".")
    if spec.kind is Kind.EXECUTABLE:
        suffix = ""
    else:
        suffix = ext_suffix(spec.py_limited_api, spec.python_abi_suffix)
    return "/".join([*package, last + suffix])


def display_base(spec: ExtensionSpec, source_root: Path | None) -> Path:
    if source_root is not None and all(s.is_relative_to(source_root) for s in spec.sources):
        return source_root
    return Path(os.path.commonpath([s.parent for s in spec.sources]))


def object_name(spec: ExtensionSpec, source: Path, base: Path) -> str:
    relative = source.relative_to(base).as_posix()
    safe = _UNSAFE.sub("_", relative)
    if safe != relative:  # keep distinct names distinct after sanitising
        safe += "-" + hashlib.sha1(relative.encode()).hexdigest()[:8]
    return f"obj/{spec.name}/{safe}.o"


def display_path(path: Path, base: Path | None) -> str:
    if base is not None and path.is_relative_to(base):
        return path.relative_to(base).as_posix()
    return str(path)

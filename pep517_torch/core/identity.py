"""Cheap identities of tools: no subprocess, a few stats. Used by the JIT's warm path."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

LAUNCHERS = frozenset({"ccache", "sccache", "distcc"})  # may stand before the compiler in CXX


def which(name: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH", os.defpath))


def torch_flavour(cuda: str | None, hip: str | None) -> str:
    """``cpu``, ``cu130``, ``rocm64``: torch's own name for a build, as in its JIT cache folder."""
    if hip:
        return f"rocm{hip.replace('.', '')}"
    return f"cu{cuda.replace('.', '')}" if cuda else "cpu"


def compiler_identity(env: Mapping[str, str]) -> tuple[str, int, int] | None:
    """(real path, mtime, size) of the C++ compiler CXX or ``c++`` names; None if not found."""
    try:
        args = shlex.split(env.get("CXX") or "c++")
    except ValueError:
        return None
    if args and Path(args[0]).name in LAUNCHERS and len(args) > 1:
        args = args[1:]
    found = which(args[0], env) if args else None
    if found is None:
        return None
    real = Path(found).resolve()
    try:
        stat = real.stat()
    except OSError:
        return None
    return str(real), stat.st_mtime_ns, stat.st_size

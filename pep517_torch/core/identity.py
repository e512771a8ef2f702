"""Cheap identities of tools: no subprocess, a few stats. Used by the JIT's warm path."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping

LAUNCHERS = frozenset({"ccache", "sccache", "distcc"})  # may stand before the compiler in CXX


def which(name: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH", os.defpath))


def torch_flavour(cuda: str | None, hip: str | None) -> str:
    """``cpu``, ``cu130``, ``rocm64``: torch's own name for a build, as in its JIT cache folder."""
    if hip:
        return f"rocm{hip.replace('.', '')}"
    return f"cu{cuda.replace('.', '')}" if cuda else "cpu"


def compiler_identity(env: Mapping[str, str]) -> tuple[str, int, int, int, int] | None:
    """(path on PATH, device, inode, mtime, size) of the C++ compiler CXX or ``c++`` names;
    None if not found. The stat follows symlinks (``c++`` -> alternatives -> ``g++-12``), so an
    alternative switched to another compiler has another inode: one ``stat`` per PATH entry
    looked at, nothing resolved in Python (the JIT's warm path pays for every call)."""
    given = env.get("CXX")
    if given:
        import shlex  # only then: the JIT's warm path imports this module
    try:
        args = shlex.split(given) if given else ["c++"]
    except ValueError:
        return None
    if args and os.path.basename(args[0]) in LAUNCHERS and len(args) > 1:
        args = args[1:]
    if not args:
        return None
    name = args[0]
    if os.path.dirname(name):
        candidates = [name]
    else:
        folders = dict.fromkeys(env.get("PATH", os.defpath).split(os.pathsep))  # once each
        candidates = [os.path.join(d, name) for d in folders]
    for candidate in candidates:
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and os.access(candidate, os.X_OK):
            return candidate, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size
    return None

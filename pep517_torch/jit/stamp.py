"""The JIT stamp: proof, checkable without a subprocess, that an artifact is up to date.

A stamp records a key (everything the build depends on that is not a file's content nor the
compiler: the request, torch and Python versions), the compiler it was built with (CXX and PATH
as they were, and the identity of the compiler they named: path, device, inode, mtime, size),
the environment variables that change what a build makes (config's list, recorded by the cold
path so that the warm check needs no config import) and the (mtime, size, ctime, inode) of
every user file the build read: sources and the project headers ninja's depfiles listed. ctime
and inode catch a replaced file whose mtime was set back (``cp -p``, ``rsync -t``): the cold
path then asks the compile core, which compares content hashes. System and torch headers are
covered by the compiler identity and torch version. With CXX and PATH unchanged, the warm
check stats only the compiler found last time (an alternatives switch, a reinstall or an
upgrade changes what that path resolves to); otherwise it looks the compiler up again.
The artifact's own identity is recorded too (the same stat fields, taken after it was linked):
a truncated artifact, or another library copied over it (``cp -p`` keeps the mtime, not the
inode or ctime), is not what we built, and rebuilds. One stat, no hash: the warm path reads
no file but the stamp (hashing a 50 MB library on every load would cost more than the load).
This module is on the warm path: it imports nothing heavy.
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..shipped_runtime import ledger

if TYPE_CHECKING:
    from .request import JitRequest

# Bumped whenever the stamp's shape changes (its history is git's): an older stamp is no stamp.
STAMP_VERSION = 8


def fingerprint(request: JitRequest, *extra: str) -> str:
    """The non-file inputs of a JIT build but the compiler and the environment's values (both
    recorded beside it), as one text. Compared whole, not digested: the stamp holds a few
    hundred bytes more, and the warm path saves a first blake2b call (~15 µs)."""
    return "\0".join((request.canonical(), sys.version, sys.executable, __version__, *extra))


def _compiler(env: Mapping[str, str]) -> dict[str, object]:
    return {"CXX": env.get("CXX"), "PATH": env.get("PATH"), "identity": ledger.compiler(env)}


def _same_compiler(recorded: object, env: Mapping[str, str]) -> bool:
    if not isinstance(recorded, dict) or not isinstance(recorded.get("identity"), list):
        return False
    found = recorded["identity"]
    if env.get("CXX") != recorded.get("CXX") or env.get("PATH") != recorded.get("PATH"):
        return ledger.compiler(env) == found
    return _state(found[0]) == found  # the compiler found last time, stat'ed again


def _state(path: str) -> list[object]:
    """The path and its identity (None five times: missing)."""
    return [path, *(ledger.identity(path) or (None, None, None, None, None))]


def stamp_path(build_dir: str | os.PathLike[str], target: str) -> str:
    return os.path.join(build_dir, f"{target}.stamp")


def recorded_env(env: Mapping[str, str], *, cuda: bool) -> dict[str, str | None]:
    """The values of the variables that change what a build makes, for the stamp (MAX_JOBS and
    the like only say how a build runs: read, and checked, when it does; the CUDA ones only
    where the build compiles CUDA). Cold path only."""
    from ..config.layers import artifact_env
    from ..shipped_runtime.environment import CUDA_ONLY_ENV

    names = artifact_env() if cuda else [n for n in artifact_env() if n not in CUDA_ONLY_ENV]
    return {name: env.get(name) for name in names}


def _read(path: str | os.PathLike[str]) -> bytes:
    """A small file's bytes in three system calls (``open()`` makes six: the warm path pays
    for each)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(descriptor, 1 << 16)]
        while len(chunks[-1]) == 1 << 16:
            chunks.append(os.read(descriptor, 1 << 16))
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def read(stamp: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The stamp's record; None if missing, unreadable or of another version. marshal, not
    JSON: a third of the time on a first call, and the key already names this Python."""
    try:
        data = marshal.loads(_read(stamp))
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return data if isinstance(data, dict) and data.get("version") == STAMP_VERSION else None


def is_fresh(
    stamp: str | os.PathLike[str], key: str, artifact: str | os.PathLike[str], env: Mapping[str, str]
) -> bool:
    data = read(stamp)
    if data is None or data.get("key") != key:
        return False
    for name, value in data.get("env", {}).items():  # loops, not any(): no generator to start
        if env.get(name) != value:
            return False
    if not _same_compiler(data.get("compiler"), env):
        return False
    if _state(os.fspath(artifact)) != data.get("artifact"):
        return False  # missing, or not the file we built (truncated, replaced)
    for entry in data.get("inputs", []):
        if _state(entry[0]) != entry:
            return False
    return True


def replaced_artifact(stamp: Path, artifact: Path) -> bool:
    """Whether ``artifact`` exists but is not the file the stamp recorded (truncated, or
    another file copied over it): the build must relink it, whatever its mtime says."""
    recorded = (read(stamp) or {}).get("artifact")
    current = _state(str(artifact))
    return recorded is not None and current[1] is not None and current != recorded


def write(
    stamp: str | os.PathLike[str], key: str, inputs: Iterable[Path], env: Mapping[str, str],
    artifact: str | os.PathLike[str], *, cuda: bool = True,
) -> None:
    """``cuda``: whether the build compiled CUDA (else the CUDA-only variables are not
    recorded)."""
    data = {
        "version": STAMP_VERSION,
        "key": key,
        "artifact": _state(os.fspath(artifact)),
        "env": recorded_env(env, cuda=cuda),
        "compiler": _compiler(env),
        "inputs": [_state(str(p)) for p in sorted(set(inputs))],
    }
    from ..atomic import write_atomic  # the cold path's: the warm one imports less

    write_atomic(Path(stamp), marshal.dumps(data))


def invalidate(stamp: Path) -> None:
    try:
        stamp.unlink()
    except FileNotFoundError:
        pass

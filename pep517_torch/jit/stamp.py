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
The stamp is read as untrusted input (``shipped_runtime/state_file.py``: never through a
symlink, only a regular file, bounded) and checked against its shape (:func:`problem`) before
anything in it is used: one that fails is a rebuild, named by the cold path.
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
from ..shipped_runtime import build_inputs
from ..shipped_runtime.state_file import Unreadable, read_bytes

if TYPE_CHECKING:
    from .request import JitRequest

# Bumped whenever the stamp's shape changes (its history is git's): an older stamp is no stamp.
STAMP_VERSION = 8
OTHER_FORMAT = "a stamp of another pep517_torch's format"
LIMIT = 16 << 20  # bytes: a stamp of 100,000 inputs is ~10 MiB


def fingerprint(request: JitRequest, *extra: str) -> str:
    """The non-file inputs of a JIT build but the compiler and the environment's values (both
    recorded beside it), as one text. Compared whole, not digested: the stamp holds a few
    hundred bytes more, and the warm path saves a first blake2b call (~15 µs)."""
    return "\0".join((request.canonical(), sys.version, sys.executable, __version__, *extra))


def _compiler(env: Mapping[str, str]) -> dict[str, object]:
    return {"CXX": env.get("CXX"), "PATH": env.get("PATH"), "identity": build_inputs.compiler(env)}


def _same_compiler(recorded: object, env: Mapping[str, str]) -> bool:
    if not isinstance(recorded, dict) or not isinstance(recorded.get("identity"), list):
        return False
    found = recorded["identity"]
    if env.get("CXX") != recorded.get("CXX") or env.get("PATH") != recorded.get("PATH"):
        return build_inputs.compiler(env) == found
    return _state(found[0]) == found  # the compiler found last time, stat'ed again


def _state(path: str) -> list[object]:
    """The path and its identity (None five times: missing)."""
    return [path, *(build_inputs.identity(path) or (None, None, None, None, None))]


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


def _state_problem(value: object) -> bool:
    """Whether ``value`` is not [path, *identity] (or the path with five None: missing)."""
    return type(value) is not list or len(value) != 6 or type(value[0]) is not str


def problem(data: object) -> str | None:
    """Why ``data`` is not a stamp :func:`write` makes (None: it is). Loops, not generators:
    the warm path runs it on every load."""
    if type(data) is not dict:
        return "not a stamp (its content is not a record)"
    if data.get("version") != STAMP_VERSION:
        return f"{OTHER_FORMAT} ({data.get('version')!r}, not {STAMP_VERSION})"
    if type(data.get("key")) is not str or _state_problem(data.get("artifact")):
        return "not a stamp (its key or artifact is missing)"
    env, compiler, inputs = data.get("env"), data.get("compiler"), data.get("inputs")
    if type(env) is not dict or type(compiler) is not dict or type(inputs) is not list:
        return "not a stamp (its environment, compiler or inputs are missing)"
    for name, value in env.items():
        if type(name) is not str or (value is not None and type(value) is not str):
            return "not a stamp (an environment variable that is not text)"
    found = compiler.get("identity")
    if found is not None and (type(found) is not list or not found or type(found[0]) is not str):
        return "not a stamp (its compiler is not a path and identity)"
    for entry in inputs:
        if _state_problem(entry):
            return "not a stamp (an input that is not a path and identity)"
    return None


def load(stamp: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The stamp's record (None: there is none); :class:`Unreadable` naming it and why for
    one that cannot be used. marshal, not JSON: a third of the time on a first call, and the
    key already names this Python."""
    data = read_bytes(stamp, LIMIT)
    if data is None:
        return None
    if data[:1] not in (b"{", b"\xfb"):  # a marshalled dict (0xfb: one that may be referenced)
        raise Unreadable(stamp, "not a stamp (its content is not a record)")
    try:  # marshal trusts the sizes it reads: a damaged one may ask for a huge list
        found = marshal.loads(data)
    except (ValueError, EOFError, TypeError, MemoryError, RecursionError):
        raise Unreadable(stamp, "not a stamp (damaged or truncated)") from None
    why = problem(found)
    if why is not None:
        raise Unreadable(stamp, why)
    return found  # type: ignore[no-any-return]


def read(stamp: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The stamp's record; None if missing or unusable (:func:`load` says why)."""
    try:
        return load(stamp)
    except Unreadable:
        return None


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

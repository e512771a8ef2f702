"""The JIT stamp: proof, checkable without a subprocess, that an artifact is up to date.

A stamp is a record of what the build depended on (``shipped_runtime/build_inputs.py``: the
variables that change what a build makes, config's list recorded by the cold path so that the
warm check needs no config import; the machine facts the compile core recorded; the user files
the build read, sources and the project headers ninja's depfiles listed, by identity) with a
key of what is neither a file nor a fact (the request, the Python and pep517_torch that built
it, torch's version and location) and the artifact's own identity. The warm check is
``build_inputs.why_stale``: the compiler found last time is stat'ed again while CXX and PATH are
as they were (looked up again otherwise), torch's version file and nvcc are stat'ed, each input
too; ctime and inode catch a replaced file whose mtime was set back (``cp -p``, ``rsync -t``):
the cold path then asks the compile core, which compares content hashes. System and torch
headers are covered by the compiler and torch. The artifact's identity is taken after it was
linked: a truncated artifact, or another library copied over it (``cp -p`` keeps the mtime, not
the inode or ctime), is not what we built, and rebuilds. One stat each, no hash: the warm path
reads no file but the stamp (hashing a 50 MB library on every load would cost more than the
load). The stamp is read as untrusted input (``shipped_runtime/state_file.py``: never through a
symlink, only a regular file, bounded) and checked against its shape (:func:`problem`) before
anything in it is used: one that fails is a rebuild, named by the cold path. When a stamp is
stale, :func:`why_stale` says why (``load(..., verbose=True)`` prints it).
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
STAMP_VERSION = 9
OTHER_FORMAT = "a stamp of another pep517_torch's format"
LIMIT = 16 << 20  # bytes: a stamp of 100,000 inputs is ~10 MiB


def fingerprint(request: JitRequest, *extra: str) -> str:
    """What a JIT build depends on that is neither a file, a machine fact nor a variable (all
    recorded beside it), as one text (``_KEY_PARTS`` names its parts; warm.py gives torch's
    as ``extra``). Compared whole, not digested: the stamp holds a few hundred bytes more, and
    the warm path saves a first blake2b call (~15 µs)."""
    return "\0".join((request.canonical(), sys.version, sys.executable, __version__, *extra))


# What the key holds, in order (fingerprint's parts and the extras warm.py gives), in words
_KEY_PARTS = ("load()'s arguments", "Python", "the Python interpreter", "pep517_torch",
              "torch's location", "torch")


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
    env, facts, lookup, files = data.get("env"), data.get("facts"), data.get("lookup"), data.get("files")
    if type(env) is not dict or type(facts) is not dict or type(lookup) is not dict or type(files) is not dict:
        return "not a stamp (its environment, facts or files are missing)"
    for values in (env, lookup):
        for name, value in values.items():
            if type(name) is not str or (value is not None and type(value) is not str):
                return "not a stamp (an environment variable that is not text)"
    for value in facts.values():
        if value is not None and (type(value) is not list or not value or type(value[0]) is not str):
            return "not a stamp (a machine fact that is not a path and identity)"
    for path, found in files.items():
        if type(path) is not str or (found is not None and (type(found) is not list or len(found) != 5)):
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


def why_stale(data: Mapping[str, Any], key: str, artifact: str | os.PathLike[str],
              env: Mapping[str, str]) -> str | None:
    """Why the stamp ``data`` (as :func:`load` read it) does not hold for ``key``, ``artifact``
    and ``env``, in words (None: it holds): another key (the part of it that differs), then
    ``build_inputs.why_stale`` (a variable, a machine fact, an input), then the artifact."""
    if data["key"] != key:
        return _key_change(data["key"], key)
    changed = build_inputs.why_stale(data, env)
    if changed is not None:
        return changed
    if _state(os.fspath(artifact)) != data["artifact"]:  # missing, truncated, replaced
        return f"{os.fspath(artifact)} is not the file this build made"
    return None


def _key_change(recorded: str, key: str) -> str:
    before, after = recorded.split("\0"), key.split("\0")
    if len(before) == len(after) == len(_KEY_PARTS):
        for words, old, new in zip(_KEY_PARTS, before, after):
            if old != new:
                if words == _KEY_PARTS[0]:
                    return f"{words} changed"
                if words == "Python":  # sys.version: the version, then how it was built
                    old, new = old.split(" ", 1)[0], new.split(" ", 1)[0]
                return f"{words} changed: {old} -> {new}"
    return "it was built for another request or another Python, pep517_torch or torch"


def is_fresh(
    stamp: str | os.PathLike[str], key: str, artifact: str | os.PathLike[str], env: Mapping[str, str]
) -> bool:
    data = read(stamp)
    return data is not None and why_stale(data, key, artifact, env) is None


def replaced_artifact(stamp: Path, artifact: Path) -> bool:
    """Whether ``artifact`` exists but is not the file the stamp recorded (truncated, or
    another file copied over it): the build must relink it, whatever its mtime says."""
    recorded = (read(stamp) or {}).get("artifact")
    current = _state(str(artifact))
    return recorded is not None and current[1] is not None and current != recorded


def write(
    stamp: str | os.PathLike[str], key: str, inputs: Iterable[Path], env: Mapping[str, str],
    artifact: str | os.PathLike[str], *, facts: Mapping[str, Any] | None = None, cuda: bool = True,
) -> None:
    """``facts``: the machine facts the compile core recorded for the build (None: the
    compiler alone, found now); ``cuda``: whether the build compiled CUDA (else the CUDA-only
    variables are not recorded)."""
    data = {
        "version": STAMP_VERSION,
        "key": key,
        "artifact": _state(os.fspath(artifact)),
        "env": recorded_env(env, cuda=cuda),
        "facts": dict(facts) if facts is not None else build_inputs.observe(("compiler",), env),
        "lookup": build_inputs.compiler_lookup(env),
        "files": {path: build_inputs.identity(path) for path in sorted(set(map(str, inputs)))},
    }
    from ..atomic import write_atomic  # the cold path's: the warm one imports less

    write_atomic(Path(stamp), marshal.dumps(data))


def invalidate(stamp: Path) -> None:
    try:
        stamp.unlink()
    except FileNotFoundError:
        pass

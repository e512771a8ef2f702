"""What a build depended on, recorded: files by identity (and content), variables by value,
machine facts.

A file's identity is one ``stat``: device, inode, size, mtime, ctime. mtime alone misses an edit
whose mtime was set back (``cp -p``, ``rsync -t``, tar); the inode and ctime do not. Where
identity is not enough (an edit that keeps the size and sets the mtime back is still a new
ctime, but so is a touch), a file is recorded with its content hash too, and compared by it
once its identity moved.

Standard library only, and no import of the rest of the runtime at module level: the editable
hook ships this file, the PCH seal, run as a script, loads the runtime's folder as a package of
its own, and the JIT's warm path imports it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from typing import Any

LAUNCHERS = frozenset({"ccache", "sccache", "distcc"})  # may stand before the compiler in CXX
# An input whose ctime is this close to a build's start may have changed after the build read
# it (timestamps lag the clock by a tick; whole seconds on coarse filesystems).
_MARGIN_NS = 50_000_000
_COARSE_MARGIN_NS = 2_000_000_000

Identity = list[int]  # [device, inode, size, mtime_ns, ctime_ns]


# -- a file ------------------------------------------------------------------------------------


def identity_of(st: os.stat_result) -> Identity:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def identity(path: str | os.PathLike[str]) -> Identity | None:
    """The file's identity (symlinks followed); None when it cannot be stat'ed (missing, or a
    name no file can have: a NUL in a path read back from disk)."""
    try:
        return identity_of(os.stat(path))
    except (OSError, ValueError):
        return None


def lasting(found: Identity | None) -> list[int] | None:
    """An identity without its ctime: what a hard link's count or a chmod changes while the
    bytes stay (a kept wheel a frontend links and deletes)."""
    return None if found is None else found[:4]


def same_file(first: os.stat_result, second: os.stat_result) -> bool:
    """Whether two stats are of one file (a lock file still the one that was opened)."""
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def content_hash(path: str | os.PathLike[str]) -> str | None:
    """sha256 of the file's bytes, read in blocks; None when it cannot be read."""
    import hashlib  # here: the JIT's warm path imports this module

    digest = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
    except (OSError, ValueError):
        return None
    return digest.hexdigest()


def changed_since(found: Identity | None, started_ns: int) -> bool:
    """Whether a file with this identity changed after (or about when) a build started at
    ``started_ns``: what that build read may not be what the record would say."""
    if found is None:
        return False
    ctime = found[4]
    margin = _COARSE_MARGIN_NS if ctime % 1_000_000_000 == 0 else _MARGIN_NS
    return ctime >= started_ns - margin


# -- what a build consulted ----------------------------------------------------------------------
# files: {path: identity} or {path: [*identity, hash]} (hash None: it changed while the build
# read it, content unknown); env: {name: value or None (unset)}.


def stamp_files(paths: Iterable[str | os.PathLike[str]]) -> dict[str, Identity | None]:
    return {os.fspath(path): identity(path) for path in sorted(set(map(os.fspath, paths)))}


def hashed(path: str, *, started_ns: int | None = None,
           before: list[Any] | None = None) -> list[Any] | None:
    """``path``'s identity and content hash (stat first: a change while hashing shows next
    time). ``before``: its last record, kept while the identity holds; ``started_ns``: a file
    that changed after the build started is recorded with no hash (content unknown)."""
    found = identity(path)
    if found is None:
        return None
    if before is not None and len(before) == 6 and before[5] is not None and before[:5] == found:
        return before
    if started_ns is not None and found[4] >= started_ns:
        return [*found, None]
    return [*found, content_hash(path)]


def file_change(path: str, recorded: list[Any] | None) -> str | None:
    """How ``path`` differs from its record, in words (None: it does not). A hashed record
    whose file was only touched (same bytes) is unchanged."""
    found = identity(path)
    if recorded is None:
        return None if found is None else "appeared"
    if found is None:
        return "is gone"
    if found == recorded[:5]:
        return None if len(recorded) < 6 or recorded[5] is not None else "changed while it was read"
    if len(recorded) == 6:
        if recorded[5] is None:
            return "changed while it was read"
        if content_hash(path) == recorded[5]:
            return None
        return "changed (its content)" if found[3] > recorded[3] else "changed (its content; its mtime is not newer)"
    return "changed"


def first_file_change(files: Mapping[str, list[Any] | None]) -> tuple[str, str] | None:
    """The first recorded file that changed, and how (identity only: no hashing)."""
    for path, recorded in files.items():
        found = identity(path)
        if (recorded is None) != (found is None) or (found is not None and found != recorded[:5]):
            return path, file_change(path, recorded) or "was touched"
    return None


def read_env(env: Mapping[str, str], names: Iterable[str]) -> dict[str, str | None]:
    return {name: env.get(name) for name in names}


def env_change(recorded: Mapping[str, str | None], env: Mapping[str, str]) -> str | None:
    """The first recorded variable whose value differs, in words (None: none does)."""
    for name, value in recorded.items():
        now = env.get(name)
        if now != value:
            return f"{name} changed: {_shown(value)} -> {_shown(now)}"
    return None


def env_changes(recorded: Mapping[str, str | None], env: Mapping[str, str]) -> str | None:
    """Every recorded variable whose value differs, in words, by name (None: none does)."""
    found = [f"{name} changed: {_shown(value)} -> {_shown(env.get(name))}"
             for name, value in sorted(recorded.items()) if env.get(name) != value]
    return "; ".join(found) or None


def _shown(value: str | None) -> str:
    return "unset" if value is None else repr(value)


# -- machine facts -----------------------------------------------------------------------------


def compiler(env: Mapping[str, str]) -> list[Any] | None:
    """The C++ compiler CXX or ``c++`` names, as found on PATH: [path, *identity]; None if
    not found. The stat follows symlinks (``c++`` -> alternatives -> ``g++-12``), so an
    alternative switched to another compiler has another inode: one ``stat`` per PATH entry
    looked at, nothing resolved in Python (the JIT's warm path pays for every call)."""
    given = env.get("CXX")
    if given:
        import shlex  # only then: the JIT's warm path imports this module

        try:
            args = shlex.split(given)
        except ValueError:
            return None
    else:
        args = ["c++"]
    if args and os.path.basename(args[0]) in LAUNCHERS and len(args) > 1:
        args = args[1:]
    if not args:
        return None
    name = args[0]
    if os.path.dirname(name):
        candidates = [name]
    else:
        folders = dict.fromkeys(env.get("PATH", os.defpath).split(os.pathsep))  # once each
        candidates = [os.path.join(folder, name) for folder in folders]
    for candidate in candidates:
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and os.access(candidate, os.X_OK):
            return [candidate, *identity_of(st)]
    return None


def fact_change(name: str, recorded: list[Any] | None, env: Mapping[str, str]) -> str | None:
    """How a machine fact differs from its record, in words. ``compiler`` is found again
    (CXX or PATH may name another one); any other fact is a file (nvcc, torch's version file)
    stat'ed again."""
    if name == "compiler":
        found = compiler(env)
        if found == recorded:
            return None
        if found is None:
            return "the C++ compiler is gone"
        same_path = recorded is not None and recorded[0] == found[0]
        return f"the C++ compiler {found[0]} {'changed' if same_path else 'is another one'}"
    found = identity(recorded[0]) if recorded else None
    if recorded is None or found == recorded[1:]:
        return None
    return f"{FACT_NAMES.get(name, name)} {recorded[0]} changed"


FACT_NAMES = {"toolkit": "nvcc", "torch": "torch"}


def fact(path: str | os.PathLike[str]) -> list[Any]:
    """A machine fact that is a file: [path, *identity]."""
    return [os.fspath(path), *(identity(path) or [])]


def everything_changed(record: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """A recorded variable or machine fact that differs now, in words (None: none does)."""
    changed = env_change(record.get("env", {}), env)
    if changed is not None:
        return changed
    for name, recorded in sorted(record.get("facts", {}).items()):
        changed = fact_change(name, recorded, env)
        if changed is not None:
            return changed
    return None

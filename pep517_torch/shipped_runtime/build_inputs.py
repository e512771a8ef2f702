"""What a build depended on, recorded, and the one answer to "is it still up to date?".

A record is a mapping each store keeps in its own file and format (the build folder's ledger
and the no-op records as JSON, a JIT stamp as marshal, the probe cache's entries), beside the
keys of its own:

- ``env``: each environment variable the build read, by value (None: unset);
- ``facts``: the machine facts it used, by name, as the registry (:data:`FACTS`) observes
  them: the C++ compiler, nvcc, torch, Python, pep517_torch itself, ninja, the libraries that
  shape a wheel, PATH;
- ``files``: each file or folder it consulted, by identity, with its content hash where
  identity cannot be trusted (None: it was absent);
- ``lookup`` (optional): CXX and PATH as the compiler was looked up with: while they hold, the
  compiler found then is stat'ed again instead of looked up (the JIT's warm path: one stat).

:func:`why_stale` says, in words, the first thing that differs now (``CXXFLAGS changed:
'-DX=1' -> '-DX=2'``, ``nvcc /usr/local/cuda/bin/nvcc changed``, ``csrc/a.cpp changed (its
content)``), or None: every fast path (the no-op replay, "ninja has nothing to do", the JIT's
warm load, the editable hook, the probe cache) asks it, and says what it answered when it
missed. The variables that change a build are environment.py's (the settings' from the
model's ``env`` metadata, config/layers.py's ``artifact_env``); a record names those it read,
so no reader needs the list.

A file's identity is one ``stat``: device, inode, size, mtime, ctime. mtime alone misses an edit
whose mtime was set back (``cp -p``, ``rsync -t``, tar); the inode and ctime do not. Where
identity is not enough (an edit that keeps the size and sets the mtime back is still a new
ctime, but so is a touch), a file is recorded with its content hash too, and compared by it
once its identity moved.

Standard library only, and no import of the rest of the runtime at module level: the editable
hook ships this file, the PCH seal, run as a script, loads the runtime's folder as a package of
its own, and the JIT's warm path imports it (``machine_facts.py``, the facts only a no-op
replay records, is imported when one of them is observed or checked).
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


def read_env(env: Mapping[str, str], names: Iterable[str]) -> dict[str, str | None]:
    return {name: env.get(name) for name in names}


def env_changes(recorded: Mapping[str, str | None], env: Mapping[str, str]) -> str | None:
    """Every recorded variable whose value differs, in words, by name (None: none does)."""
    found = [f"{name} changed: {_shown(value)} -> {_shown(env.get(name))}"
             for name, value in sorted(recorded.items()) if env.get(name) != value]
    return "; ".join(found) or None


def _shown(value: str | None) -> str:
    return "unset" if value is None else repr(value)


# -- machine facts: the registry ------------------------------------------------------------------
# Every machine fact a record may hold, by name: how a reason names it. Checked in this order.
# compiler, nvcc, torch: a file, [path, *identity] (the path alone: it was missing); the C++
# compiler is looked up again from CXX and PATH, nvcc and torch's version.py are stat'ed again.
# The others are observed again by machine_facts.py and compared whole.
FACTS = {
    "compiler": "the C++ compiler",  # what CXX, or c++ on PATH, names
    "nvcc": "nvcc",  # the nvcc binary a build that compiled CUDA ran (the core finds it)
    "torch": "torch",  # torch's version.py: a reinstall, another build of it
    "python": "Python",  # the interpreter: executable, version, platform, machine
    "backend": "pep517_torch",  # its version and its own files
    "ninja": "ninja",  # the ninja package where the import system finds it
    "libraries": "the libraries that shape a wheel",  # packaging, pyproject_metadata... torch
    "path": "PATH",  # each PATH folder: a tool added, removed or replaced in one
}
# What a compile's objects depend on beside its files and variables: the build folder's compile
# record and a JIT stamp hold these (nvcc: only a build that compiled CUDA).
COMPILE_FACTS = ("compiler", "torch", "nvcc")
# What a no-op replay's record holds, with the build folder's compile record for the rest.
REPLAY_FACTS = ("python", "backend", "libraries", "ninja", "compiler", "path", "torch")
_STATED = ("nvcc", "torch")  # facts that are files named by the build: stat'ed, never looked up


def fact(path: str | os.PathLike[str]) -> list[Any]:
    """A machine fact that is a file: [path, *identity] (the path alone: missing)."""
    return [os.fspath(path), *(identity(path) or [])]


def observe(names: Iterable[str], env: Mapping[str, str], *, nvcc: str | os.PathLike[str] | None = None,
            torch_root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The facts ``names`` as they are now, for a record. ``nvcc``: the nvcc the build ran
    (None: it compiled no CUDA, and no nvcc is recorded); ``torch_root``: torch's folder as the
    build found it (None: where this interpreter's import system finds it)."""
    found: dict[str, Any] = {}
    for name in names:
        if name == "compiler":
            found[name] = compiler(env)
        elif name == "nvcc":
            if nvcc is not None:
                found[name] = fact(nvcc)
        elif name not in FACTS:
            raise KeyError(f"{name} is no machine fact (build_inputs.FACTS lists them)")
        else:
            from . import machine_facts as machine

            if name == "torch":
                located = machine.where("torch") if torch_root is None else None
                root = torch_root if torch_root is not None else located and os.path.dirname(located)
                found[name] = fact(os.path.join(root, "version.py")) if root else None
            elif name in ("ninja", "libraries"):
                files = {library: machine.where(library) for library in
                         (("ninja",) if name == "ninja" else machine.LIBRARIES)}
                located = {library: path and fact(path) for library, path in files.items()}
                found[name] = located["ninja"] if name == "ninja" else located
            elif name == "path":
                found[name] = [[folder, *(identity(folder or ".") or [])]
                               for folder in machine.path_folders(env)]
            else:
                found[name] = getattr(machine, name)(env)  # python, backend
    return found


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


def compiler_lookup(env: Mapping[str, str]) -> dict[str, str | None]:
    """What the compiler was looked up with: a record's ``lookup``."""
    return {"CXX": env.get("CXX"), "PATH": env.get("PATH")}


def fact_change(name: str, recorded: Any, env: Mapping[str, str],
                lookup: Mapping[str, str | None] | None = None) -> str | None:
    """How the machine fact ``name`` differs from its record, in words (None: it does not).
    ``lookup``: CXX and PATH as the compiler was looked up; while they hold, the compiler found
    then is stat'ed again (one stat) instead of looked up."""
    words = FACTS.get(name)
    if words is None:
        return f"{name}, a machine fact this pep517_torch does not know, was recorded"
    try:
        if name in _STATED:
            if recorded is None:
                return None
            found = identity(recorded[0])
            if (found or []) == recorded[1:]:
                return None
            return f"{words} {recorded[0]} {'is gone' if found is None else 'changed'}"
        if name == "compiler":
            return _compiler_change(recorded, env, lookup)
        from . import machine_facts

        now = observe([name], env)[name]
        if now == recorded:
            return None
        if recorded is not None and now is not None and type(recorded) is not type(now):
            raise TypeError(name)
        return machine_facts.change(name, recorded, now)
    except (TypeError, IndexError, KeyError, AttributeError, ValueError):
        return f"{words}: its record is not one pep517_torch writes"


def _compiler_change(recorded: list[Any] | None, env: Mapping[str, str],
                     lookup: Mapping[str, str | None] | None) -> str | None:
    if (recorded is not None and lookup is not None and lookup.get("CXX") == env.get("CXX")
            and lookup.get("PATH") == env.get("PATH")):
        found: list[Any] | None = fact(recorded[0])  # the compiler found last time, again
        if found == recorded:
            return None
        if len(found) == 1:  # type: ignore[arg-type]
            return f"the C++ compiler {recorded[0]} is gone"
    else:
        found = compiler(env)
        if found == recorded:
            return None
    if found is None:
        return "the C++ compiler is gone"
    if recorded is not None and recorded[0] == found[0]:
        return f"the C++ compiler {found[0]} changed"
    return f"the C++ compiler is another one: {recorded[0] if recorded else 'none'} -> {found[0]}"


# -- a record, and why it is stale -------------------------------------------------------------


def why_stale(record: Mapping[str, Any], env: Mapping[str, str], *, files: bool = True,
              content: bool = True) -> str | None:
    """Why what ``record`` describes is out of date, in words (None: it is not): the first
    recorded variable whose value differs, then the first machine fact (:data:`FACTS`), then
    the first file whose identity moved (``files``). With ``content``, a file recorded with its
    hash whose bytes are the same (a touch) has not changed; without it, any move counts (what
    ninja, which decides by mtime, would see). Loops, not generators: the JIT's warm path runs
    it on every load."""
    recorded_env = record.get("env")
    if recorded_env:
        for name, value in recorded_env.items():
            if env.get(name) != value:
                return f"{name} changed: {_shown(value)} -> {_shown(env.get(name))}"
    facts = record.get("facts")
    if facts:
        lookup = record.get("lookup")
        for name, value in facts.items():
            changed = fact_change(name, value, env, lookup)
            if changed is not None:
                return changed
    recorded_files = record.get("files") if files else None
    if recorded_files:
        for path, recorded in recorded_files.items():
            found = identity(path)
            if found == recorded:
                continue
            if recorded is not None and found is not None and len(recorded) == 6 \
                    and found == recorded[:5] and recorded[5] is not None:
                continue  # hashed, and not moved
            if not content:
                moved = "appeared" if recorded is None else "is gone" if found is None else "changed"
                return f"{path} {moved}"
            how = file_change(path, recorded)
            if how is not None:  # else touched: the same bytes
                return f"{path} {how}"
    return None

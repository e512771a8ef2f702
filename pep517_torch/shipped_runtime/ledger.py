"""The ledger: the one answer to "did anything change?".

A file's identity is one ``stat``: device, inode, size, mtime, ctime. mtime alone misses an edit
whose mtime was set back (``cp -p``, ``rsync -t``, tar); the inode and ctime do not. Where
identity is not enough (an edit that keeps the size and sets the mtime back is still a new
ctime, but so is a touch), a file is recorded with its content hash too, and compared by it
once its identity moved.

A build folder holds one state file of ours, ``.pep517_torch_ledger.json``: what the folder's
last builds consulted and decided, in sections the layers keep (the compile core's files,
variables and machine facts; the platform tag; an editable install's plan; the timeline's
step names), the folder and project it was made for (a copied or moved build folder belongs to
another project: everything it says is void), and why the last build did what it did (read back
by ``python -m pep517_torch explain``). The same record shapes serve the state kept elsewhere:
the no-op cache's records, the tool-probe cache, a JIT extension's stamp, a precompiled
header's seal.

The state file is read as untrusted input (``state_file.py``): never through a symlink, only
as a regular file, up to a bound, checked against ``ledger_shape.py`` (the folder's keys and
each section's); one that fails is named once and treated as absent, so the next build runs every
step.

Standard library only, and no import of the rest of the runtime at module level but
``state_file.py``: the editable hook ships both files, and the PCH seal, run as a script, loads
the runtime's folder as a package of its own.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from typing import Any

from .state_file import Unreadable, ignored, read_json

FORMAT = 1  # the ledger's; its shape is ledger_shape.py's (imported when a ledger is read)

NAME = ".pep517_torch_ledger.json"
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


# -- the build folder's state file -------------------------------------------------------------


def path_in(build_dir: str | os.PathLike[str]) -> str:
    return os.path.join(build_dir, NAME)


LIMIT = 64 << 20  # bytes: a project of 100,000 files records a few MiB


def _format(value: Any) -> str | None:
    if value == FORMAT and type(value) is int:
        return None
    if type(value) is int and value > FORMAT:
        return f"is {value}: written by a newer pep517_torch (this one reads {FORMAT})"
    return f"is {value!r}, not {FORMAT}"


def read(build_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The folder's ledger ({} when there is none); :class:`Unreadable` naming it and why, for
    one that is not a regular file, too large, not JSON, or not of :data:`SHAPE`."""
    from .ledger_shape import SHAPE

    return read_json(path_in(build_dir), LIMIT, {"format": _format, **SHAPE}) or {}


_void: dict[str, Unreadable] = {}  # ledger path -> why it could not be read, until taken


def load(build_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The folder's ledger ({} when there is none, or one that cannot be read: said once, kept
    for :func:`take_void`, and then the build redoes every step)."""
    try:
        return read(build_dir)
    except Unreadable as error:
        ignored(error, "what it recorded is void: every step runs again")
        _void[os.path.abspath(path_in(build_dir))] = error
        return {}


def take_void(build_dir: str | os.PathLike[str]) -> Unreadable | None:
    """Why this folder's ledger could not be read by this process since the last call (None:
    it could, or there is none), though a write may have replaced it since: what ninja's own
    log says is void with it (the compile core then runs every step)."""
    load(build_dir)
    return _void.pop(os.path.abspath(path_in(build_dir)), None)


def owner_problem(ledger: Mapping[str, Any], build_dir: str | os.PathLike[str],
                  root: str | os.PathLike[str] | None) -> str | None:
    """Why ``ledger`` does not speak for this folder and project (None: it does): made in
    another folder (copied or moved with it), or for another project."""
    if not ledger:
        return None
    made_in, made_for = ledger.get("build_dir"), ledger.get("root")
    if made_in != os.path.abspath(build_dir):
        return f"the build folder was made at {made_in} (copied or moved since)"
    if root is not None and made_for is not None and made_for != os.path.abspath(root):
        return f"the build folder belongs to the project at {made_for}"
    return None


def update(build_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None,
           **sections: Any) -> None:
    """Replace ``sections`` of the folder's ledger (a section None: removed); the caller holds
    the build folder's lock. A ledger made elsewhere is dropped first: nothing of it holds here."""
    import json
    from pathlib import Path

    from .files import write_atomic

    folder = os.path.abspath(build_dir)
    ledger = load(folder)
    _clear_the_way(path_in(folder))
    if owner_problem(ledger, folder, root) is not None:
        ledger = {}
    ledger.update(format=FORMAT, build_dir=folder)
    if root is not None:
        ledger["root"] = os.path.abspath(root)
    for name, value in sections.items():
        if value is None:
            ledger.pop(name, None)
        else:
            ledger[name] = value
    write_atomic(Path(path_in(folder)), json.dumps(ledger, sort_keys=True))


def _clear_the_way(path: str) -> None:
    """An empty directory where the ledger goes (it cannot be renamed over) is removed; anything
    else there is replaced by the rename (a symlink itself, never what it points to)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.rmdir(path)
    except OSError:
        pass  # the write says what is in the way


def section(build_dir: str | os.PathLike[str], name: str,
            root: str | os.PathLike[str] | None = None) -> Any:
    """One section of the folder's ledger, when the ledger speaks for this folder (and
    ``root``'s project); None otherwise."""
    ledger = load(build_dir)
    if owner_problem(ledger, build_dir, root) is not None:
        return None
    return ledger.get(name)


def compile_change(build_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None,
                   env: Mapping[str, str]) -> tuple[str, bool] | None:
    """What changed since the compile core's last record in ``build_dir`` that only the core
    can bring up to date (None: nothing; plain ninja will do), in words, and whether it
    touches every step: a folder made elsewhere, a variable or machine fact, a flags variable
    on the commands (True: planned anew), or a content-tracked input (a source or project
    header) whose identity moved, even to an older mtime (False). No record: None."""
    whole = load(build_dir)
    problem = owner_problem(whole, build_dir, root)
    if problem is not None:
        return problem, True
    record = whole.get("compile")
    if not isinstance(record, dict):
        return None
    changed = everything_changed(record, env) or env_changes(record.get("flags", {}), env)
    if changed is not None:  # a flags variable: build.ninja's commands are planned anew
        return changed, True
    for path, recorded in record.get("files", {}).items():
        if recorded is not None and len(recorded) == 6:
            if recorded[5] is None or identity(path) != recorded[:5]:
                return f"{path} changed", False
    return None


def now_text() -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())


# -- why the last build did what it did ----------------------------------------------------------


def explanation(
    by: str,
    outcome: str,
    steps: Iterable[tuple[str, Iterable[str]]],
    *,
    everything: str | None = None,
    ours: Mapping[str, str] | None = None,
    ninja: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``explain`` section: who built (``"a wheel build"``), how it ended (``"built"``,
    ``"failed"``, ``"nothing to do"``), and for each step that ran (its name, its outputs) the
    first reason: what changed for the whole folder, else the output this layer deleted (an
    input's content changed), else ninja's own reason, else an input it reads was rebuilt."""
    ours, ninja = ours or {}, ninja or {}
    rows = []
    for name, outputs in steps:
        outputs = list(outputs)
        reason = everything or next((ours[o] for o in outputs if o in ours), None)
        reason = reason or next((ninja[o] for o in outputs if o in ninja), None)
        rows.append([name, reason or "an input it reads was rebuilt"])
    import time

    return {"at": now_text(), "at_ns": time.time_ns(), "by": by, "outcome": outcome,
            "everything": everything, "steps": rows}

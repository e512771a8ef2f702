"""The ledger: the build folder's one state file.

A build folder holds one state file of ours, ``.pep517_torch_ledger.json``: what the folder's
last builds consulted and decided, in sections the layers keep (the compile core's files,
variables and machine facts; the platform tag; an editable install's plan; the timeline's
step names), the folder and project it was made for (a copied or moved build folder belongs to
another project: everything it says is void), and why the last build did what it did (read back
by ``python -m pep517_torch explain``). What a build depended on (files, variables, machine
facts) is recorded as ``build_inputs.py`` records it, as in every other store: the no-op cache's
records, the tool-probe cache, a JIT extension's stamp, a precompiled header's seal.

The state file is read as untrusted input (``state_file.py``): never through a symlink, only
as a regular file, up to a bound, checked against ``ledger_shape.py`` (the folder's keys and
each section's); one that fails is named once and treated as absent, so the next build runs every
step.

Standard library only, and no import of the rest of the runtime at module level but
``state_file.py`` and ``build_inputs.py``: the editable hook ships them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from typing import Any

from .build_inputs import env_changes, identity, why_stale
from .state_file import Unreadable, ignored, read_json

FORMAT = 1  # the ledger's; its shape is ledger_shape.py's (imported when a ledger is read)

NAME = ".pep517_torch_ledger.json"


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
    changed = why_stale(record, env, files=False) or env_changes(record.get("flags", {}), env)
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
    missed: str | None = None,
) -> dict[str, Any]:
    """The ``explain`` section: who built (``"a wheel build"``), how it ended (``"built"``,
    ``"failed"``, ``"nothing to do"``), why the faster path before it did not answer
    (``missed``: the no-op replay's ``why_stale``, or None), and for each step that ran (its
    name, its outputs) the first reason: what changed for the whole folder, else the output
    this layer deleted (an input's content changed), else ninja's own reason, else an input it
    reads was rebuilt."""
    ours, ninja = ours or {}, ninja or {}
    rows = []
    for name, outputs in steps:
        outputs = list(outputs)
        reason = everything or next((ours[o] for o in outputs if o in ours), None)
        reason = reason or next((ninja[o] for o in outputs if o in ninja), None)
        rows.append([name, reason or "an input it reads was rebuilt"])
    import time

    found = {"at": now_text(), "at_ns": time.time_ns(), "by": by, "outcome": outcome,
             "everything": everything, "steps": rows}
    return found if missed is None else {**found, "missed": missed}

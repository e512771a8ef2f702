"""What the tool probes found, remembered on disk: a no-op build starts no compiler and no nvcc.

A probe (a compiler's ``--version``, nvcc's version and GPU codes, the toolkit behind an nvcc
wrapper script) answers from the files it runs. Its answer is stored under the probe's kind, its
arguments and the paths of those files, with a record of what it depended on
(``shipped_runtime/build_inputs.py``: each file's identity, device, inode, size, mtime, ctime),
in ``<cache root>/probes.json`` (the machine-wide cache directory of ``core/pch/cache.py``):
while ``build_inputs.why_stale`` finds the record holds, the answer is used; a replaced,
rebuilt or touched tool is probed again, and its new answer replaces the old. Failures are
never stored, and a cache that cannot be read or written only means the probe runs. The file is read as untrusted
input (``shipped_runtime/state_file.py``: a regular file, bounded, of :data:`SHAPE`), and each
answer is checked by its probe's ``decode`` as strictly as the probe's own output (an nvcc
version of two numbers, arch names, an absolute path): one that fails is named in one line and
probed again.

The config layer needs nvcc's version before the build directory is known (``cuda = "auto"``
picks the ``{cuda}`` in its name), so the cache lives beside the PCH cache, not in a build
directory; what it holds is a fact about this machine's files, shared by every project.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ...atomic import write_atomic
from ...shipped_runtime.input_audit import note
from ...shipped_runtime.environment import CACHE_DIR, NO_PROBE_CACHE, XDG_CACHE_HOME, cache_root
from ...shipped_runtime import build_inputs
from ...shipped_runtime.state_file import IDENTITY, Exactly, Map, Unreadable, ignored, problem, read_json
from ...shipped_runtime.user_line import say

FILE = "probes.json"
VERSION = 2
MAX_ENTRIES = 64  # oldest first out: probes of tools gone do not pile up
LIMIT = 4 << 20  # bytes: 64 answers of a few KiB at most
SHAPE = {"version": Exactly(VERSION), "entries": Map(object)}
ENTRY = {"files": Map((IDENTITY, None)), "answer": object}  # a record of its files, the answer

T = TypeVar("T")


def depended_on(files: Sequence[str | Path]) -> dict[str, Any]:
    """The record a probe's answer rests on: each file it reads by identity (a missing one,
    e.g. a config file the tool would read, as missing: creating it is a change)."""
    return {"files": {os.fspath(file): build_inputs.identity(file) for file in files}}


def _location(env: Mapping[str, str] | None) -> Path | None:
    # the few variables it needs, each looked up: a build's ReadEnv (backend/noop_record.py) learns
    # which it read, where a copy of it all would read every variable
    given = {} if env is None else env
    merged = {name: given[name] if name in given else os.environ.get(name, "")
              for name in (NO_PROBE_CACHE, CACHE_DIR, XDG_CACHE_HOME, "HOME")}
    merged = {name: value for name, value in merged.items() if value}
    if merged.get(NO_PROBE_CACHE):  # set (non-empty): every probe runs
        return None
    return cache_root(merged) / FILE


def _read(location: Path) -> dict[str, Any]:
    try:
        state = read_json(location, LIMIT, SHAPE)
    except Unreadable as error:
        ignored(error, "every tool is probed again")
        return {}
    return {} if state is None else state["entries"]


def remembered(
    kind: str,
    arguments: Sequence[str],
    files: Sequence[str | Path],
    probe: Callable[[], T],
    *,
    env: Mapping[str, str] | None = None,
    encode: Callable[[T], Any] = lambda value: value,
    decode: Callable[[Any], T] = lambda value: value,
) -> T:
    """``probe()``'s answer for ``kind`` + ``arguments`` while ``files`` keep their identity:
    from the cache when it has one, else probed (and stored when the probe succeeds)."""
    for file in files:
        note(file)  # a no-op replay checks them too (input_audit.py)
    location = _location(env)
    key = json.dumps([kind, list(arguments), [os.fspath(file) for file in files]])
    record = depended_on(files)  # before the probe: a change while it runs shows next time
    if location is not None:
        entry = _read(location).get(key)
        if problem(entry, ENTRY) is None and build_inputs.why_stale(entry, {}) is None:
            try:
                return decode(entry["answer"])
            except (TypeError, ValueError, KeyError, IndexError, AttributeError):
                say(f"{location}: its answer for {kind} is not one the probe gives: probing again")
    value = probe()
    if location is not None:
        _store(location, key, {**record, "answer": encode(value)})
    return value


def _store(location: Path, key: str, value: Any) -> None:
    entries = _read(location)  # again: another build may have added entries meanwhile
    entries.pop(key, None)
    entries[key] = value
    while len(entries) > MAX_ENTRIES:
        entries.pop(next(iter(entries)))
    try:
        location.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(location, json.dumps({"version": VERSION, "entries": entries}))
    except OSError:
        pass  # an unwritable cache costs the next build a probe, nothing else

"""Whether ninja would find anything to do, answered with stats instead of running it.

After a ninja run that succeeded, every file ninja decides with is recorded with its stamps
(mtime, size, ctime, inode): build.ninja, its ``.ninja_log`` and ``.ninja_deps``, every edge's
outputs and inputs (implicit and order-only ones included) and the headers its deps log lists
for each object. While each keeps its stamps, ninja would say "no work to do": a no-op build
then starts no ninja at all. Anything else (an edit, a touch, a deleted output, a new
build.ninja, ninja run by an editable install's import hook) changes a stamp, and ninja runs.

Nothing is recorded when a file ninja reads changed while the build ran (its ctime is after
the build started; ninja itself rebuilds what read it), or when an output is missing (ninja
would run its edge again): the next build then runs ninja, and records afresh.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..atomic import write_atomic

UP_TO_DATE_STAMPS_NAME = ".pep517_torch_up_to_date.json"
STATE_VERSION = 1
NINJA_FILES = ("build.ninja", ".ninja_log", ".ninja_deps")
_SEPARATORS = ("|", "||", "|@")


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino]


def _tokens(line: str) -> Iterator[tuple[str, bool]]:
    """A build line's paths, unescaped, each with whether an unescaped ``:`` ended it (the end
    of the outputs)."""
    token, index = "", 0
    while index < len(line):
        char = line[index]
        if char == "$" and index + 1 < len(line):
            token += line[index + 1] if line[index + 1] in " :$" else line[index : index + 2]
            index += 2
            continue
        if char == " ":
            if token:
                yield token, False
            token = ""
        elif char == ":":
            yield token, True
            token = ""
        else:
            token += char
        index += 1
    if token:
        yield token, False


def edge_files(text: str) -> tuple[set[str], set[str]]:
    """(outputs, inputs) of every ``build`` line of a build.ninja this package wrote (one line
    per edge, paths escaped by ninja_syntax.escape_path), as written."""
    outputs: set[str] = set()
    inputs: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("build "):
            continue
        in_outputs, rule_next = True, False
        for token, ends_outputs in _tokens(line[len("build "):]):
            if in_outputs:
                if token and token != "|":
                    outputs.add(token)
                if ends_outputs:
                    in_outputs, rule_next = False, True
            elif rule_next:
                rule_next = False  # the rule's name
            elif token not in _SEPARATORS:
                inputs.add(token)
    return outputs, inputs


def _absolute(build_dir: Path, path: str) -> str:
    return os.path.normpath(os.path.join(build_dir, path))


def record(build_dir: Path, dependencies: Mapping[str, Sequence[Path]], *, started_ns: int) -> None:
    """Record the stamps after a successful ninja run that started at ``started_ns`` (wall
    clock); ``dependencies`` are its deps log's (``ninja -t deps``), absolute."""
    state_file = build_dir / UP_TO_DATE_STAMPS_NAME
    state_file.unlink(missing_ok=True)  # a run that cannot be recorded leaves no stale record
    try:
        text = (build_dir / "build.ninja").read_text(encoding="utf-8")
    except OSError:
        return
    outputs, inputs = edge_files(text)
    written = {_absolute(build_dir, p) for p in (*outputs, *NINJA_FILES[1:])}
    read = {_absolute(build_dir, p) for p in inputs}
    read.update(str(p) for paths in dependencies.values() for p in paths)
    read.add(_absolute(build_dir, NINJA_FILES[0]))
    files: dict[str, list[int]] = {}
    for path in sorted(written | read):
        stamp = _stamp(path)
        if stamp is None and path in written and path.endswith(NINJA_FILES[2]):
            continue  # no deps log: a graph without depfiles
        if stamp is None or (path not in written and stamp[2] >= started_ns):
            return
        files[path] = stamp
    try:
        write_atomic(state_file, json.dumps({"version": STATE_VERSION, "files": files}))
    except OSError:
        pass  # no record: the next build runs ninja, as it always did


def _load(build_dir: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((build_dir / UP_TO_DATE_STAMPS_NAME).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return None
    files = state.get("files")
    return files if isinstance(files, dict) and files else None


def current(build_dir: Path) -> bool:
    """Whether every file recorded after the last successful ninja run keeps its stamp."""
    files = _load(build_dir)
    if files is None:
        return False
    return all(_stamp(path) == stamp for path, stamp in files.items())


def forget(build_dir: Path) -> None:
    (build_dir / UP_TO_DATE_STAMPS_NAME).unlink(missing_ok=True)

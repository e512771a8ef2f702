"""The compile core's part of the build folder's ledger: what the last ninja run decided with.

After each successful run the ``compile`` section of the build folder's ledger
(``shipped_runtime/ledger.py``) records, as ``shipped_runtime/build_inputs.py`` records what
a build depended on:

- every file ninja decides with, by identity: build.ninja, its ``.ninja_log`` and
  ``.ninja_deps``, every edge's outputs and inputs, and the headers its deps log lists; the
  project's own inputs (sources and headers outside torch and the build folder) with their
  content hash too, and which outputs read each;
- the environment variables that are compile inputs without being on any command line
  (``CPATH``, ``CPLUS_INCLUDE_PATH``, ``LIBRARY_PATH``... ``COMPILE_INPUT_ENV``), and the
  flags variables that are on them (``CXXFLAGS``, ``LDFLAGS``...: ninja redoes the steps whose
  command changed; this says which variable changed them);
- the machine facts a compile depends on (``build_inputs.COMPILE_FACTS``): the C++ compiler
  CXX or PATH finds, torch's version file, nvcc when the build compiles CUDA.

Before the next run (:func:`discard_changed`), anything that differs decides what ninja must
redo, beyond what its mtimes show: a folder made for another folder or project (copied,
moved, restored by a CI cache) or a changed variable or fact forgets ninja's log (every step
runs again: the cost is a recompile, never a wrong wheel); an input whose content changed
while its mtime lies (``cp -p``, ``rsync -t``, tar) deletes the outputs that read it. Each
reason is kept for ``explain``. And while every file keeps its identity and nothing else
changed (:func:`current`), ninja would say "no work to do": a no-op build starts no ninja.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..shipped_runtime import build_inputs, ledger
from ..shipped_runtime.environment import COMPILE_INPUT_ENV, FLAGS_ENV

SECTION = "compile"
NINJA_FILES = ("build.ninja", ".ninja_log", ".ninja_deps")
_SEPARATORS = ("|", "||", "|@")
_PRECOMPILED = (".gch", ".pch")  # outputs of our own graphs (possibly the machine cache's)


@dataclass
class Changes:
    """Why the next run has work beyond ninja's own reasons: for the whole folder, and per
    output deleted, or found missing, for a changed input (``{target: "csrc/a.cpp changed (its
    content)"}``)."""

    everything: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    # a flags variable that changed (``CXXFLAGS changed: unset -> '-DX=1'``): on the command
    # lines, so ninja redoes the steps it changes, and this says why
    commands: str | None = None


def facts(toolkit_nvcc: Path | None, torch_root: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The machine facts a build's objects depend on, as the ledger records them."""
    return build_inputs.observe(build_inputs.COMPILE_FACTS, env, nvcc=toolkit_nvcc,
                                torch_root=torch_root)


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


def _output_path(build_dir: Path, target: str) -> Path | None:
    """The output file of a ninja target, only if it lies inside the build directory."""
    path = Path(target)
    if path.is_absolute() or ".." in path.parts:
        return None
    return build_dir / path


def _exists(path: Path | None) -> bool:
    return path is not None and path.exists()


def _forget_ninja_log(build_dir: Path) -> None:
    """ninja runs every step whose command its log does not hold: all of them."""
    for name in NINJA_FILES[1:]:
        (build_dir / name).unlink(missing_ok=True)


def _record(build_dir: Path, root: Path | None) -> dict[str, Any] | None:
    found = ledger.section(build_dir, SECTION, root)
    return found if isinstance(found, dict) and isinstance(found.get("files"), dict) else None


def _changed_files(files: Mapping[str, list[Any] | None]
                   ) -> tuple[dict[str, tuple[float, str]], dict[str, build_inputs.Identity]]:
    """The content-tracked files that changed since the record: path -> (ctime of the change,
    how); and those only touched (the same bytes): path -> identity now."""
    changed: dict[str, tuple[float, str]] = {}
    touched: dict[str, build_inputs.Identity] = {}
    for path, recorded in files.items():
        if recorded is None or len(recorded) != 6:
            continue  # not content-tracked: ninja's mtimes decide
        found = build_inputs.identity(path)
        if found is None or (recorded[5] is not None and found == recorded[:5]):
            continue  # gone: ninja itself rebuilds what listed it
        how = build_inputs.file_change(path, recorded)
        if how is None:
            touched[path] = found
        else:
            changed[path] = (float("inf") if recorded[5] is None else found[4], how)
    return changed, touched


def stale_outputs(build_dir: Path, root: Path | None, env: Mapping[str, str]) -> dict[str, list[str]] | None:
    """Before a run, changing nothing: the recorded outputs the next run rebuilds because a
    tracked input changed or was touched since (target -> those inputs), as
    :func:`discard_changed` and ninja's mtimes will decide; a recorded output that is gone too
    (target -> []). None where there is nothing to go by: no record, a folder made elsewhere,
    a changed variable or fact, no ninja log (every step runs)."""
    if ledger.owner_problem(ledger.load(build_dir), build_dir, root) is not None:
        return None
    record = _record(build_dir, root)
    if record is None or build_inputs.why_stale(record, env, files=False) is not None:
        return None
    if not (build_dir / NINJA_FILES[1]).is_file():
        return None
    changed, touched = _changed_files(record["files"])
    stale: dict[str, list[str]] = {}
    for target, paths in record.get("outputs", {}).items():
        output = _output_path(build_dir, target)
        if output is None:
            continue
        try:
            built = os.stat(output).st_mtime_ns
        except OSError:
            stale[target] = []
            continue
        # content changed and not built since; or a newer mtime, which ninja rebuilds for
        dirty = [p for p in paths if (p in changed and built <= changed[p][0])
                 or (p in touched and touched[p][3] > built)]
        if dirty:
            stale[target] = dirty
    return stale


def discard_changed(build_dir: Path, root: Path | None, env: Mapping[str, str],
                    now: Mapping[str, Any]) -> Changes:
    """Before a run: make ninja redo what changed beyond its mtimes (see the module's
    docstring). ``now``: this build's machine facts (:func:`facts`). A ledger that could not be
    read (named once when it was) voids ninja's log with it: every step runs."""
    void = ledger.take_void(build_dir)
    if void is not None:
        _forget_ninja_log(build_dir)
        return Changes(everything=f"{void.path} could not be read ({void.why})")
    problem = ledger.owner_problem(ledger.load(build_dir), build_dir, root)
    if problem is not None:
        _forget_ninja_log(build_dir)
        return Changes(everything=problem)
    record = _record(build_dir, root)
    if record is None:
        return Changes()
    everything = build_inputs.why_stale(record, env, files=False)
    if everything is not None:
        _forget_ninja_log(build_dir)
        ledger.update(build_dir, root, **{SECTION: None})
        return Changes(everything=everything)
    files: dict[str, list[Any]] = record["files"]
    changed, touched = _changed_files(files)
    for path, found in touched.items():
        files[path] = [*found, files[path][5]]  # touched, not changed
    refreshed = bool(touched)
    result = Changes(commands=build_inputs.env_changes(record.get("flags", {}), env))
    still_current = set(changed)
    for target, paths in record.get("outputs", {}).items():
        output = _output_path(build_dir, target)
        dirty = [p for p in paths if p in changed]
        if output is None or not dirty:
            continue
        try:
            built = os.stat(output).st_mtime_ns
        except OSError:  # missing (an interrupted build): ninja builds it anyway; the edit is why
            still_current.difference_update(dirty)
            result.outputs[target] = (f"{dirty[0]} {changed[dirty[0]][1]} (its output {target}"
                                      " was missing: removed, or an earlier build stopped before making it)")
            continue
        if all(built > changed[p][0] for p in dirty):
            continue  # built after the change (by a plain ninja run, e.g. an editable hook)
        output.unlink(missing_ok=True)
        result.outputs[target] = f"{dirty[0]} {changed[dirty[0]][1]}"
        still_current.difference_update(dirty)
    for path in still_current:  # every output is newer than the change: record what it read
        files[path] = build_inputs.hashed(path) or files[path]
        refreshed = True
    if refreshed:  # the content record follows; ninja, which decides by mtime, still runs
        ledger.update(build_dir, root, **{SECTION: {**record, "current": False}})
    return result


def why_not_current(build_dir: Path, root: Path | None, env: Mapping[str, str]) -> str | None:
    """Why ninja would find work in ``build_dir`` (None: it would find nothing to do), in
    words: no record of a finished run, or a variable, fact or file it decided with that is not
    as recorded (``build_inputs.why_stale``; any move of a file counts: ninja decides by mtime)."""
    record = _record(build_dir, root)
    if record is None:
        return f"{build_dir} holds no record of a finished build"
    if not record.get("current"):
        return f"the last build in {build_dir} did not finish, or an input changed while it ran"
    return build_inputs.why_stale(record, env, content=False)


def current(build_dir: Path, root: Path | None, env: Mapping[str, str]) -> bool:
    """Whether ninja would find nothing to do: the last run succeeded and every file, variable
    and fact it decided with is as recorded."""
    return why_not_current(build_dir, root, env) is None


def forget_current(build_dir: Path, root: Path | None) -> None:
    """Before a run: a run that fails must not leave the last one's "nothing to do"."""
    record = _record(build_dir, root)
    if record is not None and record.get("current"):
        ledger.update(build_dir, root, **{SECTION: {**record, "current": False}})


def record(
    build_dir: Path,
    root: Path | None,
    dependencies: Mapping[str, Sequence[Path]],
    exclude: Sequence[Path],
    *,
    started_ns: int,
    env: Mapping[str, str],
    now: Mapping[str, Any],
) -> None:
    """After a successful run that started at ``started_ns`` (wall clock): every file ninja
    decided with, each output's tracked inputs with their content, the variables and facts.
    ``dependencies``: its deps log's (``ninja -t deps``), absolute; ``exclude``: folders whose
    files are not content-tracked (torch's). Outputs recorded before and absent from this graph
    are kept while they exist (another graph, e.g. a JIT extension's other version, built them).
    A file ninja reads that changed while the build ran leaves "nothing to do" unrecorded (ninja
    itself rebuilds what read it)."""
    old = _record(build_dir, root) or {"files": {}, "outputs": {}}
    try:
        text = (build_dir / NINJA_FILES[0]).read_text(encoding="utf-8")
    except OSError:
        return
    roots = [*exclude, build_dir]
    outputs: dict[str, list[str]] = {
        target: paths for target, paths in old.get("outputs", {}).items()
        if target not in dependencies and _exists(_output_path(build_dir, target))
    }
    for target, paths in dependencies.items():
        outputs[target] = sorted({
            str(p) for p in paths
            if p.is_absolute() and p.suffix not in _PRECOMPILED
            and not any(p.is_relative_to(r) for r in roots)
        })
    tracked = {p for paths in outputs.values() for p in paths}
    edge_outputs, edge_inputs = edge_files(text)
    written = {_absolute(build_dir, p) for p in (*edge_outputs, *NINJA_FILES[1:])}
    read = {_absolute(build_dir, p) for p in edge_inputs} | {_absolute(build_dir, NINJA_FILES[0])}
    read.update(str(p) for paths in dependencies.values() for p in paths)
    files: dict[str, list[Any] | None] = {}
    current_run = True
    for path in sorted(written | read | tracked):
        if path in tracked:
            files[path] = build_inputs.hashed(path, started_ns=started_ns, before=old["files"].get(path))
            found = files[path][:5] if files[path] else None
        else:
            found = files[path] = build_inputs.identity(path)
        if found is None and path in written and path.endswith(NINJA_FILES[2]):
            files.pop(path)  # no deps log: a graph without depfiles
            continue
        if found is None or (path not in written and found[4] >= started_ns):
            current_run = False
    section = {
        "current": current_run,
        "env": build_inputs.read_env(env, COMPILE_INPUT_ENV),
        "flags": build_inputs.read_env(env, FLAGS_ENV),
        "facts": dict(now),
        "files": files,
        "outputs": outputs,
    }
    ledger.update(build_dir, root, **{SECTION: section})


def recorded_inputs(build_dir: Path) -> dict[str, list[Path]]:
    """Each output's tracked inputs, as last recorded."""
    found = _record(build_dir, None)
    if found is None:
        return {}
    return {target: [Path(p) for p in paths] for target, paths in found.get("outputs", {}).items()}

"""Content hashes of a build's own inputs: an edit is rebuilt even when its mtime lies.

ninja rebuilds an output when one of its inputs is newer than it, so an edit whose mtime lands
in the past (``cp -p``, ``rsync -t``, tar, ``os.utime``) goes unnoticed. After each build that
ran anything, we record for every output that ninja's depfiles describe (objects, a project
PCH) its inputs with a sha256 of their content; before the next build, an output with an input
whose content differs is deleted, so ninja rebuilds exactly that output and what links it.

Tracked inputs are the sources and the headers the depfiles list, minus torch's (covered by the
build directory's torch key) and our own outputs (the build directory's files, the PCH stubs in
the machine-wide cache); system headers (``-isystem``
directories included) are not in ``-MMD`` depfiles at all. Only a file whose (mtime, size,
ctime, inode) changed is hashed again, so a no-op build costs one stat per input.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from ..shipped_runtime.file_identity import INPUT_HASHES_NAME, identity_of
STATE_VERSION = 1
_PRECOMPILED = (".gch", ".pch")  # outputs of our own graphs (possibly a shared cache's)

# A recorded file: [mtime_ns, size, ctime_ns, inode, sha256 or None]. None means "changed while
# the build ran, content unknown": its outputs are rebuilt next time.
Record = list[Any]
State = dict[str, Any]  # {"version", "files": {path: Record}, "outputs": {target: [path]}}


def _sha256(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _load(build_dir: Path) -> State | None:
    try:
        state = json.loads((build_dir / INPUT_HASHES_NAME).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return None
    files, outputs = state.get("files"), state.get("outputs")
    well_formed = (
        isinstance(files, dict) and isinstance(outputs, dict)
        and all(isinstance(r, list) and len(r) == 5 for r in files.values())
        and all(isinstance(p, list) and all(isinstance(i, str) for i in p) for p in outputs.values())
    )
    return state if well_formed else None


def _save(build_dir: Path, state: State) -> None:
    write_atomic(build_dir / INPUT_HASHES_NAME, json.dumps(state, sort_keys=True))


def _output_path(build_dir: Path, target: str) -> Path | None:
    """The output file of a ninja target, only if it lies inside the build directory."""
    path = Path(target)
    if path.is_absolute() or ".." in path.parts:
        return None
    return build_dir / path


def discard_changed(build_dir: Path) -> list[str]:
    """Delete each output one of whose recorded inputs changed content since it was built.

    Returns the deleted targets. An output built after the change (by a plain ninja run, e.g.
    an editable install's rebuild on import) is kept: its mtime is newer than the input's ctime.
    """
    state = _load(build_dir)
    if state is None:
        return []
    files: dict[str, Record] = state["files"]
    changed: dict[str, float] = {}  # path -> ctime_ns of the change (inf: unknown)
    refreshed = False
    for path, recorded in files.items():
        try:
            st = os.stat(path)
        except OSError:
            continue  # gone: ninja itself rebuilds what listed it
        if recorded[4] is not None and identity_of(st) == recorded[:4]:
            continue
        digest = _sha256(path) if recorded[4] is not None else None
        if digest is not None and digest == recorded[4]:
            files[path] = [*identity_of(st), digest]  # touched, not changed
            refreshed = True
        else:
            changed[path] = float("inf") if recorded[4] is None else st.st_ctime_ns
    discarded: list[str] = []
    still_current: set[str] = set(changed)
    for target, inputs in state["outputs"].items():
        output = _output_path(build_dir, target)
        dirty = [p for p in inputs if p in changed]
        if output is None or not dirty:
            continue
        try:
            built = os.stat(output).st_mtime_ns
        except OSError:
            still_current.difference_update(dirty)  # missing: ninja builds it anyway
            continue
        if all(built > changed[p] for p in dirty):
            continue
        output.unlink(missing_ok=True)
        discarded.append(target)
        still_current.difference_update(dirty)
    for path in still_current:  # every output is newer than the change: record what it read
        try:
            st = os.stat(path)
        except OSError:
            continue
        files[path] = [*identity_of(st), _sha256(path)]
        refreshed = True
    if refreshed:
        _save(build_dir, state)
    return discarded


def record(
    build_dir: Path,
    dependencies: Mapping[str, Sequence[Path]],
    exclude: Sequence[Path],
    *,
    started_ns: int,
) -> None:
    """Record each target's tracked inputs and their content after a build that started at
    ``started_ns`` (wall clock).

    ``dependencies`` are ninja's (``ninja -t deps``); ``exclude`` are directories whose files
    are not tracked (torch's root). Targets recorded before and absent now are kept while
    their output exists (another graph, e.g. a JIT extension's other version, may build them).
    """
    old = _load(build_dir) or {"files": {}, "outputs": {}}
    roots = [*exclude, build_dir]
    outputs: dict[str, list[str]] = {}
    for target, paths in old["outputs"].items():
        output = _output_path(build_dir, target)
        if target not in dependencies and output is not None and output.exists():
            outputs[target] = paths
    for target, paths in dependencies.items():
        outputs[target] = sorted({
            str(p) for p in paths
            if p.is_absolute() and p.suffix not in _PRECOMPILED
            and not any(p.is_relative_to(root) for root in roots)
        })
    files: dict[str, Record] = {}
    for path in sorted({p for paths in outputs.values() for p in paths}):
        try:
            st = os.stat(path)
        except OSError:
            continue
        before = old["files"].get(path)
        if before is not None and before[4] is not None and before[:4] == identity_of(st):
            files[path] = before
        elif st.st_ctime_ns >= started_ns:
            files[path] = [*identity_of(st), None]  # changed while compiling: content unknown
        else:
            files[path] = [*identity_of(st), _sha256(path)]  # stat first: a later change shows
    _save(build_dir, {"version": STATE_VERSION, "files": files, "outputs": outputs})


def has_record(build_dir: Path) -> bool:
    return (build_dir / INPUT_HASHES_NAME).is_file()


def recorded_inputs(build_dir: Path) -> dict[str, list[Path]]:
    """Each output's tracked inputs, as last recorded."""
    state = _load(build_dir)
    if state is None:
        return {}
    return {target: [Path(p) for p in paths] for target, paths in state["outputs"].items()}

"""``python -m pep517_torch explain [PATH]``: why the last build did what it did.

Read back from the build folder's ledger, as ``ninja -d explain`` would say it but for every
layer: each step the last build ran with the first thing that changed for it (a file, a
variable with its old and new value, the compiler, torch, a build folder copied from
elsewhere), or that nothing changed and the build did nothing or replayed its wheel; then
what changed since, which the next build will redo.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ..backend import noop_cache
from ..backend.discovery import resolve
from ..config import ConfigSettings
from ..shipped_runtime import ledger
from ..shipped_runtime.environment import FLAGS_ENV
from ..shipped_runtime.user_line import say

# A replay marks the no-op record's mtime; the build that wrote it did so this long before.
_REPLAY_MARGIN_NS = 100_000_000


def _shown(text: str, root: Path) -> str:
    """Paths below the project root, relative to it."""
    return text.replace(f"{root}{os.sep}", "")


def _replayed(root: Path, settings: ConfigSettings, env: Mapping[str, str]) -> bool:
    """Whether the last hook call replayed the kept wheel after the build that recorded it."""
    location = noop_cache.record_file(env, "wheel", str(root), settings)
    if location is None:
        return False
    try:
        import json

        with open(location, "rb") as file:
            written = json.load(file).get("written_ns")
        marked = os.stat(location).st_mtime_ns
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(written, int) and marked > written + _REPLAY_MARGIN_NS


def explain(root: Path, settings: ConfigSettings) -> int:
    project, _ = resolve(root, settings, os.environ)
    out = sys.stdout
    if not project.extensions:
        say(f"{project.root} builds no extension here: nothing is compiled, nothing to explain", out)
        return 0
    build_dir = project.options.build_dir
    whole = ledger.load(build_dir)
    if not whole:
        say(f"no build has run in {build_dir} yet: the first one runs every step", out)
        return 0
    problem = ledger.owner_problem(whole, build_dir, project.root)
    if problem is not None:
        say(f"{build_dir}: {problem}; nothing it recorded holds here, and the next build runs"
            " every step", out)
        return 0
    last = whole.get("explain")
    if isinstance(last, dict):
        _say_last(last, project.root, _replayed(project.root, settings, os.environ))
    else:
        say(f"{build_dir} holds no explanation yet (made by an older pep517_torch)", out)
    since = ledger.compile_change(build_dir, project.root, os.environ)
    if since is not None:
        flags = since[0].split(" ", 1)[0] in FLAGS_ENV  # on the commands of some steps
        reach = "the steps whose command uses it" if flags else "every step" if since[1] else "what reads it"
        say(f"since then: {_shown(since[0], project.root)}; the next build redoes {reach}", out)
    return 0


def _say_last(last: Mapping[str, object], root: Path, replayed: bool) -> None:
    out = sys.stdout
    when, by, outcome = last.get("at", "?"), last.get("by", "a build"), last.get("outcome")
    steps = [row for row in last.get("steps", []) if isinstance(row, list) and len(row) == 2]  # type: ignore[union-attr]
    if replayed:
        say(f"nothing changed since the last build ({by}, {when}): the wheel was replayed,"
            " nothing ran", out)
        return
    if outcome == "nothing to do" or not steps:
        say(f"nothing changed since the build before it: the last build ({by}, {when}) ran"
            " no step", out)
        return
    count = f"{len(steps)} step{'s' * (len(steps) != 1)}"
    verb = "failed after" if outcome == "failed" else "ran"
    say(f"the last build ({by}, {when}) {verb} {count}:", out)
    everything = last.get("everything")
    if isinstance(everything, str):
        say(f"  every step, because {_shown(everything, root)}:", out)
    for name, reason in steps:
        said = "" if reason == everything else f": {_shown(str(reason), root)}"
        say(f"  {name}{said}", out)


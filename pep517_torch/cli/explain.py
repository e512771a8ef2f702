"""``python -m pep517_torch explain [PATH]``: why the last build did what it did.

Read back from the build folder's ledger, as ``ninja -d explain`` would say it but for every
layer: each step the last build ran with the first thing that changed for it (a file, a
variable with its old and new value, the compiler, nvcc, torch, a build folder copied from
elsewhere), or that nothing changed and the build did nothing or replayed its wheel (a no-op
hook: the no-op cache's record of it, by whichever interpreter, is later than the ledger's
last build); why a wheel build did not replay the last wheel (the no-op record's
``why_stale``, kept in the ledger by the build that followed); then what changed since, which
the next build will redo. A ledger that cannot be
read is named with why. Everything read back is shown through the one sanitiser
(``user_line.shown``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..backend import noop_cache
from ..backend.discovery import resolve
from ..config import ConfigSettings
from ..shipped_runtime import ledger
from ..shipped_runtime.environment import FLAGS_ENV
from ..shipped_runtime.state_file import Unreadable
from ..shipped_runtime.user_line import say, shown


def _shown(text: object, root: Path) -> str:
    """Text read back, paths below the project root relative to it, as one printable line."""
    return shown(str(text).replace(f"{root}{os.sep}", ""))


def explain(root: Path, settings: ConfigSettings) -> int:
    project, _ = resolve(root, settings, os.environ)
    out = sys.stdout
    if not project.extensions:
        say(f"{project.root} builds no extension here: nothing is compiled, nothing to explain", out)
        return 0
    build_dir = project.options.build_dir
    try:
        whole = ledger.read(build_dir)
    except Unreadable as error:
        say(f"{shown(error)}: not a ledger pep517_torch can read, so nothing it says is used;"
            " the next build runs every step", out)
        return 0
    if not whole:
        say(f"no build has run in {build_dir} yet: the first one runs every step", out)
        return 0
    problem = ledger.owner_problem(whole, build_dir, project.root)
    if problem is not None:
        say(f"{build_dir}: {shown(problem)}; nothing it recorded holds here, and the next build"
            " runs every step", out)
        return 0
    last = whole.get("explain")
    if last is not None:  # a ledger without at_ns is an older pep517_torch's: no replay read
        replay = None if "at_ns" not in last else noop_cache.last_replay(
            str(build_dir), str(project.root), os.environ, last["at_ns"])
        if replay is not None:
            _say_replay(last, *replay)
        else:
            _say_last(last, project.root)
    else:
        say(f"{build_dir} holds no explanation yet (made by an older pep517_torch)", out)
    since = ledger.compile_change(build_dir, project.root, os.environ)
    if since is not None:
        flags = since[0].split(" ", 1)[0] in FLAGS_ENV  # on the commands of some steps
        reach = "the steps whose command uses it" if flags else "every step" if since[1] else "what reads it"
        say(f"since then: {_shown(since[0], project.root)}; the next build redoes {reach}", out)
    return 0


def _say_replay(last: Mapping[str, Any], marked_ns: int, record: Mapping[str, Any]) -> None:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(marked_ns / 1e9))
    say(f"the last build (a wheel build, {when}) ran no step: nothing had changed since the build"
        f" before it ({shown(last['by'])}, {shown(last['at'])}), so the wheel was replayed"
        f" ({shown(record['output']['wheel'])}), nothing ran", sys.stdout)


def _say_last(last: Mapping[str, Any], root: Path) -> None:
    out = sys.stdout
    when, by, outcome, steps = shown(last["at"]), shown(last["by"]), last["outcome"], last["steps"]
    missed = last.get("missed")
    if outcome == "nothing to do" or not steps:
        said = f"the last build ({by}, {when}) ran no step"
        if missed is not None:
            say(f"{said}, and did not replay the last wheel, because {_shown(missed, root)}", out)
        else:
            say(f"nothing changed since the build before it: {said}", out)
        return
    count = f"{len(steps)} step{'s' * (len(steps) != 1)}"
    verb = "failed after" if outcome == "failed" else "ran"
    say(f"the last build ({by}, {when}) {verb} {count}:", out)
    if missed is not None:
        say(f"  not a replay of the last wheel, because {_shown(missed, root)}", out)
    everything = last["everything"]
    if everything is not None:
        say(f"  every step, because {_shown(everything, root)}:", out)
    for name, reason in steps:
        said = "" if reason == everything else f": {_shown(reason, root)}"
        say(f"  {shown(name)}{said}", out)

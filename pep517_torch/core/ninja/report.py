"""What the compile core makes of a ninja run: its command, the commands a verbose build
shows, and its report: a :class:`NinjaRun` (steps, time, output, log), or a BuildError naming
the failed steps, the first real error and the log.

How ninja is started and followed (a pseudo-terminal, its own session, the parent-death
signal, progress lines) is shipped_runtime/ninja.py's, which the editable hook shares.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import BuildError
from ...shipped_runtime import ninja as ninja_follower
from ...shipped_runtime.ninja import Progress, first_error, run_ninja_followed
from ...shipped_runtime.trace import Timeline
from ...shipped_runtime.user_line import print_line, user_line

Log = Callable[[str], None]


@dataclass
class NinjaRun:
    """What one ninja invocation did."""

    steps: list[str] = field(default_factory=list)  # descriptions of finished edges
    seconds: float = 0.0
    output: str = ""  # the tools' own lines and ninja's, without progress lines
    log_file: Path | None = None  # where all of it was written (None: nothing was done)
    cache_hits: int | None = None  # compiles the compiler cache served (None: no cache)
    cache_words: str = "from cache"  # what cache_hits counts, as the summary says it
    timeline: Timeline | None = None  # its steps from ninja's log (None: no trace was written)

    @property
    def compiled(self) -> int:
        return sum(s.startswith("compiling ") for s in self.steps)

    @property
    def linked(self) -> int:
        return sum(s.startswith("linking ") for s in self.steps)

    @property
    def precompiled(self) -> int:
        return sum(s.startswith("precompiling ") for s in self.steps)


def failed_targets(output: str) -> list[str]:
    found = re.finditer(r"^FAILED: (?:\[code=\d+\] )?(.+)$", output, re.M)
    return [target for m in found for target in m.group(1).split()]


def _verbose_commands(ninja: Path, build_dir: Path, descriptions: Mapping[str, str]) -> dict[str, str]:
    """Each step's command by its description (``ninja -t compdb``: milliseconds), so that a
    verbose build shows commands without ``-v``, which would hide when steps start."""
    try:
        rules = re.findall(r"^rule (\S+)", (build_dir / "build.ninja").read_text(), re.M)
        found = subprocess.run(
            [str(ninja), "-C", str(build_dir), "-t", "compdb", *rules],
            capture_output=True, text=True, errors="replace", check=True,
        ).stdout
        entries = json.loads(found)
    except (OSError, ValueError, subprocess.CalledProcessError):
        return {}
    commands = {}
    for entry in entries:
        description = descriptions.get(entry.get("output", ""))
        if description and "command" in entry:
            commands.setdefault(description, entry["command"])
    return commands


def run_ninja(
    ninja: Path,
    build_dir: Path,
    *,
    targets: Sequence[str] = (),
    jobs: int,
    verbose: bool = False,
    show_progress: bool = True,
    log: Log = print_line,
    env: dict[str, str] | None = None,
    what: str = "build",
    header: str | None = None,
    notes: Sequence[str] = (),
    descriptions: Mapping[str, str] | None = None,
    log_file: Path | None = None,
    heartbeat: float | None = None,
    explained: list[str] | None = None,
) -> NinjaRun:
    """Run ninja in ``build_dir``; raise BuildError with the first compiler error on failure.

    With ``show_progress``, ``log`` gets ``notes``, then ``header`` before the first step, a
    line when each step starts and when it ends (with its own duration), ``still ...`` lines
    while one runs past ``heartbeat`` seconds (default: runtime.ninja.HEARTBEAT_S), and the tools'
    output; ``verbose`` adds each
    command. ``log_file`` gets all of it (and the tools' output) whatever is shown, and every
    BuildError names it. ``explained`` gets ninja's ``-d explain`` lines: why each step ran.
    """
    command = [str(ninja), "-C", str(build_dir), "-j", str(jobs), "-d", "explain", *targets]
    commands = _verbose_commands(ninja, build_dir, descriptions or {}) if verbose else {}
    progress = Progress(
        log if show_progress else None,
        log_path=None if log_file is None else str(log_file),
        header=header,
        commands=commands,
        heartbeat=ninja_follower.HEARTBEAT_S if heartbeat is None else heartbeat,
    )
    progress.note(f"$ {shlex.join(command)}", show=False)
    for note in notes:
        progress.note(user_line(note))
    start = time.perf_counter()
    try:
        returncode = run_ninja_followed(command, dict(os.environ if env is None else env), progress)
    except OSError as exc:
        raise BuildError(f"cannot run ninja ({ninja}): {exc}") from None
    finally:
        if explained is not None:
            explained.extend(progress.explained)
    result = NinjaRun(steps=progress.finished, seconds=time.perf_counter() - start,
                      output="\n".join(progress.output),
                      log_file=log_file if progress.log_written else None)
    if returncode != 0:
        names = descriptions or {}
        failed = [names.get(target, target) for target in failed_targets(result.output)]
        error = first_error(result.output)
        message = f"{what}: {', '.join(failed)} failed" if failed else f"{what} failed"
        if result.log_file is not None:
            message += f" (full log: {result.log_file})"
        if error:
            message += f":\n{error}"
        else:
            tail = "\n".join(progress.output[-20:])
            message += f"; ninja said:\n{tail}"
        raise BuildError(message, output=result.output, first_error=error)
    return result

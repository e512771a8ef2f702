"""Run ninja: progress a person can follow, and the first real error when it fails.

ninja runs in its own session and gets SIGTERM when the Python process that started it dies
(SIGKILL included); on SIGTERM ninja stops its compilers and deletes their partial outputs, so a
killed build leaves no orphan compiler writing into a directory that the next build is using.
Its own session matters: ninja starts each compiler in a process group of its own, so a kill
of the builder's process group would otherwise kill ninja alone and orphan the compilers.
Ctrl-C reaches the builder only; it terminates ninja, which stops the compilers the same way.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BuildError

_STATUS = re.compile(r"^\[(\d+)/(\d+) ([\d.]+)s\] (.*)$")
NINJA_STATUS = "[%f/%t %es] "
# Why a tool stopped when the code is not to blame: the cause beats the error it provokes
# (ld's "final link failed: No space left on device" beats collect2's "ld returned 1").
_CAUSE = re.compile(
    r"No space left on device|Disk quota exceeded|Read-only file system|Permission denied"
    r"|cannot open output file|internal compiler error|signal terminated program"
    r"|died due to signal|^Killed\b|out of memory|memory exhausted|Cannot allocate memory"
)
_ERROR_PATTERNS = [
    _CAUSE,
    re.compile(r"^\S.*?:\d+:(\d+:)? (fatal error|error): "),  # gcc / clang
    re.compile(r"^\S.*?\(\d+\): (catastrophic error|error): "),  # nvcc front end
    re.compile(r"undefined reference to|undefined symbol|cannot find -l|ld returned"),
    re.compile(r"\berror\b", re.I),
]

Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class NinjaRun:
    """What one ninja invocation did."""

    steps: list[str] = field(default_factory=list)  # descriptions of finished edges
    seconds: float = 0.0
    output: str = ""
    cache_hits: int | None = None  # compiles the compiler cache served (None: no cache)

    @property
    def compiled(self) -> int:
        return sum(s.startswith("compiling ") for s in self.steps)

    @property
    def linked(self) -> int:
        return sum(s.startswith("linking ") for s in self.steps)

    @property
    def precompiled(self) -> int:
        return sum(s.startswith("precompiling ") for s in self.steps)


def _die_with(parent: int) -> Callable[[], None]:
    def parent_death_signal() -> None:  # runs in the child between fork and exec
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:  # the parent died before prctl: no signal would come
            os._exit(1)

    return parent_death_signal


def first_error(output: str) -> str | None:
    """The first diagnostic worth showing, with the source line and caret gcc prints after it.

    A cause (a full disk, an out-of-memory kill, an internal compiler error...) comes first.
    Source lines quoted under a diagnostic (indented) and the command ninja echoes after
    ``FAILED:`` are never picked: the code or flags may contain any of these words."""
    lines = output.splitlines()
    echoed = {index + 1 for index, line in enumerate(lines) if line.startswith("FAILED:")}
    for pattern in _ERROR_PATTERNS:
        for index, line in enumerate(lines):
            if index in echoed or line.startswith(("FAILED:", "ninja:", " ", "\t")):
                continue
            if pattern.search(line):
                context = [line]
                for follow in lines[index + 1 : index + 4]:
                    if follow.startswith((" ", "\t")) and not _STATUS.match(follow):
                        context.append(follow)
                    else:
                        break
                return "\n".join(context)
    return None


def _failed_targets(output: str) -> list[str]:
    found = re.finditer(r"^FAILED: (?:\[code=\d+\] )?(.+)$", output, re.M)
    return [target for m in found for target in m.group(1).split()]


def run_ninja(
    ninja: Path,
    build_dir: Path,
    *,
    targets: Sequence[str] = (),
    jobs: int,
    verbose: bool = False,
    show_progress: bool = True,
    log: Log = _stderr,
    env: dict[str, str] | None = None,
    what: str = "build",
    slow_notice: tuple[float, str] | None = None,
    descriptions: Mapping[str, str] | None = None,
) -> NinjaRun:
    """Run ninja in ``build_dir``; raise BuildError with the first compiler error on failure.

    ``slow_notice=(seconds, line)`` prints ``line`` once if the build is still running after
    ``seconds`` (the JIT's "this will take a while" line).
    """
    command = [str(ninja), "-C", str(build_dir), "-j", str(jobs), *(["-v"] if verbose else [])]
    command += list(targets)
    run_env = dict(os.environ if env is None else env)
    run_env["NINJA_STATUS"] = NINJA_STATUS
    result = NinjaRun()
    captured: list[str] = []
    start = time.perf_counter()
    timer = None
    if slow_notice is not None:
        timer = threading.Timer(slow_notice[0], log, args=(slow_notice[1],))
        timer.daemon = True
    in_failure = False
    try:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=run_env,
            start_new_session=True,
            preexec_fn=_die_with(os.getpid()),
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise BuildError(f"cannot run ninja ({ninja}): {exc}") from None
    if timer is not None:
        timer.start()
    try:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.rstrip("\n")
            captured.append(line)
            status = _STATUS.match(line)
            if status:
                in_failure = False
                done, total, _, description = status.groups()
                result.steps.append(description)
                if show_progress:
                    elapsed = time.perf_counter() - start
                    log(f"[{done}/{total}] {description} ({elapsed:.1f} s)")
                continue
            if line.startswith("ninja: Entering directory") or line == "ninja: no work to do.":
                continue
            if line.startswith("FAILED: "):
                in_failure = True
                log(line)
                continue
            if show_progress or in_failure or verbose:
                log(line)
        returncode = process.wait()
    except BaseException:
        process.terminate()  # Ctrl-C: ninja stops its compilers and removes partial outputs
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        raise
    finally:
        if timer is not None:
            timer.cancel()
    result.seconds = time.perf_counter() - start
    result.output = "\n".join(captured)
    if returncode != 0:
        names = descriptions or {}
        failed = [names.get(target, target) for target in _failed_targets(result.output)]
        error = first_error(result.output)
        message = f"{what}: {', '.join(failed)} failed" if failed else f"{what} failed"
        if error:
            message += f":\n{error}"
        else:
            tail = "\n".join(captured[-20:])
            message += f"; ninja said:\n{tail}"
        raise BuildError(message, output=result.output, first_error=error)
    return result

"""The precompiled header a wheel build leaves behind: made after the wheel is written, in a
detached process, when the build's TUs did without it.

A cold wheel build with unity TUs has no job slot to spare for a PCH (two TUs on two cores:
making one costs that build more than it saves it), so it compiles without one. But the next
build needs it: an edited file, or a second project's unity TUs, compile in about half the time
with it (measured in docs/performance.md, "The PCH a wheel build leaves behind"). So after the
wheel is written, :func:`start` hands the PCH the build did not make to a background process,
which:

- never delays the hook: it is started (a fork and exec) after the wheel is written, in its own
  session, with no pipe of the caller's open (pip reads the hook's output to its end);
- yields the CPU to every build in front of it (``toolchain/priority.py``: SCHED_IDLE, and
  nice 19 for its session's autogroup, so that it yields across sessions too), its compiler in
  its session and at its priority; and is bounded: one at a time on the machine (an flock on
  the cache's ``background.lock``; the next is not started while one runs), a CPU-time limit
  (:data:`CPU_LIMIT_S`: a compile past it is broken) and a wall-time limit (:data:`TIME_LIMIT_S`:
  a maker the machine's work starved that long stops, to be tried again by the next build),
  its compiler's process group killed past either, started only with the memory a PCH build
  takes free and room for it in the machine cache's bound, and the cache evicted to that
  bound after it;
- says what it is doing (``making.json`` in the entry: its compiler's process group, when it
  started), so that a build needing that PCH can wait for it or not (``wait.py``), and
  records what the PCH took (``timings.py``);
- never publishes half a file: the compiler writes a temporary name, the seal is written,
  then the rename (as the graph's PCH edge does, ``seal.py``); a killed one leaves a
  temporary name the next one removes. A PCH that failed to build is not tried again in the
  background (``background-failed`` in the entry, with the compiler's last lines);
- holds the entry as a build does (a shared lock), so no eviction removes it meanwhile.

Not started: for torch in a throwaway build environment (pip deletes it when the hook
returns), with ``PEP517_TORCH_PCH_BACKGROUND=0``, or where the machine cache is off. A build
that starts while it runs waits for it or compiles without it (``wait.py``); the one after
uses it.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ...shipped_runtime.environment import PCH_BACKGROUND, switch
from ...shipped_runtime.lock import FileLock
from .. import flags
from ..toolchain import isolation, jobs, priority
from . import cache as pch_cache, seal as pch_seal, timings, wait

if TYPE_CHECKING:
    from ..plan import BuildPlan
    from ..spec import BuildOptions

LOCK = "background.lock"  # in the cache's root: held by the one background maker
LOG = "background.log"  # the last background maker's output, in the cache's root
FAILED = "background-failed"  # in an entry: the background build of its PCH failed
CPU_LIMIT_S = 30 * 60  # CPU seconds: many times what a PCH of torch/extension.h takes
TIME_LIMIT_S = 4 * 3600  # wall seconds: starved by the builds it yields to, not broken
POLL_S = 5.0
PCH_BYTES = 5 * 1024**3 // 2  # a PCH build of torch/extension.h peaks at ~2.5 GB (toolchain/jobs.py)
_TEMPORARY = ".background.tmp"


def _busy(root: Path) -> bool:
    lock = FileLock(root / LOCK)
    try:
        if lock.acquire(wait=0):
            lock.release()
            return False
    except OSError:
        pass
    return True


def wanted(plan: BuildPlan, cache_size: int, env: Mapping[str, str]) -> tuple[list[Any], str | None]:
    """The machine-cache PCHs this build's TUs would use that nobody has made, and why none is
    made in the background (None: those are, when any)."""
    root = plan.pch_cache_dir
    if root is None or not switch(env, PCH_BACKGROUND, default=True):
        return [], None
    missing = [e for e in plan.pch_cache if not e.output.exists() and not (e.directory / FAILED).exists()]
    if not missing:
        return [], None
    headers = ", ".join(e.header for e in missing)
    if isolation.is_isolated(plan.torch):
        return [], f"{headers} not precompiled for the next builds: torch comes from a throwaway build environment"
    free = jobs.memory_available()
    if free is not None and free < PCH_BYTES:
        return [], f"{headers} not precompiled for the next builds: {free / 1024**3:.1f} GiB of memory free"
    for entry in missing:
        reason = pch_cache.room_for(root, entry.header.strip("<>"), cache_size)
        if reason is not None:
            return [], f"{headers} not precompiled for the next builds: {reason}"
    if _busy(root):
        return [], f"{headers} not precompiled now: another background build of a PCH is running"
    return missing, None


def start(plan: BuildPlan, options: BuildOptions) -> str | None:
    """Start the background maker of the PCHs this build wanted and did not make; what to
    tell the user (None: nothing to say). Called by a face once its wheel is written."""
    from ..plan import tool_env

    env, cache_size = tool_env(options), options.pch_cache_size
    entries, reason = wanted(plan, cache_size, env)
    if not entries:
        return reason
    assert plan.pch_cache_dir is not None
    tuning = flags.heavy_tuning(plan.compiler)
    spec = {
        "root": str(plan.pch_cache_dir),
        "limit": cache_size,
        "entries": [{
            "directory": str(e.directory),
            "stub": e.stub_text,
            "info": e.info,
            "argv": [*plan.compiler.command, *e.flags, *tuning, "-x", "c++-header", str(e.stub)],
        } for e in entries],
    }
    try:
        _spawn(maker_argv(spec), plan.pch_cache_dir, env)
    except OSError as exc:
        return f"no PCH made in the background: {exc.strerror or exc}"
    headers = ", ".join(e.header for e in entries)
    return f"precompiling {headers} in the background for the next builds ({plan.pch_cache_dir})"


def maker_argv(spec: Mapping[str, Any]) -> list[str]:
    """The command line of a background maker of ``spec`` (root, limit, entries)."""
    package_parent = str(Path(__file__).resolve().parents[3])
    boot = ("import sys; sys.path.insert(0, sys.argv[1]);"
            " from pep517_torch.core.pch.background import main; sys.exit(main(sys.argv[2]))")
    return [sys.executable, "-c", boot, package_parent, json.dumps(spec)]


def _spawn(argv: Sequence[str], root: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` detached: its own session (whose autogroup it lowers, ``main``), output
    to the cache's log, no descriptor of ours (pip waits for the end of the hook's output,
    which a child holding it would delay)."""
    with open(root / LOG, "wb") as log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(env), start_new_session=True, close_fds=True, cwd=root)


def main(spec_text: str) -> int:
    """The background maker: each entry's PCH, one maker on the machine at a time."""
    spec = json.loads(spec_text)
    applied = priority.yield_to_foreground()
    print(f"yielding to foreground work: {', '.join(applied) or 'nothing applies here'}", flush=True)
    root = Path(spec["root"])
    lock = FileLock(root / LOCK)
    if not lock.acquire(wait=0):
        print("another background maker is running", flush=True)
        return 0
    try:
        for entry in spec["entries"]:
            _make(Path(entry["directory"]), entry["stub"], entry["info"], entry["argv"])
        pch_cache.evict(root, int(spec["limit"]))
    finally:
        lock.release()
    return 0


def _make(directory: Path, stub: str, info: Mapping[str, object], argv: Sequence[str]) -> None:
    gch = directory / pch_seal.GCH
    with pch_cache.Hold([directory]):
        for leftover in directory.glob(f"*{_TEMPORARY}"):  # a killed maker's: none runs now
            leftover.unlink(missing_ok=True)
        if gch.exists() or (directory / FAILED).exists():
            return
        if not (directory / pch_seal.STUB).exists():  # evicted since the build: made anew
            (directory / pch_seal.STUB).write_text(stub, encoding="utf-8")
        pch_cache.write_info(directory, info)
        priority.yield_to_foreground()  # again: a build that waited for the last may have raised it
        temporary = directory / f"{pch_seal.GCH}.{os.getpid()}{_TEMPORARY}"
        started = time.monotonic()
        print(f"precompiling: {' '.join(argv)}", flush=True)
        try:
            failure, cpu = _compile([*argv, "-o", str(temporary)], directory)
            if failure is None and not gch.exists():
                pch_seal.write_seal(str(temporary), str(gch))
                os.replace(temporary, gch)
                print(f"made {gch} in {time.monotonic() - started:.1f} s ({cpu:.1f} CPU-s)", flush=True)
                timings.add(directory.parent, info, {"pch": [cpu]})
            elif failure is not None:
                print(failure.text, flush=True)
                if failure.broken:
                    (directory / FAILED).write_text(failure.text + "\n", encoding="utf-8")
        finally:
            wait.clear_making(directory)
            temporary.unlink(missing_ok=True)


class Failure(NamedTuple):
    text: str
    broken: bool  # not to be tried in the background again (False: stopped, not failed)


def _compile(argv: Sequence[str], directory: Path) -> tuple[Failure | None, float]:
    """Run the PCH compile within its limits: why it failed (None: it did not), and the CPU
    seconds it took (from the OS: the compiler's driver and everything it ran)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, **priority.own_process_group())
    except OSError as exc:
        return Failure(f"cannot run {argv[0]}: {exc.strerror or exc}", True), 0.0
    try:
        wait.write_making(directory, process.pid, time.time())
    except OSError:
        pass  # a build needing it then compiles without it
    started, chunks = time.monotonic(), []
    failure = None
    while failure is None:
        try:
            output, _ = process.communicate(timeout=POLL_S)
            chunks.append(output)
            break
        except subprocess.TimeoutExpired:
            pass
        used = priority.group_cpu_seconds(process.pid) or 0.0
        if used > CPU_LIMIT_S:
            failure = Failure(f"stopped after {used:.0f} CPU-s (the limit: {CPU_LIMIT_S})", True)
        elif time.monotonic() - started > TIME_LIMIT_S:
            failure = Failure(f"stopped after {TIME_LIMIT_S} s, {used:.0f} CPU-s: the machine's"
                              " other work left it too little CPU; the next build tries again", False)
    if failure is not None:
        os.killpg(process.pid, signal.SIGKILL)  # the driver and its cc1plus
        process.communicate()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if failure is None and process.returncode != 0:
        lines = b"".join(chunks).decode(errors="replace").strip().splitlines()[-20:]
        failure = Failure("\n".join([f"{argv[0]} exited with {process.returncode}", *lines]), True)
    return failure, cpu

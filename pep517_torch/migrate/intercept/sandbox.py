"""Each run of a setup.py in a process of its own, so that nothing it does reaches migrate.

migrate forks a supervisor (a session and process group of its own; on Linux the subreaper
of everything below it), which forks the run: stdin is ``/dev/null``, stdout and stderr one
pipe that migrate drains (keeping ``OUTPUT_LIMIT`` bytes, so endless output fills no disk),
and the record with its conversion comes back pickled. Whatever the setup.py does is then one
line: ``os._exit`` before ``setup()``, a crash or a signal, a run past the timeout (the
supervisor kills the run and everything it started, daemons that left the group included),
a fork whose copy returns into migrate's code (it ends there, silently). Forked, not spawned:
torch and setuptools are imported once, in migrate.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import pickle
import selectors
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...errors import MigrateError
from .. import DEFAULT_TIMEOUT
from ..convert.tables import convert, installed_distributions
from .gpu_probes import BY_CUDA, GpuChoice
from .run import run_setup
from .record import SetupRun

OUTPUT_LIMIT = 1 << 20  # bytes of a run's output kept (the rest is counted)
GRACE = 10.0  # seconds migrate waits past the timeout for the supervisor before killing it
POLL = 0.02  # seconds between looks at a process being stopped
PR_SET_CHILD_SUBREAPER = 36
PLAIN = (str, int, float, bool, type(None))


class SetupTimeout(MigrateError):
    """A run of setup.py that did not end in time (stopped; nothing written)."""


def available() -> bool:
    return hasattr(os, "fork") and hasattr(os, "setsid")


def run_isolated(path: Path, *, env: Mapping[str, str | None] | None = None,
                 cuda: bool | None = None, gpu: GpuChoice = BY_CUDA,
                 timeout: float = DEFAULT_TIMEOUT) -> SetupRun:
    """:func:`.run.run_setup` in a process of its own, its conversion attached
    (``SetupRun.conversion``). Raises what run_setup raises, and :class:`SetupTimeout`."""
    with contextlib.suppress(ImportError):  # once here, every run inherits them; else
        import setuptools  # noqa: F401       # run_setup says what is missing, in the run
        import torch.utils.cpp_extension  # noqa: F401
    installed_distributions()
    scratch = tempfile.mkdtemp(prefix="pep517-migrate-run-")
    try:
        return _supervised(path, env, cuda, gpu, timeout, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _supervised(path: Path, env: Mapping[str, str | None] | None, cuda: bool | None,
                gpu: GpuChoice, timeout: float, scratch: str) -> SetupRun:
    """The run under its supervisor, its temporary files in ``scratch``."""
    pipes = {name: os.pipe() for name in ("result", "output", "status")}
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()  # nothing buffered here is written again by a copy
    supervisor = os.fork()
    if supervisor == 0:  # pragma: no cover (runs in the forked process)
        _supervisor(pipes, time.monotonic() + timeout,
                    lambda: _run(path, env, cuda, gpu, pipes["result"][1], scratch))
    for read, write in pipes.values():
        os.close(write)
    try:
        received = _collect({name: read for name, (read, _) in pipes.items()},
                            time.monotonic() + timeout + GRACE)
        if received.get("late"):
            _stop(supervisor)
        else:
            os.waitpid(supervisor, 0)
    except BaseException:  # KeyboardInterrupt: the run ends with migrate
        _stop(supervisor)
        raise
    finally:
        for read, _ in pipes.values():
            os.close(read)
    return _outcome(path, received, timeout)


# -- migrate's side ------------------------------------------------------------------------

class _Output:
    """A run's output, bounded: the first OUTPUT_LIMIT bytes and a count of the rest."""

    def __init__(self) -> None:
        self.kept = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = OUTPUT_LIMIT - len(self.kept)
        self.kept += data[:room]
        self.dropped += max(len(data) - room, 0)

    def text(self) -> str:
        text = self.kept.decode("utf-8", "replace")
        return text + (f"\n[{self.dropped} more bytes]" if self.dropped else "")


def _collect(reads: dict[str, int], backstop: float) -> dict[str, Any]:
    """Everything the pipes bring until the supervisor has exited (its status pipe ends),
    then what is left in the others (a process that escaped still holding one is not waited
    for); ``late``: the supervisor did not end by ``backstop``."""
    output = _Output()
    data: dict[str, bytearray] = {"result": bytearray(), "status": bytearray()}
    with selectors.DefaultSelector() as selector:
        for name, fd in reads.items():
            selector.register(fd, selectors.EVENT_READ, name)
        while "status" in {key.data for key in selector.get_map().values()}:
            left = backstop - time.monotonic()
            if left <= 0:
                return {"output": output.text(), "late": True}
            for key, _ in selector.select(min(left, 1.0)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                elif key.data == "output":
                    output.add(chunk)
                else:
                    data[key.data] += chunk
        for key in list(selector.get_map().values()):
            os.set_blocking(key.fd, False)
            with contextlib.suppress(BlockingIOError):
                while chunk := os.read(key.fd, 1 << 16):
                    (output.add(chunk) if key.data == "output" else data[key.data].extend(chunk))
    return {"output": output.text(), "result": bytes(data["result"]),
            "status": bytes(data["status"])}


def _stop(supervisor: int) -> None:
    """Ask the supervisor to end the run (it kills what the run started), then make sure."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(supervisor, signal.SIGTERM)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(supervisor, os.WNOHANG)[0]:
                return
        time.sleep(POLL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(supervisor, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(supervisor, 0)


def _outcome(path: Path, received: dict[str, Any], timeout: float) -> SetupRun:
    status = "late" if received.get("late") else received["status"].decode()
    if not status:
        raise MigrateError(f"{path}: the process supervising setup.py's run ended without a"
                           " word (killed from outside?); nothing was written")
    if status in ("timeout", "late"):
        raise SetupTimeout(f"{path}: setup.py did not finish within {timeout:g} s (migrate"
                           " --timeout): it and every process it started were stopped;"
                           " nothing was written")
    try:
        kind, message, run = pickle.loads(received["result"])
    except Exception:  # nothing came back: the process ended before migrate's code could say
        raise MigrateError(f"{path}: setup.py's process {_ended(status)} before migrate had"
                           " its record (a crash, a signal, or an exit that skips Python's"
                           " clean-up)") from None
    if isinstance(run, SetupRun):
        run.output = received["output"]
    if kind == "error":
        raise MigrateError(f"{path}: {message}", run)
    return run  # type: ignore[no-any-return]


def _ended(status: str) -> str:
    kind, _, value = status.partition(" ")
    if kind == "signal":
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(int(value)).name}"
    return f"ended with exit status {value or '?'}"


# -- the supervisor and the run (forked processes) -----------------------------------------

class _Stop(Exception):
    """The supervisor's timer ran out, or migrate asked it to stop (SIGTERM)."""


def _stop_now(*_: object) -> None:
    raise _Stop


def _supervisor(pipes: dict[str, tuple[int, int]], deadline: float,
                run: Callable[[], None]) -> None:  # pragma: no cover (a forked process)
    """The run's session leader: waits for it until ``deadline``, then ends everything below
    itself and says how the run ended on the status pipe ("exit N", "signal N", "timeout")."""
    try:
        os.setsid()
        _become_subreaper()
        signal.signal(signal.SIGTERM, _stop_now)  # before the fork: no window without it
        signal.signal(signal.SIGALRM, _stop_now)
        child = os.fork()
        if child == 0:
            for number in (signal.SIGTERM, signal.SIGALRM):
                signal.signal(number, signal.SIG_DFL)
            os.setpgid(0, 0)  # the run's own group: one kill ends what stays in it
            os.close(pipes["status"][1])
            for read, _ in pipes.values():
                os.close(read)
            for fd in (1, 2):
                os.dup2(pipes["output"][1], fd)
            os.close(pipes["output"][1])
            run()
        with contextlib.suppress(OSError):
            os.setpgid(child, child)
        for name in ("result", "output"):
            os.close(pipes[name][1])
        for read, _ in pipes.values():
            os.close(read)
        status = "timeout"
        try:
            signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))
            wait_status = os.waitpid(child, 0)[1]
            status = (f"signal {os.WTERMSIG(wait_status)}" if os.WIFSIGNALED(wait_status)
                      else f"exit {os.waitstatus_to_exitcode(wait_status)}")
        except _Stop:
            pass
        for number in (signal.SIGTERM, signal.SIGALRM):
            signal.signal(number, signal.SIG_IGN)
        signal.setitimer(signal.ITIMER_REAL, 0)
        _end_descendants(child)
        os.write(pipes["status"][1], status.encode())
    finally:
        os._exit(0)


def _become_subreaper() -> None:
    """Orphans below this process come back to it (Linux), so none outlives the run."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _children() -> list[int]:
    """This process's live children (zombies left out), read from /proc."""
    me, found = os.getpid(), []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    fields = stat.read().rpartition(b")")[2].split()
                if fields[0] != b"Z" and int(fields[1]) == me:
                    found.append(int(entry.name))
    return found


def _end_descendants(run: int) -> None:  # pragma: no cover (a forked process)
    """SIGKILL the run's process group, then every child of this subreaper until none is left
    (the orphans of a killed one come back to it), reaping them."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(run, signal.SIGKILL)
    for _ in range(1000):
        children = _children()
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _reap()
        if not children:
            return
        time.sleep(POLL)


def _reap() -> None:
    while True:
        try:
            if not os.waitpid(-1, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            return


def _run(path: Path, env: Mapping[str, str | None] | None, cuda: bool | None, gpu: GpuChoice,
         result: int, scratch: str) -> None:  # pragma: no cover (a forked process)
    """The run's process: setup.py with /dev/null for stdin and the output pipe for stdout and
    stderr (fds 1 and 2), its record and conversion pickled onto ``result``. Temporary files
    (the run's, and migrate's own stand-ins) go into ``scratch``, which migrate removes however
    the run ends (an ``os._exit`` or a kill skips every clean-up in here)."""
    tempfile.tempdir = os.environ["TMPDIR"] = scratch
    me = os.getpid()
    real_exit = os._exit
    run = SetupRun(path)
    failure: BaseException | None = None
    try:
        _own_streams()

        def exit_now(status: int) -> None:  # os._exit, as setup.py calls it
            if os.getpid() == me:
                _send(result, _exited(path, run, status, sys._getframe(1)))
            real_exit(status)

        os._exit = exit_now
        run_setup(path, env=env, cuda=cuda, run=run, capture=False, gpu=gpu)
    except BaseException as exc:  # MigrateError; else migrate's own failure, in one line
        failure = exc
    if os.getpid() != me:  # a copy setup.py forked came back here: it ends, silently
        real_exit(0)
    try:
        if isinstance(failure, MigrateError):
            _send(result, ("error", str(failure).removeprefix(f"{path}: "), _portable(run)))
        elif failure is not None:
            _send(result, ("error", f"migrate failed: {type(failure).__name__}: {failure}",
                           _portable(run)))
        else:
            _send(result, _converted(run))
    finally:
        real_exit(0)


def _own_streams() -> None:
    """stdin from /dev/null; stdout and stderr the output pipe (fds 1 and 2, as the supervisor
    left them: the output pipe's write end)."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "rb", closefd=False), encoding="utf-8")
    sys.stdout, sys.stderr = (
        io.TextIOWrapper(io.FileIO(fd, "wb", closefd=False), encoding="utf-8",
                         errors="replace", line_buffering=True, write_through=True)
        for fd in (1, 2))


def _exited(path: Path, run: SetupRun, status: int, frame: Any) -> tuple[str, str | None, Any]:
    where = f" (line {frame.f_lineno})" if frame.f_code.co_filename == str(path) else ""
    if run.setup_calls and status == 0:
        return _converted(run)
    when = "" if run.setup_calls else " before calling setup()"
    return "error", f"setup.py ended its process with os._exit({status}){where}{when}", \
        _portable(run)


def _converted(run: SetupRun) -> tuple[str, str | None, SetupRun]:
    try:
        run.conversion = convert(run)
    except MigrateError as exc:
        run.conversion = str(exc).removeprefix(f"{run.path}: ")
    return "ok", None, _portable(run)


def _portable(run: SetupRun) -> SetupRun:
    """The record without setup()'s arguments (objects of the setup.py's own: its conversion
    says what they meant) and with plain probe values, so that it pickles."""
    run.kwargs = None
    for probes in (run.cuda_probes, run.gpu_probes):
        for key, value in probes.items():
            probes[key] = value if isinstance(value, PLAIN) else repr(value)
    return run


def _send(fd: int, payload: tuple[str, str | None, Any]) -> None:
    try:
        data = pickle.dumps(payload)
    except Exception as exc:
        data = pickle.dumps(("error", f"migrate could not carry the record back ({exc})", None))
    with contextlib.suppress(OSError):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

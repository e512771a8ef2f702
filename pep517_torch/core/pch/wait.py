"""A build that needs the PCH the background is making: it waits for it when what is left of
that PCH is shorter than what it saves the build, and otherwise compiles without it, at full
speed (the background yields the CPU: ``toolchain/priority.py``); never both slow.

The background maker (``background.py``) leaves ``making.json`` in the entry while it makes
the PCH: its own pid, its compiler's process group and when the compile started. A build whose graph does not make that PCH
itself reads how much CPU the group has used, and this machine's measurements
(``timings.py``): what a PCH of that header takes to make, what it saves a TU. With ``k``
heavy job slots and ``n`` TUs using it, the build's TUs run in ``ceil(n / k)`` waves; waiting
``R`` seconds for the rest of the PCH saves ``S`` seconds in each, so it waits when
``R < waves × S`` (:func:`choose`), and for no longer than that: a PCH late past its estimate
(a busier machine than the one measured) is given up at the deadline, so the most a wrong
estimate costs is what the PCH would have saved. Without a measurement of both, a build never
waits.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...shipped_runtime.files import write_atomic
from ...shipped_runtime.user_line import user_line
from ..toolchain import priority
from . import timings
from .plan import PchPlan

MAKING = "making.json"  # in an entry while the background compiles its PCH
POLL_S = 0.2
SLACK = 1.25  # a wait's deadline: the estimate, a quarter more, and ...
GRACE_S = 2.0  # ... two seconds (the maker's rename, seal, a loaded moment)


@dataclass(frozen=True)
class Making:
    pid: int  # the maker's: alive until the PCH is sealed and renamed into place
    birth: str  # the maker's start time in /proc (a pid the kernel reused is not the maker)
    pgid: int  # its compiler's process group (the driver's pid)
    started: float  # time.time() when the compile started


@dataclass(frozen=True)
class Choice:
    wait_s: float  # how long to wait at most; 0: compile without the PCH now
    reason: str  # why, in words


def choose(*, remaining_s: float | None, saving_s: float | None, users: int, slots: int) -> Choice:
    """Wait for a PCH ``remaining_s`` from ready, or compile without it: ``saving_s`` per TU,
    ``users`` TUs that use it, ``slots`` heavy jobs at once. Pure."""
    if remaining_s is None or saving_s is None or saving_s <= 0:
        return Choice(0.0, "what it costs and saves is not measured on this machine yet")
    waves = math.ceil(max(users, 1) / max(slots, 1))
    gain = waves * saving_s
    left = f"~{remaining_s:.0f} s left; it saves ~{saving_s:.0f} s a TU, {users} TU{'s' * (users != 1)}"
    if remaining_s >= gain:
        return Choice(0.0, left)
    return Choice(min(gain, remaining_s * SLACK + GRACE_S), left)


def remaining(making: Making, pch_cpu_s: float | None, *, now: float | None = None) -> float | None:
    """Seconds until the PCH is made: what a PCH of that header took here, less what the
    compile has used (its CPU from /proc; the time since it started where /proc cannot say)."""
    if pch_cpu_s is None:
        return None
    used = priority.group_cpu_seconds(making.pgid)
    if used is None:
        used = (time.time() if now is None else now) - making.started
    return max(pch_cpu_s - used, 1.0)  # past its estimate: nearly done, or much slower


def write_making(directory: Path, pgid: int, started: float) -> None:
    """What the maker (this process) is making in ``directory``: its compiler's group."""
    pid = os.getpid()
    record = {"pid": pid, "birth": priority.start_time(pid) or "", "pgid": pgid, "started": started}
    write_atomic(directory / MAKING, json.dumps(record))


def clear_making(directory: Path) -> None:
    (directory / MAKING).unlink(missing_ok=True)


def read_making(directory: Path) -> Making | None:
    """The maker's record, while the maker runs; untrusted input (a regular file this user
    owns, bounded, every field checked)."""
    path = directory / MAKING
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > 4096:
            return None
        if path.stat().st_uid != os.getuid():
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    pid, birth, pgid, started = (record.get(k) for k in ("pid", "birth", "pgid", "started"))
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 1 for n in (pid, pgid)):
        return None
    if not isinstance(started, (int, float)) or not math.isfinite(started) or not isinstance(birth, str):
        return None
    if not birth or priority.start_time(pid) != birth:  # type: ignore[arg-type]
        return None  # gone, or its pid reused
    return Making(pid, birth, pgid, float(started))  # type: ignore[arg-type]


def users_of(entry: PchPlan, details: Mapping[str, Mapping[str, object]]) -> int:
    """How many of the build's compile steps (unity TUs counted once) use ``entry``'s PCH."""
    return sum(1 for d in details.values()
               if d.get("kind") == "compile" and d.get("pch_output") == str(entry.output))


def wait_for_background(
    entries: Sequence[PchPlan], root: Path, details: Mapping[str, Mapping[str, object]],
    slots: int, log: Callable[[str], None], *, clock: Callable[[], float] = time.monotonic,
) -> None:
    """Before a build's ninja starts: for each machine-cache PCH its graph does not make, that
    is missing and that the background is making, wait for it or go on without it (a line
    each way)."""
    for entry in entries:
        if entry.build or entry.output.exists():
            continue
        making = read_making(entry.directory)
        if making is None:
            continue
        measured = timings.estimate(root, entry.info)
        left = remaining(making, measured.pch_seconds)
        choice = choose(remaining_s=left, saving_s=measured.saving_seconds,
                        users=users_of(entry, details), slots=slots)
        what = f"the PCH of {entry.header} the background is making"
        if choice.wait_s <= 0:
            log(user_line(f"compiling without {what} ({choice.reason})"))
            continue
        log(user_line(f"waiting up to {choice.wait_s:.0f} s for {what} ({choice.reason})"))
        # Waited for, it is foreground work: its session weighs what ours does meanwhile.
        boosted = priority.set_autogroup_nice(making.pid, 0, attempts=3)
        started = clock()
        try:
            while not entry.output.exists() and clock() - started < choice.wait_s:
                if read_making(entry.directory) is None and not entry.output.exists():
                    break  # the maker stopped without it
                time.sleep(POLL_S)
        finally:
            if boosted and read_making(entry.directory) is not None:
                priority.set_autogroup_nice(making.pid, priority.AUTOGROUP_NICE)
        waited = clock() - started
        if entry.output.exists():
            log(user_line(f"{entry.header}'s PCH ready after {waited:.1f} s"))
        else:
            log(user_line(f"{entry.header}'s PCH not ready after {waited:.1f} s: compiling without it"))

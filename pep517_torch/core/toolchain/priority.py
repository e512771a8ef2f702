"""Work nobody waits for yields the CPU to the builds people wait for, whatever the kernel's
scheduler settings; and how much CPU a process group has used (what a waiting build reads).

Three things decide how Linux shares a core between a background process and a build:

- with autogroups on (``/proc/sys/kernel/sched_autogroup_enabled``, 1 on most desktop and many
  server kernels), every session is a group, and CFS shares a core between groups by each
  group's weight before it looks at the tasks inside one: a background process in a session
  of its own gets as much as the whole foreground build beside it, whatever its ``nice``
  (ninja runs in a session of its own too). Lowering its session's group to nice 19
  (``/proc/self/autogroup``: weight 15 against 1024) is what works across sessions;
- inside one group (autogroups off, or every process in one cpu cgroup), the tasks' own
  weights: ``SCHED_IDLE`` (weight 3, and any other task preempts it at once) yields far more
  than a plain ``nice``, and changes nothing across autogroups (the group still weighs 1024);
- so the background process does both, in its own session: ``SCHED_IDLE`` (nice 19 where the
  platform has no SCHED_IDLE) for its tasks, nice 19 for its session's autogroup. Children
  inherit both: the policy through fork, the autogroup through the session, which is why the
  processes it starts stay in it (their own process group, :func:`own_process_group`, never
  a new session, whose new group would weigh 1024 again).

An unprivileged process may do all three (SCHED_IDLE and raising nice need no capability; an
autogroup's nice may be raised by its owner). The measurements that chose this are in
docs/performance.md ("Background work yields to the build in front of it").
"""

from __future__ import annotations

import errno
import os
import sys
import time
from pathlib import Path
from typing import Any

AUTOGROUP_NICE = 19
NICE = 19
_PROC = Path("/proc")


def yield_to_foreground() -> list[str]:
    """Lower this process, and everything it starts from now on, to the smallest share of
    the CPU the scheduler gives: what was applied, in words (for the background log).

    Call it in the leader of a session of its own only (``start_new_session=True``): the
    autogroup it lowers is its session's, which would otherwise be the caller's terminal."""
    applied = []
    try:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
        applied.append(f"nice {NICE}")
    except (AttributeError, OSError):
        pass
    if hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            applied.append("SCHED_IDLE")
        except OSError:
            pass
    if _session_leader() and set_autogroup_nice("self", AUTOGROUP_NICE):
        applied.append(f"autogroup nice {AUTOGROUP_NICE}")
    return applied


def _session_leader() -> bool:
    try:
        return os.getsid(0) == os.getpid()
    except (AttributeError, OSError):
        return False


def set_autogroup_nice(pid: int | str, nice: int, attempts: int = 20) -> bool:
    """Set the nice of the autogroup of process ``pid`` (``"self"``: this one's): its
    session's weight against every other session's. Its owner may raise it to 19 and lower it
    back to 0. The kernel takes one autogroup change per 100 ms machine-wide (EAGAIN): try a
    while. False where the kernel has no autogroups (no such file), or refuses."""
    path = _PROC / str(pid) / "autogroup"
    for _ in range(attempts):
        try:
            path.write_text(f"{nice}\n")
            return True
        except OSError as exc:
            if exc.errno != errno.EAGAIN:
                return False
        time.sleep(0.11)
    return False


def own_process_group() -> dict[str, Any]:
    """``subprocess.Popen`` arguments that put a child in a process group of its own (so that
    a time limit can kill it with its children) and keep it in this session, and so in this
    session's autogroup and at its priority."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # pragma: no cover (3.10)


def group_cpu_seconds(pgid: int) -> float | None:
    """CPU seconds (user + system) the live processes of process group ``pgid`` have used
    (a compiler driver and its ``cc1plus``); None where /proc cannot say."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, found = 0, False
    try:
        candidates = [p for p in os.listdir(_PROC) if p.isdigit()]
    except OSError:
        return None
    for pid in candidates:
        fields = _stat_fields(_PROC / pid / "stat")
        if fields is None or fields[2] != str(pgid):
            continue
        found = True
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick if found else None


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used; None when it is gone."""
    fields = _stat_fields(_PROC / str(pid) / "stat")
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_time(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot, as /proc says it (with the pid,
    what tells a process from a later one given its pid); None when it is gone."""
    fields = _stat_fields(_PROC / str(pid) / "stat")
    return fields[19] if fields is not None and len(fields) > 19 else None


def _stat_fields(path: Path) -> list[str] | None:
    """``/proc/PID/stat`` after the command's name (which may hold spaces and parentheses):
    state, ppid, pgrp, ..., utime at [11], stime at [12]."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields if len(fields) > 12 else None

"""How many compilers to run at once: bounded by cores AND by memory.

A translation unit that includes torch/extension.h peaks at ~2.0 GB with g++ and our garbage
collector tuning (~1.5 GB without; building its precompiled header ~2.5 GB), so on a 64-core
machine with 32 GB the memory is the limit.
Ninja's pool for such TUs gets the memory bound; light TUs only the core bound. Behind distcc
the hosts' slots decide instead, and the memory bound applies only to what runs here: the
slots of `localhost` entries, nvcc and precompiled headers (the ``local_heavy`` pool).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import ToolchainError
from ...shipped_runtime.environment import NVCC_THREADS

HEAVY_TU_BYTES = 9 * 1024**3 // 4  # 2.25 GiB per torch TU, with headroom


@dataclass(frozen=True)
class JobPlan:
    jobs: int  # ninja -j
    heavy: int  # depth of the pool for TUs that include torch headers
    reason: str  # how it was decided, for verbose output and `doctor`
    local_heavy: int = 0  # torch-heavy work that always runs here (nvcc, PCHs); 0: = heavy
    memory_slots: int | None = None  # torch-heavy jobs free memory holds here (None: unknown)

    @property
    def local_heavy_depth(self) -> int:
        return self.local_heavy or self.heavy


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def memory_available() -> int | None:
    """Bytes of memory available to new processes, honouring a cgroup v2 limit."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    limit = _read_int(Path("/sys/fs/cgroup/memory.max"))
    used = _read_int(Path("/sys/fs/cgroup/memory.current"))
    if limit is not None and used is not None:
        cgroup_free = max(0, limit - used)
        available = cgroup_free if available is None else min(available, cgroup_free)
    return available


def plan_jobs(requested: int | None, distributed: tuple[int, int] | None = None) -> JobPlan:
    """``requested`` (jobs / MAX_JOBS) wins outright; otherwise cores and memory decide, or
    ``distributed`` = (distcc slots, of which on this machine) with memory for the local ones."""
    if requested is not None:
        return JobPlan(requested, requested, f"{requested} (requested)")
    cpus = cpu_count()
    memory = memory_available()
    local = cpus if memory is None else max(1, min(cpus, memory // HEAVY_TU_BYTES))
    if distributed is not None:
        slots, here = distributed
        heavy = max(1, slots - here + min(here, local))
        reason = (f"{slots} (distcc hosts: {slots - here} remote, {here} local slots),"
                  f" {heavy} for torch TUs, {local} for local torch work")
        return JobPlan(max(slots, cpus), heavy, reason, local_heavy=local)
    if memory is None:
        return JobPlan(cpus, cpus, f"{cpus} (cores; free memory unknown)")
    gib = memory / 1024**3
    return JobPlan(cpus, local, f"{cpus} (cores), {local} for torch TUs ({gib:.1f} GiB free)",
                   memory_slots=max(1, memory // HEAVY_TU_BYTES))


def nvcc_threads(
    gpu_targets: int, parallel_units: int, plan: JobPlan, requested: str | None = None,
    *, longest: bool = False,
) -> int:
    """How many of one .cu's GPU targets nvcc compiles at once (``--threads``; 1: no flag).

    ``requested`` (NVCC_THREADS) wins as given (0: nvcc's own choice, one per core).
    Otherwise threads only use what the build leaves idle: each device pass is counted as one
    torch-heavy job (memory and cores, :func:`plan_jobs`), and with ``parallel_units``
    compiles that can run side by side, ``units x threads`` never exceeds that budget; so 2
    cores never run 2 x k device compiles, and a 64-core machine building 2 files for 4
    architectures runs all 8 at once. Except for the ``longest`` compile where every compile
    starts at once: the others end before it, and the cores they free are its (a .cu beside
    a .cpp on 2 cores: 2 threads), within the memory the other compiles leave."""
    if requested is not None and requested.strip():
        text = requested.strip()
        if not text.isdigit():
            raise ToolchainError(
                f"{NVCC_THREADS}={requested!r} is not a whole number (nvcc's --threads:"
                " how many GPU architectures one nvcc compiles at once; 0 = one per core)"
            )
        return int(text)
    if gpu_targets <= 1:
        return 1
    if longest and parallel_units <= plan.local_heavy_depth:
        memory = (plan.memory_slots or plan.local_heavy_depth) - (parallel_units - 1)
        return max(1, min(gpu_targets, plan.jobs, memory))
    side_by_side = max(1, min(parallel_units, plan.jobs))
    return max(1, min(gpu_targets, plan.local_heavy_depth // side_by_side))

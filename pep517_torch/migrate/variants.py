"""Run a setup.py under several environments and turn its choices into conditions.

The first run uses the real environment. When the setup.py probes CUDA, it runs again with
the probes forced off (the base configuration) and on: what CUDA adds becomes each
extension's `cuda` table (or an ``if.cuda = true`` override). Every environment variable
the setup.py reads is then tried in each of those modes (:mod:`.variables`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import MigrateError
from . import DEFAULT_TIMEOUT
from .convert.tables import Converted, build_requirements, convert
from .convert.diff import diff
from .convert import machine_flags
from .intercept import sandbox
from .intercept.gpu_probes import BY_CUDA, GpuChoice
from .intercept.run import run_setup
from .convert.machine_flags import MachineFlags
from .convert.plan import Observed, Plan, add_changes
from .intercept.record import SetupRun
from .convert.torch_cuda import require_cuda
from .convert.variables import describe, vary_variables


class Runner:
    """Runs and converts one setup.py, each run in a process of its own (:mod:`.intercept.sandbox`);
    failures become their one-line reason, but for a run past the timeout, which ends it all."""

    def __init__(self, path: Path, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = path
        self.timeout = timeout
        # what every conversion loses: the flags that follow the machine (machine_flags.py)
        self.strip: Callable[[Converted], Converted] | None = None

    def run(self, env: Mapping[str, str | None] | None = None, cuda: bool | None = None,
            gpu: GpuChoice = BY_CUDA) -> SetupRun:
        if sandbox.available():
            return sandbox.run_isolated(self.path, env=env, cuda=cuda, gpu=gpu,
                                        timeout=self.timeout)
        return run_setup(self.path, env=env, cuda=cuda, gpu=gpu)

    def attempt(self, env: Mapping[str, str | None] | None = None, cuda: bool | None = None,
                gpu: GpuChoice = BY_CUDA) -> SetupRun | str:
        """The run, or the one-line reason it failed."""
        try:
            return self.run(env, cuda, gpu)
        except sandbox.SetupTimeout:
            raise
        except MigrateError as exc:
            return str(exc).removeprefix(f"{self.path}: ")

    def convert_run(self, run: SetupRun | str) -> Converted | str:
        """A fresh copy of the run's conversion (the plan edits what it is given)."""
        if isinstance(run, str):
            return run
        if run.conversion is None:
            try:
                run.conversion = convert(run)
            except MigrateError as exc:
                run.conversion = str(exc).removeprefix(f"{self.path}: ")
        fresh = copy.deepcopy(run.conversion)
        return self.strip(fresh) if self.strip and isinstance(fresh, Converted) else fresh

    def converted(self, run: SetupRun) -> Converted:
        """The run's conversion, or the MigrateError saying why there is none."""
        found = self.convert_run(run)
        if isinstance(found, str):
            raise MigrateError(f"{self.path}: {found}")
        return found

    def convert(self, env: Mapping[str, str | None] | None = None, cuda: bool | None = None,
                gpu: GpuChoice = BY_CUDA) -> Converted | str:
        """The conversion, or the one-line reason there is none."""
        return self.convert_run(self.attempt(env, cuda, gpu))


def _cuda(plan: Plan, cpu: Converted, gpu: Converted | str, probes: dict[str, Any]) -> None:
    looked = ", ".join(
        f"{probe} ({'unset' if probe.startswith('$') and value is None else repr(value)} here)"
        for probe, value in probes.items()
    )
    plan.environment.append(f"CUDA: setup.py consulted {looked}; migrate ran it with CUDA off"
                            " (the tables below) and on")
    if isinstance(gpu, str):
        plan.environment.append(f"with CUDA forced on, setup.py failed: {gpu}")
        return
    add_changes(plan, diff(cpu, gpu), {"cuda": True}, "when CUDA is on (setup.py's CUDA branch)",
                cuda_tables=True)
    for name in plan.cuda_tables:
        plan.note(name, "this table is what setup.py builds without CUDA; what its CUDA branch"
                  " adds is the `cuda` table that follows, which pep517_torch adds when CUDA is"
                  " enabled (cuda = \"auto\": a CUDA build of torch and nvcc; or an override"
                  " below)")


def _env_writes(plan: Plan, run: SetupRun, machine: MachineFlags) -> None:
    for name, value in run.env_writes.items():
        if name == "TORCH_CUDA_ARCH_LIST" and value and machine.arch_list:
            plan.environment.append(f"setup.py sets ${name}={value} from the machine it runs"
                                    " on: left out (see above)")
        elif name == "TORCH_CUDA_ARCH_LIST" and value:  # converted to cuda-arch-list
            plan.environment.append(f"setup.py sets ${name}={value}: now cuda-arch-list")
        else:
            plan.environment.append(f"setup.py sets ${name}={describe(value)}: set it in the"
                                    " build environment if the build needs it")


def _cuda_only(plan: Plan, reason: str) -> None:
    plan.base.tool["cuda"] = True
    plan.environment.append(f"without CUDA, setup.py fails ({reason}): cuda = true, as CUDA is"
                            " required")


def make_plan(path: Path, timeout: float = DEFAULT_TIMEOUT) -> Plan:
    """Run ``path`` as often as its environment reads require and build the plan (each run
    may take ``timeout`` seconds)."""
    runner = Runner(path, timeout)
    first: SetupRun | None
    try:
        first = runner.run()
        probes = dict(first.cuda_probes)
    except MigrateError as exc:
        if not isinstance(exc.run, SetupRun) or not exc.run.cuda_probes:
            raise
        first, probes, failure = None, dict(exc.run.cuda_probes), exc
    runs: list[SetupRun] = [first] if first is not None else []
    references: dict[bool | None, Converted] = {}  # CUDA mode -> what setup.py builds then
    if first is not None and not probes:
        by_mode: dict[bool | None, SetupRun | str] = {None: first}
    else:
        by_mode = {False: runner.attempt(cuda=False), True: runner.attempt(cuda=True)}
    machine = machine_flags.detect(runner.convert, {
        mode: (run, runner.convert_run(run)) for mode, run in by_mode.items()
        if isinstance(run, SetupRun)})
    runner.strip = machine.strip
    if None in by_mode:
        assert first is not None
        plan, base_run = Plan(base=runner.converted(first)), first
        references[None] = runner.converted(first)
    else:
        cpu_run, gpu_run = by_mode[False], by_mode[True]
        cpu, gpu = runner.convert_run(cpu_run), runner.convert_run(gpu_run)
        if isinstance(cpu, Converted) and isinstance(cpu_run, SetupRun):
            plan, base_run = Plan(base=cpu), cpu_run
            references[False] = runner.converted(cpu_run)
            _cuda(plan, references[False], gpu, probes)
            if isinstance(gpu, Converted) and isinstance(gpu_run, SetupRun):
                references[True] = gpu
                runs.append(gpu_run)
        elif isinstance(gpu, Converted) and isinstance(gpu_run, SetupRun):
            plan, base_run = Plan(base=gpu), gpu_run
            references[True] = runner.converted(gpu_run)
            _cuda_only(plan, str(cpu))
        elif first is None:
            raise failure
        else:
            raise MigrateError(f"{path}: {cpu}")
        runs.append(base_run)
    plan.environment += machine.environment
    for name, why in machine.extensions.items():
        plan.note(name, why)
    _env_writes(plan, base_run, machine)
    # Modules are imported once per process: the first run is the one that saw the imports.
    first_run = first if first is not None else failure.run
    if isinstance(first_run, SetupRun):
        found = {*plan.base.build_requires, *build_requirements(first_run)}
        plan.base.build_requires = sorted(found)
    plan.observed += [Observed({}, mode, converted) for mode, converted in references.items()]
    names = list(dict.fromkeys(name for run in runs for name in run.env_reads
                               if name not in machine.handled))
    vary_variables(plan, runner.convert, names, references)
    if plan.base.tool.get("cuda") is not True:
        plan.need_cuda = require_cuda(plan.base.extensions, plan.conditions, path.parent,
                                      plan.base.notes)
    # Variables that switch CUDA on or off come before the overrides that test `if.cuda`.
    plan.overrides.sort(key=lambda o: (not o.switches_cuda, "cuda" in o.condition))
    return plan

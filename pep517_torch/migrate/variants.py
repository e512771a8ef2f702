"""Run a setup.py under several environments and turn its choices into conditions.

The first run uses the real environment. When the setup.py probes CUDA, it runs again with
the probes forced off (the base configuration) and on: what CUDA adds becomes each
extension's `cuda` table (or an ``if.cuda = true`` override). Every environment variable
the setup.py reads is then tried unset / "1" / "0" (and a marker value, to see whether its
value is copied into the configuration); what changes becomes an override on that variable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .convert import Converted, build_requirements, convert
from .diff import MISSING, Diff, diff, same_tables
from ..errors import MigrateError
from .intercept import run_setup
from .record import SetupRun
from .settings_keys import CUDA_TABLE_KEYS, backend_variables

MARKER = "pep517-migrate-probe"
# Variables pep517_torch reads itself; what a setup.py does with them is only reported.
BACKEND_VARIABLES = backend_variables()


@dataclass
class Override:
    """One ``[[tool.torch-ext.overrides]]`` table (``disabled``: written commented out)."""

    condition: dict[str, Any]
    body: list[tuple[tuple[str, ...], Any]]
    comments: list[str] = field(default_factory=list)
    disabled: bool = False


@dataclass
class Plan:
    base: Converted
    cuda_tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)  # extension `if`
    overrides: list[Override] = field(default_factory=list)
    environment: list[str] = field(default_factory=list)  # header lines: what was looked at


class _Runner:
    def __init__(self, path: Path) -> None:
        self.path = path

    def run(self, env: Mapping[str, str | None] | None = None,
            cuda: bool | None = None) -> SetupRun:  # fmt: skip
        return run_setup(self.path, env=env, cuda=cuda)

    def attempt(self, env: Mapping[str, str | None] | None = None,
                cuda: bool | None = None) -> SetupRun | str:  # fmt: skip
        """The run, or the one-line reason it failed."""
        try:
            return self.run(env, cuda)
        except MigrateError as exc:
            return str(exc).removeprefix(f"{self.path}: ")

    def convert_run(self, run: SetupRun) -> Converted | str:
        try:
            return convert(run)
        except MigrateError as exc:
            return str(exc).removeprefix(f"{self.path}: ")

    def convert(self, env: Mapping[str, str | None] | None = None,
                cuda: bool | None = None) -> Converted | str:  # fmt: skip
        """The conversion, or the one-line reason there is none."""
        run = self.attempt(env, cuda)
        return self.convert_run(run) if isinstance(run, SetupRun) else run


def _describe(value: str | None) -> str:
    return "unset" if value is None else f"{value!r}"


def _negation(condition: dict[str, Any]) -> dict[str, Any] | None:
    if set(condition) == {"cuda"}:
        return {"cuda": not condition["cuda"]}
    env = condition.get("env", {})
    if set(condition) == {"env"} and len(env) == 1:
        ((name, value),) = env.items()
        if isinstance(value, bool):
            return {"env": {name: not value}}
    return None


def _apply(plan: Plan, changes: Diff, condition: dict[str, Any], why: str,
           cuda_tables: bool = False) -> None:  # fmt: skip
    """Add what ``changes`` says to ``plan`` under ``condition``."""
    notes = plan.base.notes
    body: list[tuple[tuple[str, ...], Any]] = []
    for change in changes.changes:
        if cuda_tables and change.append and change.extension and change.key in CUDA_TABLE_KEYS:
            plan.cuda_tables.setdefault(change.extension, {})[change.key] = change.value
        elif change.value is MISSING:
            notes.append(("tool", f"{why}: {change.key} is dropped, which no override can say"))
        else:
            body.append((change.dotted_key(), change.value))
    if body:
        plan.overrides.append(Override(condition, body, [why]))
    for table in changes.added:
        name = table["name"]
        if plan.base.extension(name) is None:
            plan.base.extensions.append(dict(table))
            plan.conditions[name] = condition
            notes.append((name, f"{why}: built only then"))
        else:  # added under an earlier condition already
            notes.append((name, f"{why}: built then too (review: its `if` says otherwise)"))
    for name in changes.removed:
        negation = _negation(condition)
        if negation is not None and name not in plan.conditions:
            plan.conditions[name] = negation
            notes.append((name, f"{why}: not built then"))
        else:
            notes.append((name, f"{why}: not built then (review: no condition says so)"))
    if changes.project_keys:
        notes.append(("project", f"{why}: [project] {', '.join(changes.project_keys)} change too,"
                      " which no override can express"))  # fmt: skip


def _cuda(plan: Plan, cpu: Converted, gpu: Converted | str, probes: dict[str, Any]) -> None:
    looked = ", ".join(f"{probe} ({value!r} here)" for probe, value in probes.items())
    plan.environment.append(f"CUDA: setup.py consulted {looked}; migrate ran it with CUDA off"
                            " (the tables below) and on")  # fmt: skip
    if isinstance(gpu, str):
        plan.environment.append(f"with CUDA forced on, setup.py failed: {gpu}")
        return
    _apply(plan, diff(cpu, gpu), {"cuda": True}, "when CUDA is on (setup.py's CUDA branch)",
           cuda_tables=True)  # fmt: skip
    for name in plan.cuda_tables:
        plan.base.notes.append((name, "this table is what setup.py builds without CUDA;"
                                " what its CUDA branch adds is the `cuda` table that follows,"
                                " which pep517_torch adds when CUDA is enabled (cuda = \"auto\":"
                                " a CUDA build of torch and nvcc; or an override below)"))


def _variable(plan: Plan, runner: _Runner, name: str, base: Converted, gpu: Converted | None,
              mode: bool | None, cuda_branch: bool) -> None:  # fmt: skip
    """Try ``name`` with other values (CUDA probes forced to ``mode``) and record the changes;
    ``cuda_branch``: the variable is only read in the CUDA branch of the setup.py."""
    current = os.environ.get(name) or None
    extra = {"cuda": True} if cuda_branch else {}
    where = " (in its CUDA branch)" if cuda_branch else ""
    header = f"${name}{where}: {_describe(os.environ.get(name))} here"
    tried = ["1", "0"] if current is None else [None]
    marked = runner.convert({name: MARKER}, mode)
    if isinstance(marked, Converted) and MARKER in json.dumps(_tables(marked)):
        plan.environment.append(f"{header}; setup.py copies its value into the configuration")
        _suggest_copy(plan, name, base, marked, extra)
        return
    results = {value: runner.convert({name: value}, mode) for value in tried}
    failures = [f"{name}={_describe(v)}: {r}" for v, r in results.items() if isinstance(r, str)]
    changed = {v: r for v, r in results.items()
               if isinstance(r, Converted) and not same_tables(base, r)}  # fmt: skip
    plan.environment.append(
        f"{header}; tried {', '.join(_describe(v) for v in tried)}: "
        + ("no change" if not changed and not failures else "see the overrides")
    )
    for failure in failures:
        plan.environment.append(f"  setup.py fails with {failure}")
    if not changed and not failures:
        note = BACKEND_VARIABLES.get(name, "it changes nothing migrate can see (it may steer"
                                     " code that migrate does not run)")  # fmt: skip
        plan.overrides.append(Override({"env": {name: True}, **extra}, [], [
            f"setup.py reads ${name}; {note}"], disabled=True))  # fmt: skip
        return
    conditions: dict[str | None, bool | str]
    if current is not None:
        conditions = {None: False}
    elif set(changed) == {"1", "0"} and same_tables(changed["1"], changed["0"]):
        conditions = {"1": True}
        del changed["0"]
    else:
        conditions = {"1": "1", "0": "0"}
    for value, variant in changed.items():
        condition = {"env": {name: conditions[value]}, **extra}
        if value is None:
            why = f"${name} unset{where}"
        elif conditions[value] is True:
            why = f"${name} set{where} (setup.py treats 1 and 0 alike)"
        else:
            why = f"${name} = {value}{where}"
        if gpu is not None and not mode and same_tables(variant, gpu):
            plan.overrides.append(Override(condition, [(("cuda",), True)], [
                f"{why}: setup.py takes its CUDA branch"]))  # fmt: skip
        else:
            _apply(plan, diff(base, variant), condition, why)
    if name in BACKEND_VARIABLES:
        plan.environment.append(f"  {BACKEND_VARIABLES[name]}")


def _tables(converted: Converted) -> list[Any]:
    return [converted.tool, converted.extensions]


def _suggest_copy(plan: Plan, name: str, base: Converted, marked: Converted,
                  extra: dict[str, Any]) -> None:  # fmt: skip
    placeholder = f"<value of {name}>"
    changes = diff(base, marked)
    body = [(c.dotted_key(), json.loads(json.dumps(c.value).replace(MARKER, placeholder)))
            for c in changes.changes if c.value is not MISSING]  # fmt: skip
    plan.overrides.append(Override({"env": {name: True}, **extra}, body, [
        f"setup.py copies ${name} into these settings: write the values you build with"],
        disabled=True))  # fmt: skip


def _env_writes(plan: Plan, run: SetupRun) -> None:
    for name, value in run.env_writes.items():
        if name == "TORCH_CUDA_ARCH_LIST" and value:
            plan.base.tool.setdefault("cuda-arch-list", value)
            plan.environment.append(f"setup.py sets ${name}={value}: now cuda-arch-list")
        else:
            plan.environment.append(f"setup.py sets ${name}={_describe(value)}: set it in the"
                                    " build environment if the build needs it")  # fmt: skip


def _cuda_only(plan: Plan, reason: str) -> None:
    plan.base.tool["cuda"] = True
    plan.environment.append(f"without CUDA, setup.py fails ({reason}): cuda = true, as CUDA is"
                            " required")  # fmt: skip


def make_plan(path: Path) -> Plan:
    """Run ``path`` as often as its environment reads require and build the plan."""
    runner = _Runner(path)
    first: SetupRun | None
    try:
        first = runner.run()
        probes = dict(first.cuda_probes)
    except MigrateError as exc:
        if exc.run is None or not exc.run.cuda_probes:
            raise
        first, probes, failure = None, dict(exc.run.cuda_probes), exc
    if first is not None and not probes:
        plan = Plan(base=convert(first))
        base_run, base_mode, gpu_run, gpu = first, None, None, None
    else:
        cpu_run, gpu_run = runner.attempt(cuda=False), runner.attempt(cuda=True)
        cpu = runner.convert_run(cpu_run) if isinstance(cpu_run, SetupRun) else cpu_run
        gpu_or_reason = runner.convert_run(gpu_run) if isinstance(gpu_run, SetupRun) else gpu_run
        if isinstance(cpu, Converted) and isinstance(cpu_run, SetupRun):
            plan, base_run, base_mode = Plan(base=cpu), cpu_run, False
            _cuda(plan, convert(cpu_run), gpu_or_reason, probes)
            gpu = gpu_or_reason if isinstance(gpu_or_reason, Converted) else None
        elif isinstance(gpu_or_reason, Converted) and isinstance(gpu_run, SetupRun):
            plan, base_run, base_mode = Plan(base=gpu_or_reason), gpu_run, True
            _cuda_only(plan, str(cpu))
            gpu, gpu_run = None, None
        elif first is None:
            raise failure
        else:
            raise MigrateError(f"{path}: {cpu}")
    _env_writes(plan, base_run)
    # Modules are imported once per process: the first run is the one that saw the imports.
    first_run = first if first is not None else failure.run
    if first_run is not None:
        found = {*plan.base.build_requires, *build_requirements(first_run)}
        plan.base.build_requires = sorted(found)
    modes: dict[str, bool | None] = {}
    for name in [*(first.env_reads if first else {}), *base_run.env_reads]:
        modes.setdefault(name, base_mode)
    if gpu is not None and isinstance(gpu_run, SetupRun):
        for name in gpu_run.env_reads:
            modes.setdefault(name, True)
    references: dict[bool | None, Converted] = {base_mode: convert(base_run)}
    if gpu is not None:
        references[True] = gpu
    for name, mode in modes.items():
        branch = mode is True and base_mode is not True
        _variable(plan, runner, name, references[mode], gpu, mode, branch)
    # Variables that switch CUDA on come before the overrides that test `if.cuda`.
    plan.overrides.sort(key=lambda o: (o.body != [(("cuda",), True)], "cuda" in o.condition))
    return plan

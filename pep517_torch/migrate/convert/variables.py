"""Environment variables a setup.py reads, tried in every CUDA mode that ran.

Each variable is tried unset / "1" / "0" (unset only, when it is set here) with the CUDA probes
forced as in each reference run; a marker value shows whether its value is copied into the
configuration or appended to the version. What changes becomes an override on the variable
(with ``if.cuda = true`` when it changes only what the CUDA branch builds).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping

from .tables import Converted
from .diff import MISSING, Change, Diff, diff
from .plan import Observed, Override, Plan, add_changes, without_cuda_tables
from .settings_keys import backend_variables

MARKER = "pep517-migrate-probe"
# Variables pep517_torch reads itself; what a setup.py does with them is only reported.
BACKEND_VARIABLES = backend_variables()
Outcome = Converted | str  # a conversion, or why setup.py failed
# Runs setup.py with these variables (None: unset) and CUDA probes forced (None: real).
Runner = Callable[[Mapping[str, str | None], bool | None], Outcome]


def describe(value: str | None) -> str:
    return "unset" if value is None else f"{value!r}"


def _differs(first: Converted, second: Converted, suffix_env: bool) -> Diff:
    """The difference, less a version change that `suffix-env` already expresses."""
    found = diff(first, second)
    if suffix_env:  # the version, its `dynamic` entry and [tool.torch-ext.version] are said
        found.project_keys = [k for k in found.project_keys if k not in ("version", "dynamic")]
        found.changes = [c for c in found.changes
                         if not (c.extension is None and c.key == "version")]
    return found


def _version_base(reference: Converted, marked: Converted, current: str | None) -> str | None:
    """The version without the variable's value, when setup.py appends that value to it."""
    version = marked.project.get("version")
    if not isinstance(version, str) or not version.endswith(MARKER):
        return None
    base = version[: -len(MARKER)]
    seen = reference.project.get("version")  # None: read from a file, without the value
    return base if base and seen in (None, base + (current or "")) else None


def _suffix_env(plan: Plan, name: str, base_version: str) -> str:
    project, tool = plan.base.project, plan.base.tool
    if "version" not in project and "version" in tool:  # already read from a file
        tool["version"]["suffix-env"] = name
        return f"setup.py appends it to the version read from {tool['version']['file']}:" \
            f" suffix-env = {json.dumps(name)}"
    project.pop("version", None)
    project["dynamic"] = ["version", *(k for k in project.get("dynamic", []) if k != "version")]
    tool["version"] = {"base": base_version, "suffix-env": name}
    return f"setup.py appends it to the version {base_version}: [tool.torch-ext.version]" \
        f" base = {json.dumps(base_version)}, suffix-env = {json.dumps(name)}"


def _suggest_copy(plan: Plan, name: str, base: Converted, marked: Converted, cuda: bool) -> None:
    placeholder = f"<value of {name}>"
    changes = diff(base, marked)
    body = [(c.dotted_key(), json.loads(json.dumps(c.value).replace(MARKER, placeholder)))
            for c in changes.changes if c.value is not MISSING]
    condition: dict[str, object] = {"env": {name: True}, **({"cuda": True} if cuda else {})}
    where = " (in its CUDA branch)" if cuda else ""
    plan.overrides.append(Override(condition, body, [
        f"setup.py copies ${name} into these settings{where}: write the values you build"
        " with"], disabled=True))


def _copied_in(marked: Outcome) -> bool:
    return isinstance(marked, Converted) and MARKER in json.dumps([marked.tool, marked.extensions])


def _scheme(current: str | None, results: Mapping[bool | None, Mapping[str | None, Outcome]],
            ) -> dict[str | None, bool | str]:
    """The `if.env` value for each tried value: true/false when they read as set/unset."""
    if current is not None:
        return {None: False}
    alike = all(isinstance(r["1"], Converted) and isinstance(r["0"], Converted)
                and diff(r["1"], r["0"]).empty() for r in results.values())
    return {"1": True} if alike else {"1": "1", "0": "0"}


def _beyond(changes: Diff, earlier: Diff | None) -> Diff:
    """What ``changes`` (CUDA on) adds to ``earlier`` (the same value with CUDA off), which
    the override for CUDA off already says: equal changes go, a longer append keeps its tail."""
    if earlier is None:
        return changes
    kept = []
    for change in changes.changes:
        same_key = [c for c in earlier.changes if (c.extension, c.key) == (change.extension,
                    change.key)]
        if change in same_key:
            continue
        before = same_key[0] if same_key else None
        if before is not None and before.append and change.append and isinstance(
                change.value, list) and change.value[: len(before.value)] == before.value:
            change = Change(change.extension, change.key, change.value[len(before.value):], True)
        kept.append(change)
    return Diff(kept, [t for t in changes.added if t not in earlier.added],
                [n for n in changes.removed if n not in earlier.removed],
                [k for k in changes.project_keys if k not in earlier.project_keys])


def _why(name: str, value: str | None, condition: bool | str, cuda_on: bool) -> str:
    if value is None:
        why = f"${name} unset"
    elif condition is True:
        why = f"${name} set (setup.py treats 1 and 0 alike)"
    else:
        why = f"${name} = {value}"
    return f"{why}, with CUDA on" if cuda_on else why


def _vary(plan: Plan, runner: Runner, name: str, references: dict[bool | None, Converted]) -> None:
    current = os.environ.get(name) or None
    header = f"${name}: {describe(os.environ.get(name))} here"
    (base_mode, base), *_ = references.items()
    marked = runner({name: MARKER}, base_mode)
    version_base = None
    if isinstance(marked, Converted):
        version_base = _version_base(base, marked, os.environ.get(name))
    # a free-form value (`os.getenv("NVCC_FLAGS", "").split(" ")`) may be read in the CUDA
    # branch only: look for the marker in every mode, not just the base one
    copied = {base_mode: marked} if _copied_in(marked) else {
        mode: outcome for mode in references if mode != base_mode
        if _copied_in(outcome := runner({name: MARKER}, mode))}
    if version_base is None and copied:
        mode, outcome = next(iter(copied.items()))
        cuda_on = mode is True and base_mode is not True
        plan.environment.append(f"{header}; setup.py copies its value into the configuration"
                                + (" (with CUDA on)" if cuda_on else ""))
        assert isinstance(outcome, Converted)
        _suggest_copy(plan, name, references[mode], outcome, cuda_on)
        return
    tried: list[str | None] = ["1", "0"] if current is None else [None]
    results = {mode: {value: runner({name: value}, mode) for value in tried}
               for mode in references}
    plan.observed += [Observed({name: value}, mode, variant) for mode, by_value in results.items()
                      for value, variant in by_value.items() if isinstance(variant, Converted)]
    scheme = _scheme(current, results)
    overrides, notes = len(plan.overrides), len(plan.base.notes)
    seen_off: dict[str | None, Diff] = {}  # what each value changes with CUDA off (or unprobed)
    failures: list[str] = []
    for mode, reference in references.items():
        for value in scheme:
            variant = results[mode][value]
            if isinstance(variant, str):
                failures.append(f"{name}={describe(value)}{', CUDA on' if mode else ''}: {variant}")
                continue
            changes = _differs(reference, variant, version_base is not None)
            if changes.empty():
                continue
            condition = {"env": {name: scheme[value]}}
            cuda_on = mode is True and base_mode is not True
            why = _why(name, value, scheme[value], cuda_on)
            other = references.get(not mode) if mode is not None else None
            if other is not None and _differs(other, variant, version_base is not None).empty():
                plan.overrides.append(Override(condition, [(("cuda",), bool(not mode))], [
                    f"{why}: setup.py {'takes' if not mode else 'skips'} its CUDA branch"]))
            elif not cuda_on:
                seen_off[value] = changes
                add_changes(plan, changes, condition, why)
            else:
                changes = without_cuda_tables(plan, _beyond(changes, seen_off.get(value)))
                add_changes(plan, changes, {**condition, "cuda": True}, why)
    written, noted = len(plan.overrides) > overrides, len(plan.base.notes) > notes
    result = ("see the overrides" if written else "see the notes" if noted
              else "only the version changes" if version_base is not None else "no change")
    modes = " with CUDA off and on" if len(references) > 1 else ""
    plan.environment.append(
        f"{header}; tried {', '.join(describe(v) for v in tried)}{modes}: {result}")
    if version_base is not None:
        plan.environment.append(f"  {_suffix_env(plan, name, version_base)}")
    plan.environment += [f"  setup.py fails with {failure}" for failure in failures]
    if not (written or noted or failures or version_base is not None):
        note = BACKEND_VARIABLES.get(name, "it changes nothing migrate can see (it may steer"
                                     " code that migrate does not run)")
        plan.overrides.append(Override({"env": {name: True}}, [], [
            f"setup.py reads ${name}; {note}"], disabled=True))
    elif name in BACKEND_VARIABLES:
        plan.environment.append(f"  {BACKEND_VARIABLES[name]}")


def vary_variables(plan: Plan, runner: Runner, names: list[str],
                   references: dict[bool | None, Converted]) -> None:
    """Try each variable in each CUDA mode of ``references`` (the base mode first)."""
    for name in names:
        _vary(plan, runner, name, references)

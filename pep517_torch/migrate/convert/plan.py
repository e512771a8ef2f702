"""The migration plan: base tables plus `cuda` tables, conditions and overrides, and how a
difference between two runs of a setup.py lands in it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .tables import Converted
from .diff import MISSING, Change, Diff
from .settings_keys import CUDA_TABLE_KEYS, CUDA_TABLE_REPLACED

CUDA_ON = ((("cuda",), True),)
CUDA_OFF = ((("cuda",), False),)


@dataclass
class Override:
    """One ``[[tool.torch-ext.overrides]]`` table (``disabled``: written commented out)."""

    condition: dict[str, Any]
    body: list[tuple[tuple[str, ...], Any]]
    comments: list[str] = field(default_factory=list)
    disabled: bool = False

    @property
    def switches_cuda(self) -> bool:
        return tuple(self.body) in (CUDA_ON, CUDA_OFF)


@dataclass(frozen=True)
class Observed:
    """What setup.py built with ``env`` over this environment and CUDA probes forced to ``cuda``."""

    env: Mapping[str, str | None]
    cuda: bool | None
    converted: Converted


@dataclass
class Plan:
    base: Converted
    cuda_tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)  # extension `if`
    overrides: list[Override] = field(default_factory=list)
    environment: list[str] = field(default_factory=list)  # header lines: what was looked at
    decisions: list[str] = field(default_factory=list)  # header lines: what migrate chose, why
    fails_here: list[str] = field(default_factory=list)  # why a build here would fail
    observed: list[Observed] = field(default_factory=list)  # every run, to check the result by
    disagreements: list[str] = field(default_factory=list)  # runs the result does not reproduce
    need_cuda: list[str] = field(default_factory=list)  # extensions given `if.cuda` on purpose

    def note(self, anchor: str, text: str) -> None:
        self.base.notes.append((anchor, text))


def _negation(condition: dict[str, Any]) -> dict[str, Any] | None:
    if set(condition) == {"cuda"}:
        return {"cuda": not condition["cuda"]}
    env = condition.get("env", {})
    if set(condition) == {"env"} and len(env) == 1:
        ((name, value),) = env.items()
        if isinstance(value, bool):
            return {"env": {name: not value}}
        if isinstance(value, str):
            return {"env": {name: {"not": value}}}  # unset included, as setup.py's `!= value`
    return None


def without_cuda_tables(plan: Plan, changes: Diff) -> Diff:
    """Changes seen with CUDA on, said so that the `cuda` tables, merged after the overrides,
    still give setup.py's values (in setup.py's order).

    A replaced list that ends with its `cuda` table's entries is written without them; an
    append to a key the `cuda` table holds goes to the end of that table; any other replaced
    value is written whole, with the `cuda` table's part emptied. The new `cuda` tables replace
    the old ones in the override.
    """
    kept: list[Change] = []
    tables: dict[str, dict[str, Any]] = {}
    for change in changes.changes:
        name = change.extension or ""
        added = plan.cuda_tables.get(name, {}).get(change.key)
        if added is None or change.value is MISSING:
            kept.append(change)
            continue
        table = tables.setdefault(name, dict(plan.cuda_tables[name]))
        value = change.value
        if change.append:
            table[change.key] = [*added, *value] if isinstance(added, list) else {**added, **value}
        elif isinstance(value, list) and value[len(value) - len(added):] == added:
            kept.append(Change(name, change.key, value[: len(value) - len(added)], False))
        elif not isinstance(added, (list, dict)):  # the `cuda` table's value replaces
            table[change.key] = value
        elif isinstance(value, dict) and all(value.get(k) == v for k, v in added.items()):
            kept.append(Change(name, change.key,
                               {k: v for k, v in value.items() if k not in added}, False))
        else:
            kept.append(change)
            table[change.key] = type(added)()
    kept += [Change(name, "cuda", table, False) for name, table in tables.items()]
    return Diff(kept, changes.added, changes.removed, changes.project_keys)


def add_changes(plan: Plan, changes: Diff, condition: dict[str, Any], why: str,
                cuda_tables: bool = False) -> None:
    """Add what ``changes`` says to ``plan`` under ``condition``; ``cuda_tables``: appends to
    the keys a `cuda` table holds go there (the CUDA branch of the setup.py)."""
    body: list[tuple[tuple[str, ...], Any]] = []
    for change in changes.changes:
        in_cuda_table = change.key in CUDA_TABLE_KEYS and (
            change.append or change.key in CUDA_TABLE_REPLACED and change.value is not MISSING
        )
        if cuda_tables and change.extension and in_cuda_table:
            plan.cuda_tables.setdefault(change.extension, {})[change.key] = change.value
        elif change.value is MISSING:
            plan.note("tool", f"{why}: {change.key} is dropped, which no override can say")
        else:
            body.append((change.dotted_key(), change.value))
    if body:
        plan.overrides.append(Override(condition, body, [why]))
    for table in changes.added:
        name = table["name"]
        if plan.base.extension(name) is None:
            plan.base.extensions.append(dict(table))
            plan.conditions[name] = condition
            plan.note(name, f"{why}: built only then")
        elif plan.conditions.get(name) != {k: v for k, v in condition.items() if k != "cuda"}:
            plan.note(name, f"{why}: built then too (review: its `if` says otherwise)")
    turned_off: list[tuple[tuple[str, ...], Any]] = []
    for name in changes.removed:
        negation = _negation(condition)
        if negation is not None and name not in plan.conditions:
            plan.conditions[name] = negation
        else:  # the extension's own `if` cannot say it: an override turns it off
            turned_off.append((("extension", name, "enabled"), False))
        plan.note(name, f"{why}: not built then")
    if turned_off:
        plan.overrides.append(Override(condition, turned_off, [f"{why}: not built then"]))
    if changes.project_keys:
        plan.note("project", f"{why}: [project] {', '.join(changes.project_keys)} change too,"
                  " which no override can express")

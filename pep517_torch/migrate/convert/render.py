"""A migration plan -> the ``[build-system]``, ``[project]`` and ``[tool.torch-ext]`` text."""

from __future__ import annotations

from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .plan import Override, Plan
from .settings_keys import PROJECT_TABLE_KEYS, TOOL_KEY_ORDER
from .toml_writer import Table, render, value

BACKEND_REQUIRES = ["pep517_torch", "torch"]
# Build requirements of a setuptools build that pep517_torch does not need.
SETUPTOOLS_REQUIRES = frozenset({"setuptools", "wheel", "torch", "pep517-torch", "ninja"})
PROJECT_SUBTABLES = ("urls", "scripts", "gui-scripts", "optional-dependencies")
INLINE_TABLE_LIMIT = 70


def build_requires(found: list[str], carried: list[str]) -> list[str]:
    """The backend's requirements plus what setup.py imported or pyproject already listed
    (an existing ``torch`` line keeps its version specifier and marker)."""
    result = list(BACKEND_REQUIRES)
    seen: set[str] = {canonicalize_name(r) for r in result}
    for requirement in [*found, *carried]:
        try:
            parsed = Requirement(requirement)
            name: str = canonicalize_name(parsed.name)
        except InvalidRequirement:
            name = requirement
        pinned = name == "torch" and requirement in carried and str(parsed) != "torch"
        if pinned and "torch" in result:
            result[result.index("torch")] = requirement
        elif name not in seen and name not in SETUPTOOLS_REQUIRES:
            seen.add(name)
            result.append(requirement)
    return result


def _notes(plan: Plan, anchor: str) -> list[str]:
    """The notes for a table or extension (``project:license`` is a [project] note)."""
    return list(dict.fromkeys(text for where, text in plan.base.notes
                              if where.partition(":")[0] == anchor))


def _header(plan: Plan) -> list[str]:
    lines = ["Converted from setup.py by `python -m pep517_torch migrate`: review the notes."]
    if plan.environment:
        lines.append("setup.py looked at its environment; migrate re-ran it to see each choice:")
        # "  detail" lines continue the item above them
        lines += [f"{'  ' if line.startswith('  ') else '- '}{line.strip()}"
                  for line in plan.environment]
    lines += plan.decisions
    if plan.disagreements:
        lines.append("Review: the tables were checked against every run of setup.py above; they"
                     " build otherwise than setup.py did")
        lines += [f"- {line}" for line in plan.disagreements]
    if plan.fails_here:
        lines.append("WARNING: built on this machine (where migrate ran), these tables fail:")
        lines += [f"- {line}" for line in plan.fails_here]
    return lines


def _project_tables(project: dict[str, Any], notes: list[str]) -> list[Table]:
    main = Table(("project",), comments=notes)
    tables = [main]
    for name, item in project.items():
        if name in PROJECT_SUBTABLES and isinstance(item, dict):
            sub = Table(("project", name))
            for k, v in item.items():
                sub.add(k, v)
            tables.append(sub)
        elif name == "entry-points":
            for group, entries in item.items():
                sub = Table(("project", "entry-points", group))
                for k, v in entries.items():
                    sub.add(k, v)
                tables.append(sub)
        elif name == "readme" and isinstance(item, dict) and "text" in item:
            sub = Table(("project", "readme"))
            for k, v in item.items():
                sub.add(k, v)
            tables.append(sub)
        else:
            main.add(name, item)
    return tables


def _add_table_value(table: Table, name: str | tuple[str, ...], item: dict[str, Any]) -> None:
    """A table-valued key inline when short, else as one dotted key per entry."""
    if len(value(item)) <= INLINE_TABLE_LIMIT:
        table.add(name, item)
        return
    for k, v in item.items():
        table.add((*((name,) if isinstance(name, str) else name), k), v)


def _condition_entries(table: Table, condition: dict[str, Any]) -> None:
    for field_name, item in condition.items():
        if isinstance(item, dict):
            for k, v in item.items():
                table.add(("if", field_name, k), v)
        else:
            table.add(("if", field_name), item)


def _extension_tables(plan: Plan) -> list[Table]:
    tables = []
    for extension in plan.base.extensions:
        name = extension["name"]
        table = Table(("tool", "torch-ext", "extension"), array=True, comments=_notes(plan, name))
        for key, item in extension.items():
            if isinstance(item, dict):
                _add_table_value(table, key, item)
            else:
                table.add(key, item)
        if name in plan.conditions:
            _condition_entries(table, plan.conditions[name])
        tables.append(table)
        if name in plan.cuda_tables:
            cuda = Table(("tool", "torch-ext", "extension", "cuda"))
            for key, item in plan.cuda_tables[name].items():
                if isinstance(item, dict):
                    _add_table_value(cuda, key, item)
                else:
                    cuda.add(key, item)
            tables.append(cuda)
    return tables


def _override_table(override: Override) -> Table:
    table = Table(("tool", "torch-ext", "overrides"), array=True, comments=list(override.comments),
                  disabled=override.disabled)
    _condition_entries(table, override.condition)
    for keys, item in override.body:
        if isinstance(item, dict):
            _add_table_value(table, keys, item)
        else:
            table.add(keys, item)
    return table


def plan_tables(plan: Plan, *, carried_requires: list[str] | None = None) -> list[Table]:
    build = Table(("build-system",), comments=_header(plan) + _notes(plan, "build-system"))
    build.add("requires", build_requires(plan.base.build_requires, carried_requires or []))
    build.add("build-backend", "pep517_torch")
    tables = [build, *_project_tables(plan.base.project, _notes(plan, "project"))]
    tool = plan.base.tool
    main = Table(("tool", "torch-ext"), comments=_notes(plan, "tool"))
    known = [k for k in TOOL_KEY_ORDER if k in tool]
    ordered = known + [k for k in tool if k not in TOOL_KEY_ORDER]
    for key in [k for k in ordered if k not in PROJECT_TABLE_KEYS]:
        if isinstance(tool[key], dict):
            _add_table_value(main, key, tool[key])
        else:
            main.add(key, tool[key])
    if main.entries or main.comments:
        tables.append(main)
    for key in [k for k in PROJECT_TABLE_KEYS if k in tool]:
        sub = Table(("tool", "torch-ext", key))
        for k, v in tool[key].items():
            sub.add(k, v)
        tables.append(sub)
    tables += _extension_tables(plan)
    tables += [_override_table(o) for o in plan.overrides]
    return tables


def render_plan(plan: Plan, *, enable_disabled: bool = False,
                carried_requires: list[str] | None = None) -> str:
    tables = plan_tables(plan, carried_requires=carried_requires)
    return render(tables, enable_disabled=enable_disabled)

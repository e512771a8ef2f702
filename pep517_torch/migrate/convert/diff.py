"""Differences between two conversions of one setup.py (two branches it can take)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .tables import Converted
from .settings_keys import (
    APPENDABLE,
    EXTENSION_DEFAULTS,
    PROJECT_APPENDABLE,
    INHERITED_KEYS,
    PROJECT_DEFAULTS,
    extension_default,
)

MISSING = object()


@dataclass(frozen=True)
class Change:
    """One key of the variant: for ``extension`` (None: a [tool.torch-ext] key)."""

    extension: str | None
    key: str
    value: Any  # the appended part when ``append``, else the new value (MISSING: removed)
    append: bool

    def dotted_key(self) -> tuple[str, ...]:
        head = ("append",) if self.append else ()
        where = ("extension", self.extension) if self.extension is not None else ()
        return (*head, *where, self.key)


@dataclass
class Diff:
    changes: list[Change] = field(default_factory=list)
    added: list[dict[str, Any]] = field(default_factory=list)  # extensions only in the variant
    removed: list[str] = field(default_factory=list)  # extensions only in the base
    project_keys: list[str] = field(default_factory=list)  # [project] keys that differ

    def empty(self) -> bool:
        return not (self.changes or self.added or self.removed or self.project_keys)


def _addition(base: Any, variant: Any) -> Any:
    """What ``variant`` adds to ``base`` when it only adds (list tail or new table keys)."""
    if not (isinstance(base, type(variant)) and isinstance(base, (list, dict))):
        return MISSING
    if len(variant) <= len(base):
        return MISSING
    if isinstance(base, list):
        return variant[len(base):] if variant[: len(base)] == base else MISSING
    if all(k in variant and variant[k] == v for k, v in base.items()):
        return {k: v for k, v in variant.items() if k not in base}
    return MISSING


def _change(extension: str | None, key: str, base: Any, variant: Any, appendable: bool) -> Change:
    added = _addition(base, variant) if appendable else MISSING
    if added is not MISSING:
        return Change(extension, key, added, True)
    return Change(extension, key, variant, False)


def diff(base: Converted, variant: Converted) -> Diff:
    result = Diff()
    for key in sorted(set(base.project) | set(variant.project)):
        if base.project.get(key, MISSING) != variant.project.get(key, MISSING):
            result.project_keys.append(key)
    for key in [*base.tool, *(k for k in variant.tool if k not in base.tool)]:
        old = base.tool.get(key, PROJECT_DEFAULTS.get(key, MISSING))
        new = variant.tool.get(key, PROJECT_DEFAULTS.get(key, MISSING))
        if old != new:
            result.changes.append(_change(None, key, old, new, key in PROJECT_APPENDABLE))
    names = [e["name"] for e in base.extensions]
    for table in variant.extensions:
        if table["name"] not in names:
            result.added.append(table)
    for old_table in base.extensions:
        new_table = variant.extension(old_table["name"])
        if new_table is None:
            result.removed.append(old_table["name"])
            continue
        for key in EXTENSION_DEFAULTS:
            if key in INHERITED_KEYS and key not in old_table and key not in new_table:
                continue  # both follow the [tool.torch-ext] value, compared above
            old = old_table.get(key, extension_default(key, base.tool))
            new = new_table.get(key, extension_default(key, variant.tool))
            if old != new:
                result.changes.append(_change(old_table["name"], key, old, new, key in APPENDABLE))
    return result


def same_tables(first: Converted, second: Converted) -> bool:
    """Whether two conversions configure the same build (notes aside)."""
    return diff(first, second).empty()

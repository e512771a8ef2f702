"""`[project.scripts]`, `[project.gui-scripts]` and `[project.entry-points]` checked against the
entry points specification, so that entry_points.txt is always well-formed.

https://packaging.python.org/en/latest/specifications/entry-points/ (pyproject-metadata checks
only the types, and group names with a key that does not say which group).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from .parse import key_path

GROUP_NAME = re.compile(r"\w+(\.\w+)*")  # the specification's rule for group names
RECOMMENDED_NAME = re.compile(r"[\w.-]+")  # its recommendation for new names: used for scripts
OBJECT_REFERENCE = re.compile(
    r" *(?P<module>[^ :\[\]]+) *(?:: *(?P<attribute>[^ :\[\]]+) *)?(?:\[(?P<extras>[^\[\]]*)\] *)?"
)
EXTRA_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")  # PEP 508
SCRIPT_TABLES = {"scripts": "console_scripts", "gui-scripts": "gui_scripts"}


def check_entry_points(pyproject: Mapping[str, Any]) -> None:
    """Raise a ConfigError naming the first bad group, name or object reference.

    Tables of the wrong type are left to the `[project]` validation that follows.
    """
    project = pyproject.get("project")
    if not isinstance(project, Mapping):
        return
    for table, group in SCRIPT_TABLES.items():
        entries = project.get(table)
        if isinstance(entries, Mapping):
            _check_group(entries, f"project.{table}", script=True)
    groups = project.get("entry-points")
    if not isinstance(groups, Mapping):
        return
    for group, entries in groups.items():
        key = key_path("project.entry-points", group)
        if not GROUP_NAME.fullmatch(group):
            raise ConfigError(
                f"{group!r} is not an entry point group name: letters, digits and underscores,"
                " in dot-separated parts",
                key,
            )
        if group in SCRIPT_TABLES.values():
            table = next(name for name, value in SCRIPT_TABLES.items() if value == group)
            raise ConfigError(f"not allowed here (PEP 621): use [project.{table}]", key)
        if isinstance(entries, Mapping):
            _check_group(entries, key, script=False)


def _check_group(entries: Mapping[str, Any], table_key: str, *, script: bool) -> None:
    for name, value in entries.items():
        key = key_path(table_key, name)
        problem = _name_problem(name, script)
        if problem:
            raise ConfigError(f"{name!r} is not a valid entry point name: {problem}", key)
        if isinstance(value, str) and not _is_object_reference(value):
            raise ConfigError(
                f"{value!r} is not an object reference: expected 'module.path' or"
                " 'module.path:object.attr' (dotted Python identifiers), optionally followed by"
                " [extras]",
                key,
            )


def _name_problem(name: str, script: bool) -> str | None:
    if not name or name != name.strip():
        return "it is empty or starts or ends with whitespace"
    if not name.isprintable():
        return "it contains a line break or another control character"
    if "=" in name:
        return "it contains '='"
    if name[0] in "[#;":
        return (
            f"it starts with {name[0]!r}, which entry_points.txt readers take for a section or"
            " a comment"
        )
    if script and set(name) == {"."}:
        return (
            f"a script's name is the file installers create in the environment's scripts"
            f" folder, and {name!r} names a folder"
        )
    if script and not RECOMMENDED_NAME.fullmatch(name):
        return (
            "a script's name (the command installers create) may hold letters, digits, '_', '.'"
            " and '-' only"
        )
    return None


def _is_object_reference(value: str) -> bool:
    match = OBJECT_REFERENCE.fullmatch(value) if value.isprintable() else None
    if match is None:
        return False
    dotted = [match["module"], *([match["attribute"]] if match["attribute"] else [])]
    if not all(part.isidentifier() for text in dotted for part in text.split(".")):
        return False
    extras = match["extras"]
    if extras is None or not extras.strip():
        return True
    return all(EXTRA_NAME.fullmatch(extra.strip()) for extra in extras.split(","))

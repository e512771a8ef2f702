"""Reading pyproject.toml and parsing its `[tool.torch-ext]` table into the settings model."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ..errors import ConfigError
from ..project_tree import require_inside
from .model import ProjectSettings
from .parse import describe_value, key_path, parse_table

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

TOOL_TABLE = "tool.torch-ext"


def read_pyproject(root: Path) -> dict[str, Any]:
    """Parse ``root/pyproject.toml``; a missing or malformed file is a ConfigError."""
    path = Path(root) / "pyproject.toml"
    if path.is_symlink():  # read from the tree like every other file: inside the root
        require_inside(Path(root), path, None, "file")
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no pyproject.toml in {root}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    if text.startswith("\ufeff"):
        raise ConfigError(
            f"{path}: starts with a UTF-8 byte-order mark (BOM), which pip, build and TOML"
            " readers reject; save the file as UTF-8 without a BOM"
        )
    try:
        document: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line L, column C)"
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply") from None
    return document


def check_project_table(pyproject: Mapping[str, Any]) -> None:
    """The two PEP 621 checks that must fail before anything is built: name and version."""
    project = pyproject.get("project")
    if project is None:
        raise ConfigError("pyproject.toml has no [project] table (PEP 621 metadata)", "project")
    if not isinstance(project, dict):
        raise ConfigError(f"expected a table, got {describe_value(project)}", "project")
    dynamic = project.get("dynamic", [])
    if not isinstance(dynamic, list) or not all(isinstance(d, str) for d in dynamic):
        raise ConfigError("expected an array of strings", "project.dynamic")
    if "name" not in project:
        raise ConfigError("missing required key 'name'", "project")
    name = project["name"]
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(
            f"expected a non-empty string, got {describe_value(name)}", "project.name"
        )
    if "name" in dynamic:
        raise ConfigError("'name' cannot be dynamic", "project.dynamic")
    if "version" in dynamic:
        if "version" in project:
            raise ConfigError(
                "'version' is given and also listed in project.dynamic", "project.version"
            )
        return
    if "version" not in project:
        raise ConfigError(
            "missing required key 'version' (or list it in project.dynamic)", "project"
        )
    version = project["version"]
    if not isinstance(version, str):
        raise ConfigError(f"expected a string, got {describe_value(version)}", "project.version")
    try:
        Version(version)
    except InvalidVersion:
        raise ConfigError(f"{version!r} is not a PEP 440 version", "project.version") from None


def tool_table(pyproject: Mapping[str, Any]) -> Mapping[str, Any]:
    tool = pyproject.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"expected a table, got {describe_value(tool)}", "tool")
    table = tool.get("torch-ext", {})
    if not isinstance(table, dict):
        raise ConfigError(f"expected a table, got {describe_value(table)}", TOOL_TABLE)
    return table


def parse_settings(pyproject: Mapping[str, Any]) -> ProjectSettings:
    """Check [project] name/version and parse `[tool.torch-ext]` (overrides not applied)."""
    check_project_table(pyproject)
    settings: ProjectSettings = parse_table(ProjectSettings, tool_table(pyproject), TOOL_TABLE)
    names = [ext.name for ext in settings.extension]
    for i, override in enumerate(settings.overrides):
        base = f"{TOOL_TABLE}.overrides[{i}]"
        patches = [(f"{base}.extension", override.extension)]
        if override.append is not None:
            patches.append((f"{base}.append.extension", override.append.extension))
        for path, patch in patches:
            for name in patch:
                if name != "*" and name not in names:
                    known = ", ".join(names) or "none"
                    raise ConfigError(
                        f"no extension is named {name!r} (extensions: {known})",
                        key_path(path, name),
                    )
    return settings

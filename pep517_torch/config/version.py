"""Where a dynamic version (``dynamic = ["version"]``) comes from, and the version string
itself: read from a file without importing it, or given as a base, plus an optional suffix
from the environment. The distribution layer only receives the string."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ..errors import ConfigError
from ..project_tree import require_inside
from .model import ProjectSettings
from .overrides import Origins
from .parse import key_path
from .paths import existing_file
from .resolved import ResolvedProject, VersionSource

VERSION_FILE_KEY = "tool.torch-ext.version.file"
VERSION_PATTERN_KEY = "tool.torch-ext.version.pattern"
VERSION_SUFFIX_KEY = "tool.torch-ext.version.suffix-env"


def resolve_version(
    root: Path, pyproject: Mapping[str, Any], project: ProjectSettings, origins: Origins
) -> VersionSource:
    table = project.version
    if table is None:
        return VersionSource()
    dynamic = pyproject.get("project", {}).get("dynamic", [])
    if "version" not in dynamic:
        raise ConfigError(
            "the version is static (project.version); add 'version' to project.dynamic"
            " or remove this table",
            origins.of("version"),
        )
    file = None
    if table.base is not None and (table.file is not None or table.pattern is not None):
        raise ConfigError(
            "give the version either in `base` or through `file`/`pattern`, not both",
            key_path(origins.of("version"), "base"),
        )
    if table.file is not None:
        key = key_path(origins.of("version"), "file")
        file = existing_file(root, table.file, key, "version file")
    return VersionSource(
        file=file, pattern=table.pattern, suffix_env=table.suffix_env, base=table.base
    )


def version_string(project: ResolvedProject, env: Mapping[str, str]) -> str | None:
    """The project's version when it is dynamic (None when ``project.version`` is static),
    read and suffixed as ``project.version`` says; reads files, so resolve_project leaves it
    to the operations that need a version (``pipeline.load``: metadata, wheels, ``doctor``)."""
    if "version" not in project.project_table.get("dynamic", []):  # type: ignore[operator]
        return None
    source = project.version
    suffix = env.get(source.suffix_env, "") if source.suffix_env else None
    if source.base is not None:
        return append_suffix(source.base, suffix or None, "(version.base)")
    file = source.file
    if file is None:
        packages = sorted(project.layout.packages.items(), key=lambda item: item[0].count("."))
        if not packages:
            raise ConfigError(
                "version is dynamic but there is no package to read __version__ from;"
                " set [tool.torch-ext.version] file",
                "project.dynamic",
            )
        file = require_inside(project.root, packages[0][1] / "__init__.py", "project.dynamic",
                              "version file")
    return read_version(file, source.pattern, suffix or None)


def read_version(file: Path, pattern: str | None = None, suffix: str | None = None) -> str:
    """Read a version from ``file`` without importing it, append ``suffix``, normalise.

    With ``pattern``, the version is the single group of the first match (multiline mode);
    without, it is the string of a module-level ``__version__ = "..."`` assignment.
    """
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {file}: {error}", VERSION_FILE_KEY) from None
    if pattern is not None:
        found = _version_by_pattern(text, pattern, file)
    else:
        found = _version_by_ast(text, file)
    try:
        Version(found)
    except InvalidVersion:
        message = f"{found!r} read from {file} is not a valid PEP 440 version"
        raise ConfigError(message, VERSION_FILE_KEY) from None
    return append_suffix(found, suffix, f"from {file}")


def append_suffix(version: str, suffix: str | None, origin: str) -> str:
    """``version`` + ``suffix``, normalised; a result that is not PEP 440 names the suffix key."""
    if not suffix:
        return str(Version(version))
    try:
        return str(Version(version + suffix))
    except InvalidVersion:
        raise ConfigError(
            f"version {version!r} {origin} plus suffix {suffix!r} is {version + suffix!r}, "
            "which is not a valid PEP 440 version (a local label starts with '+', e.g. '+cu130')",
            VERSION_SUFFIX_KEY,
        ) from None


def _version_by_pattern(text: str, pattern: str, file: Path) -> str:
    try:
        regex = re.compile(pattern, re.MULTILINE)
    except re.error as error:
        message = f"{pattern!r} is not a valid regular expression: {error}"
        raise ConfigError(message, VERSION_PATTERN_KEY) from None
    if regex.groups != 1:
        message = f"{pattern!r} must have exactly one group, the version"
        raise ConfigError(message, VERSION_PATTERN_KEY)
    match = regex.search(text)
    if match is None:
        raise ConfigError(f"{pattern!r} does not match anything in {file}", VERSION_PATTERN_KEY)
    return match.group(1).strip()


def _version_by_ast(text: str, file: Path) -> str:
    try:
        tree = ast.parse(text, filename=str(file))
    except SyntaxError as error:
        raise ConfigError(f"{file} is not valid Python: {error}", VERSION_FILE_KEY) from None
    found: ast.expr | None = None
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        if any(isinstance(target, ast.Name) and target.id == "__version__" for target in targets):
            found = value  # the last assignment wins, as when the module runs
    if found is None:
        raise ConfigError(
            f'{file} has no module-level __version__ = "..." assignment; set '
            f"{VERSION_PATTERN_KEY} to read it another way",
            VERSION_FILE_KEY,
        )
    if not (isinstance(found, ast.Constant) and isinstance(found.value, str)):
        raise ConfigError(
            f"__version__ in {file} is not a string literal, and the file is never imported; "
            f"set {VERSION_PATTERN_KEY} or a static project.version",
            VERSION_FILE_KEY,
        )
    return found.value.strip()

"""Where a dynamic version (``dynamic = ["version"]``) comes from, and the version string
itself: read from a file without importing it, given as a base, or asked of git through
setuptools-scm, plus an optional suffix from the environment. The distribution layer only
receives the string."""

from __future__ import annotations

import ast
import re
import warnings
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
SETUPTOOLS_SCM = "setuptools-scm"
SETUPTOOLS_SCM_TABLE = "setuptools_scm"  # [tool.setuptools_scm]
SETUPTOOLS_SCM_REQUIREMENT = "setuptools-scm>=8"  # Configuration.from_file, _get_version


def resolve_version(
    root: Path, pyproject: Mapping[str, Any], project: ProjectSettings, origins: Origins
) -> VersionSource:
    table = project.version
    provider = version_provider(pyproject, project)
    if table is None:
        return VersionSource(provider=provider)
    dynamic = pyproject.get("project", {}).get("dynamic", [])
    if "version" not in dynamic:
        raise ConfigError(
            "the version is static (project.version); add 'version' to project.dynamic"
            " or remove this table",
            origins.of("version"),
        )
    file = None
    given = [name for name in ("file", "pattern", "base") if getattr(table, name) is not None]
    if table.provider is not None and given:
        raise ConfigError(
            f"the version comes from {table.provider}, not from `{given[0]}`: give one",
            key_path(origins.of("version"), "provider"),
        )
    if table.base is not None and (table.file is not None or table.pattern is not None):
        raise ConfigError(
            "give the version either in `base` or through `file`/`pattern`, not both",
            key_path(origins.of("version"), "base"),
        )
    if table.file is not None:
        key = key_path(origins.of("version"), "file")
        file = existing_file(root, table.file, key, "version file")
    return VersionSource(
        file=file, pattern=table.pattern, suffix_env=table.suffix_env, base=table.base,
        provider=provider,
    )


def version_provider(pyproject: Mapping[str, Any], project: ProjectSettings) -> str | None:
    """``"setuptools-scm"`` when a dynamic version comes from it: asked for in
    ``[tool.torch-ext.version] provider``, or a ``[tool.setuptools_scm]`` table beside no other
    source (setuptools reads that table the same way). None: a file, a base, or static."""
    dynamic = pyproject.get("project", {}).get("dynamic", [])
    if not isinstance(dynamic, list) or "version" not in dynamic:
        return None
    table = project.version
    if table is not None and table.provider is not None:
        return table.provider
    if table is not None and any(getattr(table, name) is not None
                                 for name in ("file", "pattern", "base")):
        return None
    tool = pyproject.get("tool", {})
    return SETUPTOOLS_SCM if isinstance(tool, dict) and SETUPTOOLS_SCM_TABLE in tool else None


def build_requirements(root: Path) -> list[str]:
    """What a build of the project at ``root`` needs beyond ``[build-system] requires``:
    setuptools-scm, when the version comes from it."""
    from .pyproject import parse_settings, read_pyproject

    pyproject = read_pyproject(root)
    needed = version_provider(pyproject, parse_settings(pyproject)) == SETUPTOOLS_SCM
    return [SETUPTOOLS_SCM_REQUIREMENT] if needed else []


def version_string(project: ResolvedProject, env: Mapping[str, str]) -> str | None:
    """The project's version when it is dynamic (None when ``project.version`` is static),
    read and suffixed as ``project.version`` says; reads files, so resolve_project leaves it
    to the operations that need a version (``pipeline.load``: metadata, wheels, ``doctor``)."""
    if "version" not in project.project_table.get("dynamic", []):  # type: ignore[operator]
        return None
    source = project.version
    suffix = env.get(source.suffix_env, "") if source.suffix_env else None
    if source.provider == SETUPTOOLS_SCM:
        name = project.project_table.get("name")
        found = scm_version(project.root, name if isinstance(name, str) else None)
        return append_suffix(found, suffix or None, "from setuptools-scm")
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


def write_version_file(root: Path, pyproject: Mapping[str, Any], source: VersionSource) -> None:
    """The version file ``[tool.setuptools_scm]`` names (``version_file``, or the older
    ``write_to``), written now: the files a wheel ships are listed next, and a fresh clone has
    none yet (setuptools writes it as early)."""
    table = pyproject.get("tool", {}).get(SETUPTOOLS_SCM_TABLE)
    if source.provider != SETUPTOOLS_SCM or not isinstance(table, dict):
        return
    if table.get("version_file") or table.get("write_to"):
        name = pyproject.get("project", {}).get("name")
        scm_version(root, name if isinstance(name, str) else None)


def scm_version(root: Path, name: str | None) -> str:
    """The version setuptools-scm gives ``root`` (as scikit-build-core's provider asks it):
    from git or Mercurial, configured by ``[tool.setuptools_scm]``, writing its version file
    if one is configured; in an unpacked sdist (no repository), its PKG-INFO's version.
    SETUPTOOLS_SCM_PRETEND_VERSION and the library's other variables are its own to read."""
    key = f"tool.{SETUPTOOLS_SCM_TABLE}"
    try:
        from setuptools_scm import Configuration, _get_version, get_version
    except ImportError:
        raise ConfigError(
            f"the version comes from git through setuptools-scm, which is not installed here:"
            f" `pip install '{SETUPTOOLS_SCM_REQUIREMENT}'`, or build with build isolation (the"
            " backend asks the frontend for it)", key,
        ) from None
    try:
        file = root / "pyproject.toml"
        with warnings.catch_warnings():  # vcs-versioning 2 deprecates what its own API makes
            warnings.simplefilter("ignore", DeprecationWarning)
            if file.is_file():
                config = Configuration.from_file(str(file), dist_name=name)
                found = _get_version(config, force_write_version_files=True)
            else:  # migrate's, not written yet: no table, setuptools-scm's defaults
                found = get_version(root=str(root), dist_name=name)
    except Exception as exc:  # noqa: BLE001 - the library's own error, said in one line
        said = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigError(f"setuptools-scm: {said}", key) from None
    if not found:
        raise ConfigError(
            f"setuptools-scm found no version for {root}: it is not the top of a git (or"
            " Mercurial) work tree, and has no PKG-INFO (an sdist's); build from a clone (with"
            " its tags: `git fetch --tags`) or an sdist, or set SETUPTOOLS_SCM_PRETEND_VERSION",
            key,
        )
    try:
        return str(Version(found))
    except InvalidVersion:
        raise ConfigError(f"setuptools-scm gave {found!r}, which is not a PEP 440 version", key) from None


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

"""The config layer: pyproject.toml `[tool.torch-ext]` + -C + environment -> ResolvedProject.

One dataclass model (:mod:`.model`) drives parsing, the JSON schema and the reference docs.
Precedence: ``-C`` config settings > environment > pyproject (after its overrides).
"""

from __future__ import annotations

from .extension_model import ExtensionSettings
from .layers import config_setting_fields
from .model import ProjectSettings
from .resolved import ConfigSettings, Facts, PackageLayout, ResolvedProject, VersionSource
from .pyproject import parse_settings, read_pyproject
from .resolve import resolve_project
from .version import build_requirements, version_string

__all__ = [
    "ConfigSettings",
    "ExtensionSettings",
    "Facts",
    "PackageLayout",
    "ProjectSettings",
    "ResolvedProject",
    "VersionSource",
    "build_requirements",
    "config_setting_fields",
    "parse_settings",
    "read_pyproject",
    "resolve_project",
    "version_string",
]

"""What migrate knows of the settings model, derived from config/model.py and
config/extension_model.py, never copied.

A new setting in the model is then known to migrate (compared between branches, appended to
when the model allows it, written in the model's order) without touching this package.
"""

from __future__ import annotations

import dataclasses
from typing import Any, get_origin

from ...config.fields import toml_key
from ...config.extension_model import CudaVariant, ExtensionSettings
from ...config.model import PROJECT_ONLY_KEYS, OverrideAppend, ProjectSettings
from ...config.parse import fields_by_key, partial_keys, type_hints, union_members
from ...config.layers import env_fields
from ...shipped_runtime.environment import CFLAGS, FLAGS_ENV, PASSTHROUGH_ENV

EXTENSION_NAME_KEY = "name"


def _is_table(cls: type, field: dataclasses.Field[Any]) -> bool:
    """A field holding a table of its own settings (``if``, ``cuda``, ``version``)."""
    return any(dataclasses.is_dataclass(m) for m in union_members(type_hints(cls)[field.name]))


def _default(cls: type, field: dataclasses.Field[Any]) -> Any:
    """The field's default; a required list (``sources``) defaults to an empty one here."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return [] if get_origin(type_hints(cls)[field.name]) is list else None


def _plain_keys(cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Key -> default of the keys that hold values (not sub-tables), in the model's order."""
    return {
        key: _default(cls, field)
        for key, field in fields_by_key(cls).items()
        if key not in skip and not _is_table(cls, field)
    }


def _append_meta(name: str) -> dict[str, Any]:
    field = next(f for f in dataclasses.fields(OverrideAppend) if f.name == name)
    return dict(field.metadata)


# Keys of an extension table in the order they are written, with their defaults.
EXTENSION_DEFAULTS: dict[str, Any] = _plain_keys(ExtensionSettings, (EXTENSION_NAME_KEY,))
# [tool.torch-ext] keys (not extensions or overrides) in model order, with their defaults.
PROJECT_DEFAULTS: dict[str, Any] = _plain_keys(ProjectSettings, PROJECT_ONLY_KEYS)
# [tool.torch-ext] keys holding a table of their own settings ([tool.torch-ext.version]).
PROJECT_TABLE_KEYS: tuple[str, ...] = tuple(
    key for key, field in fields_by_key(ProjectSettings).items()
    if key not in PROJECT_ONLY_KEYS and _is_table(ProjectSettings, field)
)
TOOL_KEY_ORDER: tuple[str, ...] = tuple(
    key for key in fields_by_key(ProjectSettings) if key not in PROJECT_ONLY_KEYS
)
# Keys an override's `append` accepts: extension keys, and [tool.torch-ext] keys.
APPENDABLE = frozenset(partial_keys(ExtensionSettings, _append_meta("extension")))
PROJECT_APPENDABLE = frozenset(partial_keys(ProjectSettings, _append_meta("settings")))
# Keys a `cuda` table holds (each is appended to or merged into the extension's own, but
# for the few that replace it: dlink).
CUDA_TABLE_KEYS = frozenset(fields_by_key(CudaVariant))
CUDA_TABLE_REPLACED = CUDA_TABLE_KEYS - APPENDABLE
# Extension keys that, unset, take the [tool.torch-ext] value of the same name (strip, pch...).
INHERITED_KEYS = frozenset(
    key for key, default in EXTENSION_DEFAULTS.items()
    if default is None and key in PROJECT_DEFAULTS
)


def extension_default(key: str, tool: dict[str, Any]) -> Any:
    """What an extension without ``key`` gets, given the [tool.torch-ext] keys ``tool``."""
    if key in INHERITED_KEYS:
        return tool.get(key, PROJECT_DEFAULTS[key])
    return EXTENSION_DEFAULTS[key]


def backend_variables() -> dict[str, str]:
    """Environment variables pep517_torch reads itself -> what it does with them."""
    found = {
        variable: f"pep517_torch reads ${variable} itself ({toml_key(field.name)})"
        for variable, field in env_fields().items()
    }
    for variable in FLAGS_ENV:
        found[variable] = (f"pep517_torch reads ${variable} itself, as setuptools and CMake do"
                           " for C++ (docs/configuration.md)")
    found[CFLAGS] = ("pep517_torch compiles every source as C++, with $CXXFLAGS (as setuptools"
                     " and CMake do), not $CFLAGS: set CXXFLAGS")
    for variable in PASSTHROUGH_ENV:
        found.setdefault(variable, f"pep517_torch passes ${variable} to its compile steps itself"
                         " (compilers and the CUDA toolkit are found through it)")
    return found

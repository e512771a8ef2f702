"""migrate knows the settings model by deriving from it: every key, in every role.

Nothing here runs a setup.py or compiles: two conversions that differ in one key must give an
override that the config parser accepts and that says exactly that key.
"""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

import pytest

from pep517_torch.config import parse_settings
from pep517_torch.config.extension_model import ExtensionSettings
from pep517_torch.config.model import ProjectSettings
from pep517_torch.config.parse import fields_by_key, type_hints, union_members
from pep517_torch.config.pyproject import tomllib
from pep517_torch.errors import MigrateError, Pep517TorchError
from pep517_torch.migrate.convert.tables import Converted
from pep517_torch.migrate.convert.diff import diff
from pep517_torch.migrate.convert.render import render_plan
from pep517_torch.migrate.convert.settings_keys import (
    EXTENSION_DEFAULTS,
    PROJECT_DEFAULTS,
    extension_default,
)
from pep517_torch.migrate.convert.plan import Override, Plan


def other_value(cls: type, key: str, default: Any) -> Any:
    """A valid value of ``key`` that differs from ``default``, chosen from the field's type."""
    members = [m for m in union_members(type_hints(cls)[fields_by_key(cls)[key].name])
               if m is not type(None)]
    for member in members:
        if get_origin(member) is Literal:
            choices = [a for a in get_args(member) if a != default]
            if choices:
                return choices[0]
        if member is bool:
            return not default if isinstance(default, bool) else True
        if member is int:
            return 3
        if get_origin(member) is list:
            return [*(default or []), "8.0" if "arch" in key else "x"]
        if get_origin(member) is dict:
            return {**(default or {}), "X": "1" if key != "package-data" else ["*.json"]}
    if str in members:
        return {"py-limited-api": "cp311", "pch-cache-size": "8G", "stable-abi": "2.11",
                "platform-tag": "linux", "max-wheel-size": "100M"}.get(key, "h.h")
    raise AssertionError(f"no sample value for {key}")


def conversion(tool: dict[str, Any], extension: dict[str, Any]) -> Converted:
    project = {"name": "demo", "version": "1.0"}
    base = {"name": "demo._C", "sources": ["a.cpp"]}
    return Converted(project=project, tool=dict(tool), extensions=[{**base, **extension}])


def override_for(base: Converted, variant: Converted) -> dict[str, Any]:
    changes = diff(base, variant)
    assert changes.changes, "the difference went unseen"
    plan = Plan(base=base)
    body = [(change.dotted_key(), change.value) for change in changes.changes]
    plan.overrides.append(Override({"env": {"X": True}}, body))
    document = tomllib.loads(render_plan(plan))
    parse_settings(document)  # the config layer accepts what migrate derived
    (override,) = document["tool"]["torch-ext"]["overrides"]
    return override


EXTENSION_KEYS = [k for k in EXTENSION_DEFAULTS if k != "sources"]


def test_every_value_key_of_the_model_is_known_to_migrate() -> None:
    tables = {"name", "if", "cuda"}  # the name, the condition and the `cuda` table: structure
    assert set(EXTENSION_DEFAULTS) == set(fields_by_key(ExtensionSettings)) - tables
    project_only = {"extension", "overrides", "version", "matrix"}
    assert set(PROJECT_DEFAULTS) == set(fields_by_key(ProjectSettings)) - project_only


@pytest.mark.parametrize("key", EXTENSION_KEYS)
def test_a_change_of_any_extension_key_becomes_an_override(key: str) -> None:
    default = extension_default(key, {})
    value = other_value(ExtensionSettings, key, default)
    override = override_for(conversion({}, {}), conversion({}, {key: value}))
    changed = override.get("append", override)["extension"]["demo._C"]
    assert list(changed) == [key]


@pytest.mark.parametrize("key", [k for k in PROJECT_DEFAULTS if k != "packages"])
def test_a_change_of_any_project_key_becomes_an_override(key: str) -> None:
    value = other_value(ProjectSettings, key, PROJECT_DEFAULTS[key])
    override = override_for(conversion({}, {}), conversion({key: value}, {}))
    assert [k for k in override.get("append", override) if k != "if"] == [key]


@pytest.mark.parametrize("key", ["strip", "pch"])
def test_an_extension_key_left_unset_compares_as_the_project_value(key: str) -> None:
    # `strip = true` for the whole project in one branch, on the extension in the other: the
    # same build, so no extension-level override.
    project_wide = conversion({key: not PROJECT_DEFAULTS[key]}, {})
    on_extension = conversion({key: not PROJECT_DEFAULTS[key]}, {key: not PROJECT_DEFAULTS[key]})
    assert diff(project_wide, on_extension).empty()
    cleared = conversion({}, {})
    changes = diff(on_extension, cleared).changes
    assert {(c.extension, c.key, c.value) for c in changes} == {
        (None, key, PROJECT_DEFAULTS[key]), ("demo._C", key, PROJECT_DEFAULTS[key])}


def test_migrate_error_is_a_pep517_torch_error() -> None:
    assert issubclass(MigrateError, Pep517TorchError)
    import pep517_torch.migrate as migrate

    assert migrate.MigrateError is MigrateError

"""The layers above pyproject.toml: `-C` config settings, then the environment.

Precedence: ``-C`` > environment > pyproject (after overrides). Each layer maps a project
field name to a :class:`LayerValue` remembering the -C key or variable it came from.

The variables a build reads are named in shipped_runtime/environment.py: the settings' (the model's
``env`` metadata refers to those names), which this module parses, and the tools', which it
passes to the compile core unparsed.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from ..errors import ConfigError
from ..shipped_runtime.environment import (
    COMPILE_INPUT_ENV,
    FALSE_WORDS,
    FLAGS_ENV,
    PASSTHROUGH_ENV,
    TOOL_ENV,
    TRUE_WORDS,
)
from .fields import toml_key
from .model import ProjectSettings
from .parse import convert, describe_type, one_line_problem, type_hints, union_members
from .resolved import ConfigSettings



@dataclass(frozen=True)
class LayerValue:
    value: Any
    key: str  # the -C key or the environment variable that gave the value


def config_setting_fields() -> dict[str, dataclasses.Field[Any]]:
    """-C key -> project field, for the fields marked ``config_setting``."""
    return {
        toml_key(f.name): f
        for f in dataclasses.fields(ProjectSettings)
        if f.metadata.get("config_setting")
    }


def env_fields() -> dict[str, dataclasses.Field[Any]]:
    """Environment variable -> project field, for the fields marked ``env``."""
    return {
        f.metadata["env"]: f for f in dataclasses.fields(ProjectSettings) if "env" in f.metadata
    }


def artifact_env() -> tuple[str, ...]:
    """The variables whose values change what a build makes: the tools' and the settings' not
    marked ``runs_only`` (the JIT's warm check compares them)."""
    settings = (name for name, f in env_fields().items() if not f.metadata.get("runs_only"))
    return (*TOOL_ENV, *FLAGS_ENV, *COMPILE_INPUT_ENV, *settings)


def resolution_variables() -> tuple[str, ...]:
    """The names of every variable a resolution reads: passed on to the compile core or
    setting a key (an editable install records their values to re-plan as it was installed)."""
    return (*PASSTHROUGH_ENV, *env_fields())


def option_value(fld: dataclasses.Field[Any], value: Any) -> Any:
    """A setting's value as the BuildOptions field of the same name holds it."""
    convert = fld.metadata.get("option")
    return convert(value) if convert else value


def _from_string(tp: Any, text: str, key: str) -> Any:
    """Turn a -C or environment string into a TOML-like value of type ``tp``."""
    word = text.strip().lower()
    members = union_members(tp)
    for member in members:
        if get_origin(member) is Literal and word in get_args(member):
            return word
    if bool in members:
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    if int in members:
        try:
            return int(text.strip())
        except ValueError:
            pass
    if str in members:
        return text
    if any(get_origin(m) is list for m in members):
        return [text]
    raise ConfigError(f"expected {describe_type(tp)}, got {text!r}", key)


def _one_string(value: str | list[str], key: str, is_list: bool) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if is_list:
            return ";".join(value)
        if len(value) == 1:
            return value[0]
        raise ConfigError(f"given {len(value)} times; give it once", key)
    raise ConfigError(f"expected a string or a list of strings, got {value!r}", key)


def _parse_value(fld: dataclasses.Field[Any], text: str, key: str) -> Any:
    tp = type_hints(ProjectSettings)[fld.name]
    value = _from_string(tp, text, key)
    try:
        return convert(tp, value, key, fld.metadata)
    except ConfigError as exc:
        message = str(exc).removeprefix(f"{exc.key}: ")
        raise ConfigError(f"{message} (from {text!r})", key) from None


def config_settings_layer(
    config_settings: ConfigSettings,
) -> dict[str, LayerValue]:
    """Parse PEP 517 ``config_settings``; unknown keys are errors."""
    fields = config_setting_fields()
    layer: dict[str, LayerValue] = {}
    for key, raw in (config_settings or {}).items():
        if not isinstance(key, str):
            raise ConfigError(f"config setting keys must be strings, got {key!r}")
        fld = fields.get(key)
        if fld is None:
            raise _unknown_setting(key, list(fields))
        is_list = any(
            get_origin(m) is list for m in union_members(type_hints(ProjectSettings)[fld.name])
        )
        layer[fld.name] = LayerValue(_parse_value(fld, _one_string(raw, key, is_list), key), key)
    return layer


def _unknown_setting(key: str, valid: list[str]) -> ConfigError:
    project_keys = [toml_key(f.name) for f in dataclasses.fields(ProjectSettings)]
    if key in project_keys:
        return ConfigError(
            f"config setting {key!r} cannot be given with -C; set it in pyproject.toml"
            f" (-C accepts: {', '.join(valid)})",
            key,
        )
    kebab = key.replace("_", "-")
    close = [kebab] if kebab in valid else difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (valid: {', '.join(valid)})"
    return ConfigError(f"unknown config setting {key!r}{hint}", key)


def environment_layer(env: Mapping[str, str]) -> dict[str, LayerValue]:
    """TORCH_CUDA_ARCH_LIST and MAX_JOBS; empty variables count as unset. The tool variables
    (CXX, CC, CUDA_HOME, CUDA_PATH) pass through unparsed, but must be one line too."""
    for variable in TOOL_ENV:
        problem = one_line_problem(env.get(variable, ""))
        if problem:
            raise ConfigError(problem, variable)
    layer: dict[str, LayerValue] = {}
    for variable, fld in env_fields().items():
        text = env.get(variable)
        if text is None or not text.strip():
            continue
        layer[fld.name] = LayerValue(_parse_value(fld, text, variable), variable)
    return layer


def passthrough_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables the compile core needs, copied from the caller's environment."""
    return {name: env[name] for name in PASSTHROUGH_ENV if name in env}


def environment_options(env: Mapping[str, str]) -> dict[str, Any]:
    """The BuildOptions fields the environment sets, for the faces without a pyproject (the JIT,
    setup.py): each setting's variable (MAX_JOBS, TORCH_CUDA_ARCH_LIST, ...) means there what
    it means for wheels, and is the name those faces' messages give the field (``keys``)."""
    fields = {f.name: f for f in env_fields().values()}
    options: dict[str, Any] = {
        name: option_value(fields[name], layered.value)
        for name, layered in environment_layer(env).items()
    }
    options["keys"] = tuple((f.name, variable) for variable, f in env_fields().items())
    return options

"""Generic, model-driven conversion of TOML values into the settings dataclasses.

Every failure is a :class:`ConfigError` whose ``key`` is the full path of the offending value
(``tool.torch-ext.extension[1].extra-cflags[0]``); keys that are not bare TOML keys are quoted.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

from ..core.ninja.syntax import unwritable_character
from ..errors import ConfigError
from .fields import Partial, toml_key

NoneType = type(None)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def quote_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def key_path(base: str, key: str) -> str:
    return f"{base}.{quote_key(key)}" if base else quote_key(key)


def index_path(base: str, index: int) -> str:
    return f"{base}[{index}]"


# --------------------------------------------------------------------------- introspection


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def union_members(tp: Any) -> tuple[Any, ...]:
    return get_args(tp) if is_union(tp) else (tp,)


def is_required(fld: dataclasses.Field[Any]) -> bool:
    return fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING


def accepts_container(tp: Any) -> bool:
    """Whether a value of this type can be appended to or merged into (list or table)."""
    return any(get_origin(m) in (list, dict) for m in union_members(tp))


@functools.cache
def fields_by_key(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """The TOML keys of a dataclass, excluding flattened fields."""
    return {toml_key(f.name): f for f in dataclasses.fields(cls) if not f.metadata.get("flatten")}


def field_meta(fld: dataclasses.Field[Any], partial_meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """A field's metadata as it applies inside a partial table: appended lists may be short."""
    if partial_meta.get("appendable_only") and "min_items" in fld.metadata:
        return {k: v for k, v in fld.metadata.items() if k != "min_items"}
    return fld.metadata


def partial_keys(cls: type, meta: Mapping[str, Any]) -> dict[str, dataclasses.Field[Any]]:
    """The keys of ``cls`` a ``Partial[cls]`` with this metadata accepts."""
    excluded = set(meta.get("exclude", ()))
    hints = type_hints(cls)
    return {
        key: f
        for key, f in fields_by_key(cls).items()
        if key not in excluded
        and (not meta.get("appendable_only") or accepts_container(hints[f.name]))
    }


def flattened_field(cls: type) -> dataclasses.Field[Any] | None:
    return next((f for f in dataclasses.fields(cls) if f.metadata.get("flatten")), None)


# --------------------------------------------------------------------------- descriptions


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def describe_type(tp: Any) -> str:
    origin = get_origin(tp)
    if tp is bool:
        return "a boolean"
    if tp is int:
        return "an integer"
    if tp is str:
        return "a string"
    if tp is NoneType:
        return "nothing"
    if origin is Literal:
        values = [toml_value(a) for a in get_args(tp)]
        return values[0] if len(values) == 1 else "one of " + ", ".join(values)
    if origin is list:
        return f"an array of {describe_type(get_args(tp)[0]).split(' ', 1)[1]}s"
    if origin is dict:
        return "a table"
    if origin is Partial or dataclasses.is_dataclass(tp):
        return "a table"
    if is_union(tp):
        return " or ".join(describe_type(m) for m in get_args(tp) if m is not NoneType)
    return str(tp)


def describe_value(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {toml_value(value)}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"float {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {json.dumps(shown)}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def type_error(tp: Any, value: Any, path: str) -> ConfigError:
    message = f"expected {describe_type(tp)}, got {describe_value(value)}"
    if get_origin(tp) is dict and isinstance(value, list):
        message += _pairs_as_table(value)
    return ConfigError(message, path)


def _pairs_as_table(pairs: list[Any]) -> str:
    """setuptools' shape of a table, ``[["NAME", "value"], ["FLAG"]]``, spelt as the table to
    write instead (`true` for a name without a value); "" for any other array."""
    entries = []
    for pair in pairs:
        if not (isinstance(pair, list) and 1 <= len(pair) <= 2 and isinstance(pair[0], str)):
            return ""
        value = pair[1] if len(pair) == 2 else True
        if not isinstance(value, (str, int)):
            return ""
        entries.append(f"{pair[0]} = {toml_value(value)}")
    return f" of pairs: write it as {{{', '.join(entries)}}}" if entries else ""


def unknown_key_error(key: str, valid: list[str], path: str, table_path: str) -> ConfigError:
    suggestion = key.replace("_", "-") if key.replace("_", "-") in valid else None
    if suggestion is None:
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
        suggestion = close[0] if close else None
    message = f"unknown key {key!r}"
    if suggestion:
        message += f" (did you mean {suggestion!r}?)"
    if not suggestion or len(valid) <= 8:
        message += f"; valid keys{' in ' + table_path if table_path else ''}: {', '.join(valid)}"
    return ConfigError(message, path)


# --------------------------------------------------------------------------- conversion


def shallow_match(tp: Any, value: Any) -> bool:
    """Whether ``value`` has the outer shape of ``tp`` (used to pick a union member)."""
    origin = get_origin(tp)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if tp is NoneType:
        return value is None
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in get_args(tp))
    if origin is list:
        return isinstance(value, list)
    if origin in (dict, Partial) or dataclasses.is_dataclass(tp):
        return isinstance(value, dict)
    raise TypeError(f"unsupported type in the settings model: {tp!r}")


def one_line_problem(value: str) -> str | None:
    """Why ``value`` cannot be a setting that reaches a file name or a command line, or None."""
    problem = unwritable_character(value)
    if problem is None:
        return None
    return (
        f"{json.dumps(value)} contains {problem}: a setting becomes file names and command-line"
        " arguments, which must each be one line"
    )


def check_string(value: str, path: str, meta: Mapping[str, Any]) -> None:
    """The field's own ``check`` and ``pattern``, after the rule for every string: one line
    (unless the field is marked ``multiline``)."""
    problem = None if meta.get("multiline") else one_line_problem(value)
    check = meta.get("check")
    if problem is None and check:
        problem = check(value)
    pattern = meta.get("pattern")
    if problem is None and pattern and not re.fullmatch(pattern.strip("^$"), value):
        problem = f"{json.dumps(value)} {meta.get('pattern_help', f'does not match {pattern}')}"
    if problem:
        raise ConfigError(problem, path)


def convert(tp: Any, value: Any, path: str, meta: Mapping[str, Any]) -> Any:
    """Check ``value`` against ``tp`` and return it in model form (dataclasses, dicts)."""
    origin = get_origin(tp)
    if is_union(tp):
        for member in get_args(tp):
            if shallow_match(member, value):
                return convert(member, value, path, meta)
        raise type_error(tp, value, path)
    if not shallow_match(tp, value):
        raise type_error(tp, value, path)
    if tp is int and "minimum" in meta and value < meta["minimum"]:
        raise ConfigError(f"must be at least {meta['minimum']}, got {value}", path)
    if tp is int and "maximum" in meta and value > meta["maximum"]:
        raise ConfigError(f"must be at most {meta['maximum']}, got {value}", path)
    if tp is str:
        check_string(value, path, meta)
    if origin is list:
        if len(value) < meta.get("min_items", 0):
            raise ConfigError(f"must have at least {meta['min_items']} entry", path)
        (item_type,) = get_args(tp)
        return [convert(item_type, v, index_path(path, i), meta) for i, v in enumerate(value)]
    if origin is dict:
        _, value_type = get_args(tp)
        key_pattern = meta.get("key_pattern")
        converted = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"table keys must be strings, got {key!r}", path)
            if key_pattern and not re.fullmatch(key_pattern.strip("^$"), key):
                raise ConfigError(
                    f"{key!r} is not a valid name here (letters, digits and underscores, not"
                    " starting with a digit)",
                    key_path(path, key),
                )
            converted[key] = convert(value_type, item, key_path(path, key), meta)
        return converted
    if origin is Partial:
        return parse_partial(get_args(tp)[0], value, path, meta)
    if dataclasses.is_dataclass(tp):
        return parse_table(typing.cast(type, tp), value, path)
    return value


def _refused_key_error(
    cls: type, key: str, meta: Mapping[str, Any], path: str
) -> ConfigError | None:
    """A clearer error for a key the full table has but this partial table does not take."""
    if key not in fields_by_key(cls):
        return None
    if key in meta.get("exclude", ()):
        return ConfigError(f"key {key!r} cannot be set here", path)
    return ConfigError(
        f"key {key!r} cannot be appended to (only array and table keys can); set it in the"
        " override itself to replace it",
        path,
    )


def parse_partial(
    cls: type, table: Mapping[str, Any], path: str, meta: Mapping[str, Any]
) -> dict[str, Any]:
    """Convert the keys a table gives for ``cls`` into ``{field name: value}``."""
    allowed = partial_keys(cls, meta)
    hints = type_hints(cls)
    result: dict[str, Any] = {}
    for key, value in table.items():
        item_path = key_path(path, key)
        fld = allowed.get(key)
        if fld is None:
            raise _refused_key_error(cls, key, meta, item_path) or unknown_key_error(
                key, list(allowed), item_path, path
            )
        result[fld.name] = convert(hints[fld.name], value, item_path, field_meta(fld, meta))
    return result


def parse_table(cls: type, table: Mapping[str, Any], path: str) -> Any:
    """Convert a TOML table into an instance of the dataclass ``cls``."""
    if not isinstance(table, dict):
        raise ConfigError(f"expected a table, got {describe_value(table)}", path)
    own = fields_by_key(cls)
    hints = type_hints(cls)
    flat = flattened_field(cls)
    flat_cls: type | None = get_args(hints[flat.name])[0] if flat else None
    flat_meta: Mapping[str, Any] = flat.metadata if flat else {}
    flat_allowed = partial_keys(flat_cls, flat_meta) if flat_cls else {}
    for key in table:
        if not isinstance(key, str):
            raise ConfigError(f"table keys must be strings, got {key!r}", path)
        if key not in own and key not in flat_allowed:
            item_path = key_path(path, key)
            refused = _refused_key_error(flat_cls, key, flat_meta, item_path) if flat_cls else None
            raise refused or unknown_key_error(key, [*own, *flat_allowed], item_path, path)
    kwargs: dict[str, Any] = {}
    for key, value in table.items():
        if key in own:
            fld = own[key]
            kwargs[fld.name] = convert(hints[fld.name], value, key_path(path, key), fld.metadata)
    missing = [key for key, f in own.items() if is_required(f) and f.name not in kwargs]
    if missing:
        raise ConfigError(f"missing required key {missing[0]!r}", path)
    if getattr(cls, "REQUIRE_ONE_KEY", False) and not table:
        raise ConfigError(f"an empty table says nothing; give one of {', '.join(own)}", path)
    if flat is not None and flat_cls is not None:
        flat_table = {key: value for key, value in table.items() if key not in own}
        kwargs[flat.name] = parse_partial(flat_cls, flat_table, path, flat_meta)
    return cls(**kwargs)

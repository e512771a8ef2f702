"""The JSON schema and the reference docs, both generated from the settings model.

``python -m pep517_torch.config.schema --write`` regenerates
``pep517_torch/resources/torch-ext.schema.json`` and the generated part of
``docs/configuration.md``; ``--check`` fails when either is stale.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from .extension_model import Condition, CudaVariant, EnvTest, ExtensionSettings
from .fields import Partial, toml_key
from .matrix_model import MatrixExclude, MatrixSettings
from .model import Override, OverrideAppend, ProjectSettings, VersionSettings
from .parse import (
    NoneType,
    field_meta,
    is_required,
    is_union,
    partial_keys,
    toml_value,
    type_hints,
)

SCHEMA_ID = (
    "https://github.com/pep517-torch/pep517_torch/blob/main/"
    "pep517_torch/resources/torch-ext.schema.json"
)
PACKAGE_DIR = Path(__file__).resolve().parent.parent
SCHEMA_FILE = PACKAGE_DIR / "resources" / "torch-ext.schema.json"
DOCS_FILE = PACKAGE_DIR.parent / "docs" / "configuration.md"
BEGIN_MARKER = "<!-- BEGIN GENERATED: python -m pep517_torch.config.schema --write -->"
END_MARKER = "<!-- END GENERATED -->"

# (class, definition name, heading in the docs)
TABLES: tuple[tuple[type, str, str], ...] = (
    (ProjectSettings, "", "`[tool.torch-ext]`"),
    (VersionSettings, "version", "`[tool.torch-ext.version]`"),
    (ExtensionSettings, "extension", "`[[tool.torch-ext.extension]]`"),
    (CudaVariant, "cuda-variant", "`[tool.torch-ext.extension.cuda]`"),
    (Condition, "condition", "`if` tables (extensions and overrides)"),
    (EnvTest, "env-test", "`if.env.NAME` tables"),
    (Override, "override", "`[[tool.torch-ext.overrides]]`"),
    (OverrideAppend, "override-append", "`append` tables of overrides"),
    (MatrixSettings, "matrix", "`[tool.torch-ext.matrix]`"),
    (MatrixExclude, "matrix-exclude", "`exclude` tables of the matrix"),
)
DEFINITION_NAMES = {cls: name for cls, name, _ in TABLES if name}


# --------------------------------------------------------------------------- JSON schema


def one_paragraph(docstring: str) -> str:
    return " ".join(docstring.split())


def _default(fld: dataclasses.Field[Any]) -> Any:
    if fld.default_factory is not dataclasses.MISSING:
        return fld.default_factory()
    return fld.default


def _type_schema(tp: Any, meta: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    origin = get_origin(tp)
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        bounds = {bound: meta[bound] for bound in ("minimum", "maximum") if bound in meta}
        return {"type": "integer", **bounds}
    if tp is str:
        schema: dict[str, Any] = {"type": "string"}
        if "pattern" in meta:
            schema["pattern"] = meta["pattern"]
        if "format" in meta:
            schema["format"] = meta["format"]
        return schema
    if origin is Literal:
        return {"enum": list(get_args(tp))}
    if origin is list:
        schema = {"type": "array", "items": _type_schema(get_args(tp)[0], meta, defs)}
        if meta.get("min_items"):
            schema["minItems"] = meta["min_items"]
        return schema
    if origin is dict:
        schema = {"type": "object"}
        if "key_pattern" in meta:
            schema["propertyNames"] = {"pattern": meta["key_pattern"]}
        schema["additionalProperties"] = _type_schema(get_args(tp)[1], meta, defs)
        return schema
    if origin is Partial:
        target = get_args(tp)[0]
        name = f"{DEFINITION_NAMES[target]}-{'append' if meta.get('appendable_only') else 'patch'}"
        if name not in defs:
            defs[name] = {}  # reserve the name before recursing
            defs[name] = _properties_schema(target, partial_keys(target, meta), defs, [], meta)
        return {"$ref": f"#/definitions/{name}"}
    if dataclasses.is_dataclass(tp):
        name = DEFINITION_NAMES[typing.cast(type, tp)]
        if name not in defs:
            defs[name] = {}
            defs[name] = _table_schema(tp, defs)  # type: ignore[arg-type]
        return {"$ref": f"#/definitions/{name}"}
    if is_union(tp):
        members = [_type_schema(m, meta, defs) for m in get_args(tp) if m is not NoneType]
        if len(members) == 1:
            return members[0]
        if all("enum" in m or m == {"type": "boolean"} for m in members):
            return {"enum": [v for m in members for v in m.get("enum", [True, False])]}
        return {"anyOf": members}
    raise TypeError(f"unsupported type in the settings model: {tp!r}")


def _field_schema(
    cls: type, fld: dataclasses.Field[Any], defs: dict[str, Any], partial_meta: Any = None
) -> dict[str, Any]:
    schema = {"description": fld.metadata["help"]}
    meta = dict(field_meta(fld, partial_meta or {}))
    schema.update(_type_schema(type_hints(cls)[fld.name], meta, defs))
    default = _default(fld)
    if default is not dataclasses.MISSING and default is not None:
        schema["default"] = default
    return schema


def _properties_schema(
    cls: type,
    fields: dict[str, dataclasses.Field[Any]],
    defs: dict[str, Any],
    required: list[str],
    partial_meta: Any = None,
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False}
    if cls.__doc__:
        schema["description"] = one_paragraph(cls.__doc__)
    schema["properties"] = {
        key: _field_schema(cls, f, defs, partial_meta) for key, f in fields.items()
    }
    if required:
        schema["required"] = required
    return schema


def _table_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, dataclasses.Field[Any]] = {}
    owners: dict[str, tuple[type, Any]] = {}  # key -> (class, metadata of the flattened field)
    for fld in dataclasses.fields(cls):
        if fld.metadata.get("flatten"):
            target = get_args(type_hints(cls)[fld.name])[0]
            for key, inner in partial_keys(target, fld.metadata).items():
                fields[key], owners[key] = inner, (target, fld.metadata)
        else:
            fields[toml_key(fld.name)], owners[toml_key(fld.name)] = fld, (cls, None)
    required = [key for key, f in fields.items() if owners[key][0] is cls and is_required(f)]
    schema = _properties_schema(cls, {}, defs, required)
    if getattr(cls, "REQUIRE_ONE_KEY", False):
        schema["minProperties"] = 1
    schema["properties"] = {
        key: _field_schema(*owners[key][:1], f, defs, owners[key][1]) for key, f in fields.items()
    }
    return schema


def generate_schema() -> dict[str, Any]:
    """The draft-07 schema of the `[tool.torch-ext]` table."""
    defs: dict[str, Any] = {}
    table = _table_schema(ProjectSettings, defs)
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": SCHEMA_ID,
        "title": "pep517_torch settings: [tool.torch-ext] in pyproject.toml",
        **table,
        "definitions": dict(sorted(defs.items())),
    }


def schema_text() -> str:
    return json.dumps(generate_schema(), indent=2, ensure_ascii=False) + "\n"


def tool_schema(tool_name: str = "torch-ext") -> dict[str, Any]:
    """Validates the ``[tool.$tool]`` table used by the pep517_torch build backend."""
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return {"$id": schema["$id"], **schema}


# --------------------------------------------------------------------------- markdown


def type_name(tp: Any) -> str:
    origin = get_origin(tp)
    names = {bool: "boolean", int: "integer", str: "string"}
    if tp in names:
        return names[tp]
    if origin is Literal:
        return " or ".join(f"`{toml_value(a)}`" for a in get_args(tp))
    if origin is list:
        return f"array of {type_name(get_args(tp)[0])}"
    if origin is dict:
        return f"table of {type_name(get_args(tp)[1])}"
    if origin is Partial:
        return f"partial {DEFINITION_NAMES[get_args(tp)[0]]} table"
    if dataclasses.is_dataclass(tp):
        return "table"
    if is_union(tp):
        return " or ".join(type_name(m) for m in get_args(tp) if m is not NoneType)
    raise TypeError(f"unsupported type in the settings model: {tp!r}")


def _default_text(fld: dataclasses.Field[Any]) -> str:
    default = _default(fld)
    if default is dataclasses.MISSING:
        return "required"
    if default is None:
        return "default unset"
    return f"default `{toml_value(default) if isinstance(default, bool) else json.dumps(default)}`"


def _field_markdown(cls: type, fld: dataclasses.Field[Any]) -> list[str]:
    meta = fld.metadata
    if meta.get("flatten"):
        target = get_args(type_hints(cls)[fld.name])[0]
        keys = ", ".join(f"`{k}`" for k in partial_keys(target, meta))
        return ["#### *(project keys)*", "", f"{meta['help']} Accepted: {keys}.", ""]
    key = toml_key(fld.name)
    facts = [type_name(type_hints(cls)[fld.name]), _default_text(fld)]
    if "minimum" in meta and "maximum" in meta:
        facts[0] += f" from {meta['minimum']} to {meta['maximum']}"
    if meta.get("config_setting"):
        facts.append(f"`-C {key}=...`")
    if "env" in meta:
        facts.append(f"environment `{meta['env']}`")
    lines = [f"#### `{key}`", "", " · ".join(facts), "", meta["help"]]
    if get_origin(type_hints(cls)[fld.name]) is dict and "exclude" in meta:
        target = get_args(get_args(type_hints(cls)[fld.name])[1])[0]
        keys = ", ".join(f"`{k}`" for k in partial_keys(target, meta))
        lines.append(f"Accepted keys: {keys}.")
    return [*lines, ""]


def render_markdown() -> str:
    """The reference section of docs/configuration.md."""
    lines = ["## Reference", ""]
    for cls, _, heading in TABLES:
        lines += [f"### {heading}", "", one_paragraph(cls.__doc__ or ""), ""]
        for fld in dataclasses.fields(cls):
            lines += _field_markdown(cls, fld)
    return "\n".join(lines).rstrip() + "\n"


def docs_with_reference(current: str) -> str:
    """``current`` with the text between the markers replaced by the rendered reference."""
    head, begin, rest = current.partition(BEGIN_MARKER)
    if not begin:
        head, rest = current.rstrip() + "\n\n", ""
    _, end, tail = rest.partition(END_MARKER)
    return f"{head}{BEGIN_MARKER}\n\n{render_markdown()}\n{END_MARKER}{tail if end else chr(10)}"


def _placeholder(tp: Any) -> str:
    """``KEY=<this>`` in command-line help: the choices when there are few, else a word."""
    choices: list[str] = []
    for member in get_args(tp) if is_union(tp) else (tp,):
        if get_origin(member) is Literal:
            choices += [str(a) for a in get_args(member)]
        elif member is bool:
            choices += ["true", "false"]
        elif member is int:
            return "N"
        elif member is not NoneType:
            return "VALUE"
    return "|".join(choices)


def config_settings_help() -> list[tuple[str, str]]:
    """``(KEY=VALUE, first sentence of its help)`` for every ``-C`` key, in model order."""
    rows = []
    for fld in dataclasses.fields(ProjectSettings):
        meta = fld.metadata
        if not meta.get("config_setting"):
            continue
        text = meta["help"].replace("`", "")
        sentence = re.split(r"(?<=[.;])\s+(?=[A-Z])", text)[0].rstrip(".;") + "."
        if "env" in meta:
            sentence += f" Environment: {meta['env']}."
        rows.append((f"{toml_key(fld.name)}={_placeholder(type_hints(ProjectSettings)[fld.name])}", sentence))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pep517_torch.config.schema")
    parser.add_argument("--write", action="store_true", help="regenerate the schema and docs")
    parser.add_argument("--check", action="store_true", help="fail when either is stale")
    args = parser.parse_args(argv)
    docs = DOCS_FILE.read_text(encoding="utf-8") if DOCS_FILE.exists() else "# Configuration\n"
    wanted = {SCHEMA_FILE: schema_text(), DOCS_FILE: docs_with_reference(docs)}
    stale = [p for p, text in wanted.items() if not p.exists() or p.read_text("utf-8") != text]
    if args.write:
        for path in stale:
            path.write_text(wanted[path], encoding="utf-8")
            print(f"wrote {path}")
        return 0
    if args.check and stale:
        print("stale: " + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    if not args.check:
        sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``{name}-{version}-variants.json`` beside the wheels: PEP 825's index-level variant metadata.

A variant wheel's ``.dist-info/variant.json`` is read as variantlib 0.2.2 reads it
(``VariantDistInfo``: ``read_variant_metadata`` accepts what it accepts and refuses what it
refuses: every key and type, the names' patterns, one provider per namespace used, exactly one
variant, named by the file's label), and the metadata of a version's variant wheels are merged
into the text ``variantlib generate-index-json`` writes, byte for byte. Where variantlib's own
merge depends on the order the folder lists its files (wheels whose providers, namespace
priorities or properties for one label disagree: it logs an error and writes whichever came
first), nothing is written for that version, with one line naming what disagrees in which
wheels: a provider of another wheel never wins by its name.

Which wheels reach the merge (a valid variant wheel name; METADATA and ``.dist-info`` naming the
file's project and version) is ``index/wheels.py``'s, the check every wheel passes; the file is
written by ``index/write.py`` as its pages are. Plain pip skips variant wheels (their names have
one component too many for it), so ``pip_line`` says what pip can install from the folder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .wheel_variant import NAME, NULL_LABEL, SCHEMA, VALUE, VARIANT_JSON, Provider

SUFFIX = "-variants.json"
VARIANT_JSON_LIMIT = 1024 * 1024  # a variant.json is a few hundred bytes
_PLUGIN_API = re.compile(r"[\w.]+(?:\s*:\s*[\w.]+)?")  # variantlib's plugin-api pattern
_REQUIREMENT = re.compile(r"[\S ]+")
_PROVIDER_KEYS = {"requires", "build-requires", "feature-order", "static-properties", "optional",
                  "plugin-api", "builtin"}
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._]*-[A-Za-z0-9][A-Za-z0-9._+]*" + re.escape(SUFFIX))


class VariantError(ValueError):
    """A ``variant.json`` variantlib refuses; the message says which key and why."""


@dataclass(frozen=True)
class VariantMetadata:
    """One wheel's ``variant.json``, checked: its label, its properties (namespace, feature,
    value; sorted, as variantlib keeps them), namespace priorities and providers."""

    label: str
    properties: tuple[tuple[str, str, str], ...]
    namespaces: tuple[str, ...]
    providers: Mapping[str, Provider]

    def table(self) -> dict[str, dict[str, list[str]]]:
        table: dict[str, dict[str, list[str]]] = {}
        for namespace, feature, value in self.properties:
            table.setdefault(namespace, {}).setdefault(feature, []).append(value)
        return table


def file_name(namever: str) -> str:
    """``lightops-0.3.0-variants.json``: ``namever`` is the wheels' ``{name}-{version}`` as their
    file names spell it (variantlib's name for the file)."""
    return namever + SUFFIX


def is_file_name(relative: str) -> bool:
    """Whether ``index`` could have written a file of this name (its manifest's check)."""
    return _FILE_NAME.fullmatch(relative) is not None


def _strings(value: Any, pattern: re.Pattern[str], key: str, nonempty: bool = True) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise VariantError(f"{key}: not a list of strings")
    for item in value:
        if not pattern.fullmatch(item):
            raise VariantError(f"{key}: {item!r} does not match {pattern.pattern}")
    if nonempty and not value:
        raise VariantError(f"{key}: an empty list")
    return value


def _table(value: Any, key: str, allowed: set[str] | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise VariantError(f"{key}: not a JSON object")
    if allowed is not None and set(value) - allowed:
        raise VariantError(f"{key}: unexpected keys {sorted(set(value) - allowed)}")
    return value


def _provider(value: Any, key: str) -> Provider:
    table = _table(value, key, _PROVIDER_KEYS)
    given = {k: v for k, v in table.items() if v is not None}  # null: absent, as variantlib reads it
    if "build-requires" in given:
        raise VariantError(f"{key}: build-requires has no place in a wheel's {VARIANT_JSON}")
    requires = _strings(given["requires"], _REQUIREMENT, f"{key}.requires") if (
        "requires" in given) else []
    order = _strings(given["feature-order"], NAME, f"{key}.feature-order") if (
        "feature-order" in given) else None
    static: dict[str, list[str]] = {}
    if "static-properties" in given:
        features = _table(given["static-properties"], f"{key}.static-properties")
        _strings(list(features), NAME, f"{key}.static-properties")
        for feature, values in features.items():
            static[feature] = _strings(values, VALUE, f"{key}.static-properties.{feature}")
    optional = table.get("optional", False)
    plugin_api = table.get("plugin-api")
    builtin = table.get("builtin")
    if type(optional) is not bool:
        raise VariantError(f"{key}.optional: not true or false")
    if plugin_api is not None and not (isinstance(plugin_api, str)
                                       and _PLUGIN_API.fullmatch(plugin_api)):
        raise VariantError(f"{key}.plugin-api: {plugin_api!r} is not module:attribute")
    if builtin is not None and not isinstance(builtin, str):
        raise VariantError(f"{key}.builtin: not a string")
    if [bool(requires), bool(static), builtin is not None].count(True) != 1:
        raise VariantError(f"{key}: exactly one of requires, static-properties or builtin")
    if plugin_api is not None and not requires:
        raise VariantError(f"{key}: plugin-api without requires")
    if order is not None and "static-properties" not in given:
        raise VariantError(f"{key}: feature-order without static-properties")
    if (len(static) > 1 or order) and set(static) != set(order or ()):
        raise VariantError(f"{key}: feature-order must order every static property's feature")
    return Provider(requires=tuple(requires), plugin_api=plugin_api, builtin=builtin,
                    optional=optional, feature_order=tuple(order or ()),
                    static_properties=tuple(sorted((f, tuple(v)) for f, v in static.items())))


def read_variant_metadata(data: bytes, label: str) -> VariantMetadata:
    """A wheel's ``variant.json`` as variantlib 0.2.2's ``VariantDistInfo(data, label)`` reads
    it; VariantError, naming the key, where variantlib raises."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:  # bad UTF-8 and deep nesting too
        raise VariantError(f"not JSON ({str(error)[:200]})") from None
    document = _table(document, VARIANT_JSON)
    priorities = _table(document.get("default-priorities", {}), "default-priorities", {"namespace"})
    namespaces = _strings(priorities.get("namespace", []), NAME, "default-priorities.namespace")
    providers_table = _table(document.get("providers", {}), "providers")
    _strings(list(providers_table), NAME, "providers", nonempty=False)
    providers = {name: _provider(value, f"providers.{name}")
                 for name, value in providers_table.items()}
    if set(namespaces) != set(providers):
        raise VariantError(f"default-priorities.namespace {sorted(set(namespaces))} and providers"
                           f" {sorted(providers)} name other namespaces")
    variants = _table(document.get("variants", {}), "variants")
    if len(variants) != 1:
        raise VariantError(f"{len(variants)} variants, a wheel's {VARIANT_JSON} describes one")
    ((named, table),) = variants.items()
    if named != label:
        raise VariantError(f"describes label {named!r}, the file name's is {label!r}")
    found: set[tuple[str, str, str]] = set()
    for namespace, features in _table(table, f"variants.{named}").items():
        for feature, values in _table(features, f"variants.{named}.{namespace}").items():
            key = f"variants.{named}.{namespace}.{feature}"
            for value in _strings(values, VALUE, key, nonempty=False):
                for part, pattern in ((namespace, NAME), (feature, NAME)):
                    if not pattern.fullmatch(part):
                        raise VariantError(f"{key}: {part!r} does not match {pattern.pattern}")
                if (namespace, feature, value) in found:
                    raise VariantError(f"{key}: {value!r} twice")
                found.add((namespace, feature, value))
    if not found and label != NULL_LABEL:
        raise VariantError(f"a variant without properties is labelled {NULL_LABEL!r}, not {label!r}")
    if found and label == NULL_LABEL:
        raise VariantError(f"label {NULL_LABEL!r} is the variant without properties")
    missing = {namespace for namespace, _, _ in found} - set(namespaces)
    if missing:
        raise VariantError(f"no provider for namespace {', '.join(sorted(missing))}")
    return VariantMetadata(label, tuple(sorted(found)), tuple(namespaces), providers)


@dataclass(frozen=True)
class Merged:
    """One version's ``-variants.json``: its text, or (None) the lines saying what disagrees."""

    text: str | None
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def merge(namever: str, wheels: Sequence[tuple[str, VariantMetadata]]) -> Merged:
    """The ``-variants.json`` of one version's variant wheels (file name, metadata), as
    ``variantlib generate-index-json`` writes it from them; nothing where they disagree."""
    problems = []

    def disagree(what: str, sides: Mapping[Any, list[str]]) -> None:
        named = "; ".join(", ".join(names) for names in sides.values())
        problems.append(f"{file_name(namever)}: not written: the wheels disagree on {what}"
                        f" ({named})")

    by_label: dict[str, dict[tuple[tuple[str, str, str], ...], list[str]]] = {}
    for name, metadata in wheels:
        by_label.setdefault(metadata.label, {}).setdefault(metadata.properties, []).append(name)
    for label, sides in sorted(by_label.items()):
        if len(sides) > 1:
            disagree(f"the properties of label {label!r}", sides)
    longest = max((m.namespaces for _, m in wheels), key=len)
    orders: dict[tuple[str, ...], list[str]] = {}
    for name, metadata in wheels:
        orders.setdefault(metadata.namespaces, []).append(name)
    if any(order != longest[:len(order)] for order in orders):
        disagree("the namespace priorities", orders)
    providers: dict[str, dict[Provider, list[str]]] = {}
    for name, metadata in wheels:
        for namespace, provider in metadata.providers.items():
            providers.setdefault(namespace, {}).setdefault(provider, []).append(name)
    for namespace, sides in sorted(providers.items()):
        if len(sides) > 1:
            disagree(f"the provider of namespace {namespace!r}", sides)
    if problems:
        return Merged(None, tuple(problems))
    labels: dict[tuple[tuple[str, str, str], ...], list[str]] = {}
    for label, sides in sorted(by_label.items()):
        labels.setdefault(next(iter(sides)), []).append(label)
    notes = tuple(f"{file_name(namever)}: labels {', '.join(same)} name the same properties: an"
                  " installer cannot choose between them" for same in labels.values()
                  if len(same) > 1)  # variantlib logs it as an error and writes the file
    text = json.dumps({
        "$schema": SCHEMA,
        "default-priorities": {"namespace": list(longest)},
        "providers": {namespace: next(iter(sides)).to_json()
                      for namespace, sides in providers.items()},
        "variants": {m.label: m.table() for _, m in wheels},
    }, indent=4, sort_keys=True)
    return Merged(text, notes=notes)


def pip_line(json_name: str, project: str, version: str, plain: Sequence[str]) -> str:
    """What plain pip can install of this version from the folder (it skips variant wheels)."""
    if plain:
        return (f"{json_name}: pip skips variant wheels; for {project} {version} it installs a"
                f" plain one: {', '.join(plain)}")
    return (f"{json_name}: pip skips variant wheels and finds no plain wheel of {project}"
            f" {version} here: add one (a build with -Cvariant=none), or serve local-label wheels"
            " (-Cvariant=none -Clocal-version=torch) on the torch pages")

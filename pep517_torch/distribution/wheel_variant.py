"""A wheel variant (PEP 825): its label and ``.dist-info/variant.json``, as variantlib 0.2 reads them.

A variant wheel's file name ends in a label (``{name}-{ver}-{py}-{abi}-{plat}-{label}.whl``,
label ``[0-9a-z_.]+``), and ``variant.json`` maps that label to its properties
(``namespace :: feature :: value``). The wheel writer writes both from one :class:`Variant`;
what the properties are is the backend's (it knows the build), never this layer's.

Where the drafts and variantlib 0.2.2 disagree, variantlib wins (docs/publishing.md says so):

- ``$schema`` is variantlib's URL (``…/v0.2.0.json``), not PEP 825's (``…/peps/825/…``);
- ``providers`` is written (PEP 825 alone has no such key; variantlib and uv require a provider
  for every namespace a property uses);
- ``abi_dependency`` is listed in ``default-priorities.namespace`` and ``providers`` (the
  providers draft says it MUST NOT be; variantlib and uv 0.13 refuse the metadata without it),
  as a ``builtin`` provider: the draft's special, installer-implemented one.

Every wheel lists the same namespaces and providers (``nvidia`` too in a CPU build), so that
the variant metadata of all wheels of one version merge into one ``-variants.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

SCHEMA = "https://variants-schema.wheelnext.dev/v0.2.0.json"  # variantlib 0.2's own
VARIANT_JSON = "variant.json"
NULL_LABEL = "null"
LABEL = re.compile(r"[0-9a-z_.]+")
NAME = re.compile(r"[a-z0-9_]+")  # a namespace or feature name
VALUE = re.compile(r"[a-z0-9_.]+")


@dataclass(frozen=True)
class Provider:
    """How an installer learns which values of a namespace this machine supports: variantlib
    0.2's ``ProviderInfo`` (equal when every field is), written as it writes one."""

    requires: tuple[str, ...] = ()  # the plugin's requirements
    plugin_api: str | None = None
    builtin: str | None = None  # a provider built into installers
    optional: bool = False
    static_properties: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (feature, values), by feature
    feature_order: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        found: dict[str, object] = {}
        if self.requires:
            found["requires"] = list(self.requires)
        if self.optional:
            found["optional"] = True
        if self.plugin_api is not None:
            found["plugin-api"] = self.plugin_api
        if self.static_properties:
            found["static-properties"] = {f: list(v) for f, v in self.static_properties}
        if self.feature_order:
            found["feature-order"] = list(self.feature_order)
        if self.builtin:
            found["builtin"] = self.builtin
        return found


ABI_DEPENDENCY = "abi_dependency"
NVIDIA = "nvidia"
# The namespaces a pep517_torch wheel may use, most important first: the torch it is built
# against, then the GPU. uv 0.13's vendored NVIDIA provider answers to this plugin.
PROVIDERS: Mapping[str, Provider] = {
    ABI_DEPENDENCY: Provider(builtin=ABI_DEPENDENCY),
    NVIDIA: Provider(requires=("nvidia-variant-provider>=0.0.1,<1.0.0",),
                     plugin_api="nvidia_variant_provider.plugin:NvidiaVariantPlugin"),
}


@dataclass(frozen=True)
class Property:
    """``namespace :: feature :: value`` for each of ``values`` (any one may match)."""

    namespace: str
    feature: str
    values: tuple[str, ...]

    def lines(self) -> list[str]:
        return [f"{self.namespace} :: {self.feature} :: {value}" for value in self.values]


@dataclass(frozen=True)
class Variant:
    label: str
    properties: tuple[Property, ...]
    providers: Mapping[str, Provider] = field(default_factory=lambda: dict(PROVIDERS))

    def __post_init__(self) -> None:
        problem = label_problem(self.label)
        if problem is None and self.label == NULL_LABEL and self.properties:
            problem = f"{NULL_LABEL!r} is the label of the variant without properties"
        for prop in self.properties:
            for name in (prop.namespace, prop.feature):
                if not NAME.fullmatch(name):
                    problem = problem or f"{name!r} is not a variant namespace or feature name"
            for value in prop.values or ("",):
                if not VALUE.fullmatch(value):
                    problem = problem or f"{value!r} is not a variant property value"
            if prop.namespace not in self.providers:
                problem = problem or f"no provider for namespace {prop.namespace!r}"
        if problem:
            raise ValueError(problem)  # a bug of the caller: the backend builds valid ones

    def to_json(self) -> dict[str, object]:
        table: dict[str, dict[str, list[str]]] = {}
        for prop in self.properties:
            table.setdefault(prop.namespace, {})[prop.feature] = list(prop.values)
        return {
            "$schema": SCHEMA,
            "default-priorities": {"namespace": list(self.providers)},
            "providers": {name: provider.to_json() for name, provider in self.providers.items()},
            "variants": {self.label: table},
        }

    def variant_json(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n").encode()

    def lines(self) -> list[str]:
        """``abi_dependency :: torch :: 2.14``, ... one per value."""
        return [line for prop in self.properties for line in prop.lines()]


def variant_wheel_name(filename: str) -> tuple[str, str] | None:
    """A PEP 825 variant wheel's file name (``{name}-{ver}(-{build})?-{py}-{abi}-{plat}-{label}.whl``)
    as (the plain wheel name it extends, its label); None for a plain wheel's name or what is no
    wheel's. A sixth component that starts with a digit is a build tag, as variantlib reads it."""
    try:
        parse_wheel_filename(filename)
        return None
    except InvalidWheelFilename:
        pass
    stem, _, label = filename.removesuffix(".whl").rpartition("-")
    if not filename.endswith(".whl") or not stem or not LABEL.fullmatch(label):
        return None
    try:
        parse_wheel_filename(stem + ".whl")
    except InvalidWheelFilename:
        return None
    return stem + ".whl", label


def label_problem(label: str) -> str | None:
    if not LABEL.fullmatch(label):
        return f"{label!r} is not a variant label (only 0-9, a-z, '_' and '.')"
    return None


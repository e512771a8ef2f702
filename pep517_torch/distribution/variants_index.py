"""``{name}-{version}-variants.json`` beside the wheels: PEP 825's index-level variant metadata.

For every project version with variant wheels in a folder, the variant metadata of those
wheels (their ``.dist-info/variant.json``) merged into one file, in variantlib 0.2's format
(what ``variantlib generate-index-json`` writes, key for key): uv reads it from a
``--find-links`` folder to choose among the variants. A wheel is left out, with one line, when
its name is not a wheel's, its ``variant.json`` is missing, unreadable or names another label,
or it disagrees with the others of its version (a label naming other properties, other
providers, namespace priorities that do not merge). A file is written only inside the folder,
never through a symlink.

Plain pip skips variant wheels (their names have one component too many for it), so the
result also says what pip can install from the folder: its plain wheels, per version.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..atomic import writing
from ..shipped_runtime.files import write_atomic
from .wheel_variant import LABEL, VARIANT_JSON

SUFFIX = "-variants.json"


@dataclass
class VariantsIndex:
    """What :func:`write_variants_json` did: the files it wrote, the variant wheels each
    covers, the wheels it left out (one line each), and the plain wheels per version."""

    written: dict[Path, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    plain: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def pip_lines(self) -> list[str]:
        """What plain pip can install from the folder, for each version with variant wheels."""
        lines = []
        for path in self.written:
            name, version = _namever(path)
            plain = self.plain.get((name, version), [])
            if plain:
                lines.append(f"{path.name}: pip skips variant wheels; for {name} {version} it"
                             f" installs a plain one: {', '.join(plain)}")
            else:
                lines.append(
                    f"{path.name}: pip skips variant wheels and finds no plain wheel of {name}"
                    f" {version} here: add one (a build with -Cvariant=none), or serve"
                    " local-label wheels (-Cvariant=none -Clocal-version=torch) on the torch pages"
                )
        return lines


def _namever(path: Path) -> tuple[str, str]:
    name, _, version = path.name.removesuffix(SUFFIX).partition("-")
    return name, version


def split_name(filename: str) -> tuple[str, str, str | None] | None:
    """(normalized name, version, variant label or None) of a wheel's file name, as wheel
    file names normalize them; None: not a wheel's name."""
    try:
        name, version, _, _ = parse_wheel_filename(filename)
        return canonicalize_name(name).replace("-", "_"), str(version), None
    except InvalidWheelFilename:
        pass
    stem, _, label = filename.removesuffix(".whl").rpartition("-")
    if not stem or not LABEL.fullmatch(label):
        return None
    try:
        name, version, _, _ = parse_wheel_filename(stem + ".whl")
    except InvalidWheelFilename:
        return None
    return canonicalize_name(name).replace("-", "_"), str(version), label


def read_variant_json(path: Path) -> dict[str, Any]:
    """A wheel's ``*.dist-info/variant.json``; ValueError saying what is wrong."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist()
                     if re.fullmatch(r"[^/]+\.dist-info/" + re.escape(VARIANT_JSON), n)]
            if len(names) != 1:
                raise ValueError(f"{len(names)} {VARIANT_JSON} files, not one")
            document = json.loads(archive.read(names[0]))
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError) as error:
        raise ValueError(f"not a readable wheel ({error})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{VARIANT_JSON} is not JSON ({error})") from None
    if not isinstance(document, dict):
        raise ValueError(f"{VARIANT_JSON} is not a JSON object")
    return document


class _Merged:
    """One version's index-level metadata, wheel by wheel."""

    def __init__(self) -> None:
        self.schema: str | None = None
        self.namespaces: list[str] = []
        self.providers: dict[str, Any] = {}
        self.variants: dict[str, Any] = {}
        self.wheels: list[str] = []

    def add(self, label: str, document: Mapping[str, Any]) -> None:
        """Merge one wheel's metadata; ValueError (nothing merged) when it conflicts."""
        variants = document.get("variants")
        if not isinstance(variants, dict) or list(variants) != [label]:
            raise ValueError(f"its {VARIANT_JSON} does not describe exactly its label {label!r}")
        schema = document.get("$schema")
        priorities = document.get("default-priorities")
        namespaces = priorities.get("namespace") if isinstance(priorities, dict) else None
        providers = document.get("providers", {})
        if not isinstance(schema, str) or not isinstance(namespaces, list) or not isinstance(
                providers, dict):
            raise ValueError(f"its {VARIANT_JSON} lacks $schema, default-priorities or providers")
        if self.schema is not None and schema != self.schema:
            raise ValueError(f"its schema {schema} is not {self.schema}")
        if label in self.variants and self.variants[label] != variants[label]:
            raise ValueError(f"label {label!r} names other properties in another wheel")
        shorter, longer = sorted((self.namespaces, namespaces), key=len)
        if longer[:len(shorter)] != shorter:
            raise ValueError(f"namespace priorities {namespaces} do not merge with {self.namespaces}")
        for name, provider in providers.items():
            if self.providers.get(name, provider) != provider:
                raise ValueError(f"provider {name!r} differs from another wheel's")
        self.schema, self.namespaces = schema, list(longer)
        self.providers.update(providers)
        self.variants[label] = variants[label]

    def text(self) -> str:
        """As ``variantlib generate-index-json`` writes it."""
        return json.dumps({
            "$schema": self.schema,
            "default-priorities": {"namespace": self.namespaces},
            "providers": self.providers,
            "variants": self.variants,
        }, indent=4, sort_keys=True)


def write_variants_json(directory: Path) -> VariantsIndex:
    """Write ``{name}-{version}-variants.json`` for every version with variant wheels in
    ``directory``."""
    found = VariantsIndex()
    merged: dict[tuple[str, str], _Merged] = {}
    for path in sorted(directory.glob("*.whl")):
        if path.is_symlink() or not path.is_file():
            continue
        parts = split_name(path.name)
        if parts is None:
            found.skipped.append(f"{path.name}: not a wheel file name; left out of {SUFFIX} files")
            continue
        name, version, label = parts
        if label is None:
            found.plain.setdefault((name, version), []).append(path.name)
            continue
        entry = merged.setdefault((name, version), _Merged())
        try:
            entry.add(label, read_variant_json(path))
        except ValueError as error:
            found.skipped.append(f"{path.name}: {error}; left out of {name}-{version}{SUFFIX}")
            continue
        entry.wheels.append(path.name)
    for (name, version), entry in sorted(merged.items()):
        if not entry.wheels:
            continue
        target = directory / f"{name}-{version}{SUFFIX}"
        if target.is_symlink() or (target.exists() and not target.is_file()):
            found.skipped.append(f"{target.name}: a symlink or not a file; not written")
            continue
        with writing(target):
            write_atomic(target, entry.text())
        found.written[target] = entry.wheels
    return found

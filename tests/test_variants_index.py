"""`index`'s `<name>-<version>-variants.json` against the real variantlib 0.2 (issue 43 items 4
and 9), compiling nothing: variant wheels written by hand, as a careless or hostile publisher
would. A `variant.json` is read as variantlib's `VariantDistInfo` reads it (the same documents
accepted and refused: a corpus and hypothesis's), the merged file is `variantlib
generate-index-json`'s byte for byte, a wheel variantlib refuses is skipped in one line (never
as "not a valid wheel file name": variant wheel names are recognised), wheels whose providers
disagree write nothing (never the first by name, never a hostile `plugin-api`), and a wheel
whose METADATA names another project is refused by the check every wheel passes."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from variantlib.variant_dist_info import VariantDistInfo

from pep517_torch.distribution.index import MANIFEST
from pep517_torch.distribution.variants_index import VariantError, merge, read_variant_metadata
from pep517_torch.distribution.wheel_variant import PROVIDERS, Property, Variant, variant_wheel_name
from tests.commands import run, run_cli

VARIANTLIB = Path(sys.executable).parent / "variantlib"
TAG = "cp311-cp311-manylinux_2_34_x86_64"
SCHEMA = "https://variants-schema.wheelnext.dev/v0.2.0.json"
NVIDIA = {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
          "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin"}


def ours(label: str, torch: str, nvidia: dict[str, Any] | None = None,
         namespaces: tuple[str, ...] = ("abi_dependency", "nvidia")) -> dict[str, Any]:
    """A variant.json as pep517_torch writes it (``nvidia``: another provider in its place)."""
    document = json.loads(Variant(label, (Property("abi_dependency", "torch", (torch,)),)
                                  ).variant_json())
    document["default-priorities"]["namespace"] = list(namespaces)
    if nvidia is not None:
        document["providers"]["nvidia"] = nvidia
    return document


def variant_wheel(folder: Path, filename: str, document: object, *, name: str | None = None,
                  version: str | None = None) -> Path:
    """A variant wheel: one dist-info, METADATA naming ``name`` ``version`` (the file name's
    unless given), ``variant.json`` holding ``document`` (bytes as they are; None: none)."""
    folder.mkdir(parents=True, exist_ok=True)
    file_name, file_version = filename.split("-")[:2]
    name, version = name or file_name, version or file_version
    with zipfile.ZipFile(folder / filename, "w") as archive:
        dist_info = f"{name}-{version}.dist-info"
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{dist_info}/METADATA",
                         f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        if document is not None:
            archive.writestr(f"{dist_info}/variant.json", document if isinstance(document, bytes)
                             else json.dumps(document, indent=2))
    return folder / filename


def variantlib_index(folder: Path, tmp_path: Path, *names: str) -> tuple[dict[str, str], str]:
    """``variantlib generate-index-json`` over a copy of ``names`` (default: every wheel):
    the files it writes, by name, and what it logged."""
    theirs = tmp_path / "variantlib"
    shutil.rmtree(theirs, ignore_errors=True)
    theirs.mkdir()
    for wheel in names or [p.name for p in folder.glob("*.whl")]:
        shutil.copy2(folder / wheel, theirs)
    done = run(VARIANTLIB, "generate-index-json", "-d", theirs)
    return ({p.name: p.read_text() for p in theirs.glob("*-variants.json")},
            done.stdout + done.stderr)


def written(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.glob("*-variants.json") if not p.is_symlink()}


# -- one variant.json: what variantlib accepts, and how it writes it -----------------------


def variantlib_reads(data: bytes, label: str) -> str | None:
    """The document as variantlib writes it in a -variants.json; None: variantlib refuses it."""
    try:
        return VariantDistInfo(data, label).to_str()
    except Exception:  # ValidationError, and what its reading raises before validating
        return None


def ours_reads(data: bytes, label: str) -> str | None:
    try:
        metadata = read_variant_metadata(data, label)
    except VariantError:
        return None
    return merge("x-1", [("x.whl", metadata)]).text


def _provider(**fields: Any) -> dict[str, Any]:
    return fields


CORPUS: list[tuple[str, object]] = [
    ("pt213cpu", ours("pt213cpu", "2.13")),
    ("pt213cpu", ours("pt214cpu", "2.13")),  # another label
    ("pt213cpu", {**ours("pt213cpu", "2.13"), "$schema": "https://elsewhere/x.json", "extra": 1}),
    ("pt213cpu", {**ours("pt213cpu", "2.13"), "providers": {  # a namespace with no provider
        "nvidia": NVIDIA}, "default-priorities": {"namespace": ["nvidia"]}}),
    ("pt213cpu", ours("pt213cpu", "2.13", namespaces=("abi_dependency",))),  # providers unlisted
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(requires=["x"], **{"plugin-api": "os:system"}))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(requires=["x"], **{"plugin-api": "os system"}))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(**{"plugin-api": "os:system"}))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(requires=None, builtin="nvidia"))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(builtin="x", optional=True))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(builtin="x", optional=1))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(builtin=""))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(**{"static-properties": {"b": ["1"], "a": ["2", "1"]}, "feature-order": ["b", "a"]}))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(**{"static-properties": {"b": ["1"], "a": ["2"]}}))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(**{"static-properties": {}}))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(**{"build-requires": ["x"]}))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(**{"build-requires": None}, builtin="x"))),
    ("pt213cpu", ours("pt213cpu", "2.13", nvidia=_provider(builtin="x", unknown=1))),
    ("pt213cpu", {**ours("pt213cpu", "2.13"), "variants": {"pt213cpu": {
        "abi_dependency": {"torch": ["2.13", "2.12", "2.13"]}}}}),  # a value twice
    ("pt213cpu", {**ours("pt213cpu", "2.13"), "variants": {"pt213cpu": {
        "abi_dependency": {"torch": ["2.13", "2.12"], "Bad": []}, "BAD": {}}}}),
    ("pt213cpu", {**ours("pt213cpu", "2.13"), "variants": {"pt213cpu": {}}}),  # no properties
    ("null", {**ours("pt213cpu", "2.13"), "variants": {"null": {}}}),
    ("null", {**ours("pt213cpu", "2.13"), "variants": {"null": {"abi_dependency": {"torch": ["1"]}}}}),
    ("pt213cpu", {**ours("pt213cpu", "2.13"), "variants": {"pt213cpu": {"x": {"torch": ["2.13"]}}}}),
    ("pt213cpu", {**ours("pt213cpu", "2.13"), "default-priorities": {"namespace": [], "x": 1}}),
    ("pt213cpu", {**ours("pt213cpu", "2.13"), "default-priorities": None}),
    ("pt213cpu", [ours("pt213cpu", "2.13")]),
    ("pt213cpu", b"\xff\xfe{"), ("pt213cpu", b"[" * 100_000), ("pt213cpu", b"{}"),
]


@pytest.mark.parametrize(("label", "document"), CORPUS)
def test_a_variant_json_is_read_as_variantlib_reads_it(label: str, document: object) -> None:
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    assert ours_reads(data, label) == variantlib_reads(data, label)


_NAMESPACES = st.sampled_from(["abi_dependency", "nvidia", "cpu", "x_1"])
_FEATURES = st.sampled_from(["torch", "sm_arch", "level", "f2"])
_VALUES = st.sampled_from(["2.13", "13.0", "90_real", "1", "2", "a.b"])
_BAD = st.sampled_from([None, 0, 1, True, False, "", "A", "a b", "é", [], {}, [""], ["A"], {"A": []}])


@st.composite
def _provider_table(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly a provider variantlib accepts: a plugin's requirements (with or without
    plugin-api), a builtin, or static properties (with their order)."""
    kind = draw(st.sampled_from(["requires", "builtin", "static"]))
    if kind == "requires":
        provider: dict[str, Any] = {"requires": draw(st.lists(st.sampled_from(
            ["x", "x>=1,<2", "nvidia-variant-provider>=0.0.1"]), min_size=1, max_size=2))}
        if draw(st.booleans()):
            provider["plugin-api"] = draw(st.sampled_from(
                ["m:a", "os:system", "m", "m . n : a.b", "pkg.mod:Cls"]))
    elif kind == "builtin":
        provider = {"builtin": draw(st.sampled_from(["abi_dependency", "x", ""]))}
    else:
        features = draw(st.lists(_FEATURES, min_size=1, max_size=2, unique=True))
        provider = {"static-properties": {f: draw(st.lists(_VALUES, min_size=1, max_size=2,
                                                           unique=True)) for f in features}}
        if len(features) > 1 or draw(st.booleans()):
            provider["feature-order"] = draw(st.permutations(features))
    if draw(st.integers(0, 3)) == 0:
        provider["optional"] = draw(st.booleans())
    return provider


@st.composite
def _documents(draw: st.DrawFn) -> tuple[str, bytes]:
    """A document variantlib accepts, then, half the time, one to three changes to it (a key
    gone, a value of another type or pattern, a key variantlib does not know, another label)."""
    namespaces = draw(st.lists(_NAMESPACES, min_size=1, max_size=3, unique=True))
    properties: dict[str, dict[str, list[str]]] = {}
    for namespace in draw(st.lists(st.sampled_from(namespaces), max_size=2, unique=True)):
        properties[namespace] = {f: draw(st.lists(_VALUES, min_size=1, max_size=3, unique=True))
                                 for f in draw(st.lists(_FEATURES, min_size=1, max_size=2,
                                                        unique=True))}
    label = "null" if not properties else draw(st.sampled_from(["pt213cpu", "cu130"]))
    document: dict[str, Any] = {
        "$schema": SCHEMA, "default-priorities": {"namespace": namespaces},
        "providers": {n: draw(_provider_table()) for n in namespaces},
        "variants": {label: properties}}
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):
        at = draw(st.sampled_from(["top", "priorities", "provider", "variant", "label"]))
        if at == "top":
            document[draw(st.sampled_from(list(document) + ["x"]))] = draw(_BAD)
        elif at == "priorities":
            document["default-priorities"] = draw(st.sampled_from([
                {}, {"namespace": namespaces[:-1]}, {"namespace": [*namespaces, "zz"]},
                {"namespace": namespaces, "other": []}, {"namespace": namespaces * 2}]))
        elif at == "provider" and isinstance(document["providers"], dict) and document["providers"]:
            name = draw(st.sampled_from(sorted(document["providers"])))
            key = draw(st.sampled_from(["requires", "plugin-api", "builtin", "optional",
                                        "static-properties", "feature-order", "build-requires",
                                        "other"]))
            if isinstance(document["providers"][name], dict):
                document["providers"][name][key] = draw(st.one_of(_BAD, _VALUES))
        elif at == "variant" and properties:
            namespace = draw(st.sampled_from(sorted(properties)))
            feature = draw(st.sampled_from(sorted(properties[namespace])))
            values = properties[namespace][feature]
            properties[namespace][feature] = draw(st.one_of(
                _BAD, st.just(values * 2 if isinstance(values, list) else values),
                st.lists(_VALUES, max_size=2)))
            if draw(st.booleans()):
                properties[draw(st.sampled_from(["unlisted", "BAD", namespace]))] = {"f": ["1"]}
        else:
            label = draw(st.sampled_from(["null", "pt213cpu", "other"]))
    return label, json.dumps(document).encode()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents())
def test_variantlib_and_index_accept_and_write_the_same_documents(case: tuple[str, bytes]) -> None:
    label, data = case
    assert ours_reads(data, label) == variantlib_reads(data, label)


# -- the folder: index's -variants.json against generate-index-json's ----------------------


def test_index_writes_what_generate_index_json_writes(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    static = {"static-properties": {"level": ["2", "1"], "arch": ["x"]},
              "feature-order": ["level", "arch"]}
    for label, torch in (("pt213cpu", "2.13"), ("pt214cpu", "2.14"), ("pt212cpu", "2.12")):
        document = ours(label, torch)
        document["providers"]["cpu"] = static
        document["default-priorities"]["namespace"].append("cpu")
        document["variants"][label]["cpu"] = {"level": ["2", "1"]}
        variant_wheel(folder, f"demo-1.0-{TAG}-{label}.whl", document)
    variant_wheel(folder, f"demo-1.0-{TAG}-pt211cpu.whl",  # a prefix of the others' priorities
                  ours("pt211cpu", "2.11", namespaces=("abi_dependency", "nvidia")))
    status = run_cli("index", folder)
    assert status.returncode == 0, status.stderr
    theirs, _ = variantlib_index(folder, tmp_path)
    assert written(folder) == theirs and list(theirs) == ["demo-1.0-variants.json"]
    assert set(json.loads(theirs["demo-1.0-variants.json"])["variants"]) == {
        "pt211cpu", "pt212cpu", "pt213cpu", "pt214cpu"}
    assert status.stderr == ""  # every variant wheel is a wheel: no "not a valid wheel file name"
    assert status.stdout.splitlines()[0] == (
        f"pep517_torch: wrote {folder}/demo-1.0-variants.json: 4 variant wheels")


def test_a_namespace_without_a_provider_is_refused_as_variantlib_refuses_it(tmp_path: Path) -> None:
    """Issue 43 item 4: such a wheel was merged, though analyze-wheel refuses it and
    generate-index-json leaves it out."""
    folder = tmp_path / "w"
    good = variant_wheel(folder, f"lightops-0.3.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"))
    document = ours("pt214cpu", "2.14")
    document["variants"]["pt214cpu"]["nvidia"] = {"sm_arch": ["90_real"]}
    document["variants"]["pt214cpu"]["rocm"] = {"gfx": ["942"]}  # no provider for "rocm"
    bad = variant_wheel(folder, f"lightops-0.3.0-{TAG}-pt214cpu.whl", document)
    assert run(VARIANTLIB, "analyze-wheel", "-i", good).returncode == 0
    refused = run(VARIANTLIB, "analyze-wheel", "-i", bad, check=False)
    assert refused.returncode != 0 and "missing: {'rocm'}" in refused.stderr
    done = run_cli("index", folder)
    assert done.returncode == 0
    assert done.stderr == (f"pep517_torch: skipped {bad}: lightops-0.3.0.dist-info/variant.json:"
                           " no provider for namespace rocm\n")
    theirs, said = variantlib_index(folder, tmp_path)
    assert "must list providers for all variants" in said
    assert written(folder) == theirs
    assert list(json.loads(theirs["lightops-0.3.0-variants.json"])["variants"]) == ["pt213cpu"]


@pytest.mark.parametrize("order", ["hostile-first", "hostile-last"])
def test_providers_that_disagree_write_nothing_whichever_comes_first(
        tmp_path: Path, order: str) -> None:
    """Issue 43 item 4: the first wheel by name set the providers, a hostile one too."""
    folder = tmp_path / "w"
    hostile = {"requires": ["evil"], "plugin-api": "os:system"}
    first, last = ("pt212cpu", "pt213cpu")
    variant_wheel(folder, f"lightops-0.3.0-{TAG}-{first}.whl",
                  ours(first, "2.12", nvidia=hostile if order == "hostile-first" else None))
    variant_wheel(folder, f"lightops-0.3.0-{TAG}-{last}.whl",
                  ours(last, "2.13", nvidia=hostile if order == "hostile-last" else None))
    variant_wheel(folder, f"lightops-0.4.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"))
    done = run_cli("index", folder)
    assert done.returncode == 0
    assert done.stderr == (
        "pep517_torch: lightops-0.3.0-variants.json: not written: the wheels disagree on the"
        f" provider of namespace 'nvidia' (lightops-0.3.0-{TAG}-{first}.whl;"
        f" lightops-0.3.0-{TAG}-{last}.whl)\n")
    assert list(written(folder)) == ["lightops-0.4.0-variants.json"]  # the other version: as ever
    assert "os:system" not in "".join(p.read_text() for p in folder.iterdir() if p.is_file()
                                      and not p.name.endswith(".whl"))
    _, said = variantlib_index(folder, tmp_path)  # variantlib calls it an error too
    assert "Inconsistency in providers.nvidia" in said


def test_a_stale_variants_json_of_ours_goes_when_its_wheels_disagree(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    variant_wheel(folder, f"lightops-0.3.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"))
    assert run_cli("index", folder).returncode == 0 and written(folder)
    variant_wheel(folder, f"lightops-0.3.0-{TAG}-pt214cpu.whl",
                  ours("pt214cpu", "2.14", nvidia={"requires": ["evil"], "plugin-api": "os:system"}))
    done = run_cli("index", folder)
    assert written(folder) == {}
    assert f"pep517_torch: removed {folder}/lightops-0.3.0-variants.json" in done.stdout
    # one of the user's own (generate-index-json's) is theirs: never replaced nor removed
    (folder / f"lightops-0.3.0-{TAG}-pt214cpu.whl").unlink()
    (folder / "lightops-0.3.0-variants.json").write_text("{}")
    done = run_cli("index", folder)
    assert (folder / "lightops-0.3.0-variants.json").read_text() == "{}"
    assert "lightops-0.3.0-variants.json: not written by index" in done.stderr


def test_a_variant_wheel_naming_another_project_is_refused_by_the_check_every_wheel_passes(
        tmp_path: Path) -> None:
    """Issue 43 item 4: evil-0.3.0-…-pt213cpu.whl holding lightops wrote evil-0.3.0-variants.json."""
    folder = tmp_path / "w"
    evil = variant_wheel(folder, f"evil-0.3.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"),
                         name="lightops")
    older = variant_wheel(folder, f"lightops-0.3.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"),
                          version="0.2.0")
    plain_liar = folder / f"evil-0.3.0-{TAG}.whl"  # the plain wheel's path: the same words
    shutil.copy(evil, plain_liar)
    done = run_cli("index", folder)
    assert sorted(done.stderr.splitlines()) == sorted([
        f"pep517_torch: skipped {evil}: lightops-0.3.0.dist-info names 'lightops' '0.3.0', the"
        " file name evil 0.3.0",
        f"pep517_torch: skipped {plain_liar}: lightops-0.3.0.dist-info names 'lightops' '0.3.0',"
        " the file name evil 0.3.0",
        f"pep517_torch: skipped {older}: lightops-0.2.0.dist-info names 'lightops' '0.2.0', the"
        " file name lightops 0.3.0"])
    assert written(folder) == {} and done.returncode == 0


def test_only_files_really_skipped_are_said_to_be(tmp_path: Path) -> None:
    """Issue 43 item 9: every variant wheel was 'skipped …: not a valid wheel file name' while
    it went into the -variants.json."""
    folder = tmp_path / "w"
    variant_wheel(folder, f"lightops-0.3.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"))
    variant_wheel(folder, f"lightops-0.3.0-1-{TAG}-pt214cpu.whl", ours("pt214cpu", "2.14"))
    variant_wheel(folder, f"lightops-0.3.0-{TAG}-PT215.whl", ours("pt215", "2.15"))  # no label
    variant_wheel(folder, f"lightops-0.3.0-{TAG}-pt216cpu.whl", None)
    done = run_cli("index", folder)
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and done.returncode == 0
    assert lines[0].startswith(f"pep517_torch: skipped {folder}/lightops-0.3.0-{TAG}-PT215.whl:"
                               " not a valid wheel file name (")
    assert lines[1] == (f"pep517_torch: skipped {folder}/lightops-0.3.0-{TAG}-pt216cpu.whl: a"
                        " variant wheel (label 'pt216cpu') without"
                        " lightops-0.3.0.dist-info/variant.json")
    assert done.stdout.splitlines() == [
        f"pep517_torch: wrote {folder}/lightops-0.3.0-variants.json: 2 variant wheels",
        "pep517_torch: lightops-0.3.0-variants.json: pip skips variant wheels and finds no plain"
        " wheel of lightops 0.3.0 here: add one (a build with -Cvariant=none), or serve"
        " local-label wheels (-Cvariant=none -Clocal-version=torch) on the torch pages"]
    assert not (folder / "index.html").exists()  # no torch page: no overview of nothing
    assert json.loads((folder / MANIFEST).read_text())["files"].keys() == {
        "lightops-0.3.0-variants.json"}
    theirs, _ = variantlib_index(folder, tmp_path, f"lightops-0.3.0-{TAG}-pt213cpu.whl",
                                 f"lightops-0.3.0-1-{TAG}-pt214cpu.whl")
    assert written(folder) == theirs


def test_what_disagrees_is_said_and_nothing_is_written_through_a_symlink(tmp_path: Path) -> None:
    """A label naming other properties in two wheels, or namespace priorities that do not merge,
    leave that version without a file; a wheel describing another label, or none, is skipped;
    a -variants.json that is a symlink is never written through."""
    folder = tmp_path / "w"
    variant_wheel(folder, f"demo-1.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"))
    variant_wheel(folder, "demo-1.0-cp312-cp312-linux_x86_64-pt213cpu.whl", ours("pt213cpu", "2.12"))
    variant_wheel(folder, f"demo-2.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"))
    variant_wheel(folder, f"demo-2.0-{TAG}-pt219cpu.whl",
                  ours("pt219cpu", "2.19", namespaces=("nvidia", "abi_dependency")))
    other = variant_wheel(folder, f"demo-3.0-{TAG}-pt214cpu.whl", ours("pt213cpu", "2.14"))
    variant_wheel(folder, f"demo-4.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"))
    (folder / "demo-4.0-variants.json").symlink_to(tmp_path / "elsewhere.json")
    done = run_cli("index", folder)
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"pep517_torch: skipped {other}: demo-3.0.dist-info/variant.json: describes label"
        " 'pt213cpu', the file name's is 'pt214cpu'",
        f"pep517_torch: {folder}/demo-4.0-variants.json: a symlink (never written through): left"
        " as it is",
        "pep517_torch: demo-1.0-variants.json: not written: the wheels disagree on the properties"
        f" of label 'pt213cpu' (demo-1.0-{TAG}-pt213cpu.whl;"
        " demo-1.0-cp312-cp312-linux_x86_64-pt213cpu.whl)",
        "pep517_torch: demo-2.0-variants.json: not written: the wheels disagree on the namespace"
        f" priorities (demo-2.0-{TAG}-pt213cpu.whl; demo-2.0-{TAG}-pt219cpu.whl)"]
    assert written(folder) == {} and not (tmp_path / "elsewhere.json").exists()
    _, said = variantlib_index(folder, tmp_path)  # variantlib: errors, for the same wheels
    assert "Inconsistency in variants.pt213cpu" in said
    assert "Inconsistency in default-priorities.namespace" in said


def test_two_labels_naming_the_same_properties_are_said_and_written_as_variantlib_does(
        tmp_path: Path) -> None:
    folder = tmp_path / "w"
    variant_wheel(folder, f"demo-1.0-{TAG}-pt213cpu.whl", ours("pt213cpu", "2.13"))
    document = ours("pt213cpu", "2.13")
    document["variants"] = {"again": document["variants"]["pt213cpu"]}
    variant_wheel(folder, f"demo-1.0-{TAG}-again.whl", document)
    done = run_cli("index", folder)
    assert done.stderr == ("pep517_torch: demo-1.0-variants.json: labels again, pt213cpu name the"
                           " same properties: an installer cannot choose between them\n")
    theirs, said = variantlib_index(folder, tmp_path)
    assert "share the same variant properties" in said and written(folder) == theirs


def test_variant_wheel_names() -> None:
    assert variant_wheel_name("demo-1.0-cp311-cp311-linux_x86_64.whl") is None
    assert variant_wheel_name("demo-1.0-1-cp311-cp311-linux_x86_64.whl") is None  # a build tag
    assert variant_wheel_name("Demo.X-1.0-cp311-cp311-linux_x86_64-pt213cpu.whl") == (
        "Demo.X-1.0-cp311-cp311-linux_x86_64.whl", "pt213cpu")
    assert variant_wheel_name("demo-1.0-1-cp311-cp311-linux_x86_64-cu130.whl") == (
        "demo-1.0-1-cp311-cp311-linux_x86_64.whl", "cu130")
    assert variant_wheel_name("demo-1.0-py3-none-any-2.whl") == ("demo-1.0-py3-none-any.whl", "2")
    assert variant_wheel_name("demo-1.0-cp311-cp311-linux_x86_64-CPU.whl") is None
    assert variant_wheel_name("demo-1.0.whl") is None
    assert set(PROVIDERS) == {"abi_dependency", "nvidia"}

"""The shipped JSON schema and docs/configuration.md are generated from the model and current."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from validate_pyproject.api import Validator
from validate_pyproject.errors import ValidationError
from validate_pyproject.plugins import PluginWrapper

from pep517_torch.config import parse_settings
from pep517_torch.config.fields import toml_key
from pep517_torch.config.model import MODEL_CLASSES, ProjectSettings
from pep517_torch.config.pyproject import tomllib
from pep517_torch.config.schema import (
    BEGIN_MARKER,
    DOCS_FILE,
    END_MARKER,
    SCHEMA_FILE,
    generate_schema,
    main,
    render_markdown,
    schema_text,
    tool_schema,
)
from pep517_torch.errors import ConfigError

FULL_EXAMPLE: dict[str, Any] = {
    "build-system": {"requires": ["pep517_torch"], "build-backend": "pep517_torch"},
    "project": {"name": "demo", "dynamic": ["version"]},
    "tool": {
        "torch-ext": {
            "packages": ["demo"],
            "package-dir": {"": "src"},
            "py-modules": ["single"],
            "package-data": {"demo": ["*.json"]},
            "sdist-include": ["x/**"],
            "sdist-exclude": ["y/**"],
            "build-dir": "build/{wheel_tag}",
            "cuda-arch-list": "8.0;9.0",
            "torch-requirement": "exact",
            "torch-import-check": "auto",
            "jobs": 4,
            "verbose": True,
            "build-type": "debug",
            "strip": True,
            "pch": False,
            "pch-header": "include/pch.h",
            "compiler-launcher": "ccache",
            "cuda": "auto",
            "allow-cuda-version-mismatch": False,
            "version": {"file": "src/demo/__init__.py", "pattern": "v = '(.*)'", "suffix-env": "S"},
            "extension": [
                {
                    "name": "demo._C",
                    "sources": ["csrc/*.cpp"],
                    "include-dirs": ["include"],
                    "define-macros": {"A": 1, "B": "x", "C": True},
                    "extra-cflags": ["-Wall"],
                    "extra-cuda-cflags": ["-lineinfo"],
                    "extra-ldflags": ["-s"],
                    "libraries": ["m"],
                    "library-dirs": ["/opt/lib"],
                    "runtime-library-dirs": ["$ORIGIN"],
                    "with-cuda": "auto",
                    "py-limited-api": "cp310",
                    "cuda-arch-list": ["8.0"],
                    "kind": "library",
                    "python-abi-suffix": False,
                    "openmp": True,
                    "strip": False,
                    "pch": True,
                    "pch-header": "include/pch.h",
                    "if": {
                        "env": {"A": True, "B": "1"},
                        "cuda": False,
                        "platform": "linux",
                        "platform-machine": "x86_64",
                        "torch": ">=2.5",
                        "python": ">=3.10",
                    },
                    "cuda": {
                        "sources": ["csrc/*.cu"],
                        "include-dirs": ["cuinc"],
                        "define-macros": {"WITH_CUDA": True},
                        "extra-cflags": ["-DX"],
                        "extra-cuda-cflags": ["-O3"],
                        "extra-ldflags": ["-lcudart"],
                        "libraries": ["cublas"],
                        "library-dirs": ["/cuda/lib64"],
                    },
                }
            ],
            "matrix": {
                "python": ["3.11", "3.12"],
                "torch": ["2.13", "2.14.1"],
                "cuda": ["cpu", "13.0"],
                "exclude": [{"torch": "2.13", "cuda": "13.0"}, {"python": "3.12"}],
                "test-requires": ["pytest>=8"],
                "test-command": "pytest {project}/tests -x -q",
                "test-skip": ["*-cu130"],
                "torch-index": {"cpu": "https://download.pytorch.org/whl/cpu"},
                "find-links": ["https://example.org/wheels/"],
            },
            "overrides": [
                {
                    "if": {"env": {"DEBUG": True}},
                    "build-type": "debug",
                    "version": {"suffix-env": "X"},
                    "extension": {"*": {"openmp": False}, "demo._C": {"if": {"cuda": True}}},
                    "append": {
                        "sdist-include": ["z"],
                        "package-data": {"demo": ["*.txt"]},
                        "extension": {"demo._C": {"libraries": ["z"], "define-macros": {"D": 1}}},
                    },
                }
            ],
        }
    },
}


@pytest.fixture(scope="module")
def validator() -> Validator:
    return Validator(plugins=[PluginWrapper("torch-ext", tool_schema)])


def generated_region(text: str) -> str:
    _, _, rest = text.partition(BEGIN_MARKER)
    region, end, _ = rest.partition(END_MARKER)
    assert end, "docs/configuration.md lacks the generated-reference markers"
    return region.strip() + "\n"


def test_shipped_schema_is_current() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), (
        "run: python -m pep517_torch.config.schema --write"
    )
    assert tool_schema("torch-ext") == generate_schema()
    assert main(["--check"]) == 0


def test_docs_reference_is_current() -> None:
    assert generated_region(DOCS_FILE.read_text(encoding="utf-8")) == render_markdown(), (
        "run: python -m pep517_torch.config.schema --write"
    )


def test_every_model_field_is_in_schema_and_docs() -> None:
    schema = generate_schema()
    tables = [schema, *schema["definitions"].values()]
    keys_in_schema = {key for table in tables for key in table.get("properties", {})}
    docs = DOCS_FILE.read_text(encoding="utf-8")
    reference = generated_region(docs)
    for cls in MODEL_CLASSES:
        for fld in dataclasses.fields(cls):
            assert fld.metadata.get("help"), f"{cls.__name__}.{fld.name} has no help"
            if fld.metadata.get("flatten"):
                assert "*(project keys)*" in reference
                continue
            key = toml_key(fld.name)
            assert key in keys_in_schema, key
            assert f"#### `{key}`" in reference, key
            assert fld.metadata["help"] in reference


def test_schema_shape() -> None:
    schema = generate_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    for definition in schema["definitions"].values():
        assert definition["additionalProperties"] is False
    props = schema["properties"]
    assert props["build-type"]["enum"] == ["release", "debug", "relwithdebinfo", "none"]
    assert props["cuda"]["enum"] == ["auto", True, False]
    assert props["jobs"]["minimum"] == 1
    assert schema["definitions"]["extension"]["required"] == ["name", "sources"]
    assert schema["definitions"]["override"]["required"] == ["if"]
    assert "jobs" not in schema["definitions"]["override-append"]["properties"]
    assert "name" not in schema["definitions"]["extension-patch"]["properties"]


def test_validate_pyproject_accepts_the_full_example(validator: Validator) -> None:
    assert validator(FULL_EXAMPLE) == FULL_EXAMPLE
    settings = parse_settings(FULL_EXAMPLE)  # and so does the parser, reading every key
    default = ProjectSettings()
    read = {toml_key(field.name) for field in dataclasses.fields(settings)
            if getattr(settings, field.name) != getattr(default, field.name)}
    # the three keys the example sets to their defaults read as unset
    at_default = {"allow-cuda-version-mismatch", "cuda", "torch-import-check"}
    assert read == set(FULL_EXAMPLE["tool"]["torch-ext"]) - at_default


@pytest.mark.parametrize(
    "path",
    [
        ("extension", 0, "extra-cflag"),
        ("extension", 0, "if", "os"),
        ("extension", 0, "cuda", "openmp"),
        ("overrides", 0, "append", "jobs"),
        ("overrides", 0, "extension", "*", "name"),
        ("matrix", "flavours"),
        ("matrix", "exclude", 0, "pyhton"),
        ("bulid-dir",),
    ],
)
def test_validate_pyproject_rejects_unknown_keys(
    validator: Validator, path: tuple[Any, ...]
) -> None:
    bad = copy.deepcopy(FULL_EXAMPLE)
    table: Any = bad["tool"]["torch-ext"]
    for part in path[:-1]:
        table = table[part]
    table[path[-1]] = 1
    with pytest.raises(ValidationError, match=re.escape(f"must not contain {{{path[-1]!r}}}")):
        validator(bad)
    with pytest.raises(ConfigError, match=re.escape(f"key {path[-1]!r}")):
        parse_settings(bad)


def test_validate_pyproject_rejects_wrong_values(validator: Validator) -> None:
    for tool, said in (
        ({"jobs": 0}, "`tool.torch-ext.jobs` must be bigger than or equal to 1"),
        ({"build-type": "fast"}, "`tool.torch-ext.build-type` must be one of"),
        ({"extension": [{"name": "x", "sources": []}]},
         "`tool.torch-ext.extension[0].sources` must contain at least 1 items"),
        ({"matrix": {"python": ["3.11"], "torch": ["2.13"], "cuda": ["13"]}},
         "`tool.torch-ext.matrix.cuda[0]` must match pattern"),
        ({"matrix": {"torch": ["2.13"]}}, "`tool.torch-ext.matrix` must contain ['python']"),
    ):
        with pytest.raises(ValidationError, match=re.escape(said)):
            validator({**FULL_EXAMPLE, "tool": {"torch-ext": tool}})


def toml_examples() -> list[str]:
    text = DOCS_FILE.read_text(encoding="utf-8")
    return re.findall(r"```toml\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.parametrize("example", toml_examples())
def test_docs_examples_are_valid(validator: Validator, example: str) -> None:
    pyproject = tomllib.loads(example)
    pyproject.setdefault("project", {"name": "demo", "version": "1.0"})
    if "tool" not in pyproject:
        pyproject["tool"] = {"torch-ext": {}}
    assert validator(json.loads(json.dumps(pyproject))) == pyproject
    settings = parse_settings(pyproject)
    extensions = pyproject["tool"].get("torch-ext", {}).get("extension", [])
    assert [extension.name for extension in settings.extension] == [e["name"] for e in extensions]


def test_docs_examples_cover_the_brief() -> None:
    text = "\n".join(toml_examples())
    for needle in (
        'kind = "library"', "python-abi-suffix = false", "[tool.torch-ext.extension.cuda]",
        "if.cuda = true", "FORCE_CUDA", "DEBUG", "suffix-env", "openmp = true",
        'py-limited-api = "cp310"', 'dynamic = ["version", "dependencies"]', "sdist-include",
        "package-data", "package-dir", "py-modules",
    ):
        assert needle in text, needle


def test_resource_is_in_the_package() -> None:
    expected = Path(__file__).parents[1] / "pep517_torch/resources/torch-ext.schema.json"
    assert expected == SCHEMA_FILE

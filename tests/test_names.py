"""Names that would build and then never import are refused up front: an extension named like a
standard-library module, a non-ASCII module name (Python looks for PyInitU_...), and
load_inline functions that are not C++ names."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

import pep517_torch
from pep517_torch.config import ResolvedProject
from pep517_torch.errors import ConfigError
from pep517_torch.jit.api import _bindings
from tests.config_helpers import resolve


def resolve_extension_named(root: Path, name: str) -> ResolvedProject:
    """Resolve one extension called ``name``, its package (where it can be one) shipped."""
    (root / "a.cpp").write_text("")
    tool: dict[str, Any] = {"extension": [{"name": name, "sources": ["a.cpp"]}]}
    package = name.rpartition(".")[0]
    if package.isascii() and all(part.isidentifier() for part in package.split(".")):
        for depth in range(1, package.count(".") + 2):  # the package it lives in is shipped
            directory = root.joinpath(*package.split(".")[:depth])
            directory.mkdir(exist_ok=True)
            (directory / "__init__.py").write_text("")
        tool["packages"] = [package.split(".")[0]]
    return resolve(root, tool)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("os", "an extension named 'os' can never be imported: `import os` finds the"
               " standard-library module first; rename it"),
        ("json._C", "a package named 'json' can never be imported"),
        ("_json", "an extension named '_json' can never be imported"),
        ("code._ops", "a package named 'code'"),
        ("ménage._C", "'ménage' is not ASCII: Python would look for PyInitU_..."),
        ("pkg.naïve", "'naïve' is not ASCII"),
        ("pkg.class", "'class' is a Python keyword"),
    ],
)
def test_extension_names_that_could_never_be_imported(tmp_path: Path, name: str, words: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)) as error:
        resolve_extension_named(tmp_path, name)
    assert error.value.key == "tool.torch-ext.extension[0].name"


@pytest.mark.parametrize("name", ["mypkg.os", "mypkg.json._C", "ops", "_top", "testing._C"])
def test_names_that_only_look_alike_are_fine(tmp_path: Path, name: str) -> None:
    assert [spec.name for spec in resolve_extension_named(tmp_path, name).extensions] == [name]


@pytest.mark.parametrize("name", ["ménage", "naïve_ops", "class", "not-valid", "1x"])
def test_jit_names_must_be_ascii_identifiers(tmp_path: Path, name: str) -> None:
    source = tmp_path / "ops.cpp"
    source.write_text("")
    for call in (lambda: pep517_torch.load(name, [str(source)], build_directory=str(tmp_path / "b")),
                 lambda: pep517_torch.load_inline(name, "", build_directory=str(tmp_path / "b"))):
        with pytest.raises(ConfigError, match="ASCII") as error:
            call()
        assert error.value.key == "name"
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("function", ["f", "ns::f", "::f", "a::b::c", "_private", "F2"])
def test_load_inline_accepts_qualified_cpp_names(function: str) -> None:
    assert f'm.def("{function}", torch::wrap_pybind_function({function}), ' in _bindings(
        [function], with_error_handling=True
    )


@pytest.mark.parametrize(
    "function", ["f()", "a::", "1x", "a b", "", "::", "a::::b", "int", "ns::class", "é", "f;g"]
)
def test_load_inline_refuses_what_is_not_a_cpp_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, function: str
) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    for functions in ([function], {function: "doc"}):
        with pytest.raises(ConfigError, match="is not a C\\+\\+ function name") as error:
            pep517_torch.load_inline("ops", "int f() { return 1; }", functions=functions)
        assert error.value.key == "functions"
        assert str(error.value) == (
            f"functions: {function!r} is not a C++ function name (an identifier, optionally"
            " qualified: f, ns::f)"
        )
    assert not os.path.exists(tmp_path / "ext")  # refused before the sources were written


def test_load_inline_docstrings_must_be_strings() -> None:
    with pytest.raises(ConfigError, match="^functions: the docstring of 'f' must be a str$"):
        _bindings({"f": 3}, with_error_handling=True)  # type: ignore[dict-item]

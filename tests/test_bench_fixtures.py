"""The benchmark's multi-extension project (fixtures/oplib12, issue 47 item 4) compares like
with like: its pyproject.toml and its setup.py (torch's BuildExtension) build the same
extensions from the same sources, and its files are what the benchmark says they are (ten
operators of a schema file with <torch/library.h> and a CPU kernel, two with a helper file,
two pybind11 modules with torch/extension.h). Nothing is compiled here: `make bench` builds it.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from pep517_torch.core import scan

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "oplib12"


def setup_py_extensions() -> dict[str, list[str]]:
    tree = ast.parse((FIXTURE / "setup.py").read_text())
    [assignment] = [node for node in tree.body if isinstance(node, ast.Assign)
                    and any(getattr(t, "id", None) == "EXTENSIONS" for t in node.targets)]
    return ast.literal_eval(assignment.value)


def test_its_pyproject_and_its_setup_py_build_the_same_extensions() -> None:
    pyproject = tomllib.loads((FIXTURE / "pyproject.toml").read_text())
    ours = {e["name"]: e["sources"] for e in pyproject["tool"]["torch-ext"]["extension"]}
    assert ours == setup_py_extensions()
    assert len(ours) == 12 and all(1 <= len(sources) <= 3 for sources in ours.values())
    for sources in ours.values():
        assert all((FIXTURE / source).is_file() for source in sources)


def test_its_files_are_shaped_like_an_operator_library() -> None:
    extensions = setup_py_extensions()
    operators = {name: sources for name, sources in extensions.items() if sources[0].startswith("csrc/ops/")}
    assert len(operators) == 10 and sum(len(s) == 3 for s in operators.values()) == 2
    for sources in operators.values():
        schema, kernel = (FIXTURE / sources[0]), (FIXTURE / sources[1])
        # The schema file reaches <torch/library.h> first (its PCH); the kernel defines
        # TORCH_ASSERT_ONLY_METHOD_OPERATORS first (no PCH) and includes per-operator headers.
        assert scan.first_directive_include(schema) == "torch/library.h"
        assert "TORCH_LIBRARY_FRAGMENT(oplib" in schema.read_text()
        assert scan.first_directive_include(kernel) is None
        assert "#include <ATen/ops/" in kernel.read_text() and "TORCH_LIBRARY_IMPL(oplib, CPU" in kernel.read_text()
    heavy = [s for sources in extensions.values() for s in sources
             if "torch/extension.h" in (FIXTURE / s).read_text()]
    assert heavy == ["csrc/python/bindings.cpp", "csrc/python/checks.cpp"]

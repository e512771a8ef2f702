"""A project whose extension compiles in about a second: a bare CPython module (Python.h only).

``csrc/module.cpp`` exposes ``value()``, defined in ``csrc/value.cpp``; tests rewrite that file
(and may add headers under ``csrc/``, an include directory) to make each build compile again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path


def pyproject(
    name: str, *extensions: str, version: str = "1.0", dynamic: bool = True, project: str = "",
    packages: Sequence[str] | None = None, tool: str = "", torch: bool = False,
) -> str:
    """A test project's pyproject.toml text, built by pep517_torch: ``[build-system]`` (torch
    among its requires when ``torch``), ``[project]`` (``name``, ``version``, dynamic
    dependencies unless not ``dynamic``, then the lines ``project``), ``[tool.torch-ext]``
    (``packages``: ``[name]`` unless given, none when empty; then the lines ``tool``), then one
    ``[[tool.torch-ext.extension]]`` table for each of ``extensions`` (the keys of each)."""
    requires = '"pep517_torch", "torch"' if torch else '"pep517_torch"'
    listed = [name] if packages is None else list(packages)
    text = (f'[build-system]\nrequires = [{requires}]\nbuild-backend = "pep517_torch"\n\n'
            f'[project]\nname = "{name}"\nversion = "{version}"\n')
    text += ('dynamic = ["dependencies"]\n' if dynamic else "") + _lines(project)
    text += "\n[tool.torch-ext]\n" + (f"packages = {json.dumps(listed)}\n" if listed else "")
    text += _lines(tool)
    return text + "".join(f"\n[[tool.torch-ext.extension]]\n{_lines(keys)}" for keys in extensions)


def _lines(text: str) -> str:
    return text if text == "" or text.endswith("\n") else text + "\n"


def tiny_pyproject(name: str) -> str:
    """The tiny project's pyproject.toml: package ``name``, extension ``name._C`` (csrc/*.cpp)."""
    return pyproject(name, f'name = "{name}._C"\nsources = ["csrc/*.cpp"]\ninclude-dirs = ["csrc"]',
                     torch=True)


def c_api_module(
    functions: str, methods: str, first_include: str | None = None, *, name: str | None = "_C"
) -> str:
    """C++ source of a Python C-API extension module ``name`` (``PyInit_<name>``); with
    ``name=None``, whatever the build names it (TORCH_EXTENSION_NAME). ``functions`` defines
    what ``methods`` (PyMethodDef entries) lists; ``first_include`` (e.g. a PCH header) comes
    before Python.h. No torch, no pybind11: it compiles in about a second."""
    prelude = f"#include {first_include}\n" if first_include else ""
    if name is None:
        prelude += ("#define CONCAT_(a, b) a##b\n#define CONCAT(a, b) CONCAT_(a, b)\n"
                    "#define STRING_(a) #a\n#define STRING(a) STRING_(a)\n")
    quoted, init = (f'"{name}"', f"PyInit_{name}") if name else (
        "STRING(TORCH_EXTENSION_NAME)", "CONCAT(PyInit_, TORCH_EXTENSION_NAME)")
    return (
        f"{prelude}#include <Python.h>\n{functions.strip()}\n"
        f"static PyMethodDef methods[] = {{{methods}, {{nullptr, nullptr, 0, nullptr}}}};\n"
        f"static PyModuleDef definition = {{PyModuleDef_HEAD_INIT, {quoted}, nullptr, -1, methods}};\n"
        f"PyMODINIT_FUNC {init}() {{ return PyModule_Create(&definition); }}\n"
    )


MODULE = c_api_module(
    "int value();\nstatic PyObject* py_value(PyObject*, PyObject*) { return PyLong_FromLong(value()); }",
    '{"value", py_value, METH_NOARGS, nullptr}',
)
# Any extension name (the JIT's, a docs example's): ``answer()`` returns 42.
NAMED_MODULE = c_api_module(
    "static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(42); }",
    '{"answer", answer, METH_NOARGS, nullptr}',
    name=None,
)

def write_project(root: Path, name: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / "csrc").mkdir()
    (root / "pyproject.toml").write_text(tiny_pyproject(name))
    (root / name / "__init__.py").write_text("from ._C import value\n")
    (root / "csrc" / "module.cpp").write_text(MODULE)
    set_value(root, 0)
    return root


def set_value(project: Path, value: int) -> None:
    (project / "csrc" / "value.cpp").write_text(f"int value() {{ return {value}; }}\n")


def wheel_value(wheel: Path, target: Path, name: str) -> int:
    """Unpack the wheel and import its module: what the built code computes."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    result = subprocess.run([sys.executable, "-c", f"import {name}; print({name}.value())"],
                            cwd=target, env={**os.environ, "PYTHONPATH": str(target)},
                            capture_output=True, text=True, timeout=600, check=True)
    return int(result.stdout)

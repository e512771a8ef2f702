"""A project whose extension compiles in about a second: a bare CPython module (Python.h only).

``csrc/module.cpp`` exposes ``value()``, defined in ``csrc/value.cpp``; tests rewrite that file
(and may add headers under ``csrc/``, an include directory) to make each build compile again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

PYPROJECT = """\
[build-system]
requires = ["pep517_torch", "torch"]
build-backend = "pep517_torch"

[project]
name = "{name}"
version = "1.0"
dynamic = ["dependencies"]

[tool.torch-ext]
packages = ["{name}"]

[[tool.torch-ext.extension]]
name = "{name}._C"
sources = ["csrc/*.cpp"]
include-dirs = ["csrc"]
"""
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
    (root / "pyproject.toml").write_text(PYPROJECT.format(name=name))
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

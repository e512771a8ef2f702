"""A project whose extension compiles in about a second: a bare CPython module (Python.h only).

``csrc/module.cpp`` exposes ``value()``, defined in ``csrc/value.cpp``; tests rewrite that file
(and may add headers under ``csrc/``, an include directory) to make each build compile again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

PYPROJECT = """\
[build-system]
requires = ["pep517_torch", "torch"]
build-backend = "pep517_torch"

[project]
name = "{name}"
version = "1.0"

[tool.torch-ext]
packages = ["{name}"]

[[tool.torch-ext.extension]]
name = "{name}._C"
sources = ["csrc/*.cpp"]
include-dirs = ["csrc"]
"""
MODULE = textwrap.dedent(
    """
    #include <Python.h>
    int value();
    static PyObject* py_value(PyObject*, PyObject*) { return PyLong_FromLong(value()); }
    static PyMethodDef methods[] = {{"value", py_value, METH_NOARGS, nullptr}, {}};
    static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};
    PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module_def); }
    """
)

# Any extension name: the module is named by the build's TORCH_EXTENSION_NAME; `answer` is 42.
NAMED_MODULE = textwrap.dedent(
    """
    #include <Python.h>
    #define CONCAT_(a, b) a##b
    #define CONCAT(a, b) CONCAT_(a, b)
    #define STRING_(a) #a
    #define STRING(a) STRING_(a)
    static PyModuleDef module_def = {
        PyModuleDef_HEAD_INIT, STRING(TORCH_EXTENSION_NAME), nullptr, -1, nullptr};
    PyMODINIT_FUNC CONCAT(PyInit_, TORCH_EXTENSION_NAME)(void) {
      PyObject* module = PyModule_Create(&module_def);
      if (module != nullptr) PyModule_AddIntConstant(module, "answer", 42);
      return module;
    }
    """
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

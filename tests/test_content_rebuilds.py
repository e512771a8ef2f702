"""Edits whose mtime lands in the past (cp -p, rsync -t, tar) are rebuilt: content hashes.

ninja alone compares mtimes and would keep the stale object; the compile core records a hash
of every project-local input and deletes exactly the outputs whose inputs changed content.
Sources are bare CPython modules (Python.h only): each compile takes about a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import count
from tests.tiny_project import wheel_value, write_project

pytestmark = pytest.mark.compile

# value.cpp: its value is a number in the source plus one from the project header.
VALUE_CPP = '#include "offset.h"\nint value() {{ return {value} + OFFSET; }}\n'
OFFSET_H = "#pragma once\n#define OFFSET {offset}\n"


def replace_dated(path: Path, text: str, older_than: Path) -> None:
    """Replace ``path``'s content, then date it before ``older_than`` (what cp -p does)."""
    before = path.read_text()
    assert len(before) == len(text) and before != text  # same size: only the content differs
    path.write_text(text)
    past = older_than.stat().st_mtime - 100
    os.utime(path, (past, past))


def build_wheel(project: Path, out: Path) -> tuple[int, str]:
    """Build a wheel with the CLI; (what its module computes, the build's output)."""
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", project, "-o", out],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("dated-1.0-*.whl")
    return wheel_value(wheel, out / "site", "dated"), result.stdout


def test_wheel_rebuilds_a_source_and_a_header_replaced_with_an_older_mtime(tmp_path: Path) -> None:
    project = write_project(tmp_path / "dated", "dated")
    (project / "csrc" / "value.cpp").write_text(VALUE_CPP.format(value=10))
    (project / "csrc" / "offset.h").write_text(OFFSET_H.format(offset=1))
    assert build_wheel(project, tmp_path / "w1")[0] == 11
    (obj,) = project.glob("build/*/obj/dated._C/csrc/value.cpp.o")

    replace_dated(project / "csrc" / "value.cpp", VALUE_CPP.format(value=20), older_than=obj)
    value, output = build_wheel(project, tmp_path / "w2")
    assert value == 21
    assert "compiling csrc/value.cpp" in output and "compiling csrc/module.cpp" not in output

    replace_dated(project / "csrc" / "offset.h", OFFSET_H.format(offset=5), older_than=obj)
    value, output = build_wheel(project, tmp_path / "w3")
    assert value == 25
    assert "compiling csrc/value.cpp" in output and "compiling csrc/module.cpp" not in output

    # The same content written again (new ctime, old mtime): hashed, found equal, not rebuilt.
    (project / "csrc" / "value.cpp").write_text(VALUE_CPP.format(value=20))
    past = obj.stat().st_mtime - 100
    os.utime(project / "csrc" / "value.cpp", (past, past))
    value, output = build_wheel(project, tmp_path / "w4")
    assert value == 25 and "compiling" not in output
    count("edits with a past mtime rebuilt by a wheel build (source, header)", 2)


JIT_SOURCE = textwrap.dedent(
    """
    #include <Python.h>
    #include "offset.h"
    #define CONCAT_(a, b) a##b
    #define CONCAT(a, b) CONCAT_(a, b)
    #define STRING_(a) #a
    #define STRING(a) STRING_(a)
    static PyObject* value(PyObject*, PyObject*) { return PyLong_FromLong(VALUE + OFFSET); }
    static PyMethodDef methods[] = {{"value", value, METH_NOARGS, nullptr}, {}};
    static PyModuleDef module_def = {
        PyModuleDef_HEAD_INIT, STRING(TORCH_EXTENSION_NAME), nullptr, -1, methods};
    PyMODINIT_FUNC CONCAT(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&module_def); }
    """
)
JIT_CHILD = """
import sys, pep517_torch
source, build = sys.argv[1], sys.argv[2]
module = pep517_torch.load("dated_jit", [source], build_directory=build)
print(module.value())
"""


def jit_value(source: Path, build: Path) -> int:
    """load() in a fresh process (a process keeps the module it loaded first)."""
    result = subprocess.run([sys.executable, "-c", JIT_CHILD, source, build],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return int(result.stdout)


def test_jit_load_rebuilds_a_source_and_a_header_replaced_with_an_older_mtime(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    source = src / "dated.cpp"
    source.write_text("#define VALUE 10\n" + JIT_SOURCE)
    (src / "offset.h").write_text(OFFSET_H.format(offset=1))
    build = tmp_path / "build"
    assert jit_value(source, build) == 11
    (obj,) = build.glob("obj/dated_jit/*.o")

    replace_dated(source, "#define VALUE 20\n" + JIT_SOURCE, older_than=obj)
    assert jit_value(source, build) == 21
    replace_dated(src / "offset.h", OFFSET_H.format(offset=5), older_than=obj)
    assert jit_value(source, build) == 25
    count("edits with a past mtime rebuilt by JIT load() (source, header)", 2)

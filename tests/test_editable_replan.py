"""Editable installs re-plan (issue #11 item 7): after `pip install -e . --no-build-isolation`,
a new source file a glob matches, a changed define in pyproject.toml and a new extension reach
the next import; a config error surfaces as our one-line message, and the import after the fix
works. Each step compiles one or two ~1 s CPython C-API sources (no torch headers)."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path

from tests.commands import run_python
from tests.test_frontends import venv  # noqa: F401 (a fixture: a fresh venv seeing ours)
from tests.tiny_project import c_api_module, write_project

LIMIT = 600  # seconds for a few one-second compiles, on a machine 10x slower than ours

MODULE = c_api_module(
    "int value();\nint extra();\n"
    "static PyObject* py_value(PyObject*, PyObject*) { return PyLong_FromLong(value()); }\n"
    "static PyObject* py_extra(PyObject*, PyObject*) {\n"
    "#ifdef HAS_EXTRA\n  return PyLong_FromLong(extra());\n#else\n  Py_RETURN_NONE;\n#endif\n}",
    '{"value", py_value, METH_NOARGS, nullptr}, {"extra", py_extra, METH_NOARGS, nullptr}',
)


def install(project: Path, python: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install",
                    "--no-build-isolation", "--no-deps", "--no-index", "-e", project],
                   check=True, capture_output=True, timeout=LIMIT)


def test_new_source_define_and_extension_reach_the_next_import(tmp_path: Path, venv: Path) -> None:  # noqa: F811
    project = write_project(tmp_path / "replan", "replan")
    (project / "csrc" / "module.cpp").write_text(MODULE)
    (project / "replan" / "__init__.py").write_text("from ._C import value, extra\n")
    python = venv / "bin" / "python"
    install(project, python)
    in_venv = partial(run_python, python=python, cwd=tmp_path, check=False, timeout=LIMIT)
    first = in_venv("import replan; print(replan.value(), replan.extra())")
    assert first.stdout.split() == ["0", "None"], first.stderr

    # (a) a new file the `csrc/*.cpp` glob matches, (b) a define the module now compiles with
    (project / "csrc" / "extra.cpp").write_text("int extra() { return EXTRA_VALUE; }\n")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + 'define-macros = { HAS_EXTRA = true, EXTRA_VALUE = 7 }\n')
    second = in_venv("import replan; print(replan.value(), replan.extra())")
    assert second.stdout.split() == ["0", "7"], second.stderr
    assert "replan: csrc changed; planning the build again" in second.stderr  # the new file's folder

    pyproject.write_text(pyproject.read_text().replace("EXTRA_VALUE = 7", "EXTRA_VALUE = 8"))
    third = in_venv("import replan; print(replan.extra())")
    assert third.stdout.split() == ["8"], third.stderr

    # a config error: our one-line message at import, and nothing is lost
    good = pyproject.read_text()
    pyproject.write_text(good.replace('"csrc/*.cpp"', '"csrc/*.cxx"'))
    broken = in_venv("import replan")
    assert broken.returncode != 0
    assert ("pep517_torch: error: tool.torch-ext.extension[0].sources[0]: source glob 'csrc/*.cxx'"
            " matches no file") in broken.stderr, broken.stderr
    assert broken.stderr.count("pep517_torch: error:") == 1  # in the ImportError only
    pyproject.write_text(good.replace("EXTRA_VALUE = 8", "EXTRA_VALUE = 9"))
    fixed = in_venv("import replan; print(replan.extra())")
    assert fixed.stdout.split() == ["9"], fixed.stderr

    # a new extension in a shipped package: built and linked on the next import
    (project / "csrc2").mkdir()
    (project / "csrc2" / "answer.cpp").write_text(c_api_module(
        "static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(42); }",
        '{"answer", answer, METH_NOARGS, nullptr}', name="_D"))
    pyproject.write_text(pyproject.read_text() + '\n[[tool.torch-ext.extension]]\n'
                         'name = "replan._D"\nsources = ["csrc2/*.cpp"]\n')
    added = in_venv("import replan._D; print(replan._D.answer())")
    assert added.stdout.split() == ["42"], added.stderr

    # nothing changed: no re-plan, plain ninja
    quiet = in_venv("import replan; print(replan.extra())")
    assert quiet.stdout.split() == ["9"] and "planning the build again" not in quiet.stderr


def test_an_edit_with_an_older_mtime_reaches_the_next_import(tmp_path: Path, venv: Path) -> None:  # noqa: F811
    """The hook sees the core's record of its inputs change and builds through the core, which
    compares contents: plain ninja would keep the stale object."""
    project = write_project(tmp_path / "oldmtime", "oldmtime")
    python = venv / "bin" / "python"
    install(project, python)
    in_venv = partial(run_python, python=python, cwd=tmp_path, check=False, timeout=LIMIT)
    value = project / "csrc" / "value.cpp"
    before = value.stat().st_mtime_ns
    value.write_text("int value() { return 5; }\n")
    os.utime(value, ns=(before - 10**10, before - 10**10))  # `cp -p` of an older file
    edited = in_venv("import oldmtime; print(oldmtime.value())")
    assert edited.stdout.split() == ["5"], edited.stderr
    assert "rebuilding oldmtime (editable install): csrc/value.cpp changed" in edited.stderr, edited.stderr
    assert "planning the build again" not in edited.stderr
    again = in_venv("import oldmtime; print(oldmtime.value())")
    assert again.stdout.split() == ["5"] and "rebuilding" not in again.stderr, again.stderr


def test_a_compile_variable_reaches_the_next_import(tmp_path: Path, venv: Path) -> None:  # noqa: F811
    """CPLUS_INCLUDE_PATH is a compile input on no command line: the import hook sees its new
    value in the build folder's ledger and rebuilds through pep517_torch (issue 35 item 3)."""
    project = write_project(tmp_path / "envvar", "envvar")
    (project / "csrc" / "value.cpp").write_text(
        "#if __has_include(<offset.h>)\n#include <offset.h>\n#endif\n"
        "#ifndef OFFSET\n#define OFFSET 0\n#endif\nint value() { return OFFSET; }\n")
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "offset.h").write_text("#define OFFSET 4\n")
    python = venv / "bin" / "python"
    install(project, python)
    in_venv = partial(run_python, python=python, cwd=tmp_path, check=False, timeout=LIMIT)
    assert in_venv("import envvar; print(envvar.value())").stdout.split() == ["0"]
    changed = in_venv("import envvar; print(envvar.value())",
                      env={"CPLUS_INCLUDE_PATH": str(tmp_path / "inc")})
    assert changed.stdout.split() == ["4"], changed.stderr
    assert f"CPLUS_INCLUDE_PATH changed: unset -> '{tmp_path / 'inc'}'; building it again" in changed.stderr

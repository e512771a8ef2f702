"""Unity TUs compiled for real: the same results as file by file, clashes kept apart, and a
unity TU that fails (a clash no scan sees) compiled file by file.

The sources include a small torch header (c10's macros), which makes them torch-heavy for the
build, and compile in about a second each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pep517_torch.core.unity import groups as unity
from tests.tiny_project import c_api_module, pyproject

pytestmark = pytest.mark.compile

PYPROJECT = pyproject("unityops", 'name = "unityops._C"\nsources = ["csrc/*.cpp"]', torch=True)
HEAVY = "#include <c10/macros/Macros.h>\n"
# Each file's own helper, type or macro gives its value; names clash across files.
SOURCES = {
    "a.cpp": HEAVY + "static int helper() { return 1; }\nint value_a() { return helper(); }\n",
    "b.cpp": HEAVY + "static int helper() { return 2; }\nint value_b() { return helper(); }\n",
    "c.cpp": HEAVY + "namespace { struct Impl { int v = 3; }; }\nint value_c() { return Impl{}.v; }\n",
    "d.cpp": HEAVY + "namespace { struct Impl { int v = 4; }; }\nint value_d() { return Impl{}.v; }\n",
    "e.cpp": HEAVY + "#define OWN 5\nint value_e() { return OWN; }\n",
    "f.cpp": HEAVY + "static const int OWN = 6;\nint value_f() { return OWN; }\n",
}
# A static function each file defines through a shared macro: no scan of the text sees it.
HIDDEN = {
    "helpers.h": "#pragma once\n#define DEFINE_HELPER(v) static int helper() { return v; }\n",
    "g.cpp": HEAVY + '#include "helpers.h"\nDEFINE_HELPER(7)\nint value_g() { return helper(); }\n',
    "h.cpp": HEAVY + '#include "helpers.h"\nDEFINE_HELPER(8)\nint value_h() { return helper(); }\n',
}


def module_source(names: list[str]) -> str:
    declarations = "".join(f"int value_{n}();\n" for n in names)
    items = ", ".join(f"PyLong_FromLong(value_{n}())" for n in names)
    function = (f"{declarations}static PyObject* values(PyObject*, PyObject*) {{"
                f" return PyTuple_Pack({len(names)}, {items}); }}")
    return c_api_module(function, '{"values", values, METH_NOARGS, nullptr}')


def project(root: Path, sources: dict[str, str]) -> Path:
    (root / "unityops").mkdir(parents=True)
    (root / "unityops" / "__init__.py").write_text("from ._C import values\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    csrc = root / "csrc"
    csrc.mkdir()
    names = sorted(name[:-4] for name in sources if name.endswith(".cpp"))
    for name, text in {**sources, "module.cpp": module_source(names)}.items():
        (csrc / name).write_text(text)
    return root


def build(root: Path, out: Path, *settings: str, jobs: int = 1) -> tuple[tuple[int, ...], str]:
    """Build a wheel with ``jobs`` heavy jobs (one: one unity TU for all that may share it); what
    its module computes, and what the build printed."""
    arguments = [sys.executable, "-m", "pep517_torch", "wheel", str(root), "-o", str(out)]
    for setting in (f"jobs={jobs}", *settings):
        arguments += ["-C", setting]
    done = subprocess.run(arguments, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PEP517_TORCH_COMPILER_LAUNCHER": "none"})
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = out.glob("*.whl")
    target = out / "unpacked"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    values = subprocess.run(
        [sys.executable, "-c", "import unityops; print(*unityops.values())"],
        cwd=target, capture_output=True, text=True, timeout=300, check=True,
    ).stdout.split()
    return tuple(map(int, values)), done.stdout + done.stderr


def unity_edges(root: Path) -> list[list[str]]:
    """The members of each unity TU in the build's compile_commands.json order."""
    [build_dir] = (root / "build").iterdir()
    text = (build_dir / "build.ninja").read_text()
    groups = []
    for source in sorted(build_dir.glob("obj/**/unity-*.cpp")):
        if source.name in text:
            included = [line.split('"')[1] for line in source.read_text().splitlines()[1:]]
            groups.append([Path(path).name for path in included])
    return groups


def test_unity_tus_compute_what_file_by_file_computes(tmp_path: Path) -> None:
    alone, _ = build(project(tmp_path / "alone", SOURCES), tmp_path / "o1", "unity=false")
    together, log = build(project(tmp_path / "together", SOURCES), tmp_path / "o2")
    assert alone == together == (1, 2, 3, 4, 5, 6)
    assert unity_edges(tmp_path / "alone") == []
    groups = unity_edges(tmp_path / "together")
    assert groups == [["a.cpp", "c.cpp", "e.cpp"]], groups  # every other file clashes with it
    for pair in (["a.cpp", "b.cpp"], ["c.cpp", "d.cpp"], ["e.cpp", "f.cpp"]):
        assert not any(set(pair) <= set(group) for group in groups)
    assert "b.cpp compiled on its own: b.cpp declares 'helper', which a.cpp names too" in log
    [build_dir] = (tmp_path / "together" / "build").iterdir()
    listed = json.loads((build_dir / "compile_commands.json").read_text())
    assert sorted(Path(entry["file"]).name for entry in listed) == [
        "a.cpp", "b.cpp", "c.cpp", "d.cpp", "e.cpp", "f.cpp", "module.cpp"
    ]


def test_a_failed_unity_tu_is_compiled_file_by_file_from_then_on(tmp_path: Path) -> None:
    root = project(tmp_path / "p", HIDDEN)
    values, log = build(root, tmp_path / "o1")
    assert values == (7, 8)
    assert "csrc/g.cpp + csrc/h.cpp failed as one unity TU" in log, log
    assert "compiling those files one by one" in log
    [build_dir] = (root / "build").iterdir()
    assert unity.kept_apart(build_dir) == {root / "csrc" / "g.cpp", root / "csrc" / "h.cpp"}
    (root / "csrc" / "g.cpp").write_text(HIDDEN["g.cpp"].replace("(7)", "(70)"))
    values, log = build(root, tmp_path / "o2")
    assert values == (70, 8) and "unity TU" not in log and unity_edges(root) == []

"""CXXFLAGS, CPPFLAGS, LDFLAGS and CFLAGS from the environment (issue 43 item 12), read as
setuptools and CMake read them for C++: CXXFLAGS then CPPFLAGS on every C++ compile (after our
flags, before an extension's extra-cflags), LDFLAGS, CXXFLAGS and CPPFLAGS on every link, none
on nvcc; CFLAGS (C's; every source here compiles as C++) said in one line. A change rebuilds
(never a replayed wheel or a stale JIT module), and `explain` names the variable.
Tiny sources (Python.h only)."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest

from pep517_torch.core import flags
from pep517_torch.core.spec import BuildType
from pep517_torch.core.toolchain.tools import find_torch
from pep517_torch.errors import ConfigError
from tests.commands import run, run_python
from tests.test_core_flags import CUDA, cuda_spec, tools_for
from tests.test_frontends import venv  # noqa: F401 (a fixture: a fresh venv seeing ours)
from tests.tiny_project import wheel_value, write_project

pytestmark = pytest.mark.compile

VALUE = "#ifndef Y\n#define Y 0\n#endif\nint value() { return X * 10 + Y; }\n"


def project(root: Path) -> Path:
    """The tiny module, its value X * 10 + Y: X must come from the environment's flags."""
    write_project(root, "tiny")
    (root / "csrc" / "value.cpp").write_text(VALUE)
    return root


def pip_wheel(root: Path, out: Path, **flags_env: str) -> tuple[Path, str]:
    """`pip wheel .` as a user runs it in the project (the hooks, the no-op replay included),
    with these flags variables and no others."""
    result = run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
                 "-w", out, ".", cwd=root, env=flags_env, check=False,
                 unset=("CXXFLAGS", "CPPFLAGS", "LDFLAGS", "CFLAGS"))
    assert result.returncode == 0, result.stdout + result.stderr
    [wheel] = out.glob("*.whl")
    return wheel, result.stdout + result.stderr


def explain(root: Path, **flags_env: str) -> str:
    return run(sys.executable, "-m", "pep517_torch", "explain", root, env=flags_env,
               unset=("CXXFLAGS", "CPPFLAGS", "LDFLAGS", "CFLAGS")).stdout


def test_cxxflags_compile_the_module_a_change_rebuilds_and_explain_names_it(tmp_path: Path) -> None:
    root = project(tmp_path / "tiny")
    wheel, _ = pip_wheel(root, tmp_path / "one", CXXFLAGS="-DX=1")
    assert wheel_value(wheel, tmp_path / "site1", "tiny") == 10
    assert "CXXFLAGS changed: '-DX=1' -> '-DX=2'" in explain(root, CXXFLAGS="-DX=2")  # since then
    wheel, said = pip_wheel(root, tmp_path / "two", CXXFLAGS="-DX=2", CPPFLAGS="-DY=3")
    assert wheel_value(wheel, tmp_path / "site2", "tiny") == 23, said
    last = explain(root, CXXFLAGS="-DX=2", CPPFLAGS="-DY=3")
    assert ("compiling csrc/value.cpp: its command changed, as CPPFLAGS changed: unset -> '-DY=3';"
            " CXXFLAGS changed: '-DX=1' -> '-DX=2'") in last, last
    _, said = pip_wheel(root, tmp_path / "three", CXXFLAGS="-DX=2", CPPFLAGS="-DY=3")
    assert "nothing changed" in said  # the same flags: the last wheel again
    wheel, _ = pip_wheel(root, tmp_path / "four", CXXFLAGS="-DX=4", CPPFLAGS="-DY=3")
    assert wheel_value(wheel, tmp_path / "site4", "tiny") == 43  # never the replayed 23


def test_ldflags_reach_the_link(tmp_path: Path) -> None:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    root = project(tmp_path / "tiny")
    wheel, _ = pip_wheel(root, tmp_path / "out", CXXFLAGS="-DX=5",
                         LDFLAGS="-Wl,-soname,libfrom_ldflags.so")
    assert wheel_value(wheel, tmp_path / "site", "tiny") == 50
    [module] = (tmp_path / "site" / "tiny").glob("_C*.so")
    with module.open("rb") as file:
        [dynamic] = [s for s in ELFFile(file).iter_sections() if isinstance(s, DynamicSection)]
        sonames = [tag.soname for tag in dynamic.iter_tags() if tag.entry.d_tag == "DT_SONAME"]
    assert sonames == ["libfrom_ldflags.so"]


def test_where_each_variable_goes(tmp_path: Path) -> None:
    """Compiles: ours, then CXXFLAGS and CPPFLAGS, then the extension's own (which win); a
    PCH's flags too. Links: LDFLAGS, CXXFLAGS, CPPFLAGS before the libraries. nvcc: none."""
    env = {"CXXFLAGS": "-O1 -DFROM_CXX='a b'", "CPPFLAGS": "-DFROM_CPP", "LDFLAGS": "-Wl,-z,now"}
    found = flags.environment_flags(env)
    assert found.compile == ("-O1", "-DFROM_CXX=a b", "-DFROM_CPP") and found.note is None
    assert found.link == ("-Wl,-z,now", "-O1", "-DFROM_CXX=a b", "-DFROM_CPP")
    tools = tools_for(find_torch(), env_flags=found, **CUDA)
    spec = cuda_spec(extra_cflags=("-O2",), extra_cuda_cflags=("-lineinfo",),
                     build_type=BuildType.RELEASE)
    computed = flags.compute(spec, tools, source_root=tmp_path)
    assert computed.cxx.index("-O3") < computed.cxx.index("-O1") < computed.cxx.index("-O2")
    assert "-DFROM_CPP" in computed.cxx and "-DFROM_CPP" in computed.pch
    assert "-DFROM_CXX=a b" in computed.umbrella_pch
    assert not {"-O1", "-DFROM_CPP", "-Wl,-z,now"} & set(computed.nvcc)
    assert computed.ld[:5] == ("-shared", "-Wl,-z,now", "-O1", "-DFROM_CXX=a b", "-DFROM_CPP")
    assert computed.ld.index("-DFROM_CPP") < computed.ld.index("-ltorch")


def test_cflags_alone_is_said_and_a_bad_value_is_one_line(tmp_path: Path) -> None:
    note = flags.environment_flags({"CFLAGS": "-O1"}).note
    assert note is not None and note.startswith("CFLAGS is not read") and "CXXFLAGS" in note
    assert flags.environment_flags({"CFLAGS": "-O1", "CXXFLAGS": "-O1"}).note is None
    with pytest.raises(ConfigError, match="cannot be split") as info:
        flags.environment_flags({"CXXFLAGS": "-DX='1"})
    assert info.value.key == "CXXFLAGS"
    root = project(tmp_path / "tiny")
    said = run(sys.executable, "-m", "pep517_torch", "wheel", root, "-o", tmp_path / "out",
               env={"CFLAGS": "-DX=1", "CXXFLAGS": "-DX='1"}, check=False)
    assert said.returncode != 0 and "Traceback" not in said.stderr
    assert said.stderr.strip().splitlines() == [
        "pep517_torch: error: CXXFLAGS: \"-DX='1\" cannot be split into flags (No closing quotation)"]
    said = run(sys.executable, "-m", "pep517_torch", "wheel", root, "-o", tmp_path / "out",
               env={"CFLAGS": "-DX=1"}, unset=("CXXFLAGS", "CPPFLAGS"), check=False)
    assert "CFLAGS is not read" in said.stdout + said.stderr  # and X is undefined: it fails


def test_the_jit_rebuilds_when_cxxflags_change(tmp_path: Path, jit_env: Path) -> None:
    source = tmp_path / "jit_flags.cpp"
    source.write_text(
        "#include <Python.h>\nstatic PyObject* v(PyObject*, PyObject*) { return PyLong_FromLong(X); }\n"
        'static PyMethodDef m[] = {{"value", v, METH_NOARGS, nullptr}, {nullptr}};\n'
        'static PyModuleDef d = {PyModuleDef_HEAD_INIT, "jit_flags", nullptr, -1, m};\n'
        "PyMODINIT_FUNC PyInit_jit_flags(void) { return PyModule_Create(&d); }\n")
    code = (f"import pep517_torch; print(pep517_torch.load('jit_flags', [{str(source)!r}],"
            f" build_directory={str(tmp_path / 'jit')!r}).value())")
    assert run_python(code, env={"CXXFLAGS": "-DX=7"}).stdout.split()[-1] == "7"
    assert run_python(code, env={"CXXFLAGS": "-DX=8"}).stdout.split()[-1] == "8"
    assert run_python(code, env={"CXXFLAGS": "-DX=8"}).stdout.split()[-1] == "8"


def test_an_editable_install_keeps_the_flags_it_was_installed_with(tmp_path: Path, venv: Path) -> None:  # noqa: F811
    """As a CMake build folder keeps the CXXFLAGS of its first configure, an editable install
    rebuilds on import with the flags it was installed with (recorded with the install), not
    the importing shell's: the import elsewhere neither loses them nor rebuilds for them."""
    root = project(tmp_path / "tiny")
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-build-isolation",
        "--no-deps", "--no-index", "-e", root, env={"CXXFLAGS": "-DX=1"})
    value = partial(run, python, "-c", "import tiny; print(tiny.value())", cwd=tmp_path,
                    unset=("CXXFLAGS",))
    assert value(env={"CXXFLAGS": "-DX=1"}).stdout.split() == ["10"]
    other = value(env={"CXXFLAGS": "-DX=6"})
    assert other.stdout.split() == ["10"] and "building it again" not in other.stderr, other.stderr
    (root / "csrc" / "value.cpp").write_text(VALUE.replace("X * 10", "X * 100"))
    edited = value()  # a shell without CXXFLAGS: the install's -DX=1 still compiles it
    assert edited.stdout.split() == ["100"], edited.stderr

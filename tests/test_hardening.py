"""Hardening: contention, kills, interrupts, hostile names, reproducibility, torch mismatch.

Each test counts the cases it tried (`count`), printed under "cases tried" at the end.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from tests.commands import run_python
from tests.conftest import HOSTILE_NAME, count, write_tree
from tests.tiny_project import c_api_module, pyproject

pytestmark = pytest.mark.compile

PYBIND_MODULE = textwrap.dedent(
    """
    #include <pybind11/pybind11.h>
    int value() { return VALUE; }
    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("value", &value); }
    """
)
LOAD_CHILD = """
import sys, pep517_torch
module = pep517_torch.load("victim", [sys.argv[1]], build_directory=sys.argv[2], extra_cflags=sys.argv[3:])
print(module.value())
"""


def _default_sigint() -> None:
    # A shell's background job starts with SIGINT ignored, and Python then never installs
    # its KeyboardInterrupt handler: give the builder the default disposition either way.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pep517_torch", *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=_default_sigint)


def wait_for_line(process: subprocess.Popen[str], needle: str, timeout: float = 300) -> list[str]:
    assert process.stdout is not None
    seen = []
    deadline = time.monotonic() + timeout
    for line in process.stdout:
        seen.append(line)
        if needle in line or time.monotonic() > deadline:
            return seen
    raise AssertionError(f"{needle!r} never printed:\n{''.join(seen)}")


def test_eight_concurrent_loads_compile_exactly_once(tmp_path: Path) -> None:
    source = tmp_path / "m.cpp"
    source.write_text(PYBIND_MODULE)
    build = tmp_path / "build"
    children = [
        subprocess.Popen([sys.executable, "-c", LOAD_CHILD, source, build, "-DVALUE=8"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    results = [c.communicate(timeout=600) for c in children]
    assert [c.returncode for c in children] == [0] * 8, results
    assert all(out.strip() == "8" for out, _ in results)
    compiles = [l for l in (build / ".ninja_log").read_text().splitlines() if "obj/victim/" in l]
    assert len(compiles) == 1
    count("concurrent JIT loaders (one compile)", 8)


KILLS = 6


def test_sigkill_at_random_moments_never_poisons_the_next_load(tmp_path: Path) -> None:
    source = tmp_path / "m.cpp"
    source.write_text(PYBIND_MODULE)
    build = tmp_path / "build"
    rng = random.Random(20261129)
    for attempt in range(KILLS):
        flag = f"-DVALUE={attempt}"  # a new flag each time: every attempt has to rebuild
        victim = subprocess.Popen([sys.executable, "-c", LOAD_CHILD, source, build, flag],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # torch's import (~2.5 s), then the lock, a ~3 s compile, the link and the stamp: one
        # random moment in each of KILLS equal slices of 1.5-6.9 s, so that every phase is hit.
        time.sleep(1.5 + (attempt + rng.random()) * 5.4 / KILLS)
        victim.kill()
        victim.wait()
        survivor = run_python(LOAD_CHILD.replace("sys.argv[1]", repr(str(source)))
                              .replace("sys.argv[2]", repr(str(build)))
                              .replace("sys.argv[3:]", repr([flag])), timeout=180)
        assert survivor.stdout.strip() == str(attempt)
        count("JIT builds SIGKILLed at a random moment, then loaded")
    assert not list(build.glob("*.tmp")) and not list(build.glob("**/*.so.tmp"))


def big_data_project(fixture_copy, megabytes: int = 120) -> Path:
    """fixtures/light plus incompressible package data, so that zipping takes a while."""
    project = fixture_copy("light")
    (project / "lightops" / "blob.bin").write_bytes(os.urandom(megabytes * 1024 * 1024))
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace(
        'packages = ["lightops"]', 'packages = ["lightops"]\npackage-data = { lightops = ["*.bin"] }'))
    return project


@pytest.mark.parametrize(
    ("sig", "phase"),
    [(signal.SIGINT, "compile"), (signal.SIGKILL, "compile"), (signal.SIGINT, "zip"),
     (signal.SIGKILL, "zip")],
)
def test_interrupted_wheel_build_leaves_nothing(fixture_copy, tmp_path: Path, sig: int, phase: str) -> None:
    project = big_data_project(fixture_copy)
    out = tmp_path / "out"
    builder = start_cli("wheel", project, "-o", out)
    if phase == "compile":
        wait_for_line(builder, "[1/")  # the first compile finished; the second is running
    else:
        wait_for_line(builder, "extension: ")  # the build summary, printed just before zipping
        time.sleep(0.3)
    builder.send_signal(sig)
    builder.communicate(timeout=120)
    assert builder.returncode != 0
    assert not out.exists() or list(out.iterdir()) == []
    count(f"wheel builds interrupted by {signal.Signals(sig).name} while {phase}")
    retry = start_cli("wheel", project, "-o", out)
    retry.communicate(timeout=600)
    assert retry.returncode == 0
    (name,) = [p.name for p in out.iterdir()]
    assert name.startswith("lightops-0.3.0-cp311-cp311-manylinux_2_") and name.endswith("_x86_64.whl")


HOSTILE_SOURCE = textwrap.dedent(
    """
    #include <Python.h>
    static PyObject* greeting(PyObject*, PyObject*) { return PyUnicode_FromString(GREETING); }
    static PyMethodDef methods[] = {{"greeting", greeting, METH_NOARGS, nullptr}, {nullptr}};
    static PyModuleDef def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};
    PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&def); }
    """
)
HOSTILE_VALUE = "hello world; $(touch PWNED_FLAG) & `touch PWNED_TICK` it's \"q\" #x"
HOSTILE_MACRO = '"' + HOSTILE_VALUE.replace("\\", "\\\\").replace('"', '\\"') + '"'  # a C string


def test_hostile_names_build_and_execute_nothing(tmp_path: Path) -> None:
    project = tmp_path / HOSTILE_NAME / "proj ect"
    (project / "pkg").mkdir(parents=True)
    (project / "csrc dir $HOME").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    names = ["$(touch PWNED).cpp", "we ird#name;x&y.cpp", "ünï'q\"uote.cpp"]
    (project / "csrc dir $HOME" / names[0]).write_text(HOSTILE_SOURCE)
    for name in names[1:]:
        stem = name.split(".")[0]
        symbol = "f_" + str(abs(hash(stem)))
        (project / "csrc dir $HOME" / name).write_text(f"int {symbol}() {{ return 1; }}\n")
    (project / "pyproject.toml").write_text(pyproject("hostile", textwrap.dedent(f"""\
        name = "pkg._C"
        sources = ["csrc dir $HOME/*.cpp"]
        define-macros = {{ GREETING = {json.dumps(HOSTILE_MACRO)} }}
        extra-cflags = ["-DSPACED=a b", "-Wno-unused-function"]
        """), packages=["pkg"]))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", project, "-o", out],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    wheel = next(out.glob("*.whl"))
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    greeting = run_python("import pkg._C as c; print(c.greeting())", env={"PYTHONPATH": str(site)})
    assert greeting.stdout.rstrip("\n") == HOSTILE_VALUE
    pwned = [p for p in tmp_path.rglob("PWNED*")]
    assert pwned == []
    count("hostile path characters (space, ü, $, ', \", #, ;, &) in project and source names", 8)
    count("files named like shell commands compiled without executing them", len(names))


def no_pip_config() -> dict[str, str]:
    """The environment without pip's configuration (this machine points pip at local wheels)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull}


def wheel_of(project: Path, out: Path, *settings: str, env: dict[str, str] | None = None) -> Path:
    result = subprocess.run(
        [sys.executable, "-m", "pep517_torch", "wheel", project, "-o", out, *settings],
        capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert result.returncode == 0, result.stdout + result.stderr
    return next(out.glob("*.whl"))


def test_reproducible_wheels_and_sdists(fixture_copy, tmp_path: Path) -> None:
    project = fixture_copy("light")
    other = tmp_path / "elsewhere" / "light"
    shutil.copytree(project, other)
    first = wheel_of(project, tmp_path / "a", f"-Cbuild-dir={tmp_path / 'build-a'}")
    time.sleep(1.1)
    second = wheel_of(project, tmp_path / "b", f"-Cbuild-dir={tmp_path / 'build-b'}")
    third = wheel_of(other, tmp_path / "c")
    assert first.read_bytes() == second.read_bytes() == third.read_bytes()
    epoch = {"SOURCE_DATE_EPOCH": "1700000000"}
    dated = wheel_of(project, tmp_path / "d", env=epoch)
    with zipfile.ZipFile(dated) as zf:
        assert {i.date_time[:3] for i in zf.infolist()} == {(2023, 11, 14)}
    with zipfile.ZipFile(first) as zf:
        so = next(n for n in zf.namelist() if n.endswith(".so"))
        assert str(project).encode() not in zf.read(so)  # no absolute path in the binary
    sdists = []
    for name in ("s1", "s2"):
        subprocess.run([sys.executable, "-m", "pep517_torch", "sdist", project, "-o", tmp_path / name],
                       check=True, capture_output=True)
        sdists.append(next((tmp_path / name).glob("*.tar.gz")).read_bytes())
        time.sleep(1.1)
    assert sdists[0] == sdists[1]
    count("wheel builds compared byte for byte (2 build dirs, 2 times, 2 trees)", 3)
    count("sdist builds compared byte for byte", 2)


DEBUGGABLE_PYPROJECT = """\
[project]
name = "debuggable"
version = "1.0"
dynamic = ["dependencies"]
[tool.torch-ext]
packages = ["pkg"]
pch-header = "csrc/common.h"
[[tool.torch-ext.extension]]
name = "pkg._C"
sources = ["csrc/mod.cpp"]
extra-cflags = ["-Winvalid-pch", "-Werror=invalid-pch"]  # an unusable PCH fails the build
"""
DEBUGGABLE_SOURCE = c_api_module(
    """static PyObject *where(PyObject *, PyObject *) {
      std::vector<int> v{1, 2};
      return PyUnicode_FromFormat("%s:%d", __FILE__, v[0] + v[1]);
    }""",
    '{"where", where, METH_NOARGS, nullptr}',
    first_include='"common.h"',  # the project PCH header
)


def debuggable_project(root: Path) -> Path:
    """A tiny C-API module whose first include is a project PCH header (no torch TU)."""
    return write_tree(root, {
        "pkg/__init__.py": "", "pyproject.toml": DEBUGGABLE_PYPROJECT, "csrc/mod.cpp": DEBUGGABLE_SOURCE,
        "csrc/common.h": "#pragma once\n#include <Python.h>\n#include <vector>\n",
    })


@pytest.mark.parametrize("build_type", ["debug", "relwithdebinfo", "none"])
def test_every_build_type_is_reproducible(tmp_path: Path, build_type: str) -> None:
    tree = debuggable_project(tmp_path / "tree-a" / "proj")
    other = tmp_path / "tree-b" / "elsewhere" / "proj"
    shutil.copytree(tree, other)
    kind = f"-Cbuild-type={build_type}"
    first = wheel_of(tree, tmp_path / "w1", kind, f"-Cbuild-dir={tmp_path / 'build-x'}")
    second = wheel_of(tree, tmp_path / "w2", kind, f"-Cbuild-dir={tmp_path / 'elsewhere' / 'build-y'}")
    third = wheel_of(other, tmp_path / "w3", kind)  # the default build dir, inside the tree
    assert first.read_bytes() == second.read_bytes() == third.read_bytes()
    with zipfile.ZipFile(first) as zf:
        so = zf.read(next(n for n in zf.namelist() if n.endswith(".so")))
    assert (b".debug_info" in so) == (build_type != "none")  # the debug info this is about
    (pch_dir,) = {p.parent for p in (tmp_path / "build-x" / "pch").rglob("*.gch")}
    for path in (tmp_path, tree, other, tmp_path / "build-x", pch_dir, Path(pch_dir.name)):
        assert str(path).encode() not in so, path
    site = tmp_path / "site"
    with zipfile.ZipFile(third) as zf:
        zf.extractall(site)
    where = run_python("import torch, pkg._C as c; print(c.where())", env={"PYTHONPATH": str(site)})
    assert where.stdout.strip() == "./csrc/mod.cpp:3"
    count(f"{build_type} wheels compared byte for byte (2 build dirs, 2 trees)", 3)


def test_members_are_relative_and_sdist_rebuilds_the_same_wheel(fixture_copy, tmp_path: Path) -> None:
    project = fixture_copy("light")
    wheel = wheel_of(project, tmp_path / "w")
    subprocess.run([sys.executable, "-m", "pep517_torch", "sdist", project, "-o", tmp_path / "s"],
                   check=True, capture_output=True)
    sdist = next((tmp_path / "s").glob("*.tar.gz"))
    with zipfile.ZipFile(wheel) as zf:
        wheel_names = zf.namelist()
    with tarfile.open(sdist) as tf:
        sdist_names = tf.getnames()
        tf.extractall(tmp_path / "unpacked", filter="data")
    for name in wheel_names + sdist_names:
        assert not name.startswith("/") and ".." not in name.split("/")
    assert not any("/build/" in n or n.endswith(".so") for n in sdist_names)
    rebuilt = wheel_of(next((tmp_path / "unpacked").iterdir()), tmp_path / "w2")
    assert rebuilt.read_bytes() == wheel.read_bytes()
    count("archive members checked for absolute paths and '..'", len(wheel_names) + len(sdist_names))


def test_torch_mismatch_is_caught_at_install_and_at_import(fixture_copy, tmp_path: Path) -> None:
    project = fixture_copy("light")
    pinned = wheel_of(project, tmp_path / "pinned")
    fake_env = tmp_path / "fake-site"  # a torch 2.12.0 that only pretends to be installed
    (fake_env / "torch-2.12.0.dist-info").mkdir(parents=True)
    (fake_env / "torch-2.12.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.12.0\n")
    (fake_env / "torch").mkdir()
    (fake_env / "torch" / "__init__.py").write_text("__version__ = '2.12.0'\n")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site_packages = next(venv.glob("lib/python*/site-packages"))
    shutil.copytree(fake_env / "torch-2.12.0.dist-info", site_packages / "torch-2.12.0.dist-info")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-index",
         pinned], capture_output=True, text=True, env=no_pip_config())
    assert install.returncode != 0 and "torch<2.14,>=2.13" in install.stderr, install.stderr
    count("installs refused through the Requires-Dist pin")

    unpinned = wheel_of(project, tmp_path / "unpinned", "-Ctorch-requirement=none",
                        "-Cbuild-dir=" + str(tmp_path / "b2"))
    site = tmp_path / "site"
    with zipfile.ZipFile(unpinned) as zf:
        assert "Requires-Dist: torch>=2.0\n" in zf.read("lightops-0.3.0.dist-info/METADATA").decode()
        zf.extractall(site)
    # the check lives in the library: it asks the torch Python imported (a real one, its
    # libraries loaded, saying it is 2.12.0)
    failure = run_python("import torch; torch.__version__ = '2.12.0'; import lightops",
                         env={"PYTHONPATH": str(site)}, check=False)
    assert failure.returncode != 0
    assert "2.12.0" in failure.stderr and "2.13" in failure.stderr and "undefined symbol" not in failure.stderr
    ok = run_python("import torch, lightops; print(lightops.scale(torch.ones(1), 4.0).item())",
                    env={"PYTHONPATH": str(site)})
    assert ok.stdout.strip() == "4.0"
    count("imports refused by the torch version guard")


def test_compile_error_shows_first_error_last_and_leaves_no_wheel(fixture_copy, tmp_path: Path) -> None:
    project = fixture_copy("light")
    scale = project / "csrc" / "scale.cpp"
    good = scale.read_text()
    scale.write_text(good.replace("return x.mul", "return x.not_a_method(1); return x.mul"))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", project, "-o", out],
                            capture_output=True, text=True)
    assert result.returncode == 1
    tail = (result.stdout + result.stderr).strip().splitlines()[-6:]
    assert any("csrc/scale.cpp:" in line and "error:" in line for line in tail), tail
    assert not out.exists() or list(out.iterdir()) == []
    scale.write_text(good)
    wheel_of(project, out)
    count("failed compiles followed by a successful rebuild")

"""The torch-version shim in front of a compiled extension, with a real (tiny, torch-free) one."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from pep517_torch.distribution.import_guard import render_import_guard
from pep517_torch.abi.guard_names import native_filename
from tests.commands import run_python
from tests.conftest import write_tree
from tests.tiny_project import c_api_module

EXTENSION_SOURCE = r"""
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *unused) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef definition = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&definition); }
"""

INCLUDE = Path(sysconfig.get_paths()["include"])
pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or not (INCLUDE / "Python.h").is_file() or sys.platform != "linux",
    reason="needs gcc and Python.h on Linux",
)


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("native")
    (directory / "ext.c").write_text(EXTENSION_SOURCE)
    output = directory / native_filename("pkg._C", sysconfig.get_config_var("EXT_SUFFIX"))
    command = ["gcc", "-shared", "-fPIC", f"-I{INCLUDE}", directory / "ext.c", "-o", output]
    subprocess.run(command, check=True)
    return output


def make_tree(base: Path, native: Path, torch_version: str) -> Path:
    """site/pkg (the shim, built against torch 2.13.0+cpu, and the library) and a fake torch."""
    package = base / "site" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy(native, package / native.name)
    (package / "_C.py").write_bytes(render_import_guard("pkg._C", native.name, "2.13.0+cpu"))
    torch = base / "fake_torch" / "torch"
    torch.mkdir(parents=True)
    (torch / "__init__.py").write_text(f"__version__ = {torch_version!r}\n")
    return base


def run_in_tree(base: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` seeing only the standard library and make_tree's site and fake torch."""
    prelude = f"import sys\nsys.path[:0] = [{str(base / 'site')!r}, {str(base / 'fake_torch')!r}]\n"
    return run_python(prelude + code, options=["-S"], check=False, timeout=60)


def test_native_filename() -> None:
    assert native_filename("pkg.sub._C", ".abi3.so") == "_C_native.abi3.so"
    assert native_filename("_top", ".so") == "_top_native.so"


def test_matching_torch_loads_the_extension(tmp_path: Path, native: Path) -> None:
    base = make_tree(tmp_path, native, "2.13.1+cu130")
    result = run_in_tree(
        base,
        "import pkg._C as c, pkg\n"
        "print(c.answer(), c.__name__, type(c.__loader__).__name__, 'torch' in sys.modules)\n"
        "print(sys.modules['pkg._C'] is c is pkg._C, c.__file__.endswith('_C_native' + "
        f"{sysconfig.get_config_var('EXT_SUFFIX')!r}))\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["42 pkg._C ExtensionFileLoader True", "True True"]


def test_mismatched_torch_raises_before_loading(tmp_path: Path, native: Path) -> None:
    base = make_tree(tmp_path, native, "2.12.0+cpu")
    result = run_in_tree(
        base,
        "try:\n    import pkg._C\nexcept ImportError as error:\n    print(error)\n"
        "print(open('/proc/self/maps').read().count('_C_native'))\n",
    )
    assert result.returncode == 0, result.stderr
    message, mapped = result.stdout.splitlines()
    assert "pkg._C was built against torch 2.13.0+cpu, but torch 2.12.0+cpu is installed" in (
        message
    )
    assert "pip install torch==2.13.0" in message
    assert mapped == "0"  # the library was never opened


def test_library_is_invisible_without_the_shim(tmp_path: Path, native: Path) -> None:
    base = make_tree(tmp_path, native, "2.13.0")
    (base / "site" / "pkg" / "_C.py").unlink()
    result = run_in_tree(base, "import pkg._C")
    assert "ModuleNotFoundError: No module named 'pkg._C'" in result.stderr


def test_shim_source_is_plain_python() -> None:
    source = render_import_guard("a.b._C", "_C_native.abi3.so", "2.13.0").decode()
    compile(source, "shim", "exec")
    assert ("_MODULE, _NATIVE, _BUILT_AGAINST, _STABLE_ABI, _BUILT_CUDA = ('a.b._C',"
            " '_C_native.abi3.so', '2.13.0', None, None)") in source
    said = "'../_C.so' must be a file name in the shim's directory"
    with pytest.raises(ValueError, match=re.escape(said)):
        render_import_guard("a._C", "../_C.so", "2.13.0")


GUARDED_PYPROJECT = """\
[build-system]
requires = ["pep517_torch", "torch"]
build-backend = "pep517_torch"

[project]
name = "guarded"
version = "1.0"
dynamic = ["dependencies"]

[tool.torch-ext]
packages = ["gpkg"]
torch-requirement = "none"

[[tool.torch-ext.extension]]
name = "gpkg._C"
sources = ["csrc/c.cpp"]
"""
GUARDED_SOURCE = c_api_module(
    "static PyObject *twice(PyObject *, PyObject *arg) { return PyLong_FromLong(2 * PyLong_AsLong(arg)); }",
    '{"twice", twice, METH_O, nullptr}',
)


def guarded_project(root: Path) -> Path:
    files = {"gpkg/__init__.py": "", "csrc/c.cpp": GUARDED_SOURCE, "pyproject.toml": GUARDED_PYPROJECT}
    return write_tree(root, files)


@pytest.fixture(scope="module")
def guarded_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(project, wheel) of a torch-requirement = "none" project: the wheel has the shim."""
    base = tmp_path_factory.mktemp("guarded")
    root = guarded_project(base / "proj")
    built = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", root, "-o", base / "out"],
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    return root, next((base / "out").glob("*.whl"))


@pytest.mark.compile
def test_guarded_wheel_passes_check_wheel_contents_and_computes(
    guarded_wheel: tuple[Path, Path], tmp_path: Path
) -> None:
    _, wheel = guarded_wheel
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    with zipfile.ZipFile(wheel) as archive:
        assert {"gpkg/_C.py", f"gpkg/_C_native{suffix}"} <= set(archive.namelist())
        archive.extractall(tmp_path / "site")
    checked = subprocess.run([Path(sys.executable).parent / "check-wheel-contents", wheel],
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    code = ("import gpkg._C as c, sys;"
            "print(c.twice(21), type(c.__loader__).__name__, sys.modules['gpkg._C'] is c)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(tmp_path / "site")}, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["42", "ExtensionFileLoader", "True"]


WITHOUT_TORCH = """
import importlib.machinery, importlib.util, sys

class NoTorch(importlib.machinery.PathFinder):  # as if torch were not installed
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            return None
        return super().find_spec(name, path, target)

sys.meta_path[sys.meta_path.index(importlib.machinery.PathFinder)] = NoTorch
assert importlib.util.find_spec("torch") is None
import pep517_torch
try:
    print(pep517_torch.prepare_metadata_for_build_wheel(sys.argv[1], {"torch-requirement": sys.argv[2]}))
finally:
    assert "torch" not in sys.modules
"""


@pytest.mark.compile
def test_metadata_without_torch_installed_equals_the_wheels(
    guarded_wheel: tuple[Path, Path], tmp_path: Path
) -> None:
    root, wheel = guarded_wheel

    def prepare(requirement: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, tmp_path / "md", requirement],
                              cwd=root, capture_output=True, text=True, timeout=300)

    ran = prepare("none")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    dist_info = ran.stdout.strip()
    assert dist_info == "guarded-1.0.dist-info"
    pinned = prepare("minor")  # a pin needs torch's version: still refused, in one line
    assert pinned.returncode == 1 and "torch is not installed" in pinned.stderr, pinned.stderr
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = archive.read(f"{dist_info}/METADATA")
    assert in_wheel == (tmp_path / "md" / dist_info / "METADATA").read_bytes()


@pytest.mark.parametrize("occupant", ["gpkg/_C_native.py", "gpkg/_C_native/__init__.py", "extension"])
def test_a_module_where_the_guarded_library_goes_is_refused(tmp_path: Path, occupant: str) -> None:
    from pep517_torch.backend import pipeline
    from pep517_torch.errors import ConfigError

    root = guarded_project(tmp_path / "proj")
    if occupant == "extension":
        with (root / "pyproject.toml").open("a") as file:
            file.write('\n[[tool.torch-ext.extension]]\nname = "gpkg._C_native"\nsources = ["csrc/c.cpp"]\n')
    else:
        (root / occupant).parent.mkdir(parents=True, exist_ok=True)
        (root / occupant).write_text("")
    with pytest.raises(ConfigError, match=re.escape("gpkg._C_native")) as caught:
        pipeline.build_wheel(root, tmp_path / "out", None)  # refused before anything compiles
    assert caught.value.key == "tool.torch-ext.extension[0].name"
    assert "torch-import-check" in str(caught.value)
    assert not (root / "build").exists() and not (tmp_path / "out").exists()

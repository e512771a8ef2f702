"""The torch-version shim in front of a compiled extension, with a real (tiny, torch-free) one."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pep517_torch.distribution.import_guard import native_filename, render_import_guard

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


def run(base: Path, code: str) -> subprocess.CompletedProcess[str]:
    prelude = f"import sys\nsys.path[:0] = [{str(base / 'site')!r}, {str(base / 'fake_torch')!r}]\n"
    command = [sys.executable, "-S", "-c", prelude + code]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_native_filename() -> None:
    assert native_filename("pkg.sub._C", ".abi3.so") == "_C._native.abi3.so"


def test_matching_torch_loads_the_extension(tmp_path: Path, native: Path) -> None:
    base = make_tree(tmp_path, native, "2.13.1+cu130")
    result = run(
        base,
        "import pkg._C as c, pkg\n"
        "print(c.answer(), c.__name__, type(c.__loader__).__name__, 'torch' in sys.modules)\n"
        "print(sys.modules['pkg._C'] is c is pkg._C, c.__file__.endswith('_C._native' + "
        f"{sysconfig.get_config_var('EXT_SUFFIX')!r}))\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["42 pkg._C ExtensionFileLoader True", "True True"]


def test_mismatched_torch_raises_before_loading(tmp_path: Path, native: Path) -> None:
    base = make_tree(tmp_path, native, "2.12.0+cpu")
    result = run(
        base,
        "try:\n    import pkg._C\nexcept ImportError as error:\n    print(error)\n"
        "print(open('/proc/self/maps').read().count('_C._native'))\n",
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
    result = run(base, "import pkg._C")
    assert "ModuleNotFoundError: No module named 'pkg._C'" in result.stderr


def test_shim_source_is_plain_python() -> None:
    source = render_import_guard("a.b._C", "_C._native.abi3.so", "2.13.0").decode()
    compile(source, "shim", "exec")
    assert "_MODULE, _NATIVE, _BUILT_AGAINST = ('a.b._C', '_C._native.abi3.so', '2.13.0')" in source
    with pytest.raises(ValueError):
        render_import_guard("a._C", "../_C.so", "2.13.0")

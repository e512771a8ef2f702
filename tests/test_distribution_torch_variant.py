"""The CUDA variant in the import check (a stub torch), which modules carry the check (their
DT_NEEDED), the torch requirement PEP 621 lets a build write, and the local label (#21)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pep517_torch.abi.elf import links_cuda, needed_libraries
from pep517_torch.distribution.import_guard import Guard, render_import_guard
from pep517_torch.abi.guard_names import native_filename
from pep517_torch.distribution.torch_requirement import (
    import_check_wanted,
    local_label,
    plan_dependencies,
    with_local_label,
)
from pep517_torch.errors import ConfigError
from tests.commands import run_python

INCLUDE = Path(sysconfig.get_paths()["include"])
needs_gcc = pytest.mark.skipif(
    shutil.which("gcc") is None or not (INCLUDE / "Python.h").is_file() or sys.platform != "linux",
    reason="needs gcc and Python.h on Linux",
)
MODULE = r"""
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *unused) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef definition = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&definition); }
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a module linking a stand-in libc10_cuda.so, the same module linking nothing of CUDA)."""
    directory = tmp_path_factory.mktemp("elf")
    (directory / "stub.c").write_text("int c10_cuda_stub(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", directory / "stub.c", "-o",
                    directory / "libc10_cuda.so"], check=True)
    (directory / "ext.c").write_text(MODULE)
    name = native_filename("pkg._C", sysconfig.get_config_var("EXT_SUFFIX"))
    cuda, plain = directory / "cuda" / name, directory / "plain" / name
    for output, extra in ((cuda, [f"-L{directory}", "-Wl,--no-as-needed", "-lc10_cuda"]),
                          (plain, [])):
        output.parent.mkdir()
        subprocess.run(["gcc", "-shared", "-fPIC", f"-I{INCLUDE}", directory / "ext.c", "-o",
                        output, *extra], check=True)
    return cuda, plain


@needs_gcc
def test_needed_libraries_name_what_the_module_links(built: tuple[Path, Path]) -> None:
    cuda, plain = built
    assert "libc10_cuda.so" in needed_libraries(cuda)
    assert links_cuda(cuda) and not links_cuda(plain)
    assert needed_libraries(Path(__file__)) == []  # not ELF: nothing, no error
    assert needed_libraries(cuda.parent / "missing.so") == []


def _site(base: Path, native: Path, guard: Guard, torch_version: str, cuda: str | None) -> Path:
    package = base / "site" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy(native, package / native.name)
    (package / "_C.py").write_bytes(render_import_guard("pkg._C", native.name, guard))
    torch = base / "fake_torch" / "torch"
    torch.mkdir(parents=True)
    (torch / "__init__.py").write_text(f"__version__ = {torch_version!r}\nfrom . import version\n")
    (torch / "version.py").write_text(f"cuda = {cuda!r}\n")
    return base


def _import(base: Path) -> subprocess.CompletedProcess[str]:
    code = (f"import sys\nsys.path[:0] = [{str(base / 'site')!r}, {str(base / 'fake_torch')!r}]\n"
            "try:\n    import pkg._C as c\n    print('ok', c.answer())\n"
            "except ImportError as error:\n    print(error)\n"
            "print(open('/proc/self/maps').read().count('_C_native'))\n")
    return run_python(code, options=["-S"], check=False, timeout=60)


@needs_gcc
@pytest.mark.parametrize(("running", "cuda", "expected"), [
    ("2.14.1+cpu", None, "built for torch 2.14.1+cu130, this is torch 2.14.1+cpu"),
    ("2.14.1+cu126", "12.6", "built for torch 2.14.1+cu130, this is torch 2.14.1+cu126"),
    ("2.14.1", None, "built for torch 2.14.1+cu130, this is torch 2.14.1+cpu"),  # a source build
])
def test_a_cuda_build_refuses_another_variant_before_loading(
    tmp_path: Path, built: tuple[Path, Path], running: str, cuda: str | None, expected: str
) -> None:
    base = _site(tmp_path, built[0], Guard("2.14.1+cu130", "13.0"), running, cuda)
    message, mapped = _import(base).stdout.splitlines()
    assert expected in message, message
    assert "find-links" in message
    assert mapped == "0"  # the library was never opened


@needs_gcc
@pytest.mark.parametrize(("guard", "running", "cuda"), [
    (Guard("2.14.1+cu130", "13.0"), "2.14.1+cu130", "13.0"),
    (Guard("2.14.1+cu130", "13.0"), "2.14.0+cu132", "13.2"),  # same CUDA major
    (Guard("2.14.1+cpu", None), "2.14.1+cu130", "13.0"),  # CPU code runs under every variant
    (Guard("2.14.1+cpu", None), "2.14.1+cpu", None),
])
def test_a_matching_variant_loads(
    tmp_path: Path, built: tuple[Path, Path], guard: Guard, running: str, cuda: str | None
) -> None:
    base = _site(tmp_path, built[1], guard, running, cuda)
    assert _import(base).stdout.splitlines()[0] == "ok 42"


# -- the torch requirement (PEP 621) -------------------------------------------------------


def _plan(project: dict[str, object], tool: list[str] | None = None, mode: str = "minor",
          torch: str | None = "2.13.0+cpu", extensions: bool = True):  # type: ignore[no-untyped-def]
    return plan_dependencies(project, tool, mode, torch, extensions)  # type: ignore[arg-type]


def test_the_pin_is_added_only_to_dynamic_dependencies() -> None:
    plan = _plan({"dynamic": ["dependencies"]}, ["numpy>=1.26", "torch>=2.0"])
    assert [str(r) for r in plan.dependencies or ()] == ["numpy>=1.26", "torch<2.14,>=2.13"]
    assert plan.pin_from_build and not plan.static_torch
    sdist = _plan({"dynamic": ["dependencies"]}, ["numpy>=1.26"], torch=None)
    assert [str(r) for r in sdist.dependencies or ()] == ["numpy>=1.26"] and sdist.pin_from_build
    none = _plan({"dynamic": ["dependencies"]}, None, mode="none")
    assert none.dependencies == () and not none.pin_from_build


@pytest.mark.parametrize("project", [{}, {"dependencies": ["numpy"]}])
def test_static_dependencies_name_both_ways_out(project: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=re.escape('dynamic = ["dependencies"]')) as caught:
        _plan(project)
    message = str(caught.value)
    assert "\n" not in message
    assert 'torch-requirement = "none"' in message
    assert caught.value.key == "project.dependencies"


def test_a_static_torch_requirement_is_kept_when_the_build_torch_satisfies_it() -> None:
    plan = _plan({"dependencies": ["torch>=2.10"]})  # a stable-ABI project's own line
    assert plan.dependencies is None and plan.static_torch and not plan.pin_from_build
    with pytest.raises(ConfigError, match=r"requires torch>=2\.14, but this build's torch is "
                       r"2\.13\.0\+cpu") as caught:
        _plan({"dependencies": ["torch>=2.14"]})
    assert caught.value.key == "project.dependencies"
    assert not _plan({}, mode="none").static_torch  # no pin wanted: nothing to check
    assert not _plan({}, extensions=False).static_torch  # pure Python: no torch involved


def test_auto_checks_at_import_wherever_no_requirement_names_the_build_torch() -> None:
    """torch-import-check = "auto": a static torch requirement (uv's match-runtime needs one),
    no torch requirement of ours, and a binary needing torch's CUDA get the check; our pin
    alone does not; true and false win over everything."""
    for static in (False, True):
        for requirement in ("minor", "exact", "none"):
            for cuda in (False, True):
                wanted = import_check_wanted("auto", requirement, static, cuda)
                assert wanted is (static or requirement == "none" or cuda), (static, requirement, cuda)
                assert import_check_wanted(True, requirement, static, cuda) is True
                assert import_check_wanted(False, requirement, static, cuda) is False
    # what the plan says of a static list is what the check is asked
    plan = _plan({"dependencies": ["torch>=2.13"]})
    assert import_check_wanted("auto", "minor", plan.static_torch, False)
    plan = _plan({"dynamic": ["dependencies"]}, ["torch>=2.0"])
    assert not import_check_wanted("auto", "minor", plan.static_torch, False)


def test_tool_dependencies_need_dynamic_dependencies() -> None:
    with pytest.raises(ConfigError, match="static") as caught:
        _plan({"dependencies": ["numpy"]}, ["scipy"])
    assert caught.value.key == "tool.torch-ext.dependencies"
    with pytest.raises(ConfigError, match=r'needs "dependencies" in project\.dynamic'):
        _plan({}, ["scipy"])
    with pytest.raises(ConfigError, match="PEP 508") as caught:
        _plan({"dynamic": ["dependencies"]}, ["not a requirement!"])
    assert caught.value.key == "tool.torch-ext.dependencies"


def test_local_label() -> None:
    assert local_label("2.13.0+cpu", None) == "pt213cpu"
    assert local_label("2.14.1+cu130", "13.0") == "pt214cu130"
    assert local_label("2.14.1", "12.6") == "pt214cu126"  # a source build: from its CUDA
    assert with_local_label("1.0.0", "pt213cpu") == "1.0.0+pt213cpu"
    assert with_local_label("1.0.0+abc", "pt214cu130") == "1.0.0+abc.pt214cu130"

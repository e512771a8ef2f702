"""What a module links (its DT_NEEDED), the torch requirement PEP 621 lets a build write, and
the variant a wheel names: its local label (#21) and index page, CUDA binaries built beside a
CPU torch included (#34). The import check of the CUDA variant: test_import_guard.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pep517_torch.abi.elf import needed_libraries
from pep517_torch.distribution.index import build_record, variant_name
from pep517_torch.distribution.torch_requirement import (
    local_label,
    plan_dependencies,
    variant_cuda,
    with_local_label,
)
from pep517_torch.errors import ConfigError

INCLUDE = Path(sysconfig.get_paths()["include"])
needs_gcc = pytest.mark.skipif(
    shutil.which("gcc") is None or sys.platform != "linux", reason="needs gcc on Linux",
)


@needs_gcc
def test_needed_libraries_name_what_a_library_links(tmp_path: Path) -> None:
    (tmp_path / "stub.c").write_text("int c10_cuda_stub(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", tmp_path / "stub.c", "-o", tmp_path / "libc10_cuda.so"],
                   check=True)
    (tmp_path / "ext.c").write_text("int f(void) { return 2; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", tmp_path / "ext.c", f"-L{tmp_path}", "-Wl,--no-as-needed",
                    "-lc10_cuda", "-o", tmp_path / "ext.so"], check=True)
    assert "libc10_cuda.so" in needed_libraries(tmp_path / "ext.so")
    assert needed_libraries(Path(__file__)) == []  # not ELF: nothing, no error
    assert needed_libraries(tmp_path / "missing.so") == []


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


def test_cuda_binaries_beside_a_cpu_torch_name_their_cuda() -> None:
    """Issue 34: a stable-ABI wheel with CUDA kernels built against the CPU torch is no CPU wheel."""
    assert variant_cuda(None, "13") == "13" and variant_cuda("13.0", "13") == "13.0"
    assert variant_cuda(None, None) is None
    assert local_label("2.13.0+cpu", variant_cuda(None, "13")) == "pt213cu13"
    assert variant_name("2.13.0+cpu", None, "13") == "2.13.0+cu13"
    assert variant_name("2.14.1+cu130", "13.0", "13") == "2.14.1+cu130"
    assert variant_name("2.13.0+cpu", None) == "2.13.0+cpu"
    assert build_record("2.13.0+cpu", None, "13") == b'{"cuda": "13", "torch": "2.13.0+cpu", "torch_cuda": null}\n'
    assert build_record("2.13.0+cpu", None) == b'{"torch": "2.13.0+cpu", "torch_cuda": null}\n'

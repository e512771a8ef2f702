"""`ops` under torch 2.14.1+cu130, without a GPU (issue 46): fixtures/opsgood built with its
CUDA kernel (nvcc, one arch), which the listing child sees registered (never run); its wheel
listed again from the wheel alone; opcheck on CPU samples under the CUDA torch; and a wheel
built against torch 2.13.0+cpu read (its record) and loaded under its own torch
(``--python``, PEP517_TORCH_CPU_PYTHON)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from pep517_torch.ops.table import read_table
from tests.commands import run, run_cli
from tests.conftest import FIXTURES
from tests.cuda_tools import require_cuda_torch

TORCH, TOOLKIT = require_cuda_torch()
CPU_PYTHON = os.environ.get("PEP517_TORCH_CPU_PYTHON", "")
pytestmark = [pytest.mark.cuda, pytest.mark.timeout(2700)]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("ops") / "opsgood"
    shutil.copytree(FIXTURES / "opsgood", root, ignore=shutil.ignore_patterns("build", "dist"))
    result = run_cli("wheel", root, "-o", root / "dist", "-Ccuda-arch-list=9.0", timeout=2400)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    return root, next((root / "dist").glob("*.whl")), said


def test_the_cuda_kernel_is_listed_registered(good: tuple[Path, Path, str]) -> None:
    root, wheel, said = good
    assert ("pep517_torch: op goodops::fused_scale_add(Tensor x, Tensor y, float alpha) ->"
            " Tensor: CPU, CUDA, Meta, Autograd") in said
    assert "[no-fake]" not in said and "[cuda-only]" not in said
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith("/pep517_torch.json"))
        record = json.loads(archive.read(name))
    table = read_table(record["ops"])
    assert table.torch == TORCH.version and "CUDA" in table.ops[0].kernels


def test_ops_loads_the_cuda_wheel_without_a_gpu(good: tuple[Path, Path, str]) -> None:
    loaded = run_cli("ops", good[1], "--load", "--json", env={"CUDA_VISIBLE_DEVICES": ""})
    assert loaded.returncode == 0, loaded.stderr
    table = json.loads(loaded.stdout)
    assert table["torch"].startswith("2.14.1") and table["verdicts"] == []
    assert table["ops"][0]["kernels"] == ["CPU", "CUDA", "Meta", "Autograd"]


def test_opcheck_on_cpu_samples_under_the_cuda_torch(good: tuple[Path, Path, str]) -> None:
    result = run_cli("ops", good[0], "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed, 0 failed" in result.stdout


@pytest.mark.skipif(not CPU_PYTHON, reason="needs PEP517_TORCH_CPU_PYTHON (torch 2.13.0+cpu)")
def test_a_wheel_built_against_the_cpu_torch(tmp_path: Path) -> None:
    root = tmp_path / "opsnofake"
    shutil.copytree(FIXTURES / "opsnofake", root, ignore=shutil.ignore_patterns("build", "dist"))
    run(CPU_PYTHON, "-m", "pep517_torch", "wheel", root, "-o", tmp_path / "dist", timeout=1800)
    wheel = next((tmp_path / "dist").glob("*.whl"))
    recorded = run_cli("ops", wheel)  # this interpreter's torch is 2.14.1: the record is read
    assert recorded.returncode == 0 and "under torch 2.13.0+cpu" in recorded.stdout
    assert "[no-fake]" in recorded.stdout
    loaded = run_cli("ops", wheel, "--python", CPU_PYTHON, "--json")
    assert loaded.returncode == 0, loaded.stderr
    table = json.loads(loaded.stdout)
    assert table["torch"] == "2.13.0+cpu" and table["ops"][0]["name"] == "nofakeops::scale"
    assert sys.executable != CPU_PYTHON

"""One stable-ABI wheel across torches: fixtures/stable built under one torch computes under the other.

Runs under the CUDA-torch tier's interpreter (torch 2.14.1+cu130); ``PEP517_TORCH_CPU_PYTHON``
names the interpreter of torch 2.13.0 (CPU). Without a GPU the CUDA kernel cannot run, so its
registration is checked (torch's dispatcher has a CUDA kernel for the op); with one, it runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.cuda import toolkit as cuda
from tests.conftest import FIXTURES

TORCH = toolchain.find_torch()
CPU_PYTHON = os.environ.get("PEP517_TORCH_CPU_PYTHON", "")

pytestmark = [
    pytest.mark.skipif(not TORCH.has_cuda_runtime,
                       reason=f"needs a CUDA build of torch (this is {TORCH.version}): make test-cuda-torch"),
    pytest.mark.skipif(not (CPU_PYTHON and Path(CPU_PYTHON).exists()),
                       reason="needs PEP517_TORCH_CPU_PYTHON (the torch 2.13.0 interpreter)"),
    pytest.mark.compile,
]

COMPUTE = """
import torch, stableops
a = torch.arange(4.0)
print(torch.__version__.split("+")[0], stableops.scaled_add(a, torch.ones(4), 2.0).tolist())
print("cuda kernel", torch._C._dispatch_has_kernel_for_dispatch_key("stableops::scaled_add", "CUDA"))
if torch.cuda.is_available() and torch._C._dispatch_has_kernel_for_dispatch_key("stableops::scaled_add", "CUDA"):
    x = torch.randn(1 << 16, device="cuda")
    y = torch.randn(1 << 16, device="cuda")
    print("gpu max abs diff", (stableops.scaled_add(x, y, 3.0) - (x * 3.0 + y)).abs().max().item())
"""


def build(python: str, root: Path, *settings: str) -> Path:
    out = root / "dist"
    result = subprocess.run([python, "-m", "pep517_torch", "wheel", "-o", str(out), *settings, str(root)],
                            capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    (wheel,) = out.glob("*.whl")
    assert re.fullmatch(r"stableops-1\.0\.0-cp310-abi3-manylinux_2_\d+_x86_64\.whl", wheel.name)
    return wheel


def install_and_compute(python: str, wheel: Path, target: Path) -> list[str]:
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, text=True)
    result = subprocess.run([python, "-c", COMPUTE], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": str(target)})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()


def project(tmp_path: Path, target: str) -> Path:
    root = tmp_path / "stable"
    shutil.copytree(FIXTURES / "stable", root, ignore=shutil.ignore_patterns("build", "dist"))
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('stable-abi = "2.10"', f'stable-abi = "{target}"'))
    return root


@pytest.mark.cuda
def test_built_against_2_13_with_a_cuda_kernel_computes_under_2_14(tmp_path: Path) -> None:
    if cuda.find_cuda(os.environ) is None:
        pytest.skip("needs nvcc")
    wheel = build(CPU_PYTHON, project(tmp_path, "2.10"), "-Ccuda=true", "-Ccuda-arch-list=8.0")
    with zipfile.ZipFile(wheel) as archive:
        assert "Requires-Dist: torch>=2.10\n" in archive.read("stableops-1.0.0.dist-info/METADATA").decode()
    lines = install_and_compute(sys.executable, wheel, tmp_path / "site")
    assert lines[0] == f"{TORCH.version.split('+')[0]} [1.0, 3.0, 5.0, 7.0]"
    assert lines[1] == "cuda kernel True"  # the nvcc-compiled kernel registered under 2.14.1
    if len(lines) > 2:
        assert float(lines[2].split()[-1]) < 1e-5


def test_built_under_2_14_for_2_13_computes_under_2_13(tmp_path: Path) -> None:
    wheel = build(sys.executable, project(tmp_path, "2.13"), "-Ccuda=false")
    with zipfile.ZipFile(wheel) as archive:
        assert "Requires-Dist: torch>=2.13\n" in archive.read("stableops-1.0.0.dist-info/METADATA").decode()
    lines = install_and_compute(CPU_PYTHON, wheel, tmp_path / "site")
    assert lines[0] == "2.13.0 [1.0, 3.0, 5.0, 7.0]"

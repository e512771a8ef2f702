"""What the CUDA-torch tier's two-torch tests share: sys.executable has torch 2.14.1+cu130,
PEP517_TORCH_CPU_PYTHON names an interpreter with torch 2.13.0+cpu, and the CUDA wheel's kernel
is one `<cuda_runtime.h>` file (no torch in it: it compiles in seconds)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.cuda import toolkit as cuda
from tests.conftest import FIXTURES

TORCH = toolchain.find_torch()
CPU_PYTHON = os.environ.get("PEP517_TORCH_CPU_PYTHON")

MARKS = [
    pytest.mark.skipif(not TORCH.has_cuda_runtime,
                       reason=f"needs a CUDA build of torch (this is {TORCH.version})"),
    pytest.mark.skipif(not CPU_PYTHON, reason="needs PEP517_TORCH_CPU_PYTHON (a CPU torch)"),
    pytest.mark.skipif(cuda.find_cuda(os.environ) is None, reason="needs nvcc"),
    pytest.mark.compile,
    pytest.mark.cuda,
]

KERNEL = """\
#include <cuda_runtime.h>
__global__ void lightops_touch(float* x) { x[threadIdx.x] += 0.0f; }
extern "C" int lightops_cuda_ready() { return cudaGetDeviceCount(nullptr) == cudaSuccess; }
"""


def light_cuda_project(target: Path, setting: str) -> Path:
    """fixtures/light at ``target`` with KERNEL as its extension's `cuda` table and ``setting``
    (a `[tool.torch-ext]` line: `variant = "torch"`, `local-version = "torch"`) added."""
    shutil.copytree(FIXTURES / "light", target, ignore=shutil.ignore_patterns("build", "dist"))
    (target / "csrc" / "cuda").mkdir()
    (target / "csrc" / "cuda" / "touch.cu").write_text(KERNEL)
    text = (target / "pyproject.toml").read_text()
    text = text.replace("[tool.torch-ext]\n", f"[tool.torch-ext]\n{setting}\n", 1)
    text += '\n[tool.torch-ext.extension.cuda]\nsources = ["csrc/cuda/*.cu"]\n'
    (target / "pyproject.toml").write_text(text)
    return target

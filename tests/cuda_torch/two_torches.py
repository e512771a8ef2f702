"""What the CUDA-torch tier's two-torch tests share: sys.executable has torch 2.14.1+cu130,
PEP517_TORCH_CPU_PYTHON names an interpreter with torch 2.13.0+cpu, and the CUDA wheel's kernel
is one `<cuda_runtime.h>` file (no torch in it: it compiles in seconds)."""

from __future__ import annotations

import os

import pytest

from pep517_torch.core import cuda, toolchain

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

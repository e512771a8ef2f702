"""What `cuda-compress-mode` (nvcc --compress-mode) does to a CUDA wheel: its size, and the time
to load its library under a CUDA torch (no GPU needed: dlopen, after `import torch`).

    python benchmarks/fatbin_compression.py [--python PY] [--modes unset,none,speed,balance,size]

Builds one project (a `kind = "library"` extension: templated kernels, `<cuda_runtime.h>` only,
for torch 2.14.1+cu130's own arch list) with each mode, through `python -m pep517_torch wheel`,
then, for each wheel, dlopens its library in fresh processes of PY (default .venv-cuda/bin/python,
torch 2.14.1+cu130; `import torch` first, not timed) and prints a table: wheel bytes, device
code stored and decompressed, median load time of 9 processes. Numbers go to docs/cuda.md by hand.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pep517_torch.abi.fatbin import read_device_code  # noqa: E402
from pep517_torch.shipped_runtime.user_line import format_size  # noqa: E402

ARCHS = "7.5;8.0;8.6;9.0;10.0;12.0+PTX"  # torch 2.14.1+cu130's list
KERNELS = """\
#include <cuda_runtime.h>
template <int N, typename T>
__global__ void poly(T* x, const T* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T acc = x[i];
#pragma unroll
  for (int k = 0; k < N; ++k) acc = acc * x[i] + c[k] * (acc - T(k));
  x[i] = acc;
}
#define INSTANTIATE(N) \\
  template __global__ void poly<N, float>(float*, const float*, int); \\
  template __global__ void poly<N, double>(double*, const double*, int);
INSTANTIATE(16) INSTANTIATE(32) INSTANTIATE(48) INSTANTIATE(64) INSTANTIATE(96)
INSTANTIATE(128) INSTANTIATE(192) INSTANTIATE(256)
extern "C" int poly_ready() { return cudaGetDeviceCount(nullptr) == cudaSuccess; }
"""
PYPROJECT = """\
[build-system]
requires = ["pep517_torch", "torch"]
build-backend = "pep517_torch"

[project]
name = "polyops"
version = "1.0"
dynamic = ["dependencies"]

[tool.torch-ext]
packages = ["polyops"]
cuda-arch-list = "{archs}"

[[tool.torch-ext.extension]]
name = "polyops._poly"
kind = "library"
sources = ["csrc/poly.cu"]
"""
LOAD = """\
import ctypes, sys, time
import torch
started = time.perf_counter()
ctypes.CDLL(sys.argv[1])
print(time.perf_counter() - started)
"""


def build(project: Path, out: Path, mode: str) -> Path:
    settings = [] if mode == "unset" else [f"-Ccuda-compress-mode={mode}"]
    subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(project), "-o", str(out),
                    "-Cbuild-dir=build/" + mode, "-Ccuda=true", *settings],
                   check=True, stdout=subprocess.DEVNULL)
    (wheel,) = out.glob("*.whl")
    return wheel


def load_seconds(python: str, library: Path, rounds: int = 9) -> float:
    times = [float(subprocess.run([python, "-c", LOAD, str(library)], capture_output=True,
                                  text=True, check=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}
                                  ).stdout.strip()) for _ in range(rounds)]
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=str(ROOT / ".venv-cuda" / "bin" / "python"))
    parser.add_argument("--modes", default="unset,none,speed,balance,size")
    args = parser.parse_args()
    rows = [("cuda-compress-mode", "wheel", "device code stored", "decompressed", "dlopen")]
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "polyops"
        (project / "csrc").mkdir(parents=True)
        (project / "polyops").mkdir()
        (project / "polyops" / "__init__.py").write_text("")
        (project / "csrc" / "poly.cu").write_text(KERNELS)
        (project / "pyproject.toml").write_text(PYPROJECT.format(archs=ARCHS))
        for mode in args.modes.split(","):
            out = Path(scratch) / f"out-{mode}"
            wheel = build(project, out, mode)
            unpacked = Path(scratch) / f"unpacked-{mode}"
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(unpacked)
            (library,) = unpacked.glob("polyops/*.so")
            code = read_device_code(library)
            decompressed = sum(size for _, size in code.by_target().values())
            seconds = load_seconds(args.python, library)
            rows.append((mode if mode != "unset" else "(unset: nvcc's default)",
                         format_size(wheel.stat().st_size), format_size(code.stored),
                         format_size(decompressed), f"{seconds * 1000:.1f} ms"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

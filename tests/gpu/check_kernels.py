"""Run fixtures/cuda's kernels (and fixtures/cuda_torch's) on the GPU against torch references.

Used by tests/gpu/check.sh; not a pytest module. Modes:

  check_kernels.py wheel            import the installed/unpacked ``cudaops`` package
  check_kernels.py jit ROOT         build fixtures/cuda with pep517_torch.load() and run it
  check_kernels.py torch-wheel      import the unpacked ``cudatorchops`` wheel (fixtures/cuda_torch)
  check_kernels.py torch-apis ROOT  build fixtures/cuda_torch's _C with load() (torch's CUDA APIs)

Prints one line per case and ``RESULT PASS`` or ``RESULT FAIL`` last; exit status 0 on PASS.
"""

from __future__ import annotations

import re
import sys
import time
import traceback
from pathlib import Path

import torch

SIZES = (1, 31, 255, 256, 257, 1000, 65_536, (1 << 20) + 3, (1 << 22) + 17)
AXPY_TOLERANCE = 1e-6  # fp32 fma vs the float64 reference, relative to max |reference|
SUMSQ_TOLERANCE = 1e-9  # float64 accumulation of fp32 squares
failures: list[str] = []
results: list[tuple[str, float, float, bool]] = []  # (kernel, error, tolerance, ok) per case


def report(name: str, error: float, tolerance: float) -> None:
    ok = error == error and error <= tolerance  # error != error: NaN
    print(f"{'ok  ' if ok else 'FAIL'} {name}: relative error {error:.3e} (tolerance {tolerance:.0e})")
    results.append((re.split(r" n=| on cuda", name)[0], error, tolerance, ok))
    if not ok:
        failures.append(name)


def print_table() -> None:
    """One row per kernel (sizes and devices folded): cases, worst error against torch, result."""
    rows: dict[str, list[tuple[float, float, bool]]] = {}
    for kernel, error, tolerance, ok in results:
        rows.setdefault(kernel, []).append((error, tolerance, ok))
    width = max((len(k) for k in rows), default=6)
    print(f"| {'kernel':<{width}} | cases | worst rel. error | tolerance | result |")
    for kernel, cases in rows.items():
        worst = max((e if e == e else float("inf")) for e, _, _ in cases)
        result = "PASS" if all(ok for _, _, ok in cases) else "FAIL"
        print(f"| {kernel:<{width}} | {len(cases):>5} | {worst:>16.3e} | {cases[0][1]:>9.0e} | {result:<6} |")


def relative_error(ours: torch.Tensor, reference: torch.Tensor) -> float:
    ours, reference = ours.double().cpu(), reference.double().cpu()
    if torch.isnan(ours).any() or torch.isinf(ours).any():
        return float("nan")
    scale = reference.abs().max().item() or 1.0
    return (ours - reference).abs().max().item() / scale


class RawKernels:
    """The raw (pointer, n, stream) functions of cudaops._C or of a load()ed build of it."""

    def __init__(self, module: object) -> None:
        self.module = module

    def axpy_(self, a: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.cuda.device(x.device):
            stream = torch.cuda.current_stream().cuda_stream
            self.module.axpy(a, x.data_ptr(), y.data_ptr(), x.numel(), stream)
        return y

    def sum_of_squares(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty((), dtype=torch.float64, device=x.device)
        with torch.cuda.device(x.device):
            stream = torch.cuda.current_stream().cuda_stream
            self.module.sum_of_squares(x.data_ptr(), out.data_ptr(), x.numel(), stream)
        return out


def check_cudaops(label: str, ops: object) -> None:
    generator = torch.Generator().manual_seed(0)
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    for device in devices:
        for n in SIZES:
            x = torch.randn(n, generator=generator).to(device)
            y = torch.randn(n, generator=generator).to(device)
            a = float(torch.randn((), generator=generator))
            reference = a * x.double() + y.double()
            ours = ops.axpy_(a, x, y.clone())
            torch.cuda.synchronize(device)
            report(f"{label} axpy_ n={n} on {device}", relative_error(ours, reference), AXPY_TOLERANCE)
            total = ops.sum_of_squares(x)
            torch.cuda.synchronize(device)
            reference = (x.double() ** 2).sum()
            report(f"{label} sum_of_squares n={n} on {device}", relative_error(total, reference),
                   SUMSQ_TOLERANCE)
    # The current stream is honoured: work queued on a side stream after a slow kernel there.
    device = devices[0]
    stream = torch.cuda.Stream(device)
    x = torch.randn(1 << 22, generator=generator).to(device)
    y = torch.zeros_like(x)
    stream.wait_stream(torch.cuda.current_stream(device))  # x and y were made on the default one
    with torch.cuda.stream(stream):
        big = torch.randn(2048, 2048, device=device)
        for _ in range(4):
            big = big @ big / 2048  # keep the side stream busy
        y.fill_(1.0)
        ops.axpy_(2.0, x, y)
    stream.synchronize()
    report(f"{label} axpy_ on a side stream", relative_error(y, 2.0 * x.double() + 1.0), AXPY_TOLERANCE)


SCALE_TOLERANCE = {torch.float32: 1e-7, torch.float64: 1e-15, torch.float16: 1e-3}


def check_cudatorchops(label: str, module: object, dlink: object | None) -> None:
    """fixtures/cuda_torch: scale (AT_DISPATCH over float/double/half, CUDAGuard, current
    stream), its TORCH_LIBRARY op, and the device-linked affine_cuda_, against torch's ops."""
    if module.cuda_available() is not True or module.device_count() != torch.cuda.device_count():
        failures.append(f"{label}: at::cuda::is_available / c10::cuda::device_count disagree with torch")
    print(f"info {label}: device_name(0) = {module.device_name(0)}")
    generator = torch.Generator().manual_seed(1)
    op = getattr(getattr(torch.ops, "cudatorchops", None), "scale", None)
    for index in range(torch.cuda.device_count()):
        device = torch.device("cuda", index)
        for dtype, tolerance in SCALE_TOLERANCE.items():
            for n in (1, 257, 65_536, (1 << 20) + 5):
                x = torch.randn(n, generator=generator).to(device, dtype)
                reference = x * -1.5  # torch's own mul
                ours = module.scale(x, -1.5)
                torch.cuda.synchronize(device)
                report(f"{label} scale {dtype} n={n} on {device}", relative_error(ours, reference), tolerance)
                if op is not None:  # the TORCH_LIBRARY op ops.cpp registers
                    report(f"{label} torch.ops.cudatorchops.scale {dtype} n={n} on {device}",
                           relative_error(op(x, -1.5), reference), tolerance)
        # The current stream is honoured, and CUDAGuard switches to x's device.
        x = torch.randn((1 << 22) + 1, generator=generator).to(device)
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        other = torch.cuda.device_count() - 1 - index
        with torch.cuda.device(other), torch.cuda.stream(stream):
            big = torch.randn(2048, 2048, device=device)
            for _ in range(4):
                big = big @ big / 2048  # keep the side stream busy
            ours = module.scale(x, 3.0)
        stream.synchronize()
        report(f"{label} scale on {device}, side stream, device {other} current",
               relative_error(ours, x * 3.0), 1e-7)
        if dlink is not None:
            x = torch.randn(100_003, generator=generator).to(device)
            ours = dlink.affine_cuda_(x.clone())
            torch.cuda.synchronize(device)
            report(f"{label} affine_cuda_ (dlink) on {device}", relative_error(ours, x * 2 + 1), 1e-7)


def load_fixture(root: Path, name: str, fixture: str, **kwargs: object) -> object:
    import pep517_torch

    csrc = root / "fixtures" / fixture / "csrc"
    sources = sorted(str(p) for p in csrc.iterdir() if p.suffix in (".cpp", ".cu"))
    started = time.perf_counter()
    module = pep517_torch.load(name, sources, verbose=False, **kwargs)
    print(f"info {name}: load() returned after {time.perf_counter() - started:.1f} s")
    return module


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "wheel"
    if not torch.cuda.is_available():
        print("FAIL no CUDA GPU visible to torch", torch.__version__, torch.version.cuda)
        print("RESULT FAIL")
        return 1
    for i in range(torch.cuda.device_count()):
        print(f"info GPU {i}: {torch.cuda.get_device_name(i)}, capability "
              f"{'.'.join(map(str, torch.cuda.get_device_capability(i)))}")
    try:
        if mode == "wheel":
            import cudaops

            print(f"info cudaops from {cudaops.__file__}, cudart {cudaops.cudart_version()}")
            if cudaops.device_count() != torch.cuda.device_count():
                failures.append("device_count differs from torch's")
            check_cudaops("wheel", cudaops)
        elif mode == "jit":
            root = Path(argv[1])
            module = load_fixture(root, "gpu_check_cudaops", "cuda",
                                  extra_include_paths=[str(root / "fixtures/cuda/csrc/include")],
                                  extra_cflags=["-DCUDAOPS_CXX_ONLY=1"],
                                  extra_cuda_cflags=["-DCUDAOPS_NVCC_ONLY=1"])
            check_cudaops("jit", RawKernels(module))
        elif mode == "torch-wheel":
            import cudatorchops

            print(f"info cudatorchops from {cudatorchops.__file__}")
            check_cudatorchops("torch-wheel", cudatorchops, cudatorchops)
        elif mode == "torch-apis":
            root = Path(argv[1])
            module = load_fixture(root, "gpu_check_cudatorchops", "cuda_torch")
            check_cudatorchops("torch-apis load()", module, None)
        else:
            print(f"unknown mode {mode!r}")
            return 2
    except Exception:  # a crash is a failure with its traceback, not a silent exit
        traceback.print_exc()
        failures.append(f"{mode}: exception")
    print_table()
    print(f"RESULT {'FAIL' if failures else 'PASS'}" + (f" ({len(failures)} failed)" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

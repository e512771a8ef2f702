"""Run fixtures/cuda's kernels (and fixtures/cuda_torch's) on the GPU against torch references.

Used by tests/gpu/check.sh; not a pytest module. Modes:

  check_kernels.py wheel            import the installed/unpacked ``cudaops`` package
  check_kernels.py jit ROOT         build fixtures/cuda with pep517_torch.load() and run it
  check_kernels.py torch-apis ROOT  build fixtures/cuda_torch with load() (torch's CUDA APIs)

Prints one line per case and ``RESULT PASS`` or ``RESULT FAIL`` last; exit status 0 on PASS.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

import torch

SIZES = (1, 31, 255, 256, 257, 1000, 65_536, (1 << 20) + 3, (1 << 22) + 17)
AXPY_TOLERANCE = 1e-6  # fp32 fma vs the float64 reference, relative to max |reference|
SUMSQ_TOLERANCE = 1e-9  # float64 accumulation of fp32 squares
failures: list[str] = []


def report(name: str, error: float, tolerance: float) -> None:
    ok = error == error and error <= tolerance  # error != error: NaN
    print(f"{'ok  ' if ok else 'FAIL'} {name}: relative error {error:.3e} (tolerance {tolerance:.0e})")
    if not ok:
        failures.append(name)


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
        elif mode == "torch-apis":
            module = load_fixture(Path(argv[1]), "gpu_check_cudatorchops", "cuda_torch")
            if module.cuda_available() is not True or module.device_count() != torch.cuda.device_count():
                failures.append("at::cuda::is_available / c10::cuda::device_count disagree with torch")
            print(f"info device_name(0) = {module.device_name(0)}")
            for index in range(torch.cuda.device_count()):
                device = torch.device("cuda", index)
                x = torch.randn((1 << 20) + 5, device=device)
                reference = x.double() * 1.5
                stream = torch.cuda.Stream(device)
                stream.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.device(0), torch.cuda.stream(stream):  # CUDAGuard switches device
                    module.scale_(x, 1.5)
                stream.synchronize()
                report(f"torch-apis scale_ on {device}, side stream", relative_error(x, reference), 1e-7)
                # c10::cuda::CUDAGuard: x on `device` while another device is current.
                y = torch.randn(4099, device=device)
                reference = y.double() * -2.0
                with torch.cuda.device(torch.cuda.device_count() - 1 - index):
                    module.scale_(y, -2.0)
                torch.cuda.synchronize(device)
                report(f"torch-apis scale_ on {device}, other device current",
                       relative_error(y, reference), 1e-7)
        else:
            print(f"unknown mode {mode!r}")
            return 2
    except Exception:  # a crash is a failure with its traceback, not a silent exit
        traceback.print_exc()
        failures.append(f"{mode}: exception")
    print(f"RESULT {'FAIL' if failures else 'PASS'}" + (f" ({len(failures)} failed)" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

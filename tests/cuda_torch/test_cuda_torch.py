"""The CUDA-torch tier (`make test-cuda-torch`): build against torch 2.14.1, the CUDA 13.0 build.

fixtures/cuda_torch is an op library as their authors write them: a .cu on torch tensors
(AT_DISPATCH_*, at::cuda::getCurrentCUDAStream(), CUDAGuard, C10_CUDA_KERNEL_LAUNCH_CHECK), a .cpp
including ATen/cuda headers that dispatches CPU/CUDA in one module and registers a TORCH_LIBRARY
op with a CPU and a CUDA kernel, and a second extension with `dlink = true`. It is built once per
face: a wheel through the PEP 517 hooks (pip), a wheel through the setuptools face, and through
load() / load_inline(cuda_sources=...). Each artifact is checked: it NEEDs the CUDA libraries it
uses, imports on this GPU-less machine, its CPU path computes the right tensor, cuobjdump shows
exactly the requested archs, and the precompiled torch header is used under CUDA torch too.

Under the default suite's CPU torch this module is skipped in one line.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from pep517_torch.core.postlink import guard_patch
from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.pch import cache as pch_cache
from tests.conftest import FIXTURES
from tests.cuda_tools import fatbin_contents, find_cuobjdump, require_cuda_torch

TORCH, TOOLKIT = require_cuda_torch()
CUOBJDUMP = find_cuobjdump()
FIXTURE = FIXTURES / "cuda_torch"

# A CUDA-torch TU takes minutes under load: generous per-test limits (the builds are shared).
pytestmark = [pytest.mark.cuda, pytest.mark.torch_ext, pytest.mark.timeout(2700)]

# Runs in a fresh interpreter against the built package: everything a GPU-less machine can check.
CHILD = """
import json, torch, cudatorchops as ops
x = torch.arange(7, dtype=torch.float32) - 2.5
result = {
    "available": [ops.cuda_available(), torch.cuda.is_available()],
    "count": [ops.device_count(), torch.cuda.device_count()],
    "scale_float": torch.equal(ops.scale(x, 1.5), x * 1.5),
    "scale_double": torch.equal(ops.scale(x.double(), -3.0), x.double() * -3.0),
    "scale_strided": torch.equal(ops.scale(x[::2], 4.0), x[::2] * 4.0),
    "op": torch.equal(torch.ops.cudatorchops.scale(x, 1.5), x * 1.5),
    "op_schema": str(torch.ops.cudatorchops.scale.default._schema),
    "affine": torch.equal(ops.affine(x), x * 2 + 1),
    "launch_status": ops.launch_status(),
}
try:
    ops.scale_cuda(x, 2.0)
except RuntimeError as exc:
    result["cuda_on_cpu_tensor"] = str(exc).splitlines()[0]
if torch.cuda.is_available():
    y = torch.randn(1 << 16, device="cuda")
    result["gpu_scale"] = torch.equal(ops.scale(y, 3.0), y * 3.0)
    result["gpu_op"] = torch.equal(torch.ops.cudatorchops.scale(y.half(), 2.0), y.half() * 2.0)
    result["gpu_affine"] = torch.equal(ops.affine_cuda_(y.clone()), y * 2 + 1)
print(json.dumps(result))
"""


def check_package(site: Path) -> None:
    """Import the built package in a fresh interpreter; its CPU paths compute x * a exactly."""
    child = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(site)}, cwd=site,
    )
    assert child.returncode == 0, child.stdout + child.stderr
    result = json.loads(child.stdout.splitlines()[-1])
    assert result["available"][0] == result["available"][1]
    assert result["count"][0] == result["count"][1]
    for key in ("scale_float", "scale_double", "scale_strided", "op", "affine"):
        assert result[key] is True, (key, result)
    assert result["op_schema"] == "cudatorchops::scale(Tensor x, float a) -> Tensor"
    assert result["cuda_on_cpu_tensor"].startswith("x must be a CUDA tensor")
    if result["available"][1]:
        assert result["launch_status"] == 0
        assert result["gpu_scale"] and result["gpu_op"] and result["gpu_affine"], result
    else:
        assert result["launch_status"] != 0  # no GPU: the runtime's error code, not a crash


def needed(so: Path) -> set[str]:
    """DT_NEEDED of a shared object, read from its ELF dynamic section."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with so.open("rb") as stream:
        elf = ELFFile(stream)
        return {
            tag.needed
            for section in elf.iter_sections() if isinstance(section, DynamicSection)
            for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"
        }


def soname_stems(libs: set[str]) -> set[str]:
    return {lib.split(".so")[0] for lib in libs}


def check_cuda_libs(so: Path, *, torch_cuda: bool, checked: bool = False) -> None:
    """What ``so`` links: with its import check (``checked``), torch's CUDA libraries leave
    NEEDED for libtorch.so, and their symbols (weak now) show what it uses."""
    stems = soname_stems(needed(so))
    if checked:
        assert guard_patch.MAGIC in so.read_bytes()
        assert {"libc10", "libtorch"} <= stems and not {"libc10_cuda", "libcudart", "libtorch_cuda"} & stems, stems
        symbols = subprocess.run(["readelf", "--dyn-syms", "-W", so], capture_output=True, text=True).stdout
        weak = [line.split()[-1] for line in symbols.splitlines() if " WEAK " in line and " UND " in line]
        assert any(name.startswith(("cuda", "__cuda")) for name in weak), weak  # the CUDA runtime
        assert any("N3c104cuda" in name for name in weak), weak  # c10::cuda
        assert any("N2at4cuda" in name for name in weak) == torch_cuda, weak  # at::cuda: libtorch_cuda
        return
    assert {"libc10", "libc10_cuda", "libcudart"} <= stems, stems
    assert ("libtorch_cuda" in stems) == torch_cuda, stems  # only where torch_cuda's API is used


def check_archs(so: Path, sass: set[str], ptx: set[str]) -> None:
    if CUOBJDUMP is None:
        pytest.skip("needs cuobjdump: pip install 'nvidia-cuda-cuobjdump==13.*'")
    assert fatbin_contents(CUOBJDUMP, so) == (sass, ptx)


def used_pch(build_dir: Path, obj_suffix: str) -> Path:
    """The .gch the TU whose object ends with ``obj_suffix`` really uses: its own command with
    -fsyntax-only -H, where gcc marks a PCH it takes with '!' (and one it rejects with 'x')."""
    commands = subprocess.run(
        [str(toolchain.find_ninja(os.environ)), "-C", str(build_dir), "-t", "commands"],
        capture_output=True, text=True,
        check=True,
    ).stdout.splitlines()
    line = next(c for c in commands if c.endswith(obj_suffix) and " -c " in c)
    argv = shlex.split(line.split(" && ")[0])
    keep: list[str] = []
    skip_next = False
    for arg in argv:
        if skip_next:
            skip_next = False
        elif arg in ("-o", "-MF"):
            skip_next = True
        elif arg not in ("-MMD", "-c"):
            keep.append(arg)
    probe = subprocess.run([*keep, "-fsyntax-only", "-H"], capture_output=True, text=True,
                           cwd=build_dir, timeout=1800)
    assert probe.returncode == 0, probe.stderr[-3000:]
    used = [line[2:] for line in probe.stderr.splitlines() if line.startswith("! ")]
    assert len(used) == 1 and used[0].endswith("pch.h.gch"), probe.stderr[:3000]
    return Path(used[0])


# ------------------------------------------------------------------------------------ JIT


JIT_CPP = """
at::Tensor scale_cuda(const at::Tensor& x, double a);
// CPU/CUDA dispatch in one function: the tensor's device picks the path.
at::Tensor scale(const at::Tensor& x, double a) { return x.is_cuda() ? scale_cuda(x, a) : x * a; }
"""
JIT_CUDA = """
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/empty_like.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

template <typename scalar_t>
__global__ void scale_kernel(const scalar_t* x, scalar_t* out, scalar_t a, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = x[i] * a;
}

at::Tensor scale_cuda(const at::Tensor& x, double a) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor input = x.contiguous();
  at::Tensor out = at::empty_like(input);
  const int64_t n = input.numel();
  if (n == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "scale_cuda", [&] {
    scale_kernel<scalar_t><<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), static_cast<scalar_t>(a), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}
"""


@dataclass
class Jit:
    module: object
    build_dir: Path


@pytest.fixture(scope="module")
def jit_load(tmp_path_factory: pytest.TempPathFactory) -> Jit:
    """load() of the fixture's _C sources (ops.cpp + kernels.cu) for 9.0 only."""
    import pep517_torch

    root = tmp_path_factory.mktemp("jit-load")
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
    try:
        module = pep517_torch.load(
            "jit_cudatorchops",
            [str(FIXTURE / "csrc" / "ops.cpp"), str(FIXTURE / "csrc" / "kernels.cu")],
            build_directory=str(root / "b"),
        )
    finally:
        del os.environ["TORCH_CUDA_ARCH_LIST"]
    return Jit(module, root / "b")


@pytest.fixture(scope="module")
def jit_inline(tmp_path_factory: pytest.TempPathFactory) -> Jit:
    """load_inline(cuda_sources=...) for 8.6+PTX."""
    import pep517_torch

    root = tmp_path_factory.mktemp("jit-inline")
    os.environ["TORCH_CUDA_ARCH_LIST"] = "8.6+PTX"
    try:
        module = pep517_torch.load_inline(
            "jit_inline_scale", cpp_sources=JIT_CPP, cuda_sources=JIT_CUDA,
            functions=["scale", "scale_cuda"], build_directory=str(root / "b"),
        )
    finally:
        del os.environ["TORCH_CUDA_ARCH_LIST"]
    return Jit(module, root / "b")


def test_load_builds_the_op_library_against_cuda_torch(jit_load: Jit) -> None:
    import torch

    module = jit_load.module
    x = torch.arange(5, dtype=torch.float64) - 1.0
    assert torch.equal(module.scale(x, 2.5), x * 2.5)  # type: ignore[attr-defined]
    assert module.cuda_available() == torch.cuda.is_available()  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor"):
        module.scale_cuda(x, 2.0)  # type: ignore[attr-defined]
    so = jit_load.build_dir / "jit_cudatorchops.so"
    check_cuda_libs(so, torch_cuda=True)
    check_archs(so, {"sm_90"}, set())


def test_load_inline_with_cuda_sources(jit_inline: Jit) -> None:
    import torch

    module = jit_inline.module
    x = torch.linspace(-1, 1, 9)
    assert torch.equal(module.scale(x, -0.5), x * -0.5)  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor"):
        module.scale_cuda(x, 2.0)  # type: ignore[attr-defined]
    if torch.cuda.is_available():
        y = torch.randn(1000, device="cuda", dtype=torch.float64)
        assert torch.equal(module.scale(y, 3.0), y * 3.0)  # type: ignore[attr-defined]
    so = jit_inline.build_dir / "jit_inline_scale.so"
    check_cuda_libs(so, torch_cuda=False)  # c10_cuda (stream, guard) but nothing of torch_cuda's
    check_archs(so, {"sm_86"}, {"compute_86"})


def test_the_torch_pch_is_used_under_cuda_torch(
    jit_load: Jit, jit_inline: Jit, machine_cache: Path
) -> None:
    """Both JIT builds' torch/extension.h TUs take the same machine-wide PCH, built for this
    CUDA torch (its size is printed: docs/cuda.md compares it with the CPU torch's)."""
    gch = used_pch(jit_load.build_dir, "ops.cpp.o")
    assert used_pch(jit_inline.build_dir, "main.cpp.o") == gch
    [entry] = [e for e in pch_cache.entries(machine_cache / "pch") if e.directory == gch.parent]
    assert entry.info["header"] == "torch/extension.h"
    assert entry.info["torch"] == TORCH.version
    print(f"CUDA-torch PCH: {gch.stat().st_size / 2**20:.0f} MiB, {entry.info}")


# --------------------------------------------------------------------------------- wheels


@dataclass
class Wheel:
    wheel: Path
    site: Path
    build_dir: Path
    log: str


def extracted(wheel: Path, site: Path) -> Path:
    zipfile.ZipFile(wheel).extractall(site)
    return site


@pytest.fixture(scope="module")
def pyproject_wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    root = tmp_path_factory.mktemp("pyproject-face")
    project = root / "cuda_torch"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("build", "dist", "setup.py"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
         "-w", str(root / "dist"), "-Ccuda-arch-list=8.0;9.0+PTX", str(project)],
        capture_output=True, text=True, timeout=2400,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-6000:]
    (wheel,) = (root / "dist").glob("cudatorchops-0.1.0-*.whl")
    (build_dir,) = {p.parent for p in (project / "build").glob("*/build.ninja")}
    return Wheel(wheel, extracted(wheel, root / "site"), build_dir, log)


@pytest.fixture(scope="module")
def setuptools_wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    root = tmp_path_factory.mktemp("setuptools-face")
    project = root / "cuda_torch"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("build", "dist"))
    (project / "pyproject.toml").unlink()  # a setup.py project, as published ones are
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
         "-w", str(root / "dist"), str(project)],
        capture_output=True, text=True, timeout=2400,
        env={**os.environ, "TORCH_CUDA_ARCH_LIST": "8.6"},
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-6000:]
    (wheel,) = (root / "dist").glob("cudatorchops-0.1.0-*.whl")
    builds = {p.parent for p in (project / "build").glob("**/build.ninja")}
    return Wheel(wheel, extracted(wheel, root / "site"), sorted(builds)[0], log)


def sos(site: Path) -> dict[str, Path]:
    return {so.name.split(".")[0]: so for so in (site / "cudatorchops").glob("*.so")}


def test_pyproject_face_wheel(pyproject_wheel: Wheel) -> None:
    # CUDA extensions carry the import check inside by default (no pin can say the CUDA
    # variant): the same files, torch's CUDA libraries brought by libtorch.so (weak symbols).
    built = sos(pyproject_wheel.site)
    assert set(built) == {"_C", "_dlink"}
    assert not {"_C.py", "_dlink.py"} & {p.name for p in (pyproject_wheel.site / "cudatorchops").iterdir()}
    check_cuda_libs(built["_C"], torch_cuda=True, checked=True)  # at::cuda::getDeviceProperties
    check_cuda_libs(built["_dlink"], torch_cuda=False, checked=True)
    check_archs(built["_C"], {"sm_80", "sm_90"}, {"compute_90"})
    # nvcc -dlink links SASS only: the device-linked code carries no PTX.
    check_archs(built["_dlink"], {"sm_80", "sm_90"}, set())
    graph = (pyproject_wheel.build_dir / "build.ninja").read_text()
    assert "-rdc=true" in graph and " -dlink " in graph
    assert "is a CPU build" not in pyproject_wheel.log and "does not match" not in pyproject_wheel.log
    metadata = zipfile.ZipFile(pyproject_wheel.wheel).read("cudatorchops-0.1.0.dist-info/METADATA")
    assert b"Requires-Dist: torch<" in metadata or b"Requires-Dist: torch==" in metadata
    check_package(pyproject_wheel.site)


def test_setuptools_face_wheel(setuptools_wheel: Wheel) -> None:
    built = sos(setuptools_wheel.site)
    assert set(built) == {"_C", "_dlink"}
    check_cuda_libs(built["_C"], torch_cuda=True)
    check_cuda_libs(built["_dlink"], torch_cuda=False)
    check_archs(built["_C"], {"sm_86"}, set())  # TORCH_CUDA_ARCH_LIST, as torch's BuildExtension
    check_archs(built["_dlink"], {"sm_86"}, set())
    check_package(setuptools_wheel.site)

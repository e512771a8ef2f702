"""The CUDA-torch tier (`make test-cuda-torch`): build against a CUDA build of torch.

Runs in its own venv (.venv-cuda, made by tests/cuda_torch/run.sh) holding torch 2.13.0+cu130
and the nvidia-* wheels it pulls in. fixtures/cuda_torch uses torch's CUDA APIs
(``at::cuda::getCurrentCUDAStream()``, ``c10::cuda::CUDAGuard``, ``at::cuda::getDeviceProperties``)
so it must link c10_cuda and torch_cuda, and its ``ATen/cuda/CUDAContext.h`` pulls in cuBLAS,
cuSPARSE and cuSOLVER headers that a trimmed toolkit lacks: they come from
``site-packages/nvidia/cu13/include``. No GPU is needed; with one, the kernel runs too.

Under the default suite's CPU torch every test here is skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pep517_torch.core import cuda, cuda_checks, toolchain
from tests.conftest import FIXTURES, run_python

TORCH = toolchain.find_torch()
TOOLKIT = cuda.find_cuda(os.environ)
FIXTURE = FIXTURES / "cuda_torch"

pytestmark = [
    pytest.mark.skipif(
        not TORCH.has_cuda_runtime,
        reason=f"needs a CUDA build of torch (this is {TORCH.version}): make test-cuda-torch",
    ),
    pytest.mark.skipif(TOOLKIT is None, reason="needs nvcc"),
    pytest.mark.cuda,
    pytest.mark.torch_ext,
]

CHILD = """
import torch, cudatorchops as ops
print("available", ops.cuda_available(), torch.cuda.is_available())
print("count", ops.device_count(), torch.cuda.device_count())
try:
    ops.scale_(torch.ones(4), 2.0)
except RuntimeError as exc:
    print("cpu tensor:", str(exc).splitlines()[0])
if torch.cuda.is_available():
    x = torch.randn(1 << 20, device="cuda")
    expected = x * 3.0
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the extension must launch on the current stream
        ops.scale_(x, 3.0)
    stream.synchronize()
    print("gpu max abs diff", (x - expected).abs().max().item(), ops.device_name(0))
"""


def check_module_output(stdout: str) -> None:
    lines = dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)
    ours, theirs = lines["available"].split()
    assert ours == theirs
    ours, theirs = lines["count"].split()
    assert ours == theirs
    assert "cpu tensor: x must be a CUDA tensor" in stdout
    if "gpu" in lines:
        assert float(lines["gpu"].split()[3]) == 0.0


def nvidia_include() -> Path:
    assert TOOLKIT is not None
    wheel_dirs = [d for d in TOOLKIT.extra_include_dirs if (d / "cublas_v2.h").is_file()]
    assert wheel_dirs, f"no cublas_v2.h among the nvidia-* wheel include dirs {TOOLKIT.extra_include_dirs}"
    return wheel_dirs[0]


def test_torch_is_a_cuda_build_matching_nvcc() -> None:
    assert TOOLKIT is not None and TORCH.cuda is not None
    assert TORCH.cuda.split(".")[0] == str(TOOLKIT.version[0])
    notes = cuda_checks.check_versions(TOOLKIT, TORCH.cuda, allow_mismatch=False)  # raises on a major
    assert len(notes) == (0 if TORCH.cuda == TOOLKIT.version_str else 1), notes
    # The toolkit itself is trimmed here; cuBLAS headers come from the nvidia wheels.
    include = nvidia_include()
    assert "site-packages/nvidia/" in str(include)


def test_wheel_links_c10_cuda_and_torch_cuda(tmp_path: Path) -> None:
    project = tmp_path / "cuda_torch"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("build", "dist"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
         "-w", str(tmp_path / "dist"), "-Ccuda-arch-list=8.0;9.0+PTX", str(project)],
        capture_output=True, text=True, timeout=900,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    assert "is a CPU build" not in log  # the CPU-torch note is for CPU torch only
    assert "does not match" not in log
    (ninja_file,) = (project / "build").glob("*/build.ninja")
    graph = ninja_file.read_text()
    ldflags = next(line for line in graph.splitlines() if line.startswith("ldflags_0 = "))
    for lib in ("-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda", "-ltorch"):
        assert f" {lib} " in f"{ldflags} ", ldflags
    assert f"-isystem {nvidia_include()}" in graph
    (wheel,) = (tmp_path / "dist").glob("cudatorchops-0.1.0-*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    (so,) = (site / "cudatorchops").glob("_C.*.so")
    needed = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True,
                            check=True).stdout
    for lib in ("libc10_cuda.so", "libtorch_cuda.so", "libcudart.so"):
        assert lib in needed, needed
    check_module_output(run_python(CHILD, env={"PYTHONPATH": str(site)}).stdout)


def test_load_links_torch_cuda_apis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pep517_torch

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    module = pep517_torch.load(
        "jit_cudatorchops",
        [str(FIXTURE / "csrc" / "ops.cpp"), str(FIXTURE / "csrc" / "scale.cu")],
        build_directory=str(tmp_path / "b"),
        use_pch=False,
    )
    import torch

    assert module.cuda_available() == torch.cuda.is_available()
    assert module.device_count() == torch.cuda.device_count()
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor"):
        module.scale_(torch.ones(2), 2.0)
    if torch.cuda.is_available():
        x = torch.randn(4096, device="cuda")
        assert torch.equal(module.scale_(x.clone(), 2.0), x * 2.0)
    needed = subprocess.run(["readelf", "-d", str(tmp_path / "b" / "jit_cudatorchops.so")],
                            capture_output=True, text=True, check=True).stdout
    assert "libc10_cuda.so" in needed and "libtorch_cuda.so" in needed


SETUP_PY = """
from setuptools import setup
from {module} import BuildExtension, CUDAExtension
setup(name="cudatorchops", version="0.1.0", packages=["cudatorchops"],
      ext_modules=[CUDAExtension("cudatorchops._C", ["csrc/ops.cpp", "csrc/scale.cu"])],
      cmdclass={{"build_ext": BuildExtension}})
"""


def test_setuptools_face_links_c10_cuda_and_torch_cuda_like_torchs(tmp_path: Path) -> None:
    """The same setup.py with torch's BuildExtension and with ours: same files, both link
    torch's CUDA libraries, ours pins torch."""
    wheels = {}
    for who, module in (("torch", "torch.utils.cpp_extension"), ("ours", "pep517_torch.setuptools")):
        project = tmp_path / who
        shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("build", "dist"))
        (project / "pyproject.toml").unlink()  # a setup.py project
        (project / "setup.py").write_text(SETUP_PY.format(module=module))
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
             "-w", str(tmp_path / f"dist-{who}"), str(project)],
            capture_output=True, text=True, timeout=1800,
            env={**os.environ, "TORCH_CUDA_ARCH_LIST": "8.0"},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        (wheels[who],) = (tmp_path / f"dist-{who}").glob("cudatorchops-0.1.0-*.whl")
    names = {who: sorted(n for n in zipfile.ZipFile(w).namelist() if ".dist-info/" not in n)
             for who, w in wheels.items()}
    assert names["ours"] == names["torch"]
    site = tmp_path / "site"
    zipfile.ZipFile(wheels["ours"]).extractall(site)
    (so,) = (site / "cudatorchops").glob("_C.*.so")
    needed = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True,
                            check=True).stdout
    for lib in ("libc10_cuda.so", "libtorch_cuda.so", "libcudart.so"):
        assert lib in needed, needed
    metadata = zipfile.ZipFile(wheels["ours"]).read("cudatorchops-0.1.0.dist-info/METADATA")
    assert b"Requires-Dist: torch<" in metadata
    check_module_output(run_python(CHILD, env={"PYTHONPATH": str(site)}).stdout)

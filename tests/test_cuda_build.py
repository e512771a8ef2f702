"""CUDA extensions end to end: nvcc in the ninja graph, wheels and load(), on a machine with nvcc.

What is checked is what was built: the fatbin inside the .so (cuobjdump), the edges ninja ran,
the modules importing and answering. No GPU is needed: kernels on raw pointers compile and link
against cudart with any torch, CPU builds included; tests/gpu/check.sh runs them on a GPU.

Sources here are small (pybind11, cuda_runtime.h): each nvcc compile takes seconds. The one
test whose .cu includes torch headers (load_inline's implicit headers) is marked torch_ext.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
import zipfile
from pathlib import Path

import pytest

import pep517_torch
from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.cuda import arch_flags as arch, arch_list, toolkit as cuda
from pep517_torch.core import build as core_build
from pep517_torch.core import plan as core_plan
from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind
from pep517_torch.errors import BuildError, ConfigError, ToolchainError
from pep517_torch.jit import stamp as jit_stamp
from tests.commands import run_python
from tests.conftest import FIXTURES, write_tree
from tests.cuda_tools import fatbin_contents, find_cuobjdump, write_script
from tests.tiny_project import c_api_module
from tests.torch_doubles import substitute_torch

TORCH = toolchain.find_torch()
TOOLKIT = cuda.find_cuda(os.environ)
CUOBJDUMP = find_cuobjdump()
FIXTURE = FIXTURES / "cuda"
CXX_FLAGS = ("-DCUDAOPS_CXX_ONLY=1",)  # the fixture's sources #error without these
NVCC_FLAGS = ("-DCUDAOPS_NVCC_ONLY=1",)
CPU_NOTE = "is a CPU build: CUDA sources compile and link against cudart"

needs_nvcc = pytest.mark.skipif(TOOLKIT is None, reason="needs nvcc (CUDA_HOME or nvcc on PATH)")
needs_cuobjdump = pytest.mark.skipif(
    CUOBJDUMP is None, reason="needs cuobjdump: pip install 'nvidia-cuda-cuobjdump==13.*'"
)


def build_env(**extra: str) -> dict[str, str]:
    """os.environ without an arch list and with no GPU visible: the defaults are deterministic."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    return {**env, "CUDA_VISIBLE_DEVICES": "", **extra}


def copy_fixture(tmp_path: Path, name: str = "cuda") -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target, ignore=shutil.ignore_patterns("build", "dist"))
    return target


def fixture_spec(
    root: Path, name: str = "cudaops._C", sources: tuple[str, ...] | None = None, **changes: object
) -> ExtensionSpec:
    csrc = root / "csrc"
    names = sources or ("module.cpp", "axpy.cu", "sum_of_squares.cu")
    arguments: dict[str, object] = dict(
        name=name,
        sources=tuple(csrc / s for s in names),
        include_dirs=(csrc / "include",),
        extra_cflags=CXX_FLAGS,
        extra_cuda_cflags=NVCC_FLAGS,
    )
    arguments.update(changes)
    return ExtensionSpec(**arguments)  # type: ignore[arg-type]


def kernel_library(
    root: Path, name: str, source: str = "axpy.cu", **changes: object
) -> ExtensionSpec:
    """One .cu file of the fixture as a shared library: the cheapest real CUDA artifact."""
    return fixture_spec(
        root, name, (source,), kind=Kind.LIBRARY, python_abi_suffix=False, **changes
    )


def build(
    specs: list[ExtensionSpec],
    build_dir: Path,
    *,
    env: dict[str, str] | None = None,
    **options: object,
) -> tuple[core_build.BuildResult, list[str]]:
    lines: list[str] = []
    result = core_build.build(
        specs,
        BuildOptions(
            build_dir=build_dir, env=env or build_env(), compiler_launcher="none", **options
        ),  # type: ignore[arg-type]
        log=lines.append,
    )
    return result, lines


def fatbin(path: Path) -> tuple[set[str], set[str]]:
    assert CUOBJDUMP is not None
    return fatbin_contents(CUOBJDUMP, path)


def notes(lines: list[str], text: str) -> list[str]:
    """Our lines (pip indents a backend's output) that contain ``text``."""
    return [line.strip() for line in lines if line.strip().startswith("pep517_torch:") and text in line]


# ------------------------------------------------------------------------- the wheel face


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """fixtures/cuda built by pip (no isolation) for 8.0;9.0+PTX: (wheel, unpacked dir, log)."""
    if TOOLKIT is None:
        pytest.skip("needs nvcc")
    tmp = tmp_path_factory.mktemp("cuda_wheel")
    project = copy_fixture(tmp)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
         "-w", str(tmp / "dist"), "-Ccuda-arch-list=8.0;9.0+PTX", str(project)],
        capture_output=True, text=True, env=build_env(), timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = (tmp / "dist").glob("cudaops-0.1.0-*.whl")
    unpacked = tmp / "site"
    with zipfile.ZipFile(built) as archive:
        archive.extractall(unpacked)
    return built, unpacked, result.stdout + result.stderr


IMPORT_CHILD = """
import cudaops, torch
print("cudart", cudaops.cudart_version())
print("ceil_div", cudaops._C.ceil_div(7, 2))
try:
    cudaops.axpy_(2.0, torch.ones(3), torch.ones(3))
except ValueError as exc:
    print("cpu tensors:", exc)
if cudaops.device_count() == 0:
    try:
        cudaops._C.axpy(1.0, 0, 0, 16, 0)
    except RuntimeError as exc:
        print("no gpu:", exc)
"""


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.compile
def test_wheel_builds_links_and_imports_without_a_gpu(wheel: tuple[Path, Path, str]) -> None:
    built, site, log = wheel
    names = zipfile.ZipFile(built).namelist()
    (so,) = [n for n in names if n.startswith("cudaops/_C.") and n.endswith(".so")]
    assert "cudaops/__init__.py" in names
    steps = [line for line in log.splitlines() if ": done in " in line]
    assert sorted(s.split("] ", 1)[1].split(": done in ")[0] for s in steps) == [
        "compiling csrc/axpy.cu", "compiling csrc/module.cpp",
        "compiling csrc/sum_of_squares.cu", "linking cudaops._C",
    ]
    needed = subprocess.run(
        ["readelf", "-d", str(site / so)], capture_output=True, text=True, check=True
    ).stdout
    assert "libcudart.so" in needed  # the kernels' launches use it
    # What the link asked for (the linker may drop unused libraries: --as-needed).
    (ninja_file,) = (site.parent / "cuda" / "build").glob("*/build.ninja")
    ldflags = next(l for l in ninja_file.read_text().splitlines() if l.startswith("ldflags_0 ="))
    libs = [flag for flag in ldflags.split() if flag.startswith("-l")]
    if TORCH.has_cuda_runtime:
        assert libs[:5] == ["-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda", "-ltorch"]
        assert CPU_NOTE not in log
    else:
        assert libs[:3] == ["-lc10", "-ltorch_cpu", "-ltorch"] and "-lc10_cuda" not in libs
        assert len(notes(log.splitlines(), CPU_NOTE)) == 1, log  # said once, clearly
        assert "torch's CUDA runtime APIs (c10::cuda, at::cuda) are unavailable" in log
    child = run_python(IMPORT_CHILD, env={"PYTHONPATH": str(site)})
    assert TOOLKIT is not None
    cudart = int(child.stdout.split("cudart ", 1)[1].split()[0])
    assert cudart // 1000 == TOOLKIT.version[0]  # cudart answered from C++, GPU or not
    assert "ceil_div 4" in child.stdout
    assert "cpu tensors: x must be a contiguous float32 CUDA tensor" in child.stdout
    if "no gpu:" in child.stdout:  # the launch failed cleanly, as a Python exception
        assert "axpy: cuda" in child.stdout


@needs_nvcc
@needs_cuobjdump
@pytest.mark.cuda
@pytest.mark.compile
def test_wheel_holds_exactly_the_requested_code(wheel: tuple[Path, Path, str]) -> None:
    _, site, _ = wheel
    (so,) = (site / "cudaops").glob("_C.*.so")
    assert fatbin(so) == ({"sm_80", "sm_90"}, {"compute_90"})


# ------------------------------------------------------------------------ arch lists, proven


@needs_nvcc
@needs_cuobjdump
@pytest.mark.cuda
@pytest.mark.compile
def test_arch_specific_9_0a(tmp_path: Path) -> None:
    spec = kernel_library(FIXTURE, "arch90a", cuda_arch_list=("9.0a",))
    result, lines = build([spec], tmp_path / "b")
    assert fatbin(result.artifacts["arch90a"]) == ({"sm_90a"}, set())
    assert not notes(lines, "GPU"), lines  # an explicit list: nothing to explain


@needs_nvcc
@needs_cuobjdump
@pytest.mark.cuda
@pytest.mark.compile
def test_default_without_gpu_is_documented_and_said_once(tmp_path: Path) -> None:
    assert TOOLKIT is not None
    specs = [
        kernel_library(FIXTURE, "dflt_axpy"),
        kernel_library(FIXTURE, "dflt_sumsq", "sum_of_squares.cu"),
    ]
    result, lines = build(specs, tmp_path / "b")
    default = arch.default_arch_entries(TOOLKIT)
    expected = (
        {f"sm_{e.number}" for e in default},
        {f"compute_{e.number}" for e in default if e.ptx},
    )
    if TOOLKIT.version == (13, 0):  # docs/cuda.md states this one
        assert arch.format_arch_list(default) == "8.0;9.0;10.0;11.0;12.0+PTX"
    for name in ("dflt_axpy", "dflt_sumsq"):
        assert fatbin(result.artifacts[name]) == expected
    said = notes(lines, "no GPU visible")
    assert said == [
        f"pep517_torch: no GPU visible and no architectures chosen: building for "
        f"{arch.format_arch_list(default)} (the default for nvcc {TOOLKIT.version_str});"
        f" set cuda_arch_list to choose"  # the core's field: this spec comes from no face
    ], lines  # two extensions, one line


@needs_nvcc
@needs_cuobjdump
@pytest.mark.cuda
@pytest.mark.compile
def test_explicit_gencode_replaces_the_arch_list(tmp_path: Path) -> None:
    gencode = "-gencode=arch=compute_86,code=sm_86"
    spec = kernel_library(
        FIXTURE,
        "own_gencode",
        cuda_arch_list=("8.0", "9.0+PTX"),
        extra_cuda_cflags=(*NVCC_FLAGS, gencode),
    )
    result, lines = build([spec], tmp_path / "b")
    assert fatbin(result.artifacts["own_gencode"]) == ({"sm_86"}, set())
    assert notes(lines, "chooses the GPU architectures") == [
        f"pep517_torch: extra_cuda_cflags[{len(NVCC_FLAGS)}] chooses the GPU architectures"
        f" ({gencode}): adding no arch flags; cuda_arch_list (8.0;9.0+PTX) ignored"
    ]
    command = (tmp_path / "b" / "build.ninja").read_text()
    assert "compute_80" not in command and "compute_90" not in command


# ----------------------------------------------------------------- incremental: .cuh edits


def edit(path: Path, text: str | None = None) -> None:
    """Rewrite (or just touch) a file after a build: it is now newer than the objects."""
    time.sleep(0.05)
    path.write_text(path.read_text() if text is None else text)


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.compile
def test_edited_cuh_rebuilds_only_the_cu_files_that_include_it(tmp_path: Path) -> None:
    project = copy_fixture(tmp_path)
    spec = fixture_spec(project)
    options = dict(cuda_arch_list=("8.0",), source_root=project)
    first, _ = build([spec], tmp_path / "b", **options)
    assert sorted(first.run.steps) == [
        "compiling csrc/axpy.cu", "compiling csrc/module.cpp",
        "compiling csrc/sum_of_squares.cu", "linking cudaops._C",
    ]
    assert build([spec], tmp_path / "b", **options)[0].run.steps == []

    # nvcc's depfile is in ninja's log: project headers only (-MMD), no toolkit or system ones.
    deps = core_build.header_dependencies(first.plan)
    include = (project / "csrc" / "include" / "cudaops").resolve()
    axpy_deps = {p.resolve() for p in deps["obj/cudaops._C/csrc/axpy.cu.o"]}
    assert {include / "axpy.cuh", include / "launch.h"} <= axpy_deps
    assert include / "reduce.cuh" not in axpy_deps
    assert not any(
        str(p).startswith(("/usr/", str(TOOLKIT.root if TOOLKIT else "/nowhere")))
        for p in axpy_deps
    )

    header = include / "axpy.cuh"
    edit(header, header.read_text().replace("fmaf(a, x, y)", "a * x + y"))
    assert build([spec], tmp_path / "b", **options)[0].run.steps == [
        "compiling csrc/axpy.cu", "linking cudaops._C",
    ]
    edit(include / "reduce.cuh")
    assert build([spec], tmp_path / "b", **options)[0].run.steps == [
        "compiling csrc/sum_of_squares.cu", "linking cudaops._C",
    ]
    edit(include / "launch.h")  # a plain header all three include
    assert len(build([spec], tmp_path / "b", **options)[0].run.steps) == 4


# ----------------------------------------------------------------------------- the JIT face


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.compile
def test_load_with_cu_sources(
    tmp_path: Path,
    jit_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.6")
    csrc = FIXTURE / "csrc"
    with warnings.catch_warnings(record=True) as caught:  # unwatched: notes come as warnings
        warnings.simplefilter("always")
        module = pep517_torch.load(
            "jit_cudaops",
            [str(csrc / "module.cpp"), str(csrc / "axpy.cu"), str(csrc / "sum_of_squares.cu")],
            extra_include_paths=[str(csrc / "include")],
            extra_cflags=list(CXX_FLAGS),
            extra_cuda_cflags=[" ".join(NVCC_FLAGS) + " -lineinfo"],  # torch-style: one string
            build_directory=str(tmp_path / "b"),
        )
    assert module.__name__ == "jit_cudaops"
    warned = [str(w.message) for w in caught]
    assert {w.filename for w in caught} <= {__file__}  # they point at the load() call
    assert sum(CPU_NOTE in w for w in warned) == (0 if TORCH.has_cuda_runtime else 1), warned
    assert module.ceil_div(9, 4) == 3
    assert TOOLKIT is not None and module.cudart_version() // 1000 == TOOLKIT.version[0]
    err = capfd.readouterr().err
    assert CPU_NOTE not in err  # unwatched load() prints nothing
    assert not any("no GPU visible" in w for w in warned)  # TORCH_CUDA_ARCH_LIST chose
    if CUOBJDUMP is not None:
        assert fatbin(tmp_path / "b" / "jit_cudaops.so") == ({"sm_86"}, set())
    # The up-to-date stamp tracks the sources and the project headers nvcc's depfiles named
    # (.cuh included), and no system or toolkit header.
    stamp = jit_stamp.read(jit_stamp.stamp_path(tmp_path / "b", "jit_cudaops"))
    assert stamp is not None
    tracked = {Path(path).name for path in stamp["files"]}
    assert tracked == {"module.cpp", "axpy.cu", "sum_of_squares.cu", "launch.h", "axpy.cuh",
                       "reduce.cuh"}, stamp["files"]
    # Warm: the same request is the same module, without a rebuild.
    again = pep517_torch.load(
        "jit_cudaops",
        [str(csrc / "module.cpp"), str(csrc / "axpy.cu"), str(csrc / "sum_of_squares.cu")],
        extra_include_paths=[str(csrc / "include")],
        extra_cflags=list(CXX_FLAGS),
        extra_cuda_cflags=[" ".join(NVCC_FLAGS) + " -lineinfo"],
        build_directory=str(tmp_path / "b"),
    )
    assert again is module


INLINE_CUDA = textwrap.dedent(
    """
    #include <cuda_runtime.h>
    __global__ void fill(float* x, float value, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) x[i] = value;
    }
    int blocks_for(int n) {  // host code in the .cu file: compiled by nvcc's host pass
      int device_count = 0;
      cudaGetDeviceCount(&device_count);
      (void)device_count;
      return (n + 255) / 256;
    }
    """
)


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.compile
def test_load_inline_cuda_sources_fast_path(
    tmp_path: Path, jit_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    module = pep517_torch.load_inline(
        "inline_cuda_fast",
        cpp_sources=["#include <pybind11/pybind11.h>", "int blocks_for(int n);"],
        cuda_sources=INLINE_CUDA,
        functions=["blocks_for"],
        no_implicit_headers=True,
        with_pytorch_error_handling=False,
        build_directory=str(tmp_path / "b"),
    )
    assert module.blocks_for(1000) == 4 and module.blocks_for(256) == 1
    cu = (tmp_path / "b" / "cuda.cu").read_text()
    assert cu.lstrip().startswith("#include <cuda_runtime.h>") and "torch/types.h" not in cu
    if CUOBJDUMP is not None:
        assert fatbin(tmp_path / "b" / "inline_cuda_fast.so") == ({"sm_80"}, set())


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.torch_ext
@pytest.mark.slow  # the CUDA-torch tier's test_load_inline_with_cuda_sources proves it in CI
def test_load_inline_cuda_sources_with_torch_headers(
    tmp_path: Path, jit_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch's prepended headers (torch/types.h, cuda.h, cuda_runtime.h) compile under nvcc."""
    import torch

    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    module = pep517_torch.load_inline(
        "inline_cuda_torch",
        cpp_sources="int64_t rows_times_blocks(torch::Tensor x);",
        cuda_sources=INLINE_CUDA
        + textwrap.dedent(
            """
            int64_t rows_times_blocks(torch::Tensor x) {
              return x.size(0) * blocks_for(static_cast<int>(x.numel()));
            }
            """
        ),
        functions=["rows_times_blocks"],
        build_directory=str(tmp_path / "b"),
        use_pch=False,
    )
    assert module.rows_times_blocks(torch.zeros(3, 200)) == 3 * 3
    cu = (tmp_path / "b" / "cuda.cu").read_text().splitlines()
    assert cu[:3] == ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]


# ---------------------------------------------------------------------- bad input, clear errors


def test_cu_source_without_nvcc_says_where_it_looked(
    tmp_path: Path, jit_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nowhere = tmp_path / "no-cuda-here"
    monkeypatch.setattr(cuda, "DEFAULT_SEARCH_PATHS", (nowhere,))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a C++ compiler, no nvcc
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    if cuda.find_cuda(os.environ) is not None:
        pytest.skip("an nvcc wheel is installed in this environment")
    said = r"^no usable CUDA toolkit \(nvcc\) found\. Looked at:"
    with pytest.raises(ToolchainError, match=said) as failure:
        pep517_torch.load(
            "no_nvcc",
            [str(FIXTURE / "csrc" / "axpy.cu")],
            extra_cuda_cflags=list(NVCC_FLAGS),
            build_directory=str(tmp_path / "b"),
            extra_include_paths=[str(FIXTURE / "csrc" / "include")],
            is_python_module=False,
        )
    message = str(failure.value)
    for looked in (
        "CUDA_HOME: not set",
        "CUDA_PATH: not set",
        "nvcc on PATH: not found",
        f"{nowhere}: does not exist",
        "nvidia-cuda-nvcc wheel: no nvidia/cu*/bin/nvcc",
    ):
        assert f"  - {looked}" in message, message
    assert "set CUDA_HOME to the directory holding bin/nvcc" in message
    assert "pip install 'nvidia-cuda-nvcc" in message
    assert not (tmp_path / "b" / "obj").exists()  # failed before compiling anything


@needs_nvcc
def test_unknown_arch_is_a_config_error_naming_its_source(
    tmp_path: Path, jit_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = copy_fixture(tmp_path)
    from pep517_torch.backend import pipeline

    said = "^cuda-arch-list: unknown CUDA architecture 'sm_80'"
    with pytest.raises(ConfigError, match=said) as failure:
        pipeline.build_wheel(project, tmp_path / "dist", {"cuda-arch-list": "sm_80"})
    assert str(failure.value) == (
        "cuda-arch-list: unknown CUDA architecture 'sm_80' (did you mean 8.0?); expected "
        + arch_list.ACCEPTED_FORMS + " (from 'sm_80')"
    )
    assert not (tmp_path / "dist").exists() and not (project / "build").exists()
    with pytest.raises(
        ConfigError,
        match=r"^cuda_arch_list: nvcc \d+\.\d+ .* cannot build for 3\.5; it can build \d",
    ):
        core_plan.prepare(
            [kernel_library(project, "old", cuda_arch_list=("3.5",))],
            BuildOptions(build_dir=tmp_path / "b", env=build_env()),
        )
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "Hopper;bogus")  # the JIT names the variable
    with pytest.raises(
        ConfigError, match="^TORCH_CUDA_ARCH_LIST: unknown CUDA architecture 'bogus'"
    ):
        pep517_torch.load(
            "arch_typo",
            [str(project / "csrc" / "axpy.cu")],
            extra_cuda_cflags=list(NVCC_FLAGS),
            is_python_module=False,
            extra_include_paths=[str(project / "csrc" / "include")],
            build_directory=str(tmp_path / "jit"),
        )
    assert not list(tmp_path.glob("**/obj/**/*.o"))

@needs_nvcc
def test_nvcc_and_torch_cuda_major_mismatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert TOOLKIT is not None
    other = f"{TOOLKIT.version[0] - 1}.8"
    substitute_torch(monkeypatch, tmp_path / "torch", f"2.13.0+cu{other.replace('.', '')}",
                     other)
    spec = kernel_library(FIXTURE, "mismatch")
    said = re.escape(f"nvcc {TOOLKIT.version_str} ({TOOLKIT.nvcc}")
    with pytest.raises(ToolchainError, match=said) as failure:
        core_plan.prepare([spec], BuildOptions(build_dir=tmp_path / "b", env=build_env()))
    message = str(failure.value)
    assert f"does not match the CUDA {other} torch was built with" in message
    assert f"pip install 'nvidia-cuda-nvcc-cu{TOOLKIT.version[0] - 1}=={other}.*'" in message
    assert "build anyway" not in message  # this spec's face (none) names no override
    assert not (tmp_path / "b" / "build.ninja").exists()
    plan = core_plan.prepare(
        [spec],
        BuildOptions(
            build_dir=tmp_path / "b",
            env=build_env(),
            allow_cuda_version_mismatch=True,
            cuda_arch_list=("8.0",),
        ),
    )
    assert [n for n in plan.notes if "building anyway" in n] == [
        f"nvcc {TOOLKIT.version_str} ({TOOLKIT.nvcc}, found via {TOOLKIT.found_via}) does not"
        f" match the CUDA {other} torch was built with; an extension built with another CUDA"
        " major version fails to load or crashes (building anyway: allow_cuda_version_mismatch"
        " is set)"
    ]
    # A minor difference is a note, not an error.
    minor = f"{TOOLKIT.version[0]}.{TOOLKIT.version[1] + 1}"
    substitute_torch(monkeypatch, tmp_path / "torch2", "2.13.0+cuXYZ", minor)
    plan = core_plan.prepare(
        [spec], BuildOptions(build_dir=tmp_path / "c", env=build_env(), cuda_arch_list=("8.0",))
    )
    assert any("differs from torch's CUDA" in n and "minor version" in n for n in plan.notes)


TINY_KERNEL = """#include <cuda_runtime.h>
__global__ void add_one(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}
int kernel_line() { return __LINE__; }
"""
TINY_MODULE = c_api_module(
    "int kernel_line();\n"
    "static PyObject *line(PyObject *, PyObject *) { return PyLong_FromLong(kernel_line()); }",
    '{"line", line, METH_NOARGS, nullptr}',
)


def tiny_cuda_project(root: Path) -> Path:
    return write_tree(root, {
        "pkg/__init__.py": "", "csrc/k.cu": TINY_KERNEL, "csrc/mod.cpp": TINY_MODULE,
        "pyproject.toml": '[project]\nname = "tinycuda"\nversion = "1.0"\ndynamic = ["dependencies"]\n[tool.torch-ext]\n'
        'packages = ["pkg"]\n[[tool.torch-ext.extension]]\nname = "pkg._C"\n'
        'sources = ["csrc/mod.cpp", "csrc/k.cu"]\n',
    })


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.compile
@pytest.mark.parametrize("build_type", ["release", "debug"])
def test_nvcc_objects_are_reproducible(tmp_path: Path, build_type: str) -> None:
    """nvcc's temporary file names (/tmp/tmpxft_<pid>_...) and the build directory stay out."""
    tree = tiny_cuda_project(tmp_path / "a" / "proj")
    other = tmp_path / "b" / "elsewhere" / "proj"
    shutil.copytree(tree, other)
    wheels = []
    for source, build_dir in [(tree, tmp_path / "bx"), (tree, tmp_path / "by"), (other, None)]:
        out = tmp_path / f"w{len(wheels)}"
        command = [sys.executable, "-m", "pep517_torch", "wheel", source, "-o", out,
                   f"-Cbuild-type={build_type}", "-Ccuda-arch-list=8.0"]
        command += [f"-Cbuild-dir={build_dir}"] if build_dir else []
        result = subprocess.run(command, capture_output=True, text=True, env=build_env(), timeout=600)
        assert result.returncode == 0, result.stdout + result.stderr
        wheels.append(next(out.glob("*.whl")).read_bytes())
    assert wheels[0] == wheels[1] == wheels[2]
    with zipfile.ZipFile(next((tmp_path / "w0").glob("*.whl"))) as archive:
        so = archive.read(next(n for n in archive.namelist() if n.endswith(".so")))
    assert b"tmpxft" not in so and str(tmp_path).encode() not in so
    assert b"k.cu.o.cudafe1.cpp" in so  # nvcc's intermediate, named after the object


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.compile
def test_kernel_compile_error_shows_nvccs_file_and_line(tmp_path: Path, jit_env: Path) -> None:
    source = tmp_path / "src" / "broken kernel.cu"
    source.parent.mkdir()
    source.write_text(
        "#include <cuda_runtime.h>\n__global__ void k(float* x) {\n  x[0] = undeclared_thing;\n}\n"
    )
    with pytest.raises(BuildError, match="^Error building extension 'broken_kernel'") as failure:
        pep517_torch.load(
            "broken_kernel",
            [str(source)],
            build_directory=str(tmp_path / "b"),
            is_python_module=False,
        )
    expected = f'{source}(3): error: identifier "undeclared_thing" is undefined'
    assert failure.value.first_error is not None
    assert failure.value.first_error.splitlines()[:2] == [expected, "    x[0] = undeclared_thing;"]
    message = str(failure.value)
    assert "compiling broken kernel.cu failed" in message  # names the failed source
    assert message.endswith(f"{failure.value.first_error}")  # nvcc's words, file(line) first


def test_include_line_numbers_after_blank_lines(tmp_path: Path) -> None:
    from pep517_torch.core import scan

    source = tmp_path / "ops.cpp"
    source.write_text("// header\n#include <a.h>\n\n#include <ATen/cuda/CUDAContext.h>\n")
    assert [(i.line, i.header) for i in scan.includes(source)] == [
        (2, "a.h"),
        (4, "ATen/cuda/CUDAContext.h"),
    ]


def test_torch_cuda_headers_with_a_cpu_torch_fail_before_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    substitute_torch(monkeypatch, tmp_path / "torch", "2.13.0+cpu", None)
    ops = FIXTURES / "cuda_torch" / "csrc" / "ops.cpp"
    line = ops.read_text().splitlines().index("#include <ATen/cuda/CUDAContext.h>") + 1
    spec = ExtensionSpec("cudatorchops._C", (ops, FIXTURES / "cuda_torch" / "csrc" / "kernels.cu"))
    if TOOLKIT is None:  # without nvcc the toolkit error comes first; the header check is pure
        from pep517_torch.core import scan

        with pytest.raises(ToolchainError, match=rf"ops\.cpp:{line} includes <ATen/cuda/CUDAContext\.h>"):
            core_plan._check_torch_cuda_headers(
                spec, scan.walk_includes(spec.sources, ()), toolchain.find_torch()
            )
        return
    said = "^" + re.escape(f"{ops}:{line} includes <ATen/cuda/CUDAContext.h>")
    with pytest.raises(ToolchainError, match=said) as failure:
        core_plan.prepare([spec], BuildOptions(build_dir=tmp_path / "b", env=build_env()))
    assert str(failure.value) == (
        f"{ops}:{line} includes <ATen/cuda/CUDAContext.h>, but torch 2.13.0+cpu is a CPU build without"
        " torch's CUDA headers and libraries (c10_cuda, torch_cuda). Extension 'cudatorchops._C'"
        " needs a CUDA build of torch (on Linux x86_64, PyPI's torch==2.13.0 is one;"
        " download.pytorch.org has +cuXYZ builds), or guard those includes"
    )
    assert not (tmp_path / "b" / "build.ninja").exists()


def test_cu_source_with_cuda_disabled(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^with_cuda: .*has CUDA sources, but CUDA is off"):
        pep517_torch.load(
            "nocuda",
            [str(FIXTURE / "csrc" / "axpy.cu")],
            with_cuda=False,
            build_directory=str(tmp_path / "b"),
        )


@needs_nvcc
def test_cuda_detection_cc_as_ccbin_and_with_cuda(tmp_path: Path) -> None:
    """with-cuda auto: .cu sources or an included .cuh; true: CUDA for C++ only; CC → -ccbin."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "kernels.cuh").write_text("#pragma once\nint launch(int n);\n")
    (src / "uses_cuh.cpp").write_text('#include "kernels.cuh"\nint f() { return launch(1); }\n')
    (src / "plain.cpp").write_text("int g() { return 1; }\n")
    gcc = shutil.which("gcc", path="/usr/bin:/bin")
    env = build_env(CC=gcc) if gcc else build_env()

    def ninja_for(spec: ExtensionSpec) -> str:
        directory = tmp_path / spec.name
        core_plan.prepare(
            [spec], BuildOptions(build_dir=directory, env=env, cuda_arch_list=("8.0",))
        )
        return (directory / "build.ninja").read_text()

    assert TOOLKIT is not None
    cuh = ninja_for(ExtensionSpec("cuh", (src / "uses_cuh.cpp",)))
    assert "-lcudart" in cuh and f"-isystem {TOOLKIT.include_dirs[0]}" in cuh
    plain = ninja_for(ExtensionSpec("plain", (src / "plain.cpp",)))
    assert "-lcudart" not in plain and str(TOOLKIT.include_dirs[0]) not in plain
    forced = ninja_for(ExtensionSpec("forced", (src / "plain.cpp",), with_cuda=True))
    assert "-lcudart" in forced and "nvcc" not in forced.split("# extension forced", 1)[1]
    off = ninja_for(ExtensionSpec("off", (src / "uses_cuh.cpp",), with_cuda=False))
    assert "-lcudart" not in off
    kernels = ninja_for(kernel_library(FIXTURE, "kernels"))
    if gcc:
        assert f"cuflags_0 = -ccbin {gcc} " in kernels
    assert "build obj/kernels/axpy.cu.o: nvcc " in kernels
    assert "rule nvcc\n  command = $nvcc -MMD -MF $out.d $cuflags $tuning $threads -c $in_q -o $out\n" in kernels


NVCC_WRAPPER = """for arg in "$@"; do
  case "$arg" in
    --version) echo "Cuda compilation tools, release 13.0, V{version}"; exit 0;;
    -dryrun) echo "#$ TOP={top}" >&2; exit 0;;
  esac
done
exec {real} "$@"
"""
DRIFT_CHILD = """
import pep517_torch
folder = {folder!r}
module = pep517_torch.load("nvcc_drift", [folder + "/mod.cpp", folder + "/kern.cu"],
                           build_directory=folder + "/build", verbose=True)
print(module.blocks(1000))
"""


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.compile
def test_the_jit_builds_again_when_nvcc_changed_in_place(tmp_path: Path) -> None:
    """Issue 44: with an nvcc whose version changed in place (same path, V13.0.88 -> V13.0.99),
    a wheel build reran every step and explain said `every step, because nvcc ... changed`,
    while a JIT load() of the same .cpp + .cu in a fresh process reused its old library without
    a word: its stamp recorded no nvcc. The toolkit here is the real one behind a wrapper
    script that answers --version itself (tests/cuda_tools.py fakes toolkits the same way)."""
    assert TOOLKIT is not None
    top = tmp_path / "toolkit"
    for name in ("include", "lib64"):
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).symlink_to(TOOLKIT.root / name)
    nvcc = top / "bin" / "nvcc"
    write_script(nvcc, NVCC_WRAPPER.format(version="13.0.88", top=top, real=TOOLKIT.nvcc))
    (tmp_path / "mod.cpp").write_text(c_api_module(
        "int blocks_for(int n);\nstatic PyObject* blocks(PyObject*, PyObject* n) {"
        " return PyLong_FromLong(blocks_for((int)PyLong_AsLong(n))); }",
        '{"blocks", blocks, METH_O, nullptr}', name=None))
    (tmp_path / "kern.cu").write_text(
        "__global__ void fill(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 1; }\n"
        "int blocks_for(int n) { return (n + 255) / 256; }\n")
    env = build_env(CUDA_HOME=str(top), TORCH_CUDA_ARCH_LIST="8.0",
                    PEP517_TORCH_CACHE_DIR=str(tmp_path / "cache"), TORCH_EXTENSIONS_DIR=str(tmp_path))
    load = functools.partial(run_python, DRIFT_CHILD.format(folder=str(tmp_path)), env=env, timeout=600)
    first = load()
    assert first.stdout == "4\n" and "building extension 'nvcc_drift'" in first.stderr, first.stderr
    warm = load()
    assert (warm.stdout, warm.stderr) == ("4\n", "")
    write_script(nvcc, NVCC_WRAPPER.format(version="13.0.99", top=top, real=TOOLKIT.nvcc))
    again = load()
    assert again.stdout == "4\n"
    assert f"pep517_torch: 'nvcc_drift' is out of date: nvcc {nvcc} changed" in again.stderr, again.stderr
    assert "building extension 'nvcc_drift'" in again.stderr
    assert load().stderr == ""  # recorded anew: warm again

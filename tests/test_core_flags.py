"""Compile and link arguments (core/flags.py) for specs, without compiling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pep517_torch.core import flags
from pep517_torch.core.spec import BuildType, ExtensionSpec, Kind
from pep517_torch.core.toolchain.tools import Compiler, TorchInstall, find_torch
from tests.conftest import FIXTURES, write
from tests.torch_doubles import substitute_torch

GCC = Compiler(("/usr/bin/c++",), Path("/usr/bin/g++"), "gcc", (12, 2, 0), None)
CSRC = FIXTURES / "cuda" / "csrc"
CUDA: dict[str, Any] = dict(  # what core/cuda/toolkit.py would have found
    cuda_include_dirs=(Path("/cuda/include"), Path("/wheels/nvidia/cu13/include")),
    cuda_library_dirs=(Path("/cuda/lib64"),),
    host_compiler_for_nvcc="/opt/gcc-12/bin/gcc",
)


def tools_for(torch: TorchInstall, **changes: Any) -> flags.ResolvedTools:
    return flags.ResolvedTools(
        **{"compiler": GCC, "torch": torch, "python_include": Path("/py/include"), **changes}
    )


def cuda_spec(**changes: Any) -> ExtensionSpec:
    """The CUDA fixture's extension (flags.compute reads none of its files)."""
    sources = tuple(CSRC / name for name in ("module.cpp", "axpy.cu", "sum_of_squares.cu"))
    return ExtensionSpec("cudaops._C", sources, include_dirs=(CSRC / "include",), **changes)


def test_flags_user_std_replaces_ours_and_user_flags_come_last(tmp_path: Path) -> None:
    source = [write(tmp_path / "a.cpp", "int f() { return 0; }\n")]
    spec = ExtensionSpec("m", tuple(source), extra_cflags=("-std=c++17", "-O1"),
                         build_type=BuildType.RELEASE)
    computed = flags.compute(spec, tools_for(find_torch()), source_root=tmp_path)
    assert "-std=c++20" not in computed.cxx and computed.cxx[-2:] == ("-std=c++17", "-O1")
    assert computed.cxx.index("-O3") < computed.cxx.index("-O1")
    assert "-DTORCH_EXTENSION_NAME=m" in computed.cxx
    assert "-DTORCH_EXTENSION_NAME=m" not in computed.pch


def test_flags_limited_api_defines_once_and_drops_torch_python(tmp_path: Path) -> None:
    source = [write(tmp_path / "a.cpp", "int f() { return 0; }\n")]
    spec = ExtensionSpec("m", tuple(source), py_limited_api="cp310")
    computed = flags.compute(spec, tools_for(find_torch()), source_root=tmp_path)
    assert [f for f in computed.cxx if "Py_LIMITED_API" in f] == ["-DPy_LIMITED_API=0x030A0000"]
    assert "-ltorch_python" not in computed.ld
    user = ExtensionSpec("m", tuple(source), py_limited_api="cp310",
                         define_macros=(("Py_LIMITED_API", "0x030A0000"),))
    computed = flags.compute(user, tools_for(find_torch()), source_root=tmp_path)
    assert len([f for f in computed.cxx if "Py_LIMITED_API" in f]) == 1


def test_executables_link_torch_with_rpath_and_no_python(tmp_path: Path) -> None:
    source = [write(tmp_path / "main.cpp", "int main() { return 0; }\n")]
    spec = ExtensionSpec("tool", tuple(source), kind=Kind.EXECUTABLE)
    computed = flags.compute(spec, tools_for(find_torch()), source_root=tmp_path)
    assert "-shared" not in computed.ld and "-ltorch_python" not in computed.ld
    assert any(f.startswith("-Wl,-rpath,") for f in computed.ld)
    assert not any("TORCH_EXTENSION_NAME" in f for f in computed.cxx)


def test_nvcc_flags_torch_defaults_host_compiler_and_per_language_flags(tmp_path: Path) -> None:
    torch = TorchInstall(tmp_path, "2.13.0+cpu", None, None)
    spec = cuda_spec(
        extra_cflags=("-DONLY_CXX", "-O1"),
        extra_cuda_cflags=("-DONLY_NVCC", "--use_fast_math"),
    )
    arch_flags = ("-gencode=arch=compute_80,code=sm_80",)
    out = flags.compute(spec, tools_for(torch, **CUDA), source_root=None, arch_flags=arch_flags)
    nvcc, cxx = list(out.nvcc), list(out.cxx)
    assert nvcc[:2] == ["-ccbin", "/opt/gcc-12/bin/gcc"]
    for flag in (*flags.TORCH_NVCC_FLAGS, "-Xcompiler=-fPIC", *arch_flags, "-std=c++20"):
        assert nvcc.count(flag) == 1, flag
    assert nvcc[-2:] == ["-DONLY_NVCC", "--use_fast_math"]  # the user's last: they win
    assert "-DONLY_CXX" not in nvcc and "-O1" not in nvcc
    assert "-DONLY_NVCC" not in cxx and "--use_fast_math" not in cxx and cxx[-1] == "-O1"
    for include in ("/cuda/include", "/wheels/nvidia/cu13/include"):  # wheels' headers after ours
        assert nvcc[nvcc.index(include) - 1] == "-isystem" and include in cxx
    assert nvcc.index("/cuda/include") < nvcc.index("/wheels/nvidia/cu13/include")
    # A user -std replaces ours for nvcc only; no CC: nvcc picks its own host compiler.
    spec17 = cuda_spec(extra_cuda_cflags=("-std=c++17",))
    out = flags.compute(spec17, tools_for(torch, **{**CUDA, "host_compiler_for_nvcc": None}), source_root=None)
    assert "-std=c++20" not in out.nvcc and "-std=c++20" in out.cxx and "-ccbin" not in out.nvcc


def test_link_flags_cpu_and_cuda_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = cuda_spec()
    cpu = TorchInstall(tmp_path / "cpu", "2.13.0+cpu", None, None)
    ld = list(flags.compute(spec, tools_for(cpu, **CUDA), source_root=None).ld)
    assert "-lc10_cuda" not in ld and "-ltorch_cuda" not in ld
    assert ld[ld.index("-L/cuda/lib64") + 1] == "-lcudart"
    cu = substitute_torch(monkeypatch, tmp_path / "cu", "2.13.0+cu130", "13.0",
                          cuda_runtime=True)
    assert cu.has_cuda_runtime
    ld = list(flags.compute(spec, tools_for(cu, **CUDA), source_root=None).ld)
    torch_libs = [f for f in ld if f.startswith("-l") and f != "-lcudart"]
    assert torch_libs == [
        "-lc10",
        "-lc10_cuda",
        "-ltorch_cpu",
        "-ltorch_cuda",
        "-ltorch",
        "-ltorch_python",
    ]
    assert "-lcudart" in ld
    # A C++-only extension never links CUDA, whatever torch is.
    plain = ExtensionSpec("plain", (CSRC / "module.cpp",))
    ld = flags.compute(plain, tools_for(cu, **CUDA), source_root=None).ld
    assert not {"-lc10_cuda", "-ltorch_cuda", "-lcudart", "-L/cuda/lib64"} & set(ld)
    # The nvidia-cuda-runtime wheel ships libcudart.so.13 only.
    (tmp_path / "wheel_lib").mkdir()
    (tmp_path / "wheel_lib" / "libcudart.so.13").write_text("")
    assert flags.cudart_flag((tmp_path / "wheel_lib",)) == "-l:libcudart.so.13"

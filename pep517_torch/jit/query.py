"""torch.utils.cpp_extension's query functions, answered by our toolchain discovery."""

from __future__ import annotations

import os
from typing import Any

from ..core import toolchain
from ..errors import ToolchainError

MINIMUM_VERSIONS = {"gcc": (9,), "clang": (10,)}


def _wants_cuda(device_type: str, cuda: bool | None) -> bool:
    if cuda is not None:  # torch < 2.6 signature: include_paths(cuda=False)
        return cuda
    return device_type == "cuda"


def _cuda_dirs() -> tuple[list[str], list[str]]:
    from ..core import cuda

    toolkit = cuda.require_cuda(os.environ)
    includes = [str(p) for p in (*toolkit.include_dirs, *toolkit.extra_include_dirs)]
    libraries = [str(p) for p in (*toolkit.library_dirs, *toolkit.extra_library_dirs)]
    return includes, libraries


def include_paths(
    device_type: str = "cpu", torch_include_dirs: bool = True, *, cuda: bool | None = None
) -> list[str]:
    """Include directories for building an extension (torch's, plus CUDA's for "cuda")."""
    paths = [str(p) for p in toolchain.find_torch().include_dirs] if torch_include_dirs else []
    if _wants_cuda(device_type, cuda):
        paths += _cuda_dirs()[0]
    return paths


def library_paths(
    device_type: str = "cpu",
    torch_include_dirs: bool = True,
    cross_target_platform: str | None = None,
    *,
    cuda: bool | None = None,
) -> list[str]:
    """Library directories for linking an extension (torch's lib, plus CUDA's for "cuda")."""
    if cross_target_platform is not None:
        raise ToolchainError("cross-compiling for another platform is not supported")
    paths = [str(toolchain.find_torch().library_dir)] if torch_include_dirs else []
    if _wants_cuda(device_type, cuda):
        paths += _cuda_dirs()[1]
    return paths


def get_compiler_abi_compatibility_and_version(compiler: str) -> tuple[bool, Any]:
    """(compatible, version) for ``compiler``; a missing compiler is an error, not a warning.

    torch 2.x ships C++11-ABI binaries built with gcc, so any gcc ≥ 9 or clang ≥ 10 that can
    compile C++17/20 is compatible; ccache/sccache wrappers are looked through.
    """
    from torch.torch_version import TorchVersion

    found = toolchain.find_compiler({**os.environ, "CXX": compiler})
    minimum = MINIMUM_VERSIONS.get(found.family)
    compatible = minimum is not None and found.version >= minimum
    return compatible, TorchVersion(found.version_text)


def verify_ninja_availability() -> None:
    """Raise ToolchainError (a RuntimeError) naming how to install ninja when it is missing."""
    toolchain.find_ninja(os.environ)


def is_ninja_available() -> bool:
    try:
        toolchain.find_ninja(os.environ)
    except ToolchainError:
        return False
    return True

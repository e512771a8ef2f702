"""torch.utils.cpp_extension's query functions, answered by our toolchain discovery."""

from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING

from . import tools as toolchain
from ...errors import ToolchainError
from ...shipped_runtime.environment import TORCH_DONT_CHECK_COMPILER_ABI, is_true

if TYPE_CHECKING:
    from torch.torch_version import TorchVersion

logger = logging.getLogger(__name__)  # torch logs these warnings too (it does not warnings.warn)


def _wants_cuda(device_type: str, cuda: bool | None) -> bool:
    if cuda is not None:  # torch < 2.6 signature: include_paths(cuda=False)
        return cuda
    return device_type == "cuda"


def _cuda_dirs() -> tuple[list[str], list[str]]:
    from ..cuda import toolkit as cuda

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


def _binary_torch(version: str) -> bool:
    """torch's own test: a source build has a version like ``2.13.0a0+git1234``."""
    return re.match(r"\d+\.\d+\.\d+\w+\+\w+", version) is None


def get_compiler_abi_compatibility_and_version(compiler: str) -> tuple[bool, TorchVersion]:
    """(compatible, version) for ``compiler``, as torch answers it: ``(False,
    TorchVersion('0.0.0'))`` and a logged warning for a compiler that is missing, will not run,
    or is neither gcc nor clang; ``(True, TorchVersion('0.0.0'))`` for a torch built from
    source or with TORCH_DONT_CHECK_COMPILER_ABI set.

    Compatible means at least the version ``core.toolchain.MINIMUM_VERSIONS`` names (gcc >= 9,
    clang >= 10; torch says gcc >= 5); ccache/sccache wrappers are looked through.
    """
    import torch
    from torch.torch_version import TorchVersion

    if not _binary_torch(torch.version.__version__):
        return True, TorchVersion("0.0.0")
    if is_true(os.environ.get(TORCH_DONT_CHECK_COMPILER_ABI)):
        return True, TorchVersion("0.0.0")
    try:
        found = toolchain.find_compiler({**os.environ, "CXX": compiler})
    except ToolchainError as exc:
        logger.warning("cannot check the ABI compatibility of %s with torch: %s", compiler, exc)
        return False, TorchVersion("0.0.0")
    minimum = found.minimum_version
    if minimum is None:
        logger.warning("%s is neither gcc nor clang: it may be ABI-incompatible with torch,"
                       " which was built with gcc", compiler)
        return False, TorchVersion("0.0.0")
    version = TorchVersion(found.version_text)
    if not found.supported:
        wanted = ".".join(map(str, minimum))
        logger.warning("%s %s may be ABI-incompatible with torch: use %s >= %s",
                       compiler, version, found.family, wanted)
        return False, version
    return True, version


def verify_ninja_availability() -> None:
    """Raise ToolchainError (a RuntimeError) naming how to install ninja when it is missing."""
    toolchain.find_ninja(os.environ)


def is_ninja_available() -> bool:
    try:
        toolchain.find_ninja(os.environ)
    except ToolchainError:
        return False
    return True

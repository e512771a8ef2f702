"""``CppExtension`` and ``CUDAExtension``: torch.utils.cpp_extension's, with its signatures.

Each returns a plain ``setuptools.Extension`` carrying torch's include and library
directories and libraries, as torch's do, so a setup.py that inspects or edits them keeps
working. :class:`~pep517_torch.setuptools.BuildExtension` strips what the compile core adds
itself again, so any ``setuptools.Extension`` (ours, torch's or a hand-made one) builds alike.
"""

from __future__ import annotations

import os
from typing import Any

import setuptools

from ..core.toolchain import tools as toolchain
from ..errors import ToolchainError
from ..core.toolchain.queries import include_paths as torch_include_paths, library_paths as torch_library_paths

CPU_LIBRARIES = ("c10", "torch", "torch_cpu")
TORCH_PYTHON = "torch_python"
CUDA_TORCH_LIBRARIES = ("c10_cuda", "torch_cuda")  # only in a CUDA build of torch
CUDART = "cudart"
# What the CUDAExtension keyword arguments become on the Extension (setuptools drops unknown
# keywords with a warning, so they are set as attributes after construction).
DLINK_ATTRIBUTE = "dlink"
DLINK_LIBRARIES_ATTRIBUTE = "dlink_libraries"


def cuda_directories() -> tuple[list[str], list[str]]:
    """The CUDA toolkit's include and library directories; none when no toolkit is found (the
    build then fails with the toolkit search's own message; sdist and egg_info still work)."""
    try:
        return torch_include_paths("cuda", False), torch_library_paths("cuda", False)
    except ToolchainError:
        return [], []


def _listed(kwargs: dict[str, Any], key: str) -> list[Any]:
    """``kwargs[key]`` as a new list (torch appends to the caller's list; we don't)."""
    return list(kwargs.get(key) or [])


def _torch_libraries(py_limited_api: bool) -> list[str]:
    return [*CPU_LIBRARIES, *([] if py_limited_api else [TORCH_PYTHON])]


def CppExtension(  # noqa: N802  (torch's names)
    name: str, sources: list[str], *args: Any, **kwargs: Any
) -> setuptools.Extension:
    """A ``setuptools.Extension`` for C++ against torch (``torch.utils.cpp_extension``'s).

    Adds torch's include and library directories and libraries (``c10``, ``torch``,
    ``torch_cpu``, and ``torch_python`` unless ``py_limited_api=True``); every argument is
    forwarded to ``setuptools.Extension``.
    """
    kwargs["include_dirs"] = _listed(kwargs, "include_dirs") + torch_include_paths()
    kwargs["library_dirs"] = _listed(kwargs, "library_dirs") + torch_library_paths()
    limited = bool(kwargs.get("py_limited_api", False))
    kwargs["libraries"] = _listed(kwargs, "libraries") + _torch_libraries(limited)
    kwargs["language"] = "c++"
    return setuptools.Extension(name, sources, *args, **kwargs)


def CUDAExtension(  # noqa: N802  (torch's names)
    name: str, sources: list[str], *args: Any, **kwargs: Any
) -> setuptools.Extension:
    """A ``setuptools.Extension`` for CUDA/C++ against torch (``torch.utils.cpp_extension``'s).

    Like :func:`CppExtension`, plus the CUDA toolkit's include and library directories,
    ``cudart``, and ``c10_cuda``/``torch_cuda`` when torch is a CUDA build (a CPU torch has
    neither). ``dlink=True`` (or a non-empty ``dlink_libraries``) turns on device linking:
    .cu files compile with ``-rdc=true`` and ``nvcc -dlink`` runs over the CUDA objects,
    with ``extra_compile_args["nvcc_dlink"]`` as its extra flags.
    """
    dlink = bool(kwargs.pop("dlink", False))
    dlink_libraries = list(kwargs.pop("dlink_libraries", None) or [])
    cuda_includes, cuda_libraries = cuda_directories()
    kwargs["include_dirs"] = [*_listed(kwargs, "include_dirs"), *torch_include_paths(),
                              *cuda_includes]
    kwargs["library_dirs"] = [*_listed(kwargs, "library_dirs"), *torch_library_paths(),
                              *cuda_libraries]
    limited = bool(kwargs.get("py_limited_api", False))
    libraries = _listed(kwargs, "libraries") + _torch_libraries(limited) + [CUDART]
    if toolchain.find_torch().has_cuda_runtime:
        libraries += CUDA_TORCH_LIBRARIES
    kwargs["libraries"] = libraries
    kwargs["language"] = "c++"
    extension = setuptools.Extension(name, sources, *args, **kwargs)
    setattr(extension, DLINK_ATTRIBUTE, dlink or bool(dlink_libraries))
    setattr(extension, DLINK_LIBRARIES_ATTRIBUTE, dlink_libraries)
    return extension


def SyclExtension(  # noqa: N802  (torch's names)
    name: str, sources: list[str], *args: Any, **kwargs: Any
) -> setuptools.Extension:
    raise ToolchainError("SYCL extensions are not supported by pep517_torch (SyclExtension)")


def cuda_home() -> str | None:
    """torch's ``CUDA_HOME``: the toolkit root our CUDA discovery finds, or None."""
    from ..core.cuda import toolkit as cuda

    toolkit = cuda.find_cuda(os.environ)
    return str(toolkit.root) if toolkit is not None else None

"""torch.utils.cpp_extension's setuptools face on pep517_torch's compile core.

Switch one import in a setup.py::

    from pep517_torch.setuptools import BuildExtension, CppExtension, CUDAExtension

and every ``ext_modules`` entry builds in one ninja graph with the precompiled torch header,
compiler launchers, memory-bounded jobs, progress lines and first-error summaries; the wheel
pins the torch it was built against. Nothing else in pep517_torch imports setuptools, and this
package imports it (and the compile core) only when a name below is first used.
"""

from __future__ import annotations

from typing import Any

_EXTENSIONS = frozenset({"CppExtension", "CUDAExtension", "SyclExtension"})
_QUERIES = frozenset({"include_paths", "library_paths"})

__all__ = sorted({"BuildExtension", "CUDA_HOME", *_EXTENSIONS, *_QUERIES})


def __getattr__(name: str) -> Any:
    if name == "BuildExtension":
        from .command import BuildExtension

        return BuildExtension
    if name in _EXTENSIONS:
        from . import extension

        return getattr(extension, name)
    if name == "CUDA_HOME":
        from .extension import cuda_home

        return cuda_home()
    if name in _QUERIES:
        from ..core.toolchain import queries

        return getattr(queries, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__

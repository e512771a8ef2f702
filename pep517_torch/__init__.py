"""pep517_torch: build PyTorch C++/CUDA extensions from pyproject.toml alone, or just in time.

As a PEP 517 build backend (``build-backend = "pep517_torch"``) this module exposes the hooks;
as a library it offers torch.utils.cpp_extension's JIT API (``load``, ``load_inline``, ...).
Both are imported on first use, and neither imports torch at import time.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__

_HOOKS = frozenset({
    "build_wheel",
    "build_sdist",
    "build_editable",
    "get_requires_for_build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_wheel",
    "prepare_metadata_for_build_editable",
})
_JIT = frozenset({
    "load",
    "load_inline",
    "include_paths",
    "library_paths",
    "get_compiler_abi_compatibility_and_version",
    "verify_ninja_availability",
    "is_ninja_available",
})

__all__ = sorted(_HOOKS | _JIT | {"__version__"})


def __getattr__(name: str) -> Any:
    if name in _HOOKS:
        from . import buildapi

        return getattr(buildapi, name)
    if name in _JIT:
        from . import jit

        return getattr(jit, name)
    raise AttributeError(f"module 'pep517_torch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__

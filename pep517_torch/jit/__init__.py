"""The JIT face: torch.utils.cpp_extension's functions, on pep517_torch's compile core."""

from __future__ import annotations

from typing import Any

from .api import load, load_inline

_QUERIES = frozenset({
    "get_compiler_abi_compatibility_and_version",
    "include_paths",
    "is_ninja_available",
    "library_paths",
    "verify_ninja_availability",
})


def __getattr__(name: str) -> Any:
    if name in _QUERIES:  # imported on first use: load() stays light
        from ..core.toolchain import queries

        return getattr(queries, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "get_compiler_abi_compatibility_and_version",
    "include_paths",
    "is_ninja_available",
    "library_paths",
    "load",
    "load_inline",
    "verify_ninja_availability",
]

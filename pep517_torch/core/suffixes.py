"""Which files compile, and as what: the one list of source suffixes every face checks against.

A leaf (standard library only): the JIT's warm path imports it without ``core.spec``.
"""

from __future__ import annotations

import os

CXX_SUFFIXES = frozenset({".cpp", ".cc", ".cxx", ".c++", ".cp", ".C", ".c"})
CUDA_SUFFIXES = frozenset({".cu"})
CUDA_HEADER_SUFFIXES = frozenset({".cuh"})
SOURCE_SUFFIXES = CXX_SUFFIXES | CUDA_SUFFIXES
# Headers: found through the include directories, never compiled (torch's load() accepts them
# among the sources, and a .cuh there turns CUDA on).
HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".inl"}) | CUDA_HEADER_SUFFIXES


def _suffix(path: str | os.PathLike[str]) -> str:
    """PurePath(path).suffix, without building a path object (the JIT's warm path)."""
    name = os.path.basename(os.fspath(path))
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def is_cuda_source(path: str | os.PathLike[str]) -> bool:
    return _suffix(path) in CUDA_SUFFIXES


def is_header(path: str | os.PathLike[str]) -> bool:
    return _suffix(path) in HEADER_SUFFIXES

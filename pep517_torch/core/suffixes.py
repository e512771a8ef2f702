"""Which files compile, and as what: the one list of source suffixes every face checks against.

A leaf (standard library only): the JIT's warm path imports it without ``core.spec``.
"""

from __future__ import annotations

import os
from pathlib import PurePath

CXX_SUFFIXES = frozenset({".cpp", ".cc", ".cxx", ".c++", ".cp", ".C", ".c"})
CUDA_SUFFIXES = frozenset({".cu"})
CUDA_HEADER_SUFFIXES = frozenset({".cuh"})
SOURCE_SUFFIXES = CXX_SUFFIXES | CUDA_SUFFIXES
# Headers: found through the include directories, never compiled (torch's load() accepts them
# among the sources, and a .cuh there turns CUDA on).
HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".inl"}) | CUDA_HEADER_SUFFIXES


def is_cuda_source(path: str | os.PathLike[str]) -> bool:
    return PurePath(path).suffix in CUDA_SUFFIXES


def is_header(path: str | os.PathLike[str]) -> bool:
    return PurePath(path).suffix in HEADER_SUFFIXES

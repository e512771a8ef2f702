"""The names of an extension's library behind its import-guard shim: ``pkg._C_native``, at
``_C_native<suffix>``. A leaf: the distribution layer writes the shim and the library under
them, the config layer refuses a module that would collide with one."""

from __future__ import annotations


def native_module(module: str) -> str:
    """The dotted name the library of ``module`` sits at behind a shim: ``pkg._C_native``
    (importing it by that name fails: its init function is ``PyInit__C``)."""
    return f"{module}_native"


def native_filename(module: str, suffix: str) -> str:
    """The file name of that library: ``_C_native.cpython-311-x86_64-linux-gnu.so``."""
    return f"{native_module(module).rpartition('.')[2]}{suffix}"

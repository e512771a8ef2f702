"""build_ext's own options mapped onto the compile core's: build dir, jobs, debug, -I/-D/-l.

- the persistent build directory lives in ``build_temp`` (``build/temp.<platform>-<python>``),
  named like the pyproject face's, by the same placeholder values (``<wheel tag>-torch<version>``,
  ``-isolated`` after the version when torch comes from an isolated build environment); an
  editable install's ``build_temp`` is thrown away, so editable builds use the regular one instead;
- ``--parallel N`` is the job count (else MAX_JOBS, else bounded by cores and free memory);
- ``--debug`` is the debug build type (``-O0 -g``), otherwise release (``-O3 -DNDEBUG``);
- ``-I``, ``-D``, ``-U``, ``-l``, ``-L``, ``-R`` and ``--link-objects`` apply to every extension;
- ``TORCH_CUDA_ARCH_LIST``, ``MAX_JOBS``, ``PEP517_TORCH_COMPILER_LAUNCHER`` and
  ``PEP517_TORCH_PCH_CACHE_SIZE`` mean what they mean for the other faces.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ..config.model import DEFAULT_BUILD_DIR
from ..config.resolve import format_build_dir
from ..config.layers import environment_options, passthrough_env
from ..core.spec import BuildOptions, BuildType
from ..core.toolchain.tools import TorchInstall
from ..backend.discovery import build_dir_values
from .translate import CommandOptions

BUILD_DIR_NAME = Path(DEFAULT_BUILD_DIR).name  # "{wheel_tag}-torch{torch_version}"


def persistent_build_dir(command: Any, torch: TorchInstall) -> Path:
    build_temp = command.build_temp
    if getattr(command, "editable_mode", False):
        build = command.get_finalized_command("build")
        tag = f".{build.plat_name}-{sys.implementation.cache_tag}"  # as setuptools' build names it
        build_temp = os.path.join(build.build_base, "temp" + tag)
    name = format_build_dir(BUILD_DIR_NAME, build_dir_values(torch), "build_temp")
    return Path(build_temp).absolute() / "pep517_torch" / name


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split(os.pathsep))
    return tuple(value)


def command_options(command: Any) -> CommandOptions:
    """build_ext's ``-I/-D/-U/-l/-L/-R/--link-objects``, ``--debug`` and BuildExtension's
    ``no_python_abi_suffix``. Python's own include directories (which build_ext always adds)
    are left to the compile core."""
    from distutils import sysconfig  # setuptools' distutils: build_ext's own view

    python = {sysconfig.get_python_inc(), sysconfig.get_python_inc(plat_specific=True)}
    includes = tuple(d for d in _strings(command.include_dirs) if d not in python)
    return CommandOptions(
        include_dirs=includes,
        define=tuple(command.define or ()),
        undef=_strings(command.undef),
        libraries=_strings(command.libraries),
        library_dirs=_strings(command.library_dirs),
        rpath=_strings(command.rpath),
        link_objects=_strings(command.link_objects),
        build_type=BuildType.DEBUG if command.debug else BuildType.RELEASE,
        python_abi_suffix=not command.no_python_abi_suffix,
    )


def build_options(command: Any, build_dir: Path, root: Path) -> BuildOptions:
    from_env = environment_options(os.environ)
    parallel = command.parallel  # build_ext -j N; True means "the default"
    if type(parallel) is int and parallel > 0:
        from_env["jobs"] = parallel
    if from_env.get("unity") is None:  # "auto": a one-off build's choice, not --inplace's
        from_env["unity"] = not getattr(command, "_in_place", False)
    return BuildOptions(
        build_dir=build_dir,
        verbose=(command.verbose or 0) >= 2,
        source_root=root,
        env=passthrough_env(os.environ),
        **from_env,
    )

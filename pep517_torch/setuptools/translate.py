"""``setuptools.Extension`` -> :class:`ExtensionSpec`: every argument honoured or refused by name.

torch's own directories and libraries (which ``CppExtension``/``CUDAExtension`` add, ours and
torch's alike) are dropped again, because the compile core adds them itself (as
``-isystem``, and the libraries the extension's kind and torch build need).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..abi import limited_api
from ..config.checks import shipped_name_problem
from ..core.flags import torch_libraries
from ..core.spec import BuildType, ExtensionSpec, is_cuda_source
from ..core.toolchain.tools import TorchInstall
from ..errors import ConfigError
from .extension import CUDART, DLINK_ATTRIBUTE, DLINK_LIBRARIES_ATTRIBUTE, cuda_directories

COMPILE_ARGS_KEYS = ("cxx", "nvcc", "nvcc_dlink")
LANGUAGES = (None, "c", "c++")
SPEC_ARGUMENTS = {  # an ExtensionSpec field -> the Extension argument it comes from
    "name": "name",
    "sources": "sources",
    "include_dirs": "include_dirs",
    "define_macros": "define_macros",
    "extra_cflags": "extra_compile_args",
    "extra_cuda_cflags": "extra_compile_args['nvcc']",
    "extra_ldflags": "extra_link_args",
    "libraries": "libraries",
    "library_dirs": "library_dirs",
    "runtime_library_dirs": "runtime_library_dirs",
    "py_limited_api": "py_limited_api",
    "dlink": DLINK_ATTRIBUTE,
    "dlink_libraries": DLINK_LIBRARIES_ATTRIBUTE,
    "extra_dlink_flags": "extra_compile_args['nvcc_dlink']",
}


@dataclass(frozen=True)
class CommandOptions:
    """What applies to every extension: build_ext's own options (``-I``, ``-D``, ``-l``...),
    the build type (``--debug``) and BuildExtension's options."""

    include_dirs: tuple[str, ...] = ()
    define: tuple[tuple[str, str | None], ...] = ()
    undef: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    link_objects: tuple[str, ...] = ()
    build_type: BuildType = BuildType.RELEASE
    python_abi_suffix: bool = True


class _Arguments:
    """One extension's attributes, read with checks whose errors name the argument."""

    def __init__(self, extension: Any, name: str) -> None:
        self.extension = extension
        self.name = name

    def key(self, argument: str) -> str:
        return f"Extension {self.name!r} {argument}"

    def error(self, argument: str, message: str) -> ConfigError:
        return ConfigError(message, self.key(argument))

    def strings(self, argument: str, value: Any = None) -> list[str]:
        value = getattr(self.extension, argument, None) if value is None else value
        if value is None:
            return []
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise self.error(argument, f"must be a list of strings, not {type(value).__name__}")
        items = []
        for item in value:
            if not isinstance(item, (str, os.PathLike)):
                raise self.error(argument, f"holds {item!r}, which is not a string")
            items.append(os.fspath(item))  # setuptools accepts Path objects in its lists
        return items

    def compile_args(self) -> dict[str, list[str]]:
        """``extra_compile_args``: a list (C++ and nvcc alike) or a dict by compiler."""
        value = getattr(self.extension, "extra_compile_args", None) or []
        if not isinstance(value, Mapping):
            flags = self.strings("extra_compile_args", value)
            return {"cxx": flags, "nvcc": list(flags)}
        found: dict[str, list[str]] = {}
        for key, flags in value.items():
            argument = f"extra_compile_args[{key!r}]"
            if key == "sycl":
                if flags:
                    raise self.error(argument, "SYCL is not supported by pep517_torch")
                continue  # torch's BuildExtension adds an empty "sycl" list itself
            if key not in COMPILE_ARGS_KEYS:
                known = ", ".join(repr(k) for k in COMPILE_ARGS_KEYS)
                raise self.error(argument, f"unknown compiler {key!r} (expected {known})")
            found[key] = self.strings(argument, flags)
        return found


def _absolute(paths: Iterable[str], root: Path) -> list[Path]:
    return [Path(root, path).absolute() for path in paths]


def _without(paths: Iterable[Path], dropped: Iterable[str | Path]) -> tuple[Path, ...]:
    known = {Path(p).resolve() for p in dropped}
    return tuple(dict.fromkeys(p for p in paths if p.resolve() not in known))


def _unsupported(arguments: _Arguments) -> None:
    extension = arguments.extension
    if type(extension).__name__ == "Library":  # setuptools.extension.Library: a plain .so
        raise arguments.error(
            "Library", "setuptools Library extensions are not supported (use an Extension)"
        )
    if getattr(extension, "swig_opts", None):
        raise arguments.error("swig_opts", "SWIG is not supported by pep517_torch")
    if getattr(extension, "optional", False):
        raise arguments.error(
            "optional", "optional extensions are not supported: all extensions build in one"
            " ninja graph, and a failure fails the build"
        )
    language = getattr(extension, "language", None)
    if (language.lower() if isinstance(language, str) else language) not in LANGUAGES:
        raise arguments.error("language", f"{language!r} is not supported (c or c++)")


def _macros(
    arguments: _Arguments, command: CommandOptions
) -> tuple[tuple[tuple[str, str | None], ...], list[str]]:
    """(defines, names to undefine): as distutils reads ``define_macros``, a ``(name,)``
    1-tuple undefines and a number is its text."""
    macros: list[tuple[str, str | None]] = list(command.define)
    undefined: list[str] = []
    for item in getattr(arguments.extension, "define_macros", None) or []:
        valid = isinstance(item, tuple) and len(item) in (1, 2) and isinstance(item[0], str)
        if valid and len(item) == 1:
            undefined.append(item[0])
        elif valid and (item[1] is None or isinstance(item[1], (str, int, float))):
            macros.append((item[0], None if item[1] is None else str(item[1])))
        else:
            raise arguments.error(
                "define_macros", f"holds {item!r}; each entry is a (name, value or None) tuple"
            )
    return tuple(macros), undefined


def _device_link(
    arguments: _Arguments, dlink_flags: list[str] | None
) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
    """(dlink, dlink_libraries, extra dlink flags) from our CUDAExtension's attributes or
    torch's ``extra_compile_args["nvcc_dlink"]`` (whose ``-dlink`` the core adds itself)."""
    extension = arguments.extension
    libraries = arguments.strings(DLINK_LIBRARIES_ATTRIBUTE)
    wanted = bool(getattr(extension, DLINK_ATTRIBUTE, False)) or dlink_flags is not None
    flags = tuple(f for f in dlink_flags or () if f not in ("-dlink", "--device-link"))
    return wanted, tuple(libraries), flags


def extension_spec(
    extension: Any,
    full_name: str,
    *,
    root: Path,
    command: CommandOptions,
    torch: TorchInstall,
) -> ExtensionSpec:
    """The spec for one ``setuptools.Extension`` (``full_name``: with build_ext's package)."""
    arguments = _Arguments(extension, full_name)
    _unsupported(arguments)
    problem = shipped_name_problem(full_name, compiled=True)
    if problem:
        raise arguments.error("name", problem)
    sources = tuple(_absolute(arguments.strings("sources"), root))
    cuda_dirs = cuda_directories() if any(map(is_cuda_source, sources)) else ([], [])
    compile_args = arguments.compile_args()
    macros, undefined = _macros(arguments, command)
    undefine = [f"-U{name}" for name in (*command.undef, *arguments.strings("undef_macros"),
                                         *undefined)]
    dlink, dlink_libraries, dlink_flags = _device_link(arguments, compile_args.get("nvcc_dlink"))
    include_dirs = _absolute([*arguments.strings("include_dirs"), *command.include_dirs], root)
    library_dirs = _absolute([*arguments.strings("library_dirs"), *command.library_dirs], root)
    objects = _absolute([*arguments.strings("extra_objects"), *command.link_objects], root)
    values: dict[str, Any] = dict(
        name=full_name,
        sources=sources,
        include_dirs=_without(include_dirs, [*torch.include_dirs, *cuda_dirs[0]]),
        define_macros=macros,
        extra_cflags=(*undefine, *compile_args.get("cxx", ())),
        extra_cuda_cflags=(*undefine, *compile_args.get("nvcc", ())),
        extra_ldflags=(*map(str, objects), *arguments.strings("extra_link_args")),
        libraries=(*arguments.strings("libraries"), *command.libraries),
        library_dirs=_without(library_dirs, [torch.library_dir, *cuda_dirs[1]]),
        runtime_library_dirs=(*arguments.strings("runtime_library_dirs"), *command.rpath),
        py_limited_api=limited_api.DEFAULT if getattr(extension, "py_limited_api", False) else None,
        python_abi_suffix=command.python_abi_suffix,
        build_type=command.build_type,
        dlink=dlink,
        dlink_libraries=dlink_libraries,
        extra_dlink_flags=dlink_flags,
        keys=tuple((name, arguments.key(argument)) for name, argument in SPEC_ARGUMENTS.items()),
    )
    spec = ExtensionSpec(**values)  # its own checks name the arguments (keys)
    own = {*torch_libraries(spec, torch), *([CUDART] if spec.uses_cuda else [])}
    return dataclasses.replace(
        spec, libraries=tuple(lib for lib in spec.libraries if lib not in own)
    )

"""One recorded setup.py run -> ``[project]``, ``[tool.torch-ext]`` and extension tables.

The result is plain data (TOML-ready, kebab-case keys, paths relative to the project root)
plus notes: what did not convert, and why.
"""

from __future__ import annotations

import functools
import glob
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.spec import CUDA_HEADER_SUFFIXES
from ...core.spec import CUDA_SUFFIXES as CUDA_SOURCE_SUFFIXES
from ...errors import MigrateError
from ..intercept.record import (
    FAKE_CUDA_HOME,
    SetupRun,
    build_ext_options,
    factory_extras,
    factory_of,
)
from .compile_args import LIMITED_API_DEFINE, interpret, limited_api_tag, macro_value, take_define
from .metadata import Notes, project_table, scm_version_keyword, version_source
from .settings_keys import EXTENSION_DEFAULTS
from .setup_cfg import with_setup_cfg

TORCH_FACTORIES = ("CppExtension", "CUDAExtension")
CUDA_SUFFIXES = tuple(CUDA_SOURCE_SUFFIXES | CUDA_HEADER_SUFFIXES)
# Linked by pep517_torch itself; a setup.py that lists them explicitly gains nothing.
TORCH_LIBRARIES = frozenset({"c10", "torch", "torch_cpu", "torch_python", "c10_cuda", "torch_cuda"})
# Top-level package names many projects ship by mistake (find_packages() without exclude).
SHARED_NAMES = frozenset({"tests", "test", "docs", "examples", "benchmarks"})
MODULE_INIT = re.compile(rb"PYBIND11_MODULE|PyInit_|PyMODINIT_FUNC")


@dataclass
class Converted:
    """The tables one setup.py run stands for."""

    project: dict[str, Any]
    tool: dict[str, Any]  # [tool.torch-ext] keys other than extension / overrides
    extensions: list[dict[str, Any]]
    build_requires: list[str] = field(default_factory=list)
    notes: Notes = field(default_factory=list)  # (anchor, text); anchor: a table or extension

    def extension(self, name: str) -> dict[str, Any] | None:
        return next((e for e in self.extensions if e["name"] == name), None)


class _Paths:
    """Paths relative to the project root, as setuptools reads them (from the setup.py dir)."""

    def __init__(self, root: Path, skip_dirs: list[str]) -> None:
        self.root = root
        self.skip_dirs = [os.path.normpath(d) for d in skip_dirs if d]

    def absolute(self, value: Any) -> str:
        return os.path.normpath(os.path.join(self.root, os.fspath(value)))

    def inside(self, value: Any) -> bool:
        return Path(self.absolute(value)).is_relative_to(self.root)

    def relative(self, value: Any) -> str:
        """Relative (posix) when inside the root; otherwise as given, normalised."""
        path = self.absolute(value)
        if Path(path).is_relative_to(self.root):
            return Path(path).relative_to(self.root).as_posix() or "."
        return path if os.path.isabs(os.fspath(value)) else os.path.normpath(os.fspath(value))

    def is_toolchain_dir(self, value: Any) -> bool:
        """torch's own include/lib dirs (and CUDA's): pep517_torch adds them itself."""
        path = self.absolute(value)
        return any(path == d or path.startswith(d + os.sep) for d in self.skip_dirs)


def _escape_glob(path: str) -> str:
    return glob.escape(path) if glob.has_magic(path) else path


def _lift_includes(flags: list[str], paths: _Paths, include_dirs: list[str]) -> list[str]:
    """Move ``-I<dir>`` of project directories into include-dirs (flags have no base dir)."""
    kept: list[str] = []
    pending = False
    for flag in flags:
        if pending:
            pending = False
            if paths.inside(flag):
                include_dirs.append(paths.relative(flag))
                continue
            kept.append("-I")
        elif flag == "-I":
            pending = True
            continue
        elif flag.startswith("-I") and paths.inside(flag[2:]):
            include_dirs.append(paths.relative(flag[2:]))
            continue
        kept.append(flag)
    return kept + (["-I"] if pending else [])


def _defines_module(sources: list[str], root: Path) -> bool | None:
    """Whether some source defines a Python module init (None: a source is unreadable)."""
    for source in sources:
        try:
            if MODULE_INIT.search((root / source).read_bytes()):
                return True
        except OSError:
            return None
    return False


def convert_extension(
    ext: Any, paths: _Paths, options: dict[str, Any], notes: Notes
) -> dict[str, Any]:
    """One setuptools Extension (as the user built it) -> an extension table."""
    name = str(ext.name)
    factory = factory_of(ext)

    def note(text: str) -> None:
        notes.append((name, text))

    table: dict[str, Any] = {"name": name}
    sources = [paths.relative(s) for s in ext.sources]
    for source in sources:
        if not paths.inside(source):
            note(f"source {source} is outside the project root: pep517_torch refuses it")
        elif not (paths.root / source).is_file():
            note(f"source {source} does not exist")
    table["sources"] = [_escape_glob(s) for s in sources]
    has_cuda_sources = any(s.endswith(CUDA_SUFFIXES) for s in sources)

    include_dirs: list[str] = []
    for directory in ext.include_dirs or []:
        if paths.is_toolchain_dir(directory):
            continue
        include_dirs.append(paths.relative(directory))
        if not paths.inside(directory):
            note(f"include dir {paths.relative(directory)} is outside the project: it is"
                 " specific to this machine")

    args = ext.extra_compile_args or []
    dlink_flags: list[str] = []
    if isinstance(args, dict):
        cflags, cuda_flags = list(args.get("cxx", [])), list(args.get("nvcc", []))
        # torch's CUDAExtension puts -dlink itself into nvcc_dlink; pep517_torch adds it too
        dlink_flags = [str(f) for f in args.get("nvcc_dlink", []) if f != "-dlink"]
        for key in sorted(set(args) - {"cxx", "nvcc", "nvcc_dlink"}):
            note(f"extra_compile_args[{key!r}] is not converted")
    else:
        cflags, cuda_flags = list(args), list(args) if has_cuda_sources else []
    macros: dict[str, Any] = {}
    for macro in ext.define_macros or []:
        if isinstance(macro, (tuple, list)) and len(macro) == 2:
            macros[str(macro[0])] = macro_value(macro[1])
        else:
            note(f"define_macros entry {macro!r} is not a (name, value) pair: dropped")
    limited = bool(getattr(ext, "py_limited_api", False))
    args = interpret(macros, cflags, cuda_flags, list(ext.extra_link_args or []), limited=limited)
    macros, cflags, cuda_flags, ldflags = args.macros, args.cflags, args.cuda_flags, args.ldflags
    if limited:
        define_tag = limited_api_tag(args.limited_api_value)
        table["py-limited-api"] = options.get("py_limited_api") or define_tag or True
        if args.stable_abi:
            table["stable-abi"] = args.stable_abi
    elif LIMITED_API_DEFINE in macros or take_define(cflags, LIMITED_API_DEFINE)[1]:
        note("defines Py_LIMITED_API without py_limited_api=True: the wheel is not abi3")
    for macro in ext.undef_macros or []:
        cflags.append(f"-U{macro}")
        if has_cuda_sources:
            cuda_flags.append(f"-U{macro}")
    cflags = _lift_includes(cflags, paths, include_dirs)
    cuda_flags = _lift_includes(cuda_flags, paths, include_dirs)
    if any(str(paths.root) in flag for flag in cflags + cuda_flags + ldflags):
        note("a compiler or linker flag holds an absolute path of this checkout")

    libraries = [str(lib) for lib in ext.libraries or [] if str(lib) not in TORCH_LIBRARIES]
    library_dirs = [paths.relative(d) for d in ext.library_dirs or []
                    if not paths.is_toolchain_dir(d)]
    for key, value in (
        ("include-dirs", list(dict.fromkeys(include_dirs))), ("define-macros", macros),
        ("extra-cflags", cflags), ("extra-cuda-cflags", cuda_flags), ("extra-ldflags", ldflags),
        ("libraries", libraries), ("library-dirs", library_dirs),
        ("runtime-library-dirs", [str(d) for d in ext.runtime_library_dirs or []]),
    ):
        if value:
            table[key] = value
    if factory == "CUDAExtension" and not has_cuda_sources:
        table["with-cuda"] = True
    extras = factory_extras(ext)
    if extras.get("dlink") or extras.get("dlink_libraries") or "nvcc_dlink" in (
        args if isinstance(args, dict) else {}
    ):
        table["dlink"] = True
    if extras.get("dlink_libraries"):
        table["dlink-libraries"] = [str(lib) for lib in extras["dlink_libraries"]]
    if dlink_flags:
        table["extra-dlink-flags"] = dlink_flags
    if args.openmp:
        table["openmp"] = True
    if args.strip:
        table["strip"] = True
    if options.get("no_python_abi_suffix"):
        table["python-abi-suffix"] = False
        if _defines_module(sources, paths.root) is False:
            note('no PYBIND11_MODULE or PyInit_ in its sources: if it is loaded with'
                 ' torch.ops.load_library, say kind = "library"')
    _note_leftovers(ext, factory, note)
    return {k: table[k] for k in ["name", *EXTENSION_DEFAULTS] if k in table}


def _note_leftovers(ext: Any, factory: str, note: Callable[[str], None]) -> None:
    if factory == "Extension":
        note("a plain setuptools Extension: pep517_torch compiles it against torch")
    if (ext.language or "c++") not in ("c++", "c"):
        note(f"language {ext.language!r} is not converted")
    for attribute in ("extra_objects", "swig_opts", "export_symbols"):
        if getattr(ext, attribute, None):
            note(f"{attribute} is not converted")
    if getattr(ext, "optional", False):
        note("optional=True is not converted: a failing extension fails the build")


def _layout(kwargs: dict[str, Any], paths: _Paths, converted: Converted) -> None:
    tool, notes = converted.tool, converted.notes
    raw_dirs = dict(kwargs.get("package_dir") or {})
    package_dir = {str(k): paths.relative(v) for k, v in raw_dirs.items()}
    if package_dir:
        tool["package-dir"] = package_dir[""] if list(package_dir) == [""] else package_dir
    listed = [str(p) for p in kwargs.get("packages") or []]
    roots = [p for p in listed if not any(p.startswith(q + ".") for q in listed)]
    if roots:
        tool["packages"] = roots
    elif not kwargs.get("py_modules"):
        notes.append(("tool", "setup() lists no packages: pep517_torch discovers them"))
    shipped = listed
    for shared in sorted({p.split(".")[0] for p in shipped} & SHARED_NAMES):
        family = [p for p in shipped if p.split(".")[0] == shared]
        notes.append(("tool", f"a top-level package named {shared!r} ships ({', '.join(family)};"
                      " find_packages() finds it): it collides with every other project that"
                      f" ships one; drop it from packages (find_packages(exclude=[{shared!r}])"
                      f" leaves its subpackages in: exclude [{shared!r}, '{shared}.*'])"))
    if kwargs.get("py_modules"):
        tool["py-modules"] = [str(m) for m in kwargs["py_modules"]]

    def locate(package: str) -> Path:
        parts = package.split(".")
        for cut in range(len(parts), 0, -1):
            if ".".join(parts[:cut]) in package_dir:
                return paths.root / package_dir[".".join(parts[:cut])] / Path(*parts[cut:])
        return paths.root / package_dir.get("", ".") / Path(*parts)

    data: dict[str, list[str]] = {}
    for package, patterns in dict(kwargs.get("package_data") or {}).items():
        targets = listed if package == "" else [str(package)]
        for target in targets:
            for pattern in [str(p) for p in patterns]:
                if glob.glob(pattern, root_dir=locate(target), recursive=True):
                    data.setdefault(target, []).append(pattern)
                elif package:
                    notes.append(("tool", f"package_data {target}: {pattern!r} matches no file"
                                  " (pep517_torch requires a match): dropped"))
    if data:
        tool["package-data"] = data
    version = converted.project.get("version")
    # Without a package list, the packages pep517_torch would discover hold the version file.
    candidates = [locate(p) for p in roots] or sorted(
        init.parent for init in (paths.root / package_dir.get("", ".")).glob("*/__init__.py"))
    found = version_source(paths.root, candidates, version) if (
        version and kwargs.get("version")
    ) else None
    if found:  # single-sourced from a file: pep517_torch reads it there too
        del converted.project["version"]
        converted.project["dynamic"] = ["version", *(
            k for k in converted.project.get("dynamic", []) if k != "version")]
        converted.tool["version"] = found
    scm_version_keyword(kwargs, converted.project, converted.tool, converted.notes)


def convert(run: SetupRun) -> Converted:
    """Everything a setup() call says, as tables; raises MigrateError without extensions."""
    kwargs = dict(run.kwargs or {})
    modules = list(kwargs.get("ext_modules") or [])
    torch_modules = [m for m in modules if factory_of(m) in TORCH_FACTORIES]
    if not torch_modules:
        plain = ", ".join(str(getattr(m, "name", m)) for m in modules)
        detail = f" (only plain setuptools Extensions: {plain})" if plain else ""
        raise MigrateError(f"{run.path}: setup() defines no CppExtension/CUDAExtension{detail}")
    notes: Notes = []
    paths = _Paths(run.root, _toolchain_dirs())
    options = _build_options(kwargs, notes)
    kwargs = with_setup_cfg(kwargs, run.root, notes)
    project = project_table(kwargs, run.root, notes)
    converted = Converted(project=project, tool={}, extensions=[], notes=notes)
    if "torch_requirement" in options:  # pep517_torch.setuptools' BuildExtension option
        converted.tool["torch-requirement"] = options["torch_requirement"]
    _layout(kwargs, paths, converted)
    arch_list = run.env_writes.get("TORCH_CUDA_ARCH_LIST")
    if arch_list:  # set by the setup.py for BuildExtension: the key that says the same
        converted.tool["cuda-arch-list"] = arch_list
    for module in modules:
        converted.extensions.append(convert_extension(module, paths, options, notes))
    converted.build_requires = build_requirements(run)
    dynamic_dependencies(converted.project, converted.tool)
    return converted


def dynamic_dependencies(project: dict[str, Any], tool: dict[str, Any]) -> None:
    """PEP 621: the torch pin is the backend's to add only when ``dependencies`` is dynamic, so
    setup.py's install_requires move to ``[tool.torch-ext] dependencies``."""
    if tool.get("torch-requirement", "minor") == "none" or "dependencies" in project.get(
        "dynamic", []
    ):
        return
    requirements = project.pop("dependencies", None)
    project["dynamic"] = [*project.get("dynamic", []), "dependencies"]
    if requirements:
        tool["dependencies"] = requirements


def _build_options(kwargs: dict[str, Any], notes: Notes) -> dict[str, Any]:
    """BuildExtension options and the bdist_wheel py_limited_api tag."""
    options: dict[str, Any] = {}
    commands = dict(kwargs.get("cmdclass") or {})
    for name, command in commands.items():
        found = build_ext_options(command)
        if name == "build_ext" and found is not None:
            options.update(found)
            known = {"no_python_abi_suffix", "use_ninja", "torch_requirement"}
            unknown = sorted(set(found) - known)
            if unknown:
                text = "BuildExtension options not converted: " + ", ".join(unknown)
                notes.append(("tool", text))
        if name != "build_ext" or getattr(command, "__module__", "") == "__main__":
            notes.append(("tool", f"cmdclass {name!r} ({getattr(command, '__name__', command)})"
                          " runs code of its own: it is not converted"))
    wheel_options = dict(dict(kwargs.get("options") or {}).get("bdist_wheel") or {})
    if wheel_options.get("py_limited_api"):
        options["py_limited_api"] = str(wheel_options["py_limited_api"])
    return options


def _toolchain_dirs() -> list[str]:
    import torch
    import torch.utils.cpp_extension as cpp_extension

    dirs = [os.path.dirname(torch.__file__), FAKE_CUDA_HOME]
    cuda_home = cpp_extension.CUDA_HOME
    return dirs + ([cuda_home] if cuda_home else [])


@functools.cache
def installed_distributions() -> Mapping[str, list[str]]:
    """Top-level module -> the distributions providing it, read once per process (every
    metadata file of the environment: the sandbox reads it before forking its runs)."""
    try:
        from importlib.metadata import packages_distributions

        return packages_distributions()
    except Exception:  # best effort: broken metadata must not stop migrate
        return {}


def build_requirements(run: SetupRun) -> list[str]:
    """Distributions of the third-party modules the setup.py imported (numpy, pybind11...)."""
    distributions = installed_distributions()
    found = {distributions.get(name, [name])[0] for name in run.imported}
    return sorted(found)

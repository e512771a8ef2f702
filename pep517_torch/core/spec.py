"""What to build: the one description both faces (pyproject.toml and ``load()``) turn into.

The compile core receives a list of :class:`ExtensionSpec` plus one :class:`BuildOptions` and
knows nothing of TOML, wheels or Python imports.
"""

from __future__ import annotations

import enum
import keyword
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..abi import stable_abi as stable
from ..errors import ConfigError
from . import flag_syntax
from .ninja.syntax import shown, unnameable_character
from .suffixes import (  # re-exported: spec users find the suffixes here too
    CUDA_HEADER_SUFFIXES,
    CUDA_SUFFIXES,
    SOURCE_SUFFIXES,
    is_cuda_source,
    is_header,
)

DEFAULT_PCH_CACHE_BYTES = 5 * 1024**3  # ~6 torch/extension.h PCHs (~790 MB per flag set)


class Kind(str, enum.Enum):
    """What the linked artifact is."""

    MODULE = "module"  # a Python extension module with PyInit_<name>
    LIBRARY = "library"  # a shared library that registers operators (torch.ops.load_library)
    EXECUTABLE = "executable"  # a standalone program linked against libtorch (JIT only)


class BuildType(str, enum.Enum):
    """Optimisation profile; NONE adds no -O flag at all (torch's JIT behaviour)."""

    NONE = "none"
    RELEASE = "release"
    DEBUG = "debug"
    RELWITHDEBINFO = "relwithdebinfo"


BUILD_TYPE_FLAGS: dict[BuildType, tuple[str, ...]] = {
    BuildType.NONE: (),
    BuildType.RELEASE: ("-O3", "-DNDEBUG"),
    BuildType.DEBUG: ("-O0", "-g"),
    BuildType.RELWITHDEBINFO: ("-O2", "-g", "-DNDEBUG"),
}


def source_problem(path: str | os.PathLike[str], include_dirs: str = "include_dirs") -> str | None:
    """Why ``path`` cannot be compiled as a source (the rest of "<path> is ..."), or None;
    ``include_dirs`` is the face's name for the include directories."""
    if Path(path).suffix in SOURCE_SUFFIXES:
        return None
    if is_header(path):
        return f"a header: headers are found through {include_dirs}"
    known = ", ".join(sorted(SOURCE_SUFFIXES))
    return f"not a C++ or CUDA source (expected one of {known})"


def first_duplicate(names: Sequence[str]) -> tuple[int, int] | None:
    """(index of the first use, index of the second) of the first name given twice, or None;
    two extensions of one name would write one artifact."""
    first: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in first:
            return first[name], index
        first[name] = index
    return None


@dataclass(frozen=True)
class ExtensionSpec:
    """One artifact to build.

    ``name`` is the dotted module name (``myops._C``) for wheels or a plain identifier for JIT;
    ``output`` is where the artifact lands, relative to the build directory's ``out/``.
    All paths are absolute. Flags are lists of single arguments (never shell-split again).
    """

    name: str
    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...] = ()
    define_macros: tuple[tuple[str, str | None], ...] = ()
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    library_dirs: tuple[Path, ...] = ()
    runtime_library_dirs: tuple[str, ...] = ()
    with_cuda: bool | None = None  # None: decided by the presence of .cu/.cuh sources
    cuda_arch_list: tuple[str, ...] | None = None  # None: BuildOptions / environment / default
    py_limited_api: str | None = None  # minimum CPython as "cp310", or None
    stable_abi: str | None = None  # the oldest torch (as "2.10") a LibTorch stable-ABI build loads under
    kind: Kind = Kind.MODULE
    python_abi_suffix: bool = True
    openmp: bool = False
    build_type: BuildType = BuildType.NONE
    strip: bool = False
    pch: bool = True
    pch_header: Path | None = None  # a project header to precompile instead of torch/extension.h
    unity: bool = True  # its torch-heavy C++ files may share unity TUs (when the build makes any)
    extension_name: str | None = None  # TORCH_EXTENSION_NAME; default: last part of ``name``
    # Device linking (relocatable device code): .cu files compile with -rdc=true and one
    # ``nvcc -dlink`` over the extension's CUDA objects joins the host link. dlink_libraries
    # (``-l`` names for that step) imply it, as in torch's CUDAExtension.
    dlink: bool = False
    dlink_libraries: tuple[str, ...] = ()
    extra_dlink_flags: tuple[str, ...] = ()
    # The torch (torch.__version__) the artifact's own import check compares the running one
    # with (core/postlink/import_guard.py); None: no check (the JIT's, an editable rebuild's choice).
    import_check_torch: str | None = None
    # Where values came from, for error messages: ("field" or "field[index]", the face's name
    # for it: a TOML key path, an argument name). Not part of what is built.
    keys: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        parts = self.name.split(".")
        if not self.name or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
            raise ConfigError(
                f"{self.name!r} is not a valid module name (dotted Python identifiers)",
                self.key_of("name"),
            )
        if not self.sources:
            raise ConfigError(f"extension {self.name!r} has no sources", self.key_of("sources"))
        for index, source in enumerate(self.sources):
            problem = source_problem(source, self.key_of("include_dirs"))
            if problem:
                raise ConfigError(f"{source} is {problem}", self.key_of("sources", index))
            unnameable = unnameable_character(str(source))
            if unnameable:
                raise ConfigError(
                    f"{shown(str(source))} contains {unnameable}: no compiler command can name"
                    " it; rename the file", self.key_of("sources", index),
                )
        if self.with_cuda is False and any(map(is_cuda_source, self.sources)):
            raise ConfigError(
                f"extension {self.name!r} has CUDA sources, but CUDA is off for it",
                self.key_of("with_cuda"),
            )
        if self.stable_abi is not None:
            self._check_stable_abi(self.stable_abi)
        if self.import_check_torch is not None and self.kind is Kind.EXECUTABLE:
            raise ConfigError(f"executable {self.name!r} cannot carry an import check", self.key_of("name"))
        if self.device_link:
            field_name = "dlink" if self.dlink else "dlink_libraries"
            if self.with_cuda is False:
                raise ConfigError(
                    f"extension {self.name!r} asks for device linking, but CUDA is off for it",
                    self.key_of(field_name),
                )
            if not any(map(is_cuda_source, self.sources)):
                raise ConfigError(
                    f"extension {self.name!r} asks for device linking but has no .cu source to"
                    " device-link",
                    self.key_of(field_name),
                )
        elif self.extra_dlink_flags:
            raise ConfigError(
                f"extension {self.name!r} has device-link flags but no device link",
                self.key_of("extra_dlink_flags"),
            )

    def _check_stable_abi(self, target: str) -> None:
        problem = stable.problem(target)
        if problem:
            raise ConfigError(problem, self.key_of("stable_abi"))
        for key, macro in self.user_macros(stable.MACRO):
            problem = (stable.undefine_problem(target) if macro.undefine
                       else stable.define_problem(macro.value, target))
            if problem:
                raise ConfigError(problem, key)
        unread = self.option_files()
        if unread:
            key, flag = unread[0]
            raise ConfigError(
                f"{flag!r} reads more flags from a file, which could define or undefine"
                f" {stable.MACRO} unseen: a stable-ABI extension lists its flags", key,
            )
        if self.py_limited_api is None:
            raise ConfigError(
                f"extension {self.name!r} targets the stable ABI but not the limited API",
                self.key_of("py_limited_api"),
            )

    def user_macros(self, name: str) -> list[tuple[str, flag_syntax.Macro]]:
        """Each define or undefine of macro ``name`` in ``define_macros`` and the user's C++
        and nvcc flags (in every spelling :mod:`.flag_syntax` reads), with its key."""
        found = [
            (self.key_of("define_macros"), flag_syntax.Macro(-1, macro, value))
            for macro, value in self.define_macros if macro == name
        ]
        for field_name, nvcc in (("extra_cflags", False), ("extra_cuda_cflags", True)):
            read = flag_syntax.macros(getattr(self, field_name), nvcc=nvcc)
            found += [(self.key_of(field_name, m.index), m) for m in read.named(name)]
        return found

    def option_files(self) -> list[tuple[str, str]]:
        """(key, flag) of each user flag that reads more flags from a file."""
        found = []
        for field_name, nvcc in (("extra_cflags", False), ("extra_cuda_cflags", True)):
            flags = getattr(self, field_name)
            found += [(self.key_of(field_name, i), flags[i])
                      for i in flag_syntax.macros(flags, nvcc=nvcc).option_files]
        return found

    def key_of(self, name: str, index: int | None = None) -> str:
        """Where field ``name`` (or its entry ``index``) was given, in the words of the face
        that made the spec; default: the field's own name."""
        recorded = dict(self.keys)
        item = f"{name}[{index}]" if index is not None else name
        return recorded.get(item) or recorded.get(name) or item

    def missing_directories(
        self, root: Path | None, kinds: Sequence[str] = ("include_dirs", "library_dirs")
    ) -> list[str]:
        """A note for each include or library directory (of ``kinds``) that is missing or empty:
        the compiler skips it without a word, and the build then fails on a header or library it
        would have held (or finds another copy on the system). Not an error: one listed for
        another setup is common."""
        notes = []
        submodules = root is not None and (root / ".gitmodules").is_file()
        for field_name in kinds:
            what = {"include_dirs": "include directory", "library_dirs": "library directory"}[field_name]
            for index, directory in enumerate(getattr(self, field_name)):
                try:
                    state = "is empty" if not any(directory.iterdir()) else None
                except NotADirectoryError:
                    state = "is not a directory"
                except FileNotFoundError:
                    state = "does not exist"
                except OSError as exc:
                    state = f"cannot be read ({exc.strerror})"
                if state is None:
                    continue
                inside = root is not None and directory.is_relative_to(root)
                shown = directory.relative_to(root) if inside else directory
                hint = (" (a git submodule not checked out? git submodule update --init --recursive)"
                        if submodules and state != "is not a directory" else "")
                notes.append(f"{self.key_of(field_name, index)}: {what} {shown} {state}{hint}")
        return notes

    @property
    def module_name(self) -> str:
        """The symbol part of PyInit_<x> and TORCH_EXTENSION_NAME."""
        return self.extension_name or self.name.rpartition(".")[2]

    @property
    def device_link(self) -> bool:
        return self.dlink or bool(self.dlink_libraries)

    @property
    def uses_cuda(self) -> bool:
        if self.with_cuda is not None:
            return self.with_cuda
        return any(Path(s).suffix in CUDA_SUFFIXES | CUDA_HEADER_SUFFIXES for s in self.sources)


@dataclass(frozen=True)
class BuildOptions:
    """Graph-wide settings: where to build and how to drive the tools."""

    build_dir: Path
    jobs: int | None = None  # None: bounded by cores and free memory (MAX_JOBS overrides)
    verbose: bool = False
    compiler_launcher: str = "auto"  # "auto" | "none" | a command
    cuda_arch_list: tuple[str, ...] | None = None  # -C/env value for every spec; None: per spec
    allow_cuda_version_mismatch: bool = False
    # nvcc --compress-mode for every fatbin (CUDA 12.8+): "default", "size", "speed",
    # "balance" or "none"; None: nvcc's own default, no flag
    cuda_compress_mode: str | None = None
    pch: bool = True
    source_root: Path | None = None  # mapped to "." in __FILE__ and debug info (reproducibility)
    env: dict[str, str] = field(default_factory=dict)  # CXX, CC, CUDA_HOME... (not os.environ)
    quiet: bool = False  # no notes, progress or tool output on the log (build.log has them)
    output_dir: Path | None = None  # where artifacts land; default <build_dir>/out
    # The machine-wide PCH cache wheel builds and the JIT share (pch/cache.py): its directory
    # (None: PEP517_TORCH_CACHE_DIR or the user cache) and bound (0: PCHs in the build dir).
    pch_cache_dir: Path | None = None
    pch_cache_size: int = DEFAULT_PCH_CACHE_BYTES
    pch_eager: bool = False  # build a torch header's PCH even if no TU would wait (the JIT)
    # Compile torch-heavy C++ files in unity TUs, one per heavy job slot (unity/groups.py): a one-off
    # build's choice; None (the JIT, editable installs): one TU per file, the dev loop's.
    unity: bool | None = None
    # The face's name for a field, for messages: where its value came from or where a user of
    # that face sets it (a TOML key, an environment variable). Not part of what is built.
    keys: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def key_of(self, name: str) -> str | None:
        """The face's name for field ``name``; None: that face gives no way to set it."""
        return dict(self.keys).get(name)

"""The settings model: one set of dataclasses drives parsing, the JSON schema and the docs.

Each field is a ``setting()`` whose metadata (the vocabulary is in ``fields.py``) says how it is
checked, documented and layered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from .. import limited_api
from .. import stable_abi
from ..core.arch_list import arch_list_problem
from ..core.spec import DEFAULT_PCH_CACHE_BYTES
from ..distribution.manylinux import tag_problem as manylinux_tag_problem
from ..runtime import environment as variables
from .checks import (
    extension_name_problem,
    library_name,
    no_keyword_parts,
    one_group_regex,
    parse_size,
    relative_glob,
    split_list,
    valid_size,
    valid_requirement,
    valid_specifier,
    valid_version,
)
from .fields import IDENTIFIER_PATTERN, MODULE_NAME_PATTERN, Partial, setting

BUILD_DIR_PLACEHOLDERS = ("wheel_tag", "python_tag", "torch_version", "cuda", "build_type")
DEFAULT_BUILD_DIR = "build/{wheel_tag}-torch{torch_version}"
DEFAULT_PCH_CACHE_SIZE = f"{DEFAULT_PCH_CACHE_BYTES // 1024**3}G"
MAX_JOBS = 4096  # far above any machine's cores; ninja reads -j and pool depths as C ints


MODULE_NAME = {
    "pattern": MODULE_NAME_PATTERN,
    "pattern_help": "is not a valid module name (dotted Python identifiers)",
    "check": no_keyword_parts,
}
EXTENSION_NAME = {**MODULE_NAME, "check": extension_name_problem}
SPECIFIER = {"check": valid_specifier, "format": "pep508-versionspec"}
STABLE_ABI = {"pattern": stable_abi.PATTERN, "check": stable_abi.problem}
STABLE_ABI_HELP = (
    "Build against LibTorch's stable ABI (torch/csrc/stable, torch/headeronly), for every torch"
    ' from this `MAJOR.MINOR` on (`"2.10"` or newer, not newer than the building torch):'
    " defines `TORCH_TARGET_VERSION` for the C++ compiler and nvcc, turns on the limited API"
    " (`py-limited-api` picks the CPython, default `cp310`), links no libtorch_python and"
    " precompiles no torch header; the wheel requires `torch>=MAJOR.MINOR` and is tagged"
    " abi3. After linking, an undefined symbol of torch's C++ API fails the build."
)
ARCH_LIST = {"check": arch_list_problem}  # the syntax only: what nvcc can build is core's check


@dataclass(frozen=True, kw_only=True)
class EnvTest:
    """A test of one environment variable, for what a plain `true`, `false` or string cannot
    say: every key given must hold, and at least one is needed."""

    REQUIRE_ONE_KEY: ClassVar[bool] = True

    not_: str | list[str] | None = setting(
        None,
        help="Holds when the value is none of these strings; an unset variable has no value, so"
        ' it holds too (`{not = "0"}` reads as `os.environ.get(NAME) != "0"`).',
        multiline=True,
        min_items=1,
    )
    unset: bool | None = setting(
        None,
        help="`true`: the variable is not in the environment at all; `false`: it is, even if"
        " empty.",
    )


@dataclass(frozen=True, kw_only=True)
class Condition:
    """A condition: every field given must hold (an empty table always holds)."""

    env: dict[str, bool | str | EnvTest] | None = setting(
        None,
        help="Environment variables: `true` means set and non-empty, `false` means unset or"
        ' empty, a string means equal to that string, `{not = "0"}` (or a list of strings)'
        " means not equal to any of them, unset included, and `{unset = true}` means not in the"
        " environment at all.",
        multiline=True,
    )
    cuda: bool | None = setting(
        None,
        help="Whether CUDA is enabled at this point of resolution (the `cuda` key after the"
        " overrides before this one, or its -C value).",
    )
    platform: str | None = setting(
        None, help="fnmatch pattern matched against `sys.platform` (e.g. `linux`, `win32`)."
    )
    platform_machine: str | None = setting(
        None,
        help="fnmatch pattern matched against `platform.machine()` (e.g. `x86_64`, `aarch64`).",
    )
    torch: str | None = setting(
        None,
        help="PEP 440 specifier set matched against the torch version without its local label"
        " (`2.13.0+cu130` is `2.13.0`; pre-releases match). False when torch is not found.",
        **SPECIFIER,
    )
    torch_cuda: bool | str | None = setting(
        None,
        help="Whether torch is a CUDA build, whatever `cuda` says: `true` for a CUDA build,"
        " `false` for a CPU build (or no torch); a string is a PEP 440 specifier set matched"
        " against torch's CUDA version (`torch.version.cuda`, e.g. `>=12.8`), which a CPU"
        " build never matches.",
        **SPECIFIER,
    )
    python: str | None = setting(
        None, help="PEP 440 specifier set matched against the Python version.", **SPECIFIER
    )


@dataclass(frozen=True, kw_only=True)
class CudaVariant:
    """Added to an extension only when it is built with CUDA."""

    sources: list[str] = setting(
        factory=list, help="More source globs (e.g. the `.cu` files), appended to `sources`."
    )
    include_dirs: list[str] = setting(factory=list, help="Appended to `include-dirs`.")
    define_macros: dict[str, str | int | bool] = setting(
        factory=dict, help="Merged into `define-macros`.", key_pattern=IDENTIFIER_PATTERN
    )
    extra_cflags: list[str] = setting(factory=list, help="Appended to `extra-cflags`.")
    extra_cuda_cflags: list[str] = setting(factory=list, help="Appended to `extra-cuda-cflags`.")
    extra_ldflags: list[str] = setting(factory=list, help="Appended to `extra-ldflags`.")
    libraries: list[str] = setting(
        factory=list, help="Appended to `libraries`.", check=library_name
    )
    library_dirs: list[str] = setting(factory=list, help="Appended to `library-dirs`.")
    dlink: bool | None = setting(None, help="Replaces `dlink`; unset: the extension's value.")
    dlink_libraries: list[str] = setting(
        factory=list, help="Appended to `dlink-libraries`.", check=library_name
    )
    extra_dlink_flags: list[str] = setting(factory=list, help="Appended to `extra-dlink-flags`.")


@dataclass(frozen=True, kw_only=True)
class ExtensionSettings:
    """One compiled artifact: a Python extension module or an operator library."""

    name: str = setting(
        help="Dotted module name of the artifact (`mypkg._C`); it lands in that package.",
        **EXTENSION_NAME,
    )
    sources: list[str] = setting(
        help="Source globs relative to the project root (`**` recurses); each must match at least"
        " one file. Matches are sorted; files inside the build directory are skipped.",
        min_items=1,
    )
    include_dirs: list[str] = setting(
        factory=list,
        help="Include directories; relative ones are inside the project root, absolute ones may"
        " be anywhere.",
    )
    define_macros: dict[str, str | int | bool] = setting(
        factory=dict,
        help="Preprocessor macros: a string or integer defines `NAME=value`, `true` defines"
        " `NAME`, `false` leaves it undefined.",
        key_pattern=IDENTIFIER_PATTERN,
    )
    extra_cflags: list[str] = setting(
        factory=list, help="Extra C++ compiler arguments, one argument per entry."
    )
    extra_cuda_cflags: list[str] = setting(
        factory=list, help="Extra nvcc arguments, one argument per entry."
    )
    extra_ldflags: list[str] = setting(
        factory=list, help="Extra linker arguments, one argument per entry."
    )
    libraries: list[str] = setting(
        factory=list, help="Libraries to link (`-l` names: `m`, not `-lm`).", check=library_name
    )
    library_dirs: list[str] = setting(
        factory=list, help="Library search directories (relative ones are inside the root)."
    )
    runtime_library_dirs: list[str] = setting(
        factory=list, help="Run-time search paths (rpath), e.g. `$ORIGIN/lib`; not resolved."
    )
    with_cuda: Literal["auto"] | bool = setting(
        "auto",
        help='Compile with CUDA; `"auto"` decides by the presence of `.cu`/`.cuh` sources.',
    )
    dlink: bool = setting(
        False,
        help="Device linking: `.cu` files compile with `-rdc=true` (unless `extra-cuda-cflags`"
        " choose `-rdc`), and `nvcc -dlink` over the CUDA objects, for the same architectures,"
        " joins the link, so kernels can call `__device__` functions of other `.cu` files."
        ' Moot without `.cu` sources when `with-cuda = "auto"`.',
    )
    dlink_libraries: list[str] = setting(
        factory=list,
        help="`-l` names for the device link (e.g. NVSHMEM's); implies `dlink`.",
        check=library_name,
    )
    extra_dlink_flags: list[str] = setting(
        factory=list, help="Extra `nvcc -dlink` arguments, one per entry (e.g. `-dlto`)."
    )
    py_limited_api: bool | str = setting(
        False,
        help='Build against the stable ABI: `true` means `"cp310"`; a string names the oldest'
        ' CPython (`"cp38"` or newer).',
        pattern=limited_api.PATTERN,
        check=limited_api.problem,
    )
    stable_abi: str | None = setting(
        None, help=STABLE_ABI_HELP + " Unset: the project value.", **STABLE_ABI
    )
    cuda_arch_list: list[str] | str | None = setting(
        None,
        help="CUDA architectures for this extension (wins over the project value; a -C value or"
        " TORCH_CUDA_ARCH_LIST wins over both). A string is split on `;`, commas and spaces.",
        **ARCH_LIST,
    )
    kind: Literal["module", "library"] = setting(
        "module",
        help="`module`: a Python extension module; `library`: a shared library registering"
        " operators (`torch.ops.load_library`).",
    )
    python_abi_suffix: bool = setting(
        True,
        help="Name the file with the Python ABI suffix (`_C.cpython-312-x86_64-linux-gnu.so`).",
    )
    openmp: bool = setting(False, help="Compile and link with OpenMP.")
    strip: bool | None = setting(None, help="Strip the artifact; unset: the project value.")
    pch: bool | None = setting(None, help="Use a precompiled header; unset: the project value.")
    pch_header: str | None = setting(
        None, help="Project header to precompile; unset: the project value."
    )
    enabled: bool = setting(
        True,
        help="`false`: do not build this extension; it is listed as skipped, naming the key that"
        " turned it off (an override's `extension.NAME.enabled = false` does so under a"
        " condition).",
    )
    if_: Condition | None = setting(
        None,
        help="Build this extension only when the condition holds; otherwise it is listed as"
        " skipped with the reason.",
    )
    optional: bool = setting(
        False,
        help="`true`: the project works without this extension, so a build where it is skipped"
        " (by `enabled`, `if`) still succeeds. A build that skips every extension fails with"
        " the reasons unless each of them is optional: it would ship a wheel without one.",
    )
    cuda: CudaVariant | None = setting(
        None,
        help='Merged in (lists appended, macros merged) when `with-cuda = true`, or `"auto"`'
        " and CUDA is enabled. Not allowed with `with-cuda = false`.",
    )


@dataclass(frozen=True, kw_only=True)
class VersionSettings:
    """Where a dynamic version (`dynamic = ["version"]`) is read from."""

    file: str | None = setting(
        None,
        help="File holding the version, relative to the root; default: the first package's"
        " `__init__.py`.",
    )
    pattern: str | None = setting(
        None,
        help='Regex with exactly one group capturing the version; default: `__version__ = "..."`.',
        check=one_group_regex,
        multiline=True,
    )
    suffix_env: str | None = setting(
        None, help="Environment variable whose value is appended to the version (e.g. `+cu130`)."
    )
    base: str | None = setting(
        None,
        help="The version itself (PEP 440), instead of reading it from `file`: for a static"
        " version that `suffix-env` extends.",
        check=valid_version,
    )


PROJECT_ONLY_KEYS = ("extension", "overrides")


@dataclass(frozen=True, kw_only=True)
class ProjectSettings:
    """Settings of the pep517_torch build backend; every key is optional."""

    packages: list[str] | None = setting(
        None,
        help="Python packages to ship (subpackages included); unset: discovered (`src/` layout,"
        " else directories with `__init__.py` or a stub-only `__init__.pyi` in the root, minus tests, docs and the like).",
        **MODULE_NAME,
    )
    package_dir: str | dict[str, str] = setting(
        factory=dict,
        help='setuptools-style package directories: `"src"` means `{"" = "src"}`;'
        ' `{"" = "src", pkg = "lib/pkg"}` maps root packages and single packages.',
    )
    py_modules: list[str] = setting(
        factory=list, help="Top-level pure-Python modules to ship.", **MODULE_NAME
    )
    package_data: dict[str, list[str]] = setting(
        factory=dict,
        help="Package name to globs relative to that package's directory; the files ship in the"
        " wheel (data, prebuilt libraries). Each glob must match at least one file.",
    )
    sdist_include: list[str] = setting(
        factory=list,
        help="Extra globs (relative to the root) to put in the sdist.",
        check=relative_glob,
    )
    sdist_exclude: list[str] = setting(
        factory=list,
        help="Globs (relative to the root) to leave out of the sdist.",
        check=relative_glob,
    )
    build_dir: str = setting(
        DEFAULT_BUILD_DIR,
        help="Build directory, relative to the root or absolute. Placeholders: `{wheel_tag}`,"
        " `{python_tag}`, `{torch_version}` (`2.13.0+cpu`; `2.13.0+cpu-isolated` when torch"
        " comes from an isolated build environment), `{cuda}` (e.g. `cu130` or `cpu`),"
        " `{build_type}`.",
        config_setting=True,
    )
    cuda_arch_list: list[str] | str | None = setting(
        None,
        help="Default CUDA architectures for every extension (e.g. `8.0;9.0+PTX`). A -C value or"
        " TORCH_CUDA_ARCH_LIST overrides every extension's list.",
        config_setting=True,
        env=variables.TORCH_CUDA_ARCH_LIST,
        option=lambda value: tuple(split_list(value)) or None,
        **ARCH_LIST,
    )
    torch_requirement: Literal["minor", "exact", "none"] = setting(
        "minor",
        help="Torch requirement written into the wheel: `minor` (`torch>=2.13,<2.14`), `exact`"
        " (`torch==2.13.0`) or `none`.",
        config_setting=True,
    )
    stable_abi: str | None = setting(
        None, help=STABLE_ABI_HELP + " Each extension's own value wins.", **STABLE_ABI
    )
    platform_tag: str = setting(
        "auto",
        help='The wheel\'s platform tag on Linux: `"auto"` is the strictest `manylinux_2_X` that'
        " every shipped binary satisfies (read from its ELF: the versions of glibc, libstdc++"
        " and libgcc symbols it needs and its NEEDED libraries, by auditwheel's policies;"
        " torch's own libraries and the CUDA libraries torch brings count as supplied by the"
        " torch requirement); a NEEDED library outside both makes it `linux_<arch>` with a"
        ' note. `"linux"`: always `linux_<arch>`. An explicit tag (`manylinux_2_28_x86_64`,'
        " `manylinux2014_x86_64`) is checked: binaries that need more are an error. Other"
        " platforms keep their interpreter's tag.",
        pattern=r"^(auto|linux|[a-z]+[0-9_]*_[a-z0-9_]+)$",
        check=manylinux_tag_problem,
        config_setting=True,
    )
    torch_import_check: Literal["auto"] | bool = setting(
        "auto",
        help="Check at import time that the running torch matches the build (its major.minor,"
        ' and its CUDA variant: none or CUDA, and the CUDA major); `"auto"`: when'
        ' `torch-requirement = "none"`, when a static `project.dependencies` holds the torch'
        " requirement, and for every module built against a CUDA torch that links torch's CUDA"
        " libraries or the CUDA runtime (no requirement can name the variant).",
        config_setting=True,
    )
    dependencies: list[str] | None = setting(
        None,
        help='The project\'s own requirements (PEP 508) when `project.dynamic` lists'
        ' `"dependencies"`: the wheel\'s `Requires-Dist` is these plus the torch pin. Refused'
        " beside a static `project.dependencies`.",
        check=valid_requirement,
        format="pep508",
    )
    local_version: Literal["torch", "none"] = setting(
        "none",
        help='`"torch"`: the wheel\'s version gains a local label naming the build torch and'
        " its CUDA, `1.0.0+pt213cpu` or `1.0.0+pt214cu130` (joined to an existing label with"
        " `.`), for one find-links page per variant. An sdist never carries it.",
        config_setting=True,
    )
    jobs: int | None = setting(
        None,
        help="Parallel compile jobs; unset: bounded by cores and free memory.",
        minimum=1,
        maximum=MAX_JOBS,
        config_setting=True,
        env=variables.MAX_JOBS,
        runs_only=True,
    )
    verbose: bool = setting(False, help="Print every command.", config_setting=True)
    build_type: Literal["release", "debug", "relwithdebinfo", "none"] = setting(
        "release",
        help="Optimisation profile: `release` (-O3), `debug` (-O0 -g), `relwithdebinfo`"
        " (-O2 -g) or `none` (no -O flag).",
        config_setting=True,
    )
    strip: bool = setting(False, help="Strip debug symbols from artifacts.", config_setting=True)
    pch: bool = setting(
        True,
        help="Precompile the torch header each C++ file reaches first (`torch/extension.h`,"
        " `torch/library.h`, `ATen/ATen.h`, ...; directly or through the project's own"
        " header) into the machine-wide cache, or `pch-header` into the build directory.",
        config_setting=True,
    )
    pch_header: str | None = setting(
        None, help="Project header (relative to the root) to precompile instead."
    )
    compiler_launcher: str = setting(
        "auto",
        help='`"auto"` (ccache or sccache when found), `"none"`, or a launcher command:'
        ' `"ccache"`, `"sccache"`, `"distcc"` (DISTCC_HOSTS then sets the job count). The JIT'
        " reads the same environment variable.",
        config_setting=True,
        env=variables.COMPILER_LAUNCHER,
        runs_only=True,
    )
    pch_cache_size: str = setting(
        DEFAULT_PCH_CACHE_SIZE,
        help="Bound on the machine-wide cache of precompiled torch headers that wheel builds"
        " and the JIT share (least recently used entries go first): bytes, or a number with"
        " `K`, `M`, `G` or `T` (powers of 1024), e.g. `8G`; `0` keeps precompiled headers in each"
        " build directory instead. The JIT reads the same environment variable.",
        config_setting=True,
        env=variables.PCH_CACHE_SIZE,
        runs_only=True,
        option=parse_size,
        check=valid_size,
    )
    cuda: Literal["auto"] | bool = setting(
        "auto",
        help='Enable CUDA: `"auto"` means when torch is a CUDA build and nvcc is found. Governs'
        " the extensions' `cuda` tables and `if.cuda` conditions.",
        config_setting=True,
    )
    allow_cuda_version_mismatch: bool = setting(
        False,
        help="Allow an nvcc whose major version differs from torch's CUDA.",
        config_setting=True,
    )
    version: VersionSettings | None = setting(
        None, help='Dynamic version source (needs `dynamic = ["version"]`).'
    )
    extension: list[ExtensionSettings] = setting(
        factory=list, help="The compiled extensions, one table each."
    )
    overrides: list[Override] = setting(
        factory=list,
        help="Conditional changes, applied in order after parsing, before -C and environment.",
    )


@dataclass(frozen=True, kw_only=True)
class OverrideAppend:
    """Like an override, but appends to list keys and merges table keys key by key."""

    settings: Partial[ProjectSettings] = setting(
        factory=dict,
        help="Any project-level list or table key.",
        flatten=True,
        exclude=PROJECT_ONLY_KEYS,
        appendable_only=True,
    )
    extension: dict[str, Partial[ExtensionSettings]] = setting(
        factory=dict,
        help='Extension name (or `"*"` for all) to list and table keys to extend.',
        exclude=("name",),
        appendable_only=True,
    )


@dataclass(frozen=True, kw_only=True)
class Override:
    """Conditional changes: when `if` holds, the other keys replace values and `append` extends
    lists and tables. Overrides apply in order, after the rest of the table, before -C and the
    environment."""

    if_: Condition = setting(help="When this override applies (required).")
    settings: Partial[ProjectSettings] = setting(
        factory=dict,
        help="Any project-level key except `extension` and `overrides`: replaces the value.",
        flatten=True,
        exclude=PROJECT_ONLY_KEYS,
    )
    extension: dict[str, Partial[ExtensionSettings]] = setting(
        factory=dict,
        help='Extension name (or `"*"` for all) to keys that replace that extension\'s values.',
        exclude=("name",),
    )
    append: OverrideAppend | None = setting(
        None, help="Keys to append to (lists) or merge into (tables) instead of replacing."
    )


MODEL_CLASSES: tuple[type, ...] = (
    ProjectSettings,
    ExtensionSettings,
    CudaVariant,
    Condition,
    EnvTest,
    VersionSettings,
    Override,
    OverrideAppend,
)


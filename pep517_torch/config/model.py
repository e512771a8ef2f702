"""The settings model: one set of dataclasses drives parsing, the JSON schema and the docs.

Each field is a ``setting()`` whose metadata (the vocabulary is in ``fields.py``) says how it is
checked, documented and layered. The project's table, its version source and its overrides are
here; an extension's table and the `if` conditions are in ``extension_model.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..core.spec import DEFAULT_PCH_CACHE_BYTES
from ..abi.platform_tags import tag_problem as platform_tag_problem
from ..shipped_runtime import environment as variables
from .checks import (
    one_group_regex,
    parse_size,
    relative_glob,
    split_list,
    valid_size,
    valid_requirement,
    valid_version,
)
from .extension_model import (
    ARCH_LIST,
    MODULE_NAME,
    STABLE_ABI,
    STABLE_ABI_HELP,
    Condition,
    CudaVariant,
    EnvTest,
    ExtensionSettings,
)
from .fields import Partial, setting
from .matrix_model import MatrixExclude, MatrixSettings

BUILD_DIR_PLACEHOLDERS = ("wheel_tag", "python_tag", "torch_version", "cuda", "build_type")
DEFAULT_BUILD_DIR = "build/{wheel_tag}-torch{torch_version}"
DEFAULT_PCH_CACHE_SIZE = f"{DEFAULT_PCH_CACHE_BYTES // 1024**3}G"
MAX_JOBS = 4096  # far above any machine's cores; ninja reads -j and pool depths as C ints


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
    provider: Literal["setuptools-scm"] | None = setting(
        None,
        help='`"setuptools-scm"`: the version comes from git (or Mercurial) through the'
        " setuptools-scm library, configured by `[tool.setuptools_scm]` (`1.2.4.dev3+g1a2b3c4d`"
        " three commits after the tag `v1.2.3`); an sdist carries it in PKG-INFO, so a wheel"
        " builds from the sdist without git. The default when pyproject.toml has a"
        " `[tool.setuptools_scm]` table and neither `file`, `pattern` nor `base` is given. The"
        " build then requires setuptools-scm (`get_requires_for_build_*` asks the frontend for"
        " it), and a build's no-op replay is off (the version changes with every commit).",
    )


PROJECT_ONLY_KEYS = ("extension", "overrides", "matrix")


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
        help="Extra globs (relative to the root) to put in the sdist; a well-known credential"
        " file (`.pypirc`, `.env`, `.ssh/`, ...) comes in only through a glob that names it.",
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
        ' note. `"linux"` (or this machine\'s `linux_<arch>` itself): always `linux_<arch>`,'
        " whatever the binaries need. An explicit manylinux tag (`manylinux_2_28_x86_64`,"
        " `manylinux2014_x86_64`) is checked: binaries that need more are an error. Other"
        " platforms keep their interpreter's tag.",
        pattern=r"^(auto|linux|[a-z]+[0-9_]*_[a-z0-9_]+)$",
        check=platform_tag_problem,
        config_setting=True,
    )
    torch_import_check: Literal["auto"] | bool = setting(
        "auto",
        help="Check, inside each module and library, that the running torch is one it runs under"
        " (the build's major.minor, a stable-ABI target or newer; and for one that needs a CUDA"
        " torch, one of the same CUDA major) before any code of it runs, on `import` and"
        " `torch.ops.load_library` alike: otherwise one ImportError names both torches. The"
        " file keeps its name and place. An extension needs a CUDA torch when it is CUDA code"
        " built against a CUDA torch, or stable-ABI CUDA code (kernels on raw pointers built"
        " beside a CPU torch need a CUDA runtime only). `\"auto\"`: when `torch-requirement ="
        ' \"none\"`, when a static `project.dependencies` holds the torch requirement, and for'
        " every extension that needs a CUDA torch (no requirement can name torch's CUDA variant)."
        " Linux x86_64 and aarch64 (elsewhere a note says no check is built).",
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
        " `.`; a version that already holds it keeps one, one naming another torch is an"
        " error), for one find-links page per variant. An sdist never carries it.",
        config_setting=True,
    )
    variant: Literal["torch", "none"] = setting(
        "none",
        help='`"torch"`: each wheel is a wheel variant (PEP 825, as variantlib 0.2 reads it):'
        " its file name ends in a label naming what was built (`pt213cpu`, `pt214cu130`,"
        " `cu130` for a stable-ABI CUDA build) and `.dist-info/variant.json` holds its"
        " properties, read from the built binaries: `abi_dependency :: torch :: 2.14` (the"
        " torch it was built against; none for the stable ABI), and for device code"
        " `nvidia :: cuda_version_lower_bound :: 13.0` and `nvidia :: sm_arch :: 90_real` /"
        " `90_virtual` per cubin and PTX. A stable-ABI build without device code stays one"
        " plain wheel. Not with `local-version = \"torch\"`.",
        config_setting=True,
    )
    max_wheel_size: str | None = setting(
        None,
        help="Largest wheel to write: bytes, or a number with `K`, `M`, `G` or `T` (powers of"
        " 1024), e.g. `100M` (PyPI's default per-file limit, 100 MiB). A larger wheel is not"
        " written; one line names its largest members and, for CUDA libraries, their device"
        " code by arch.",
        config_setting=True,
        check=valid_size,
    )
    ops_check: Literal["notes", "strict", "off"] = setting(
        "notes",
        help="After each build, a child process with the build's torch loads the artifacts (and"
        " the project's Python modules that use `torch.library`) and lists every operator they"
        " registered: its schema and the dispatch keys with a kernel (one line each in the"
        " summary; the wheel's `.dist-info/pep517_torch.json` keeps the table). What"
        " torch.compile will trip on is said per op: no fake (Meta) kernel, a CUDA kernel but"
        ' no CPU one, autograd for one device and not another. `"notes"`: as notes;'
        ' `"strict"`: as errors (no wheel is written), a listing that fails too; `"off"`: no'
        " listing. Artifacts that call none of torch's registration API are not loaded.",
        config_setting=True,
    )
    ops_samples: str | None = setting(
        None,
        help="A Python file (relative to the root) whose `samples()` returns"
        ' `{"ns::op": [args_tuple, ...]}`: `python -m pep517_torch ops --check` runs'
        " `torch.library.opcheck` on each (test_schema, test_autograd_registration,"
        " test_faketensor, test_aot_dispatch_dynamic), one row per op and test.",
    )
    stubs: bool = setting(
        False,
        help="Write a `.pyi` stub beside each pybind11 module in the wheel (pybind11-stubgen,"
        " run with the build's torch; the build then requires it) and `py.typed` in its"
        " package, so mypy and editors see real signatures. A stub that does not parse fails"
        " the build.",
        config_setting=True,
    )
    cuda_compress_mode: Literal["default", "size", "speed", "balance", "none"] | None = setting(
        None,
        help="nvcc's `--compress-mode` for every fatbin (CUDA 12.8 or newer): `size` (zstd,"
        " cubins too: the smallest wheel), `speed` (LZ4), `balance`, `default` (nvcc's own"
        " choice), `none`; unset: no flag.",
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
    unity: Literal["auto"] | bool = setting(
        "auto",
        help="Compile the torch-heavy C++ files of each extension as unity translation units,"
        " one per job slot, so torch's headers are parsed once per slot instead of once per"
        " file (files that declare clashing names for themselves stay apart; a unity TU that"
        ' fails is compiled file by file); after an edit, a TU is compiled again whole, or its'
        " edited files alone beside the rest where idle job slots make that sooner, until every"
        ' file compiles again. `"auto"`: for wheels, not for editable installs (whose next'
        " build is an edit of one file).",
        config_setting=True,
        env=variables.UNITY,
        runs_only=True,  # the same program either way: a JIT stamp need not record it
        option=lambda value: None if value == "auto" else value,
    )
    compiler_launcher: str = setting(
        "auto",
        help='`"auto"` (ccache or sccache when found), `"none"`, or a launcher command:'
        ' `"ccache"`, `"sccache"`, `"distcc"` (DISTCC_HOSTS then sets the job count). The build'
        " summary names the launcher in use and how to turn it off. The JIT reads the same"
        " environment variable.",
        config_setting=True,
        env=variables.COMPILER_LAUNCHER,
        runs_only=True,
    )
    pch_cache_size: str = setting(
        DEFAULT_PCH_CACHE_SIZE,
        help="Bound on the machine-wide cache of precompiled torch headers that wheel builds"
        " and the JIT share (least recently used entries go first): bytes, or a number with"
        " `K`, `M`, `G` or `T` (powers of 1024), e.g. `8G`; `0` keeps precompiled headers in each"
        " build directory instead. The JIT reads the same environment variable. A wheel build"
        " whose TUs did without a torch header's PCH makes it after the wheel is written, in"
        " the background, for the next builds (PEP517_TORCH_PCH_BACKGROUND=0: never).",
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
    matrix: MatrixSettings | None = setting(
        None,
        help="The wheels to publish, built and tested by `python -m pep517_torch matrix`"
        " (read by that command alone: a build never reads it).",
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
    MatrixSettings,
    MatrixExclude,
)


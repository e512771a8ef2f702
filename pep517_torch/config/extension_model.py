"""The settings model of one `[[tool.torch-ext.extension]]` table and of the `if` conditions
(extensions and overrides both take one), with the field metadata the project's settings share
(module names, specifiers, stable-ABI targets, arch lists). ``model.py`` holds the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from ..abi import limited_api
from ..abi import stable_abi
from ..core.cuda.arch_list import arch_list_problem
from .checks import (
    extension_name_problem,
    library_name,
    shipped_name_problem,
    valid_specifier,
)
from .fields import IDENTIFIER_PATTERN, MODULE_NAME_PATTERN, setting

MODULE_NAME = {
    "pattern": MODULE_NAME_PATTERN,
    "pattern_help": "is not a valid module name (dotted Python identifiers)",
    "check": shipped_name_problem,
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
    " abi3 (`\"02.10\"` reads as 2.10). After linking, an undefined symbol of torch's C++ API"
    " fails the build; a flag that defines or undefines `TORCH_TARGET_VERSION` is an error."
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
    unity: bool | None = setting(
        None,
        help="`false`: compile this extension's files one by one even where the build makes"
        " unity TUs; unset: allowed.",
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

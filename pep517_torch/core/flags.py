"""Compile and link arguments for one extension: a pure function of spec and resolved tools.

Order matters and is fixed: our defaults first, the user's flags last, so the user wins; a
user ``-std=`` replaces ours per language rather than fighting it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from ..abi import limited_api
from ..abi import stable_abi as stable
from ..errors import ConfigError
from ..shipped_runtime.environment import CFLAGS, FLAGS_ENV
from . import flag_syntax
from .spec import BUILD_TYPE_FLAGS, BuildType, ExtensionSpec, Kind
from .toolchain.tools import Compiler, TorchInstall

# torch's nvcc defaults: its headers define these half/bfloat16 operators themselves.
TORCH_NVCC_FLAGS = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
)
# What `openmp = true` defines (as 1) when torch itself was built with OpenMP.
OPENMP_DEFINE = "AT_PARALLEL_OPENMP"


# gcc collects garbage far more often than a torch TU needs: with these, a TU that includes
# torch/extension.h compiles faster for a little more memory, with identical objects
# (measured in docs/performance.md).
GCC_HEAVY_TUNING = ("--param=ggc-min-expand=400", "--param=ggc-min-heapsize=1048576")


def heavy_tuning(compiler: Compiler) -> tuple[str, ...]:
    return GCC_HEAVY_TUNING if compiler.family == "gcc" else ()


def pch_instantiation(compiler: Compiler) -> tuple[str, ...]:
    """What a torch umbrella's PCH is built with for its users' sake: clang 11+ instantiates the
    header's pending templates once, in the PCH, instead of again in every TU that uses it (as
    CMake's precompiled headers do): about half the time of a TU that uses it (measured in
    docs/performance.md). gcc has no such option. The TUs' command lines do not change."""
    return ("-fpch-instantiate-templates",) if compiler.family == "clang" and compiler.version >= (11,) else ()


def nvcc_heavy_tuning(host_family: str) -> tuple[str, ...]:
    """The same for the host compiler nvcc runs over a .cu that includes torch (its last pass:
    the host code cudafe++ wrote, torch's inline functions at -O3)."""
    return (f"-Xcompiler={','.join(GCC_HEAVY_TUNING)}",) if host_family == "gcc" else ()


@dataclass(frozen=True)
class ResolvedTools:
    """Everything the flags depend on besides the spec, resolved once per build from what
    ``toolchain/tools.py`` and ``cuda/toolkit.py`` found: the compiler, torch, Python's and CUDA's directories."""

    compiler: Compiler
    torch: TorchInstall
    python_include: Path
    cuda_include_dirs: tuple[Path, ...] = ()
    cuda_library_dirs: tuple[Path, ...] = ()
    host_compiler_for_nvcc: str | None = None  # CC, passed as -ccbin
    env_flags: EnvironmentFlags | None = None  # CXXFLAGS, CPPFLAGS, LDFLAGS (environment_flags)


@dataclass(frozen=True)
class EnvironmentFlags:
    """The flags variables as setuptools and CMake apply them to C++: ``compile`` (CXXFLAGS,
    then CPPFLAGS) on every C++ compile, ``link`` (LDFLAGS, CXXFLAGS, CPPFLAGS: setuptools'
    order for a C++ link) on every link; nvcc gets neither."""

    compile: tuple[str, ...] = ()
    link: tuple[str, ...] = ()
    note: str | None = None  # CFLAGS set where only C++ compiles


def environment_flags(env: Mapping[str, str]) -> EnvironmentFlags:
    """CXXFLAGS, CPPFLAGS and LDFLAGS from ``env``, each split as a shell would split it (as
    setuptools and make do); a value no shell could split is an error naming its variable."""
    found: dict[str, list[str]] = {}
    for name in (*FLAGS_ENV, CFLAGS):
        try:
            found[name] = shlex.split(env.get(name) or "")
        except ValueError as exc:
            raise ConfigError(f"{env[name]!r} cannot be split into flags ({exc})", name) from None
    note = None
    if found[CFLAGS] and not found["CXXFLAGS"]:
        note = ("CFLAGS is not read: every source compiles as C++, whose flags setuptools and"
                " CMake take from CXXFLAGS (torch's BuildExtension passed CFLAGS): set CXXFLAGS")
    return EnvironmentFlags(
        (*found["CXXFLAGS"], *found["CPPFLAGS"]),
        (*found["LDFLAGS"], *found["CXXFLAGS"], *found["CPPFLAGS"]), note,
    )


@dataclass(frozen=True)
class ExtensionFlags:
    cxx: tuple[str, ...]
    nvcc: tuple[str, ...]
    ld: tuple[str, ...]
    pch: tuple[str, ...]  # cxx without the per-extension name define and user include dirs
    dlink: tuple[str, ...] = ()  # nvcc -dlink arguments (besides inputs and output), if any
    # A torch umbrella's PCH names no project path, so every project shares it: prefix maps
    # are applied when a TU is compiled, and gcc accepts a PCH built with other maps.
    umbrella_pch: tuple[str, ...] = ()


def default_std(torch: TorchInstall) -> str:
    release = Version(torch.version).release
    return "-std=c++20" if release >= (2, 10) else "-std=c++17"


def has_std(flags: tuple[str, ...]) -> bool:
    """Whether ``flags`` choose the standard themselves (an ``-Xcompiler -std`` is the host
    compiler's alone: nvcc still gets ours)."""
    return flag_syntax.requested_standard(flags) is not None


def standard_problem(spec: ExtensionSpec, torch: TorchInstall, *, nvcc: bool) -> tuple[str, str] | None:
    """(why, key) when the ``-std`` the user's C++ (or nvcc) flags ask for is older than the
    standard torch's headers accept (they stop with an ``#error`` otherwise); else None."""
    needs = torch.cxx_standard
    name = "extra_cuda_cflags" if nvcc else "extra_cflags"
    asked = flag_syntax.requested_standard(getattr(spec, name), nvcc=nvcc)
    if needs is None or asked is None or asked.cplusplus is None or asked.cplusplus >= needs[0]:
        return None
    wanted = flag_syntax.standard_name(needs[0])
    return (
        f"{asked.flag} asks for {flag_syntax.standard_name(asked.cplusplus)}, older than"
        f" {wanted}, which torch {torch.version} needs (its {needs[1]} stops with an #error"
        f" below {wanted}): remove the flag or ask for {wanted.lower()} or newer",
        spec.key_of(name, asked.index),
    )


def _defines(spec: ExtensionSpec) -> list[str]:
    out = []
    if spec.kind is not Kind.EXECUTABLE:
        out += [f"-DTORCH_EXTENSION_NAME={spec.module_name}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    for name, value in spec.define_macros:
        out.append(f"-D{name}" if value is None else f"-D{name}={value}")
    if spec.py_limited_api and not _defines_limited_api(spec):
        out.append(f"-DPy_LIMITED_API=0x{limited_api.macro_value(spec.py_limited_api):08X}")
    return out + _stable_abi_defines(spec)


def _stable_abi_defines(spec: ExtensionSpec) -> list[str]:
    """TORCH_TARGET_VERSION (unless the user defines it: the spec checked it agrees) and, for a
    CUDA extension, USE_CUDA, which declares the C shim's CUDA stream functions."""
    if spec.stable_abi is None:
        return []
    defined = spec.user_macros(stable.MACRO)
    out = [] if defined else [f"-D{stable.MACRO}={stable.macro_text(spec.stable_abi)}"]
    if spec.uses_cuda and not spec.user_macros("USE_CUDA"):
        out.append("-DUSE_CUDA")
    return out


def _defines_limited_api(spec: ExtensionSpec) -> bool:
    """Whether the user already defines Py_LIMITED_API (the config layer checks it agrees)."""
    return bool(spec.user_macros(limited_api.MACRO))


def prefix_map_flags(source_root: Path | None, torch: TorchInstall) -> list[str]:
    """Keep absolute paths out of __FILE__ and debug info: reproducible artifacts."""
    maps = [f"-ffile-prefix-map={torch.root}=torch"]
    if source_root is not None:
        maps.append(f"-ffile-prefix-map={source_root}=.")
    return maps


def build_dir_map_flags(source_root: Path | None, build_dir: Path | None) -> list[str]:
    """A project build (``source_root``) also maps its build directory: ninja runs compilers
    there, and debug info records it as the compilation directory. Given after the source
    root's map, which it may sit in (the last matching map wins). Translation units only: a
    prefix map does not make a PCH invalid, and the JIT's shared PCHs stay shared."""
    if source_root is None or build_dir is None:
        return []
    return [f"-ffile-prefix-map={build_dir}=."]


def compute(
    spec: ExtensionSpec,
    tools: ResolvedTools,
    *,
    source_root: Path | None,
    arch_flags: tuple[str, ...] = (),
    build_dir: Path | None = None,
) -> ExtensionFlags:
    torch = tools.torch
    defines = _defines(spec)
    user_includes = [f"-I{d}" for d in spec.include_dirs]
    system = [*torch.include_dirs]
    if spec.uses_cuda:
        system += tools.cuda_include_dirs
    system.append(tools.python_include)
    system_includes = [arg for d in system for arg in ("-isystem", str(d))]
    optimisation = list(BUILD_TYPE_FLAGS[spec.build_type])
    openmp = ["-fopenmp"] if spec.openmp else []
    if spec.openmp and torch.openmp:
        defines.append(f"-D{OPENMP_DEFINE}=1")
    prefix_maps = prefix_map_flags(source_root, torch)
    build_map = build_dir_map_flags(source_root, build_dir)

    cxx_std = [] if has_std(spec.extra_cflags) else [default_std(torch)]
    from_env = tools.env_flags or EnvironmentFlags()
    common = [*system_includes, "-fPIC", *cxx_std, *optimisation, *openmp, *prefix_maps,
              *from_env.compile]
    name_define = defines[:1] if spec.kind is not Kind.EXECUTABLE else []
    cxx = [*defines, *user_includes, *common, *build_map, *spec.extra_cflags]
    pch = [*defines[len(name_define):], *common, *spec.extra_cflags]
    torch_map = prefix_map_flags(None, torch)
    umbrella = [*(f for f in pch if f not in prefix_maps or f in torch_map),
                *pch_instantiation(tools.compiler)]

    nvcc: list[str] = []
    if spec.uses_cuda:
        nvcc_std = [] if has_std(spec.extra_cuda_cflags) else [default_std(torch)]
        host = ["-fPIC", *openmp, *prefix_maps, *build_map]
        ccbin = ["-ccbin", tools.host_compiler_for_nvcc] if tools.host_compiler_for_nvcc else []
        nvcc = [
            *ccbin,
            *defines,
            *user_includes,
            *system_includes,
            *TORCH_NVCC_FLAGS,
            # Intermediate files next to the object, named after it: nvcc's /tmp/tmpxft_<pid>_*
            # names otherwise land in every object (reproducible builds; nvcc >= 11.2).
            "--objdir-as-tempdir",
            *(f"-Xcompiler={flag}" for flag in host),
            *arch_flags,
            *nvcc_std,
            *[f for f in optimisation if f != "-g"],  # -g is host debug info: pass through
            *(["-g"] if "-g" in optimisation else []),
            *(["-rdc=true"] if spec.device_link and not has_rdc(spec.extra_cuda_cflags) else []),
            *spec.extra_cuda_cflags,
        ]
    dlink = _device_link_flags(spec, tools, arch_flags) if spec.device_link else []
    return ExtensionFlags(
        tuple(cxx), tuple(nvcc), tuple(_link_flags(spec, tools)), tuple(pch), tuple(dlink),
        tuple(umbrella),
    )


RDC_OPTIONS = ("-rdc", "--relocatable-device-code", "-dc", "--device-c", "-dw", "--device-w")


def has_rdc(flags: tuple[str, ...]) -> bool:
    """Whether the user's nvcc flags already choose relocatable (or whole-program) device code."""
    return any(f.partition("=")[0] in RDC_OPTIONS for f in flags)


def _device_link_flags(
    spec: ExtensionSpec, tools: ResolvedTools, arch_flags: tuple[str, ...]
) -> list[str]:
    """``nvcc -dlink`` arguments: the compile's architectures (nvcc would otherwise link for its
    default arch only), position-independent host code for the shared library, the library
    search path for ``dlink_libraries``, then the user's flags."""
    from .cuda.arch_flags import user_arch_flags

    ccbin = ["-ccbin", tools.host_compiler_for_nvcc] if tools.host_compiler_for_nvcc else []
    return [
        "-dlink",
        *ccbin,
        "-Xcompiler=-fPIC",
        *arch_flags,
        *user_arch_flags(spec.extra_cuda_cflags),
        *(f"-L{d}" for d in (*spec.library_dirs, *tools.cuda_library_dirs)),
        *(f"-l{lib}" for lib in spec.dlink_libraries),
        *spec.extra_dlink_flags,
    ]


def cudart_flag(library_dirs: tuple[Path, ...]) -> str:
    """``-lcudart``, or ``-l:libcudart.so.13`` where only the versioned file exists (the
    nvidia-cuda-runtime wheel ships no unversioned development link)."""
    if any((d / "libcudart.so").exists() for d in library_dirs):
        return "-lcudart"
    for directory in library_dirs:
        versioned = sorted(directory.glob("libcudart.so.*"))
        if versioned:
            return f"-l:{versioned[0].name}"
    return "-lcudart"


def torch_libraries(spec: ExtensionSpec, torch: TorchInstall) -> list[str]:
    """The torch libraries (``-l`` names) every link of ``spec`` gets, in link order."""
    cuda_torch = spec.uses_cuda and torch.has_cuda_runtime
    libraries = ["c10", *(["c10_cuda"] if cuda_torch else []), "torch_cpu"]
    libraries += [*(["torch_cuda"] if cuda_torch else []), "torch"]
    if spec.kind is not Kind.EXECUTABLE and not spec.py_limited_api:
        libraries.append("torch_python")
    return libraries


def _torch_link(spec: ExtensionSpec, torch: TorchInstall) -> list[str]:
    """``-l`` flags for torch's libraries. A stable-ABI or import-checked CUDA artifact keeps
    libtorch.so among its NEEDED even where the linker drops unused libraries: libtorch.so of a
    CUDA torch brings in libtorch_cuda (the C shim's ``aoti_torch_get_current_cuda_stream``)
    and the CUDA libraries at load time, whichever torch (even a CPU one) it was linked
    against, and an import check (core/postlink/import_guard.py) drops them from NEEDED."""
    flags = [f"-l{lib}" for lib in torch_libraries(spec, torch)]
    if spec.uses_cuda and (spec.stable_abi is not None or spec.import_check_torch is not None):
        index = flags.index("-ltorch")
        flags[index:index + 1] = ["-Wl,--push-state,--no-as-needed", "-ltorch", "-Wl,--pop-state"]
    return flags


def _link_flags(spec: ExtensionSpec, tools: ResolvedTools) -> list[str]:
    torch = tools.torch
    executable = spec.kind is Kind.EXECUTABLE
    ld = [] if executable else ["-shared"]
    ld += (tools.env_flags or EnvironmentFlags()).link
    ld += [f"-L{torch.library_dir}", *_torch_link(spec, torch)]
    if executable:
        ld.append(f"-Wl,-rpath,{torch.library_dir}")
    ld += [f"-L{d}" for d in spec.library_dirs]
    ld += [f"-l{lib}" for lib in spec.libraries]
    ld += [f"-Wl,-rpath,{d}" for d in spec.runtime_library_dirs]
    if spec.uses_cuda:
        ld += [f"-L{d}" for d in tools.cuda_library_dirs]
        ld.append(cudart_flag(tools.cuda_library_dirs))
    if spec.openmp:
        ld.append("-fopenmp")
    if spec.strip and spec.build_type not in (BuildType.DEBUG, BuildType.RELWITHDEBINFO):
        ld.append("-s")  # a build asked for debug info keeps it
    if spec.build_type in (BuildType.DEBUG, BuildType.RELWITHDEBINFO):
        ld.append("-g")
    ld += spec.extra_ldflags
    return ld

"""Every environment variable pep517_torch reads, the words a yes/no variable takes, and the
user's cache directories: one home for them all.

config/layers.py turns the settings' variables (the model's ``env`` metadata names them from
here) into values and passes the tools' on to the compile core; the JIT, the PCH and probe
caches and the editable hook read theirs through the names and helpers below. The compiler
caches' own settings (``CCACHE_BASEDIR``, ``SCCACHE_SERVER_PORT``...) are the launchers'
business: core/toolchain/launcher.py sets and reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

# -- pep517_torch's own ----------------------------------------------------------------------
CACHE_DIR = "PEP517_TORCH_CACHE_DIR"  # the machine-wide cache: PCHs, tool probes
PCH = "PEP517_TORCH_PCH"  # the JIT's use_pch when load() does not say (default: on)
PCH_CACHE_SIZE = "PEP517_TORCH_PCH_CACHE_SIZE"  # the setting pch-cache-size
COMPILER_LAUNCHER = "PEP517_TORCH_COMPILER_LAUNCHER"  # the setting compiler-launcher
UNITY = "PEP517_TORCH_UNITY"  # the setting unity
EDITABLE_REBUILD = "PEP517_TORCH_EDITABLE_REBUILD"  # off: an editable import rebuilds nothing
NO_PROBE_CACHE = "PEP517_TORCH_NO_PROBE_CACHE"  # set (non-empty): every tool probe runs
NO_REPLAY = "PEP517_TORCH_NO_REPLAY"  # set (non-empty): a no-op hook builds instead of replaying
PCH_BACKGROUND = "PEP517_TORCH_PCH_BACKGROUND"  # off: a wheel build leaves no PCH made after it

# -- torch's, meaning here what they mean to torch.utils.cpp_extension ------------------------
MAX_JOBS = "MAX_JOBS"  # the setting jobs
TORCH_CUDA_ARCH_LIST = "TORCH_CUDA_ARCH_LIST"  # the setting cuda-arch-list
TORCH_EXTENSIONS_DIR = "TORCH_EXTENSIONS_DIR"  # where the JIT builds
TORCH_DONT_CHECK_COMPILER_ABI = "TORCH_DONT_CHECK_COMPILER_ABI"  # the JIT's ABI check passes
NVCC_THREADS = "NVCC_THREADS"  # nvcc's --threads, as flash-attention's users set it

# -- the tools' and the system's --------------------------------------------------------------
TOOL_ENV = ("CXX", "CC", "CUDA_HOME", "CUDA_PATH")  # their values end up in build.ninja
# Compile inputs on no command line: the compilers read them from the environment. A change
# rebuilds every step (core/compile_record.py); the JIT's stamp records them.
COMPILE_INPUT_ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH",
                     "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")
# What only a build that compiles CUDA reads (CC: nvcc's host compiler); a JIT stamp of a
# C++-only extension leaves them out, so that changing them rebuilds nothing.
CUDA_ONLY_ENV = ("CC", "CUDA_HOME", "CUDA_PATH", TORCH_CUDA_ARCH_LIST, "NVCC_PREPEND_FLAGS",
                 "NVCC_APPEND_FLAGS")
# The flags variables every make, setuptools and CMake build reads, as they read them for C++
# (core/flags.py, environment_flags): CXXFLAGS then CPPFLAGS on every C++ compile (a PCH's
# too) after pep517_torch's own flags, before an extension's extra-cflags; LDFLAGS, CXXFLAGS
# and CPPFLAGS on every link; nvcc reads none of them (nor does it under setuptools or CMake).
# On the command lines: ninja redoes the steps they change; the compile record keeps them for
# `explain`, the JIT's stamp for its warm check.
FLAGS_ENV = ("CXXFLAGS", "CPPFLAGS", "LDFLAGS")
CFLAGS = "CFLAGS"  # C's, and every source here compiles as C++: read only to say so
XDG_CACHE_HOME = "XDG_CACHE_HOME"
# Where tools, GPUs, distcc hosts and the PCH cache are found; not written into build.ninja.
SEARCH_ENV = ("PATH", "CUDA_VISIBLE_DEVICES", "DISTCC_HOSTS", CACHE_DIR, XDG_CACHE_HOME)
PASSTHROUGH_ENV = TOOL_ENV + FLAGS_ENV + (CFLAGS,) + SEARCH_ENV  # into BuildOptions.env
CCACHE_STATSLOG = "CCACHE_STATSLOG"  # set for ccache by a traced build, unless the user set it
# Holds "$" in a ccache's environment: how a ccache setting pep517_torch sets spells a literal $
# (ccache_value).
CCACHE_DOLLAR = "PEP517_TORCH_CCACHE_DOLLAR"
SOURCE_DATE_EPOCH = "SOURCE_DATE_EPOCH"  # the timestamp of every wheel and sdist member
# setuptools-scm's own, read by the library where a version comes from it (config/version.py):
# SETUPTOOLS_SCM_PRETEND_VERSION (and _FOR_<NAME>) replaces what git says.
SETUPTOOLS_SCM_PRETEND_VERSION = "SETUPTOOLS_SCM_PRETEND_VERSION"
VIRTUAL_ENV = "VIRTUAL_ENV"  # the user's environment, named when a build is isolated from it

# -- yes and no ---------------------------------------------------------------------------------
# Any case; torch's own variables take these too (cpp_extension reads ON, 1, YES, TRUE, Y).
TRUE_WORDS = frozenset({"true", "1", "yes", "y", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "n", "off"})


def is_true(value: str | None) -> bool:
    return value is not None and value.strip().lower() in TRUE_WORDS


def is_false(value: str | None) -> bool:
    return value is not None and value.strip().lower() in FALSE_WORDS


def switch(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    """A yes/no variable: ``default`` unless it holds one of the words of the other answer."""
    value = env.get(name)
    return not is_false(value) if default else is_true(value)


# ccache caches compiles that use a precompiled header only with pch_defines and time_macros
# (its manual, "Precompiled headers"); the include_file_* words let it cache a compile that
# reads a header written moments before (a PCH stub).
CCACHE_SLOPPINESS = "pch_defines,time_macros,include_file_mtime,include_file_ctime"


def set_ccache_defaults(env: dict[str, str], source_root: str | None) -> None:
    """Put into a build's ``env`` what ccache needs from us, unless the user set it: its
    sloppiness, and its base directory (its own relative paths, for debug builds) when the
    project's root is known; each spelled as ccache reads it. Every run through ccache takes
    them: a wheel build, the JIT, an editable install's rebuild on import."""
    env.setdefault("CCACHE_SLOPPINESS", CCACHE_SLOPPINESS)
    if source_root is not None and "CCACHE_BASEDIR" not in env:
        env["CCACHE_BASEDIR"] = ccache_value(source_root, env)


def ccache_value(value: str, env: dict[str, str]) -> str:
    """``value`` (a path) as a ccache setting in ``env`` must spell it. ccache expands ``$VAR``
    and ``${VAR}`` in its path settings (CCACHE_BASEDIR, CCACHE_STATSLOG, ...: its manual,
    "Configuration value syntax"; an unset one is an error), and reads ``$$`` as one ``$``
    only since 4.9 (4.7 reads ``$$x`` as ``$`` and ``$x``). So each ``$`` becomes
    ``${PEP517_TORCH_CCACHE_DOLLAR}``, a variable set to ``$`` here: every ccache expands it
    once, and the value it brings is not expanded again."""
    if "$" not in value:
        return value
    env[CCACHE_DOLLAR] = "$"
    return value.replace("$", "${" + CCACHE_DOLLAR + "}")


# -- the user's cache -------------------------------------------------------------------------


def user_cache_home(env: Mapping[str, str]) -> Path:
    """$XDG_CACHE_HOME, else $HOME/.cache (the home directory when HOME is unset)."""
    from pathlib import Path

    given = env.get(XDG_CACHE_HOME)
    return Path(given) if given else Path(env.get("HOME") or Path.home()) / ".cache"


def cache_root(env: Mapping[str, str]) -> Path:
    """PEP517_TORCH_CACHE_DIR, else $XDG_CACHE_HOME/pep517_torch, else ~/.cache/pep517_torch."""
    from pathlib import Path

    given = env.get(CACHE_DIR)
    return Path(given).expanduser() if given else user_cache_home(env) / "pep517_torch"

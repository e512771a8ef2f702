"""Where the tools are: C++ compiler, ninja, torch and Python headers.

torch is located and described from its files, never imported: the build backend runs before
torch could be imported cheaply, and importing it costs seconds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...errors import ToolchainError
from ...shipped_runtime import build_inputs
from ...shipped_runtime.build_inputs import LAUNCHERS
from . import probe_cache
from .lookup import torch_flavour, which

CompilerFamily = Literal["gcc", "clang", "unknown"]
# The oldest compilers torch 2.x extensions build with: its headers need C++17 (C++20 from
# torch 2.10) and its binaries use the C++11 ABI (torch's own table still says gcc >= 5).
MINIMUM_VERSIONS: dict[CompilerFamily, tuple[int, ...]] = {"gcc": (9,), "clang": (10,)}


def minimum_versions_text() -> str:
    """``gcc >= 9 or clang >= 10``: the table above, for messages."""
    return " or ".join(f"{f} >= {'.'.join(map(str, v))}" for f, v in MINIMUM_VERSIONS.items())


@dataclass(frozen=True)
class Compiler:
    """A C++ compiler, possibly behind a cache launcher (``CXX="ccache g++"``)."""

    command: tuple[str, ...]  # what to run, launcher included
    path: Path  # the compiler itself, symlinks resolved
    family: CompilerFamily
    version: tuple[int, ...]
    launcher: str | None  # "ccache" / "sccache" when CXX or the c++ symlink already is one

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))

    @property
    def minimum_version(self) -> tuple[int, ...] | None:
        """The oldest version of this compiler's family torch extensions build with; None for
        a family torch was not built with (neither gcc nor clang)."""
        return MINIMUM_VERSIONS.get(self.family)

    @property
    def supported(self) -> bool:
        minimum = self.minimum_version
        return minimum is not None and self.version >= minimum


@dataclass(frozen=True)
class TorchInstall:
    """An installed torch package, read from its files."""

    root: Path
    version: str  # e.g. "2.13.0+cpu"
    cuda: str | None  # torch.version.cuda
    hip: str | None
    build: str = ""  # identifies the build wherever it is installed (a hash of version.py)

    @property
    def include_dirs(self) -> tuple[Path, Path]:
        include = self.root / "include"
        return include, include / "torch" / "csrc" / "api" / "include"

    @property
    def library_dir(self) -> Path:
        return self.root / "lib"

    @property
    def flavour(self) -> str:
        return torch_flavour(self.cuda, self.hip)

    @property
    def has_cuda_runtime(self) -> bool:
        """Whether c10_cuda/torch_cuda and the c10/cuda headers exist (a CUDA build of torch)."""
        macros = self.root / "include" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
        return macros.is_file() and any(self.library_dir.glob("libc10_cuda.*"))

    @property
    def cxx_standard(self) -> tuple[int, str] | None:
        """The oldest C++ standard torch's headers accept, as ``__cplusplus`` and the header that
        says so: ATen/ATen.h's ``#if __cplusplus < 202002L`` ``#error`` (torch 2.14: C++20;
        2.13: C++17). None where no header says."""
        for relative in ("ATen/ATen.h", "torch/csrc/api/include/torch/all.h"):
            try:
                text = (self.root / "include" / relative).read_text(errors="replace")[:4096]
            except OSError:
                continue
            match = re.search(r"__cplusplus\s*<\s*(\d{6})L?\s*\n\s*#\s*error", text)
            if match:
                return int(match[1]), relative
        return None

    @property
    def openmp(self) -> bool:
        config = self.root / "include" / "ATen" / "Config.h"
        try:
            return "#define AT_PARALLEL_OPENMP 1" in config.read_text()
        except OSError:
            return False


def split_command(value: str, variable: str) -> list[str]:
    try:
        args = shlex.split(value)
    except ValueError as exc:
        raise ToolchainError(f"{variable}={value!r} cannot be parsed: {exc}") from None
    if not args:
        raise ToolchainError(f"{variable} is set but empty")
    return args


PROBE_TIMEOUT_S = 60.0  # a compiler's --version; a hung one must not hang the build


def run_probe(
    argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a quick tool query (``--version``...). On timeout, or Ctrl-C, its whole process
    group is killed (a wrapper script's children too) before the exception propagates."""
    with subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, errors="replace", env=None if env is None else dict(env),
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except BaseException:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    return subprocess.CompletedProcess(list(argv), process.returncode, stdout, stderr)


def cxx_command(env: Mapping[str, str], variable: str = "CXX") -> list[str]:
    """The compiler command from CXX (which may carry a launcher), else ``c++`` on PATH.

    ``variable="CC"`` reads nvcc's host compiler instead."""
    given = env.get(variable)
    args = split_command(given, variable) if given else ["c++"]
    found = which(args[0], env)
    if found is None:
        where = f"{variable}={given!r}" if given else "'c++' on PATH"
        raise ToolchainError(
            f"C++ compiler not found ({where}): install g++ or clang++, or set {variable} to one"
        )
    args[0] = found
    if Path(found).name in LAUNCHERS and len(args) > 1:
        compiler = which(args[1], env)
        if compiler is None:
            raise ToolchainError(f"C++ compiler {args[1]!r} after launcher in {variable} not found")
        args[1] = compiler
    return args


def _ask(command: tuple[str, ...], args: Sequence[str], label: str) -> str:
    """The compiler's output for ``args``; ToolchainError if it cannot run, fails or does not
    answer in time."""
    try:
        result = run_probe([*command, *args], timeout=PROBE_TIMEOUT_S)
    except OSError as exc:
        raise ToolchainError(f"cannot run {label}: {exc}") from None
    except subprocess.TimeoutExpired:
        raise ToolchainError(
            f"{label} did not answer `{' '.join(args)}` within {PROBE_TIMEOUT_S:g} s"
        ) from None
    output = result.stdout.strip() or result.stderr.strip()
    if result.returncode != 0:
        lines = output.splitlines()
        # a compiler's own error line if it wrote one, else what it says it is (`false --version`
        # ends with "Written by Jim Meyering.", which names no problem)
        said = next((line for line in lines if re.search(r"error|fatal|not found", line, re.I)),
                    lines[0] if lines else "no output")
        raise ToolchainError(
            f"{label}: `{' '.join(args)}` failed (exit {result.returncode}; it said"
            f" {said.strip()!r}): not a working C/C++ compiler"
        )
    return output


@functools.lru_cache(maxsize=16)
def _probe(command: tuple[str, ...], identity: tuple[object, ...], label: str) -> str:
    """The compiler's ``--version`` output; ``label`` names it in errors (``CXX=g++-12``).

    ``-dumpversion`` must print a version too (gcc: ``12``, clang: ``16.0.6``): coreutils'
    ``true --version`` prints one, ``true -dumpversion`` nothing. It costs what ``--version``
    does (the driver alone), a fifth of asking the compiler proper to preprocess."""
    del identity  # part of the cache key only: a replaced compiler is probed again
    version = _ask(command, ["--version"], label)
    if not re.search(r"\d+\.\d+", version) or not re.match(
        r"\d+", _ask(command, ["-dumpversion"], label)
    ):
        raise ToolchainError(f"{label} printed no version: not a C/C++ compiler")
    return version


def parse_compiler_version(text: str) -> tuple[CompilerFamily, tuple[int, ...]]:
    """Family and version from the first line of ``--version`` output."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if "clang" in first.lower():
        found = re.search(r"version\s+(\d+)\.(\d+)(?:\.(\d+))?", first)
        family: CompilerFamily = "clang"
    else:
        matches = re.findall(r"(\d+)\.(\d+)(?:\.(\d+))?", first)
        found = None
        family = "gcc" if ("GCC" in text or "Free Software" in text or "g++" in first) else "unknown"
        if matches:
            return family, tuple(int(x) for x in matches[-1] if x)
    if found is None:
        return family, (0,)
    return family, tuple(int(x) for x in found.groups() if x)


def _version_text(saved: object) -> str:
    """A kept ``--version`` answer: text, as a compiler prints it (ValueError otherwise)."""
    if not isinstance(saved, str) or not saved.strip() or len(saved) > 64 * 1024:
        raise ValueError("not a compiler's --version text")
    return saved


def find_compiler(env: Mapping[str, str], variable: str = "CXX") -> Compiler:
    args = cxx_command(env, variable)
    given = env.get(variable)
    label = f"{variable}={given}" if given else f"C++ compiler {args[0]}"
    launcher = None
    if Path(args[0]).name in LAUNCHERS:
        launcher = Path(args[0]).name
    elif Path(args[0]).resolve().name in LAUNCHERS:  # /usr/lib/ccache/c++ -> ccache
        launcher = Path(args[0]).resolve().name
    real = Path(args[-1] if launcher and len(args) > 1 else args[0]).resolve()
    stamp = (str(real), *(build_inputs.identity(real) or ()))
    output = probe_cache.remembered(
        "compiler", args, [real], lambda: _probe(tuple(args), stamp, label), env=env,
        decode=_version_text,
    )
    family, version = parse_compiler_version(output)
    return Compiler(tuple(args), real, family, version, launcher)


def find_ninja(env: Mapping[str, str]) -> Path:
    """ninja from the `ninja` PyPI package when installed, else from PATH."""
    if importlib.util.find_spec("ninja") is not None:
        import ninja  # the PyPI package; cheap to import

        candidate = Path(ninja.BIN_DIR) / "ninja"
        if ninja.BIN_DIR and candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = which("ninja", env)
    if found is None:
        raise ToolchainError(
            "ninja not found: install it with 'pip install ninja' (or your system's package)"
        )
    return Path(found)


def _find_torch_root() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError(
            "torch is not installed in this environment. Install the torch you will run with"
            " (e.g. 'pip install torch==2.13.0') and build with --no-build-isolation, or list"
            " torch in [build-system] requires"
        )
    return Path(next(iter(spec.submodule_search_locations)))


@functools.lru_cache(maxsize=4)
def _read_torch(root: Path, identity: tuple[int, ...]) -> TorchInstall:
    del identity  # cache key: a reinstalled torch is read again
    text = (root / "version.py").read_text()

    def field(name: str) -> str | None:
        found = re.search(rf"^{name}\s*(?::[^=]+)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        return found.group(1) if found else None

    version = field("__version__")
    if version is None:
        raise ToolchainError(f"cannot read torch's version from {root / 'version.py'}")
    build = hashlib.sha256(text.encode()).hexdigest()[:16]  # version.py names the build (git_version)
    return TorchInstall(root, version, field("cuda"), field("hip"), build)


def find_torch(root: Path | None = None) -> TorchInstall:
    """The installed torch, without importing it."""
    root = root or _find_torch_root()
    found = build_inputs.identity(root / "version.py")
    if found is None:
        raise ToolchainError(f"{root} does not look like a torch installation")
    return _read_torch(root, tuple(found))


def python_include_dir() -> Path:
    return Path(sysconfig.get_path("include", scheme="posix_prefix"))


def ext_suffix(limited_api: str | None = None, python_abi_suffix: bool = True) -> str:
    """A module's file suffix: ``.cpython-311-x86_64-linux-gnu.so``, ``.abi3.so`` or ``.so``."""
    if not python_abi_suffix:
        return ".so"
    if limited_api:
        return ".abi3.so"
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"

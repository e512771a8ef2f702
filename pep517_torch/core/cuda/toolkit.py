"""CUDA toolkit discovery (version and host-compiler checks: :mod:`.checks`).

Where the toolkit comes from, in this order (the first usable one wins):

1. ``CUDA_HOME``, then ``CUDA_PATH``: a directory holding ``bin/nvcc``. When one of them is set
   but holds no working nvcc, the search stops there with an error rather than silently using
   some other toolkit.
2. ``nvcc`` on ``PATH``. Symlinks are resolved; when it is a wrapper script (``#!...``, e.g.
   ``exec /usr/local/cuda-13.0/bin/nvcc "$@"``) the toolkit root is the ``TOP=`` line that nvcc
   itself prints under ``-dryrun``, not ``dirname(dirname(which nvcc))``.
3. ``/usr/local/cuda``.
4. nvcc from PyPI wheels in the running Python environment: ``nvidia-cuda-nvcc`` 13+ installs
   ``site-packages/nvidia/cu13/bin/nvcc`` (with cudart, crt and nvvm from its dependencies in the
   same tree), the CUDA 12 wheels ``nvidia/cuda_nvcc/bin/nvcc``. So
   ``requires = ["pep517_torch", "torch", "nvidia-cuda-nvcc"]`` builds without a system CUDA.

A toolkit is usable when its nvcc runs and reports its version; missing headers are not checked
here (trimmed toolkits are common). Besides the toolkit's own include and library directories,
:class:`CudaToolkit` carries those of the ``nvidia-*`` wheels a CUDA build of torch installs
(cuBLAS, cuSPARSE, cuSOLVER... headers and libraries); they go after the toolkit's own.

Nothing here imports torch: torch's CUDA version (``torch.version.cuda``, or None for a CPU
build) is passed in by the caller.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...shipped_runtime import build_inputs
from ...shipped_runtime.input_audit import note
from ...errors import ToolchainError
from ..toolchain import probe_cache
from ..toolchain.tools import run_probe

DEFAULT_SEARCH_PATHS: tuple[Path, ...] = (Path("/usr/local/cuda"),)
WHEEL_FOUND_VIA = "nvidia-cuda-nvcc wheel"
_NVCC = "nvcc.exe" if os.name == "nt" else "nvcc"
_NVCC_TIMEOUT_S = 60


@dataclass(frozen=True)
class CudaToolkit:
    """A usable CUDA toolkit; all paths absolute."""

    root: Path
    nvcc: Path  # the real nvcc binary, never a wrapper script
    version: tuple[int, int]
    include_dirs: tuple[Path, ...]
    library_dirs: tuple[Path, ...]
    found_via: str
    supported_archs: tuple[str, ...] = ()  # "7.5", "8.0", ... from nvcc --list-gpu-code
    extra_include_dirs: tuple[Path, ...] = ()  # from nvidia-* wheels, after include_dirs
    extra_library_dirs: tuple[Path, ...] = ()

    @property
    def version_str(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


class _Rejected(Exception):
    """A candidate that is not a usable toolkit; the message says why."""


# ---------------------------------------------------------------------------------- discovery


def find_cuda(
    env: Mapping[str, str],
    *, search_paths: Sequence[Path] | None = None, nvidia_dirs: Sequence[Path] | None = None,
) -> CudaToolkit | None:
    """The first usable toolkit in the documented order, or None.

    ``search_paths`` replaces ``(/usr/local/cuda,)``; ``nvidia_dirs`` replaces the ``nvidia``
    package directories of the running environment (both for tests and unusual layouts).
    """
    return _search(env, search_paths, nvidia_dirs)[0]


def require_cuda(
    env: Mapping[str, str],
    *,
    search_paths: Sequence[Path] | None = None,
    nvidia_dirs: Sequence[Path] | None = None,
    torch_cuda: str | None = None,
) -> CudaToolkit:
    """Like :func:`find_cuda`, but raise ToolchainError saying where it looked and how to fix it."""
    toolkit, looked = _search(env, search_paths, nvidia_dirs)
    if toolkit is not None:
        return toolkit
    wheels = nvcc_wheel_requirements(torch_cuda)
    example = f"/usr/local/cuda-{torch_cuda}" if torch_cuda else "/usr/local/cuda-13.0"
    toml_list = ", ".join(f'"{wheel}"' for wheel in wheels)
    raise ToolchainError(
        "no usable CUDA toolkit (nvcc) found. Looked at:\n"
        + "".join(f"  - {line}\n" for line in looked)
        + f"To use one: set CUDA_HOME to the directory holding bin/nvcc (e.g. CUDA_HOME={example}),"
        f" put that bin/ on PATH, or install nvcc from PyPI: pip install {quoted_requirements(wheels)} (in a"
        f" pyproject build: add {toml_list} to [build-system] requires)."
    )


def quoted_requirements(requirements: Sequence[str]) -> str:
    return " ".join(f"'{r}'" for r in requirements)


def _search(
    env: Mapping[str, str], search_paths: Sequence[Path] | None, nvidia_dirs: Sequence[Path] | None
) -> tuple[CudaToolkit | None, list[str]]:
    looked: list[str] = []
    extras = _nvidia_dirs(nvidia_dirs)

    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = env.get(var, "")
        if not value:
            looked.append(f"{var}: not set")
            continue
        try:
            return _toolkit_from(Path(value) / "bin" / _NVCC, var, env, extras), looked
        except _Rejected as why:
            looked.append(f"{var}={value}: {why}")
            looked.append(f"(stopped: {var} is set, so nothing else was tried; fix or unset it)")
            return None, looked

    on_path = shutil.which(_NVCC, path=env_path(env))
    if on_path is None:
        looked.append("nvcc on PATH: not found")
    else:
        try:
            return _toolkit_from(Path(on_path), "nvcc on PATH", env, extras, arrow=True), looked
        except _Rejected as why:
            looked.append(f"nvcc on PATH ({on_path}): {why}")

    for root in DEFAULT_SEARCH_PATHS if search_paths is None else search_paths:
        note(root)
        if not root.exists():
            looked.append(f"{root}: does not exist")
            continue
        try:
            return _toolkit_from(root / "bin" / _NVCC, str(root), env, extras), looked
        except _Rejected as why:
            looked.append(f"{root}: {why}")

    wheel_nvccs = [nvcc for base in extras for nvcc in _wheel_nvcc_candidates(base)]
    for nvcc in wheel_nvccs:
        try:
            return _toolkit_from(nvcc, WHEEL_FOUND_VIA, env, extras), looked
        except _Rejected as why:
            looked.append(f"{WHEEL_FOUND_VIA} ({nvcc}): {why}")
    if not wheel_nvccs:
        where = ", ".join(map(str, extras)) or "no 'nvidia' package in this Python environment"
        looked.append(
            f"{WHEEL_FOUND_VIA}: no nvidia/cu*/bin/nvcc or nvidia/cuda_nvcc/bin/nvcc ({where})"
        )
    return None, looked


def _toolkit_from(
    nvcc: Path, label: str, env: Mapping[str, str], extras: Sequence[Path], *, arrow: bool = False
) -> CudaToolkit:
    note(nvcc)  # where nvcc was looked for decides the toolkit: a no-op replay checks it
    if not nvcc.is_file():
        raise _Rejected(f"no {nvcc}")
    if not os.access(nvcc, os.X_OK):
        raise _Rejected(f"{nvcc} is not executable")
    real_nvcc, root = _real_nvcc(nvcc, env)
    version, archs = probe_cache.remembered(
        "nvcc", [], [real_nvcc], lambda: _probe_nvcc(str(real_nvcc), file_stamp(real_nvcc)),
        env=env, encode=lambda found: [list(found[0]), list(found[1])], decode=_nvcc_answer,
    )
    if label == WHEEL_FOUND_VIA:
        _check_wheel_companions(root, version)
    includes, libs = _toolkit_dirs(root)
    for folder in (root, root / "targets", *includes, *libs):
        note(folder)
    extra_includes, extra_libs = nvidia_wheel_dirs(version[0], nvidia_dirs=extras)
    if arrow or root != nvcc.parent.parent.resolve():
        label = f"{label} ({nvcc} → {root})"
    return CudaToolkit(
        root=root,
        nvcc=real_nvcc,
        version=version,
        include_dirs=includes,
        library_dirs=libs,
        found_via=label,
        supported_archs=archs,
        extra_include_dirs=_unique(extra_includes, besides=includes),
        extra_library_dirs=_unique(extra_libs, besides=libs),
    )


def _nvcc_answer(saved: object) -> tuple[tuple[int, int], tuple[str, ...]]:
    """A kept nvcc probe, only as ``_probe_nvcc`` answers: [[major, minor], ["9.0", ...]]."""
    if not (isinstance(saved, list) and len(saved) == 2 and isinstance(saved[0], list) and len(saved[0]) == 2
            and all(type(n) is int and 0 <= n < 1000 for n in saved[0]) and isinstance(saved[1], list)
            and all(isinstance(a, str) and re.fullmatch(r"\d{1,3}\.\d", a) for a in saved[1])):
        raise ValueError("not [[major, minor], [arch, ...]]")  # it names every build's arch flags
    return (saved[0][0], saved[0][1]), tuple(saved[1])


def _wrapper_top(saved: object) -> Path:
    if not (isinstance(saved, str) and os.path.isabs(saved) and saved.isprintable()):
        raise ValueError("not an absolute path")
    return Path(saved)


def _real_nvcc(nvcc: Path, env: Mapping[str, str]) -> tuple[Path, Path]:
    """(the nvcc binary behind ``nvcc``, its toolkit root), through symlinks and wrapper scripts."""
    resolved = nvcc.resolve()
    if not _is_script(resolved):
        return resolved, resolved.parent.parent
    search = env_path(env)
    top = probe_cache.remembered(
        "nvcc-wrapper", [search], [resolved],
        lambda: _dryrun_top(str(resolved), file_stamp(resolved), search),
        env=env, encode=str, decode=_wrapper_top,
    )
    real = top / "bin" / _NVCC
    if not real.is_file():
        raise _Rejected(f"wrapper script whose nvcc -dryrun reports TOP={top}, with no bin/{_NVCC}")
    return real.resolve(), top


def _is_script(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(2) == b"#!"


def file_stamp(path: Path) -> tuple[int, ...]:
    """The file as it is now (the record's identity), as a cache key."""
    found = build_inputs.identity(path)
    if found is None:
        raise FileNotFoundError(path)
    return tuple(found)


def env_path(env: Mapping[str, str]) -> str:
    return env.get("PATH", os.environ.get("PATH", os.defpath))


def _run(argv: Sequence[str], search_path: str | None = None) -> subprocess.CompletedProcess[str]:
    run_env = dict(os.environ)
    if search_path is not None:
        run_env["PATH"] = search_path
    try:
        return run_probe(argv, timeout=_NVCC_TIMEOUT_S, env=run_env)
    except OSError as exc:
        raise _Rejected(f"running {argv[0]} failed: {exc}") from None
    except subprocess.TimeoutExpired:
        question = " ".join(argv[1:])
        raise _Rejected(f"{argv[0]} did not answer `{question}` within {_NVCC_TIMEOUT_S:g} s") from None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


@functools.lru_cache(maxsize=32)
def _dryrun_top(script: str, _stamp: tuple[int, ...], search_path: str) -> Path:
    # nvcc -dryrun needs a host compiler on PATH to get this far, hence the env's PATH.
    proc = _run([script, "-dryrun", "-E", "-x", "cu", os.devnull], search_path)
    match = re.search(r"^#\$ TOP=(.+)$", proc.stdout + proc.stderr, re.MULTILINE)
    if match is None:
        raise _Rejected(
            "wrapper script, and nvcc -dryrun printed no TOP= line to find the toolkit behind it"
            f" ({_last_line(proc.stderr + proc.stdout)}); point CUDA_HOME at the real toolkit"
        )
    return Path(match.group(1).strip()).resolve()


@functools.lru_cache(maxsize=32)
def _probe_nvcc(nvcc: str, _stamp: tuple[int, ...]) -> tuple[tuple[int, int], tuple[str, ...]]:
    proc = _run([nvcc, "--version"])
    match = re.search(r"release (\d+)\.(\d+)", proc.stdout)
    if proc.returncode != 0:
        raise _Rejected(f"{nvcc} --version failed: {_last_line(proc.stderr + proc.stdout)}")
    if match is None:
        raise _Rejected(
            f"{nvcc} --version printed no CUDA version ('release X.Y'): not an nvcc"
            f" ({_last_line(proc.stdout + proc.stderr)})"
        )
    listed = _run([nvcc, "--list-gpu-code"])  # absent before CUDA 11: then nothing is listed
    codes = re.findall(r"\bsm_(\d+)(\d)\b", listed.stdout) if listed.returncode == 0 else []
    archs = sorted({(int(major), int(minor)) for major, minor in codes})
    return (int(match[1]), int(match[2])), tuple(f"{a}.{b}" for a, b in archs)


def _toolkit_dirs(root: Path) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    includes = [root / "include"]
    libs = [root / "lib64" if (root / "lib64").is_dir() else root / "lib"]
    targets = sorted(p for p in (root / "targets").glob("*-linux") if p.is_dir())
    for target in targets:
        includes.append(target / "include")
        libs.append(target / "lib")
    if not targets:
        # nvcc.profile adds targets/<triple>/include/cccl itself; wheel layouts have no targets/.
        includes.append(root / "include" / "cccl")
    return _unique(p for p in includes if p.is_dir()), _unique(p for p in libs if p.is_dir())


def _unique(paths: Iterable[Path], besides: Iterable[Path] = ()) -> tuple[Path, ...]:
    """``paths`` not in ``besides`` and without repeats, by resolved path (lib64 → lib...)."""
    seen = {path.resolve() for path in besides}
    kept: list[Path] = []
    for path in paths:
        real = path.resolve()
        if real not in seen:
            seen.add(real)
            kept.append(path)
    return tuple(kept)


# --------------------------------------------------------------------------- nvidia-* wheels


def _nvidia_dirs(override: Sequence[Path] | None) -> tuple[Path, ...]:
    if override is not None:
        return tuple(override)
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return ()
    if spec is None or not spec.submodule_search_locations:
        for folder in sys.path:  # where an nvidia-* wheel would appear
            note(folder or ".")
        return ()
    return _unique(Path(p) for p in spec.submodule_search_locations if Path(p).is_dir())


def _wheel_nvcc_candidates(nvidia_dir: Path) -> list[Path]:
    """nvidia/cu13/bin/nvcc (newest cuNN first), then the CUDA 12 layout nvidia/cuda_nvcc."""
    note(nvidia_dir)
    versioned = [p for p in nvidia_dir.glob("cu*") if re.fullmatch(r"cu\d+", p.name)]
    dirs = [*sorted(versioned, key=lambda p: -int(p.name[2:])), nvidia_dir / "cuda_nvcc"]
    return [d / "bin" / _NVCC for d in dirs if (d / "bin" / _NVCC).is_file()]


def _check_wheel_companions(root: Path, version: tuple[int, int]) -> None:
    """Reject a wheel nvcc whose cicc (nvidia-nvvm) or crt headers come from another release.

    nvidia-cuda-nvcc depends on them unpinned, so ``pip install nvidia-cuda-nvcc==13.0.*`` pulls
    the newest ones, and ptxas then rejects cicc's output ("Unsupported .version").
    """
    site_packages = root.parent.parent
    note(site_packages)
    mismatched: list[str] = []
    for dist in ("nvidia_nvvm", "nvidia_cuda_crt"):
        for info in site_packages.glob(f"{dist}-*.dist-info"):
            found = parse_cuda_version(info.name[len(dist) + 1 :])
            if found is not None and found != version:
                mismatched.append(f"{dist.replace('_', '-')} {found[0]}.{found[1]}")
    if mismatched:
        pins = quoted_requirements([f"{m.split()[0]}=={version[0]}.{version[1]}.*" for m in mismatched])
        raise _Rejected(
            f"nvcc is {version[0]}.{version[1]} but {' and '.join(mismatched)} sit next to "
            f"it; mixed releases fail in ptxas. Fix: pip install {pins}"
        )


def nvidia_wheel_dirs(
    cuda_major: int | None = None, *, nvidia_dirs: Sequence[Path] | None = None
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(include dirs, library dirs) of the ``nvidia-*`` wheels in this environment.

    Covers the merged layout of CUDA 13+ wheels (``nvidia/cu13/include``, ``.../lib``) and the
    per-package one (``nvidia/cublas/include``, ``nvidia/cudnn/lib``...). With ``cuda_major``,
    ``cuNN`` trees of other CUDA majors are left out.
    """
    includes: list[Path] = []
    libs: list[Path] = []
    for base in _nvidia_dirs(nvidia_dirs):
        note(base)
        for package in sorted(p for p in base.iterdir() if p.is_dir()):
            note(package)
            versioned = re.fullmatch(r"cu(\d+)", package.name)
            if versioned and cuda_major is not None and int(versioned[1]) != cuda_major:
                continue
            if (package / "include").is_dir():
                includes.append(package / "include")
            if (package / "lib").is_dir():
                libs.append(package / "lib")
    return _unique(includes), _unique(libs)


def nvcc_wheel_requirements(torch_cuda: str | None) -> list[str]:
    """PyPI requirements for an nvcc matching torch's CUDA (companions pinned alike, see above)."""
    version = parse_cuda_version(torch_cuda) if torch_cuda else None
    if version is None:
        return ["nvidia-cuda-nvcc"]
    major, minor = version
    if major < 13:
        return [f"nvidia-cuda-nvcc-cu{major}=={major}.{minor}.*"]
    names = ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt")
    return [f"{name}=={major}.{minor}.*" for name in names]


# ---------------------------------------------------------------------------- version checks


def parse_cuda_version(text: str) -> tuple[int, int] | None:
    match = re.match(r"\s*(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None

"""Checks around a CUDA toolkit: nvcc against torch's CUDA, the host compiler against nvcc,
and the GPUs this machine can see (for ``native`` and default arch lists).

Nothing here imports torch: torch's CUDA version is passed in by the caller.
"""

from __future__ import annotations

import functools
import mmap
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from ...errors import ToolchainError
from .toolkit import (
    CudaToolkit,
    env_path,
    file_stamp,
    nvcc_wheel_requirements,
    parse_cuda_version,
    quoted_requirements,
)

ALLOW_UNSUPPORTED_COMPILER_FLAGS = frozenset(
    {"-allow-unsupported-compiler", "--allow-unsupported-compiler"}
)
_NVIDIA_SMI_TIMEOUT_S = 10


def check_versions(
    toolkit: CudaToolkit,
    torch_cuda: str | None,
    *,
    allow_mismatch: bool,
    override_key: str | None = None,
) -> list[str]:
    """Warnings about nvcc vs torch's CUDA; a different major version is a ToolchainError.

    ``torch_cuda`` is ``torch.version.cuda``: None for a CPU build of torch, which is no error
    (CUDA code still builds; torch's own CUDA APIs are just unavailable). ``override_key`` is
    where the caller's face sets ``allow_mismatch`` (None: it cannot).
    """
    if torch_cuda is None:
        return []
    nvcc = f"nvcc {toolkit.version_str} ({toolkit.nvcc}, found via {toolkit.found_via})"
    torch_version = parse_cuda_version(torch_cuda)
    if torch_version is None:
        return [f"cannot read torch's CUDA version {torch_cuda!r}; not comparing it with {nvcc}"]
    if torch_version[0] != toolkit.version[0]:
        message = (
            f"{nvcc} does not match the CUDA {torch_cuda} torch was built with; an extension "
            "built with another CUDA major version fails to load or crashes"
        )
        if allow_mismatch:
            set_by = override_key or "allow_cuda_version_mismatch"
            return [f"{message} (building anyway: {set_by} is set)"]
        anyway = f"; or, to build anyway, set {override_key} = true" if override_key else ""
        raise ToolchainError(
            f"{message}. Fix: point CUDA_HOME at a CUDA {torch_version[0]}.x toolkit or "
            f"pip install {quoted_requirements(nvcc_wheel_requirements(torch_cuda))}{anyway}"
        )
    if torch_version != toolkit.version:
        return [
            f"{nvcc} differs from torch's CUDA {torch_cuda} in the minor version; this usually "
            "works (CUDA minor version compatibility)"
        ]
    return []


_GUARDED_COMPILERS = {"GNU": ("gcc", "__GNUC__"), "clang": ("clang", "__clang_major__")}


@functools.lru_cache(maxsize=16)
def _host_compiler_limits(header: str, _stamp: tuple[int, ...]) -> dict[str, int]:
    """{"gcc": newest supported major, "clang": ...} from crt/host_config.h's #error guards."""
    text = Path(header).read_text(errors="replace").replace("\\\n", " ")  # join continued lines
    limits: dict[str, int] = {}
    # Each guard is "#if <condition>" followed (after blank lines) by "#error -- unsupported ...".
    guard_re = r"^\s*#\s*if\b(.*)\n(?:\s*\n)*\s*#\s*error -- unsupported (\w+) "
    for guard in re.finditer(guard_re, text, re.MULTILINE):
        condition, kind = guard.group(1), guard.group(2)
        family, macro = _GUARDED_COMPILERS.get(kind, ("", "$^"))
        bound = re.search(rf"{macro}\s*(>=|>)\s*(\d+)", condition)
        if family and bound:
            limits[family] = int(bound[2]) - (1 if bound[1] == ">=" else 0)
    return limits


def check_host_compiler(
    toolkit: CudaToolkit,
    compiler_family: Literal["gcc", "clang"],
    compiler_version: tuple[int, ...],
    nvcc_flags: Sequence[str],
    *,
    flags_key: str = "extra_cuda_cflags",
) -> None:
    """Raise ToolchainError when nvcc would reject the host compiler as too new.

    The limit is read from the toolkit's ``include/crt/host_config.h``; nothing is checked when
    that header is missing or ``-allow-unsupported-compiler`` is among ``nvcc_flags``
    (``flags_key``: where the caller's face takes them).
    """
    if ALLOW_UNSUPPORTED_COMPILER_FLAGS.intersection(nvcc_flags) or not compiler_version:
        return
    headers = [d / "crt" / "host_config.h" for d in toolkit.include_dirs]
    header = next((h for h in headers if h.is_file()), None)
    if header is None:
        return
    newest = _host_compiler_limits(str(header), file_stamp(header)).get(compiler_family)
    if newest is None or compiler_version[0] <= newest:
        return
    version = ".".join(map(str, compiler_version))
    raise ToolchainError(
        f"host compiler {compiler_family} {version} is newer than nvcc {toolkit.version_str} "
        f"({toolkit.nvcc}) supports: {compiler_family} {newest} at most, per {header}. Fix: set "
        f"CC/CXX to an older {compiler_family} (CC is passed to nvcc as -ccbin), e.g. "
        f"CC={compiler_family}-{newest}; or add -allow-unsupported-compiler to {flags_key} "
        "(at your own risk)"
    )


# ------------------------------------------------------------------------ torch's archs

# torch.cuda.get_arch_list() is torch._C._cuda_getArchFlags().split(): the string CUDA_ARCH_FLAGS
# ("sm_75 sm_80 ... sm_120") compiled into libtorch_python. Read from the file, not by importing
# torch (the hooks run where importing torch is slow or impossible).
_ARCH_FLAGS_RE = re.compile(rb"((?:sm|compute)_\d+[af]?(?: (?:sm|compute)_\d+[af]?)*)\x00")


def torch_arch_list(library_dir: Path) -> tuple[str, ...]:
    """The architectures a CUDA build of torch was compiled for (``torch.cuda.get_arch_list()``,
    e.g. ``("sm_75", ..., "sm_120")``), read from ``library_dir``; () when not found."""
    library = next(iter(sorted(library_dir.glob("libtorch_python.*"))), None)
    if library is None:
        return ()
    try:
        return _arch_flags_in(str(library), file_stamp(library))
    except (OSError, ValueError):  # unreadable, or empty (mmap refuses)
        return ()


@functools.lru_cache(maxsize=8)
def _arch_flags_in(library: str, _stamp: tuple[int, ...]) -> tuple[str, ...]:
    found: list[bytes] = []
    with open(library, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for lead in (b"\x00sm_", b"\x00compute_"):  # a C string of arch names only
            index = data.find(lead)
            while index != -1:
                match = _ARCH_FLAGS_RE.match(data, index + 1)
                if match:
                    found.append(match[1])
                index = data.find(lead, index + 1)
    longest = max(found, key=lambda hit: hit.count(b" "), default=b"")
    return tuple(longest.decode().split())


# ---------------------------------------------------------------------------------- GPUs


def visible_gpu_archs(env: Mapping[str, str]) -> list[str]:
    """Compute capabilities ("8.6", ...) of the GPUs CUDA would see, sorted; [] on any problem.

    Honours ``CUDA_VISIBLE_DEVICES``: "" hides all GPUs; indices and ``GPU-<uuid>`` prefixes
    select (indices are matched in nvidia-smi's order, which is PCI order).
    """
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        return []
    smi = shutil.which("nvidia-smi", path=env_path(env))
    if smi is None:
        return []
    gpus = list(_query_gpus(smi, file_stamp(Path(smi))))
    if visible is not None:
        gpus = _select_visible(gpus, visible)
    return sorted({cap for _, _, cap in gpus}, key=lambda c: tuple(map(int, c.split("."))))


@functools.lru_cache(maxsize=8)
def _query_gpus(smi: str, _stamp: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
    """(index, uuid, compute capability) per GPU; cached, failures included (a hung driver)."""
    try:
        proc = subprocess.run(
            [smi, "--query-gpu=index,uuid,compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, errors="replace",
            timeout=_NVIDIA_SMI_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    if proc.returncode != 0:
        return ()
    rows = (tuple(f.strip() for f in line.split(",")) for line in proc.stdout.splitlines())
    return tuple(row for row in rows if len(row) == 3 and re.fullmatch(r"\d+\.\d+", row[2]))


def _select_visible(gpus: list[tuple[str, ...]], visible: str) -> list[tuple[str, ...]]:
    """The (index, uuid, capability) rows CUDA_VISIBLE_DEVICES selects."""
    chosen: list[tuple[str, ...]] = []
    for item in (part.strip() for part in visible.split(",")):
        if item.startswith("MIG-"):
            return gpus  # MIG instances do not map to nvidia-smi's GPU list; keep them all
        match = [g for g in gpus if g[0] == item or (item[:4] == "GPU-" and g[1].startswith(item))]
        if not match:
            break  # CUDA ignores everything from the first invalid entry on
        chosen.extend(match)
    return chosen

"""Helpers for the CUDA tests: fake nvcc / nvidia-smi scripts, fake toolkits, cuobjdump."""

from __future__ import annotations

import glob
import os
import re
import shutil
import site
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain

REAL_ROOT = Path("/usr/local/cuda-13.0")
REAL_NVCC = REAL_ROOT / "bin" / "nvcc"
# A PATH with a host compiler (nvcc -dryrun needs one) but no nvcc (that lives in /usr/local/bin).
SYSTEM_PATH = "/usr/bin:/bin"
NVCC_13_0_CODES = tuple(
    f"sm_{n}" for n in (75, 80, 86, 87, 88, 89, 90, 100, 110, 103, 120, 121)
)  # nvcc 13.0's --list-gpu-code order, unsorted as nvcc prints it
HOST_CONFIG_13_0 = """\
#if defined(__GNUC__)

#if __GNUC__ > 15

#error -- unsupported GNU version! gcc versions later than 15 are not supported! The nvcc flag \
'-allow-unsupported-compiler' can be used to override this version check.

#endif /* __GNUC__ > 15 */

#if defined(__HORIZON__)
#if (__clang_major__ >= 21) || (__clang_major__ < 3)
#error -- unsupported HOS clang version! The version must be must be less than 21
#endif
#endif

#if defined(__clang__) && !defined(__ibmxl_vrm__) && !defined(__ICC) && !defined(__HORIZON__)
#if (__clang_major__ >= 21) || (__clang_major__ < 3) || ((__clang_major__ == 3) && \
     (__clang_minor__ < 3))
#error -- unsupported clang version! clang version must be less than 21 and greater than 3.2 .
#endif
#endif
#endif /* __GNUC__ */
"""


def require_cuda_torch() -> tuple[toolchain.TorchInstall, object]:
    """The CUDA-torch tier's torch and nvcc; skips the calling test module (one line) under a
    CPU torch or without nvcc."""
    from pep517_torch.core.cuda import toolkit as cuda

    torch, toolkit = toolchain.find_torch(), cuda.find_cuda(os.environ)
    if not torch.has_cuda_runtime or toolkit is None:
        pytest.skip(
            f"CUDA-torch tier: needs a CUDA build of torch and nvcc (this is torch {torch.version}):"
            " make test-cuda-torch", allow_module_level=True,
        )
    return torch, toolkit


def real_toolkit_available() -> bool:
    return os.access(REAL_NVCC, os.X_OK) and shutil.which("gcc", path=SYSTEM_PATH) is not None


def write_script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def write_fake_nvcc(
    path: Path,
    *,
    version: str = "13.0",
    codes: Sequence[str] = NVCC_13_0_CODES,
    top: Path | None = None,
) -> Path:
    """A shell-script nvcc answering --version, --list-gpu-code and -dryrun (TOP= like nvcc)."""
    top_line = f"#$ TOP={top}" if top else "#$ TOP=${0%/*}/.."  # no dirname: PATH may be empty
    return write_script(
        path,
        f"""for arg in "$@"; do
  case "$arg" in
    --version) echo "Cuda compilation tools, release {version}, V{version}.1"; exit 0;;
    --list-gpu-code) printf '%s\\n' {" ".join(codes)}; exit 0;;
    -dryrun) echo "{top_line}" >&2; exit 0;;
  esac
done
echo "nvcc fatal   : No input files specified" >&2
exit 1
""",
    )


def make_fake_toolkit(
    root: Path, *, version: str = "13.0", codes: Sequence[str] = NVCC_13_0_CODES
) -> Path:
    """bin/nvcc (fake), include/cuda_runtime.h, include/crt/host_config.h, lib64/libcudart.so."""
    write_fake_nvcc(root / "bin" / "nvcc", version=version, codes=codes)
    (root / "include" / "crt").mkdir(parents=True)
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / "include" / "crt" / "host_config.h").write_text(HOST_CONFIG_13_0)
    (root / "lib64").mkdir()
    (root / "lib64" / "libcudart.so").write_text("")
    return root


def write_fake_nvidia_smi(bin_dir: Path, rows: Sequence[str], *, exit_code: int = 0) -> Path:
    """nvidia-smi printing ``rows`` ("index, uuid, compute_cap") for --query-gpu."""
    lines = "".join(f"echo '{row}'\n" for row in rows)
    return write_script(bin_dir / "nvidia-smi", f"{lines}exit {exit_code}\n")


# ------------------------------------------------------------------------------- cuobjdump


def find_cuobjdump() -> Path | None:
    """cuobjdump on PATH, else from the nvidia-cuda-cuobjdump wheel (nvidia/**/bin/cuobjdump)."""
    on_path = shutil.which("cuobjdump")
    if on_path:
        return Path(on_path)
    roots = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    for root in dict.fromkeys(roots):
        for hit in sorted(glob.glob(os.path.join(root, "nvidia", "**", "bin", "cuobjdump"))):
            if os.access(hit, os.X_OK):
                return Path(hit)
    return None


def fatbin_contents(cuobjdump: Path, obj: Path) -> tuple[set[str], set[str]]:
    """({"sm_80", ...} machine code, {"compute_90", ...} PTX) embedded in an object file."""
    out = subprocess.run(
        [str(cuobjdump), "--list-elf", "--list-ptx", str(obj)],
        capture_output=True, text=True, check=True,
    ).stdout
    elf = set(re.findall(r"^ELF file\s+\d+: .*\.(sm_\w+)\.cubin$", out, re.MULTILINE))
    ptx = re.findall(r"^PTX file\s+\d+: .*\.sm_(\w+)\.ptx$", out, re.MULTILINE)
    return elf, {f"compute_{arch}" for arch in ptx}

"""What a CUDA library holds, read from its fatbins (issue #38 item 4): ``abi/fatbin.py``
against cuobjdump on real nvcc output, the build summary's per-arch line, the timeline's
linking step, and ``cuda-compress-mode`` (nvcc's ``--compress-mode``), proven on the fatbin.

Everything compiles one small kernel with ``<cuda_runtime.h>`` only (no torch header): seconds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from pep517_torch.abi.fatbin import DeviceCode, read_device_code
from pep517_torch.core import build as core_build
from pep517_torch.core.cuda import toolkit as cuda
from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind
from pep517_torch.errors import ConfigError
from pep517_torch.shipped_runtime import trace
from tests.cuda_tools import fatbin_contents, find_cuobjdump, make_fake_toolkit

TOOLKIT = cuda.find_cuda(os.environ)
CUOBJDUMP = find_cuobjdump()
pytestmark = [
    pytest.mark.skipif(TOOLKIT is None, reason="needs nvcc"),
    pytest.mark.skipif(CUOBJDUMP is None,
                       reason="needs cuobjdump: pip install 'nvidia-cuda-cuobjdump==13.*'"),
    pytest.mark.cuda,
    pytest.mark.compile,
]

KERNEL = """\
#include <cuda_runtime.h>
__global__ void fatbin_scale(float* x, float a) { x[threadIdx.x] *= a; }
__global__ void fatbin_shift(float* x, float b) { x[threadIdx.x] += b; }
extern "C" int fatbin_ready() { return cudaGetDeviceCount(nullptr) == cudaSuccess; }
"""


def nvcc_library(tmp_path: Path, name: str, *flags: str) -> Path:
    """``KERNEL`` as a shared library, built by nvcc directly with ``flags``."""
    assert TOOLKIT is not None
    source = tmp_path / "kernel.cu"
    source.write_text(KERNEL)
    out = tmp_path / f"{name}.so"
    subprocess.run([str(TOOLKIT.nvcc), "-shared", "-Xcompiler", "-fPIC", *flags, str(source),
                    "-o", str(out)], check=True, capture_output=True, timeout=600)
    return out


def listed(code: DeviceCode) -> tuple[set[str], set[str]]:
    """(cubins, PTX) as cuobjdump's helper names them."""
    return ({e.name for e in code.entries if not e.ptx},
            {e.name for e in code.entries if e.ptx})


@pytest.mark.parametrize("mode", [None, "none", "speed", "size"])
def test_entries_match_cuobjdump(tmp_path: Path, mode: str | None) -> None:
    gencode = ["-gencode", "arch=compute_80,code=sm_80",
               "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
    compress = [f"--compress-mode={mode}"] if mode else []
    library = nvcc_library(tmp_path, f"k_{mode}", *gencode, *compress)
    code = read_device_code(library)
    assert CUOBJDUMP is not None
    assert listed(code) == fatbin_contents(CUOBJDUMP, library) == ({"sm_80", "sm_90"}, {"compute_90"})
    assert code.cubin_archs == ("80", "90") and code.ptx_archs == ("90",)
    by_target = code.by_target()
    assert list(by_target) == ["sm_80", "sm_90", "compute_90"]  # cubins by arch, then PTX
    assert code.stored == sum(stored for stored, _ in by_target.values())
    compressed = {e.name for e in code.entries if e.compression}
    if mode == "size":  # zstd, the cubins too: smaller stored than held, and no readable note
        assert {"sm_80", "sm_90", "compute_90"} <= compressed
        assert all(stored < size for stored, size in by_target.values())
        assert {e.compression for e in code.entries} == {"zstd"}
        assert code.release is None
    else:
        assert not compressed & {"sm_80", "sm_90"}
        assert code.release == TOOLKIT.version  # the cubins' .note.nv.tkinfo
    if mode in ("none",):
        assert not compressed
    line = code.describe()
    assert re.fullmatch(r"sm_80 [\d.]+ (B|KiB)( \(.*?\))?, sm_90 [\d.]+ (B|KiB)( \(.*?\))?, "
                        r"PTX compute_90 \d+(\.\d)? (B|KiB)( \(.*? decompressed\))?", line), line


def test_arch_specific_and_family_targets(tmp_path: Path) -> None:
    library = nvcc_library(tmp_path, "targets",
                           "-gencode", "arch=compute_90a,code=sm_90a",
                           "-gencode", "arch=compute_100f,code=[sm_100f,compute_100f]",
                           "-gencode", "arch=compute_120,code=sm_120")
    code = read_device_code(library)
    assert CUOBJDUMP is not None
    # a family target's cubin is its arch's, as cuobjdump lists it; its PTX keeps the family
    assert listed(code) == ({"sm_90a", "sm_100", "sm_120"}, {"compute_100f"})
    assert fatbin_contents(CUOBJDUMP, library)[0] == {"sm_90a", "sm_100", "sm_120"}
    assert code.cubin_archs == ("90a", "100", "120") and code.ptx_archs == ("100f",)


def test_not_cuda_is_empty(tmp_path: Path) -> None:
    plain = tmp_path / "plain.so"
    source = tmp_path / "plain.cpp"
    source.write_text("int plain() { return 1; }\n")
    subprocess.run(["g++", "-shared", "-fPIC", str(source), "-o", str(plain)], check=True)
    assert not read_device_code(plain) and read_device_code(plain).describe() == ""
    (tmp_path / "text.so").write_text("not an ELF file")
    assert not read_device_code(tmp_path / "text.so")
    assert not read_device_code(tmp_path / "missing.so")


# ------------------------------------------------------------------- through the compile core


def kernel_spec(tmp_path: Path, name: str = "fatk") -> ExtensionSpec:
    source = tmp_path / "src" / "kernel.cu"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(KERNEL)
    return ExtensionSpec(name=name, sources=(source,), kind=Kind.LIBRARY,
                         python_abi_suffix=False, cuda_arch_list=("8.0", "9.0+PTX"))


def core_options(build_dir: Path, **changes: object) -> BuildOptions:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    return BuildOptions(build_dir=build_dir, env=env, compiler_launcher="none",
                        **changes)  # type: ignore[arg-type]


def test_summary_and_timeline_carry_device_code_by_arch(tmp_path: Path) -> None:
    lines: list[str] = []
    result = core_build.build([kernel_spec(tmp_path)], core_options(tmp_path / "b"),
                              log=lines.append)
    code = result.device_code["fatk"]
    assert listed(code) == ({"sm_80", "sm_90"}, {"compute_90"})
    summary = result.summary().splitlines()
    shown = [line for line in summary if line.startswith("device code of fatk: ")]
    assert shown == [f"device code of fatk: {code.describe()}"], summary
    assert shown[0].startswith("device code of fatk: sm_80 ") and ", PTX compute_90 " in shown[0]
    document = json.loads((tmp_path / "b" / trace.TRACE_NAME).read_text())
    linking = [e for e in document["traceEvents"] if e.get("name") == "linking fatk"]
    assert len(linking) == 1
    assert linking[0]["args"]["device_code"] == code.to_json()
    assert set(code.to_json()) == {"sm_80", "sm_90", "compute_90"}
    assert trace.Timeline.from_json(document).steps  # still a timeline the trace command reads
    # a build with nothing to do still says what the library holds (its trace is empty)
    again = core_build.build([kernel_spec(tmp_path)], core_options(tmp_path / "b"),
                             log=lines.append)
    assert f"device code of fatk: {code.describe()}" in again.summary().splitlines()


def test_compress_mode_reaches_every_fatbin(tmp_path: Path) -> None:
    plain = core_build.build([kernel_spec(tmp_path / "p")], core_options(tmp_path / "bp"),
                             log=lambda line: None)
    small = core_build.build([kernel_spec(tmp_path / "s")],
                             core_options(tmp_path / "bs", cuda_compress_mode="size"),
                             log=lambda line: None)
    assert "--compress-mode=size" in (tmp_path / "bs" / "build.ninja").read_text()
    assert "--compress-mode" not in (tmp_path / "bp" / "build.ninja").read_text()
    before, after = plain.device_code["fatk"], small.device_code["fatk"]
    assert {e.compression for e in after.entries} == {"zstd"}
    assert not any(e.compression for e in before.entries if not e.ptx)
    assert after.stored < before.stored


def test_compress_mode_needs_cuda_12_8(tmp_path: Path) -> None:
    """A toolkit without --compress-mode: one line naming the key and the nvcc, before anything
    compiles."""
    from pep517_torch.core import plan

    old = make_fake_toolkit(tmp_path / "cuda-12.4", version="12.4")
    options = core_options(tmp_path / "b", cuda_compress_mode="size",
                           keys=(("cuda_compress_mode", "tool.torch-ext.cuda-compress-mode"),))
    options = BuildOptions(**{**options.__dict__, "env": {**options.env, "CUDA_HOME": str(old),
                                                          "PATH": f"{old}/bin:/usr/bin:/bin"},
                              "allow_cuda_version_mismatch": True})
    with pytest.raises(ConfigError) as caught:
        plan.check([kernel_spec(tmp_path)], options)
    message = str(caught.value)
    assert message.startswith("tool.torch-ext.cuda-compress-mode: 'size' needs nvcc's"
                              " --compress-mode, which nvcc 12.4"), message
    assert "CUDA 12.8" in message and "\n" not in message
    assert not (tmp_path / "b" / "build.ninja").exists()


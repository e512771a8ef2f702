"""CUDA toolkit discovery, version checks, host-compiler limits and visible GPUs."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pep517_torch.core.cuda import checks as cuda_checks
from pep517_torch.core.cuda.toolkit import (
    CudaToolkit,
    find_cuda,
    nvcc_wheel_requirements,
    nvidia_wheel_dirs,
    require_cuda,
)
from pep517_torch.core.cuda.checks import check_host_compiler, check_versions, visible_gpu_archs
from pep517_torch.errors import ToolchainError
from tests.cuda_tools import (
    REAL_NVCC,
    REAL_ROOT,
    SYSTEM_PATH,
    make_fake_toolkit,
    real_toolkit_available,
    write_fake_nvcc,
    write_fake_nvidia_smi,
    write_script,
)

ROOT = Path(__file__).resolve().parents[1]
needs_real_nvcc = pytest.mark.skipif(
    not real_toolkit_available(), reason=f"needs {REAL_NVCC} and gcc on {SYSTEM_PATH}"
)
# No system locations, no wheels: only what a test sets up is found.
ISOLATED = {"search_paths": [], "nvidia_dirs": []}


def fake_toolkit_obj(tmp_path: Path, version: tuple[int, int] = (13, 0)) -> CudaToolkit:
    root = tmp_path / "cuda"
    if not root.exists():
        make_fake_toolkit(root)
    return CudaToolkit(
        root=root,
        nvcc=root / "bin" / "nvcc",
        version=version,
        include_dirs=(root / "include",),
        library_dirs=(root / "lib64",),
        found_via="CUDA_HOME",
        supported_archs=("7.5", "8.0", "9.0", "10.0", "12.0"),
    )


# ----------------------------------------------------------------------- the real toolkit


@needs_real_nvcc
@pytest.mark.cuda
class TestRealToolkit:
    def test_cuda_home(self) -> None:
        toolkit = require_cuda({"PATH": SYSTEM_PATH, "CUDA_HOME": str(REAL_ROOT)}, **ISOLATED)
        assert toolkit.found_via == "CUDA_HOME"
        assert toolkit.root == REAL_ROOT
        assert toolkit.nvcc == REAL_NVCC
        assert toolkit.version == (13, 0)
        assert toolkit.include_dirs == (REAL_ROOT / "include",)
        # lib64 → lib and targets/x86_64-linux/lib → ../../lib are one directory here
        assert toolkit.library_dirs == (REAL_ROOT / "lib64",)
        assert toolkit.supported_archs[0] == "7.5" and toolkit.supported_archs[-1] == "12.1"
        assert list(toolkit.supported_archs) == sorted(
            toolkit.supported_archs, key=lambda a: tuple(map(int, a.split(".")))
        )
        assert {"8.0", "9.0", "10.0", "10.3", "11.0", "12.0"} <= set(toolkit.supported_archs)

    def test_cuda_path(self) -> None:
        toolkit = require_cuda({"PATH": SYSTEM_PATH, "CUDA_PATH": str(REAL_ROOT)}, **ISOLATED)
        assert toolkit.found_via == "CUDA_PATH" and toolkit.root == REAL_ROOT

    def test_cuda_home_wins_over_cuda_path(self, tmp_path: Path) -> None:
        env = {"PATH": SYSTEM_PATH, "CUDA_HOME": str(REAL_ROOT), "CUDA_PATH": str(tmp_path)}
        assert require_cuda(env, **ISOLATED).found_via == "CUDA_HOME"

    def test_cuda_home_through_symlink_root(self) -> None:
        toolkit = require_cuda({"PATH": SYSTEM_PATH, "CUDA_HOME": "/usr/local/cuda"}, **ISOLATED)
        assert toolkit.root == REAL_ROOT and toolkit.nvcc == REAL_NVCC
        assert toolkit.found_via == "CUDA_HOME"

    def test_machine_wrapper_script_on_path(self) -> None:
        wrapper = Path("/usr/local/bin/nvcc")
        if not wrapper.read_bytes().startswith(b"#!"):
            pytest.skip("/usr/local/bin/nvcc is not a wrapper script here")
        toolkit = require_cuda({"PATH": f"/usr/local/bin:{SYSTEM_PATH}"}, **ISOLATED)
        assert toolkit.found_via == f"nvcc on PATH ({wrapper} → {REAL_ROOT})"
        assert toolkit.nvcc == REAL_NVCC and toolkit.root == REAL_ROOT

    def test_own_wrapper_script_on_path(self, tmp_path: Path) -> None:
        # Its directory's parent (tmp_path) is not a toolkit: only nvcc -dryrun's TOP= tells.
        wrapper = write_script(tmp_path / "bin" / "nvcc", f'exec {REAL_NVCC} "$@"\n')
        toolkit = require_cuda({"PATH": f"{wrapper.parent}:{SYSTEM_PATH}"}, **ISOLATED)
        assert toolkit.root == REAL_ROOT and toolkit.nvcc == REAL_NVCC
        assert toolkit.found_via == f"nvcc on PATH ({wrapper} → {REAL_ROOT})"
        assert toolkit.version == (13, 0)

    def test_symlink_on_path(self, tmp_path: Path) -> None:
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "nvcc").symlink_to("/usr/local/cuda/bin/nvcc")
        toolkit = require_cuda({"PATH": f"{tmp_path / 'bin'}:{SYSTEM_PATH}"}, **ISOLATED)
        assert toolkit.root == REAL_ROOT and toolkit.nvcc == REAL_NVCC

    def test_default_search_path(self) -> None:
        toolkit = require_cuda({"PATH": SYSTEM_PATH}, nvidia_dirs=[])
        assert toolkit.found_via == "/usr/local/cuda" and toolkit.root == REAL_ROOT

    def test_real_host_config(self) -> None:
        toolkit = require_cuda({"PATH": SYSTEM_PATH, "CUDA_HOME": str(REAL_ROOT)}, **ISOLATED)
        check_host_compiler(toolkit, "gcc", (15, 2), [])
        check_host_compiler(toolkit, "clang", (20, 1), [])
        with pytest.raises(ToolchainError, match=r"gcc 16\.1"):
            check_host_compiler(toolkit, "gcc", (16, 1), [])
        with pytest.raises(ToolchainError, match=r"clang 21"):
            check_host_compiler(toolkit, "clang", (21,), [])


@pytest.mark.cuda
def test_wrapper_whose_dryrun_fails_is_rejected_with_reason(tmp_path: Path) -> None:
    """No host compiler on PATH: nvcc -dryrun stops before TOP=, and the error says so."""
    if not real_toolkit_available():
        pytest.skip("needs the real nvcc")
    bin_dir = tmp_path / "bin"
    write_script(bin_dir / "nvcc", f'exec {REAL_NVCC} "$@"\n')
    env = {"PATH": str(bin_dir)}
    assert find_cuda(env, **ISOLATED) is None
    said = re.escape(f"nvcc on PATH ({bin_dir / 'nvcc'}): wrapper script")
    with pytest.raises(ToolchainError, match=said) as error:
        require_cuda(env, **ISOLATED)
    assert "TOP=" in str(error.value) and "point CUDA_HOME at the real toolkit" in str(error.value)


def test_modules_do_not_import_torch() -> None:
    code = (
        "import sys; import pep517_torch.core.cuda.toolkit, pep517_torch.core.cuda.arch_flags; "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.stdout.strip() == "False", result.stderr


# ------------------------------------------------------------------------- fake toolkits


def test_fake_toolkit_via_cuda_home(tmp_path: Path) -> None:
    root = make_fake_toolkit(tmp_path / "cuda-12.4", version="12.4", codes=["sm_80", "sm_90"])
    toolkit = require_cuda({"PATH": "", "CUDA_HOME": str(root)}, **ISOLATED)
    assert toolkit.version == (12, 4)
    assert toolkit.supported_archs == ("8.0", "9.0")
    assert toolkit.nvcc == root / "bin" / "nvcc"
    assert toolkit.include_dirs == (root / "include",)
    assert toolkit.library_dirs == (root / "lib64",)


def test_targets_dirs_are_added(tmp_path: Path) -> None:
    root = make_fake_toolkit(tmp_path / "cuda")
    target = root / "targets" / "x86_64-linux"
    (target / "include").mkdir(parents=True)
    (target / "lib").mkdir()
    (root / "include" / "cccl").mkdir()
    toolkit = require_cuda({"PATH": "", "CUDA_HOME": str(root)}, **ISOLATED)
    assert toolkit.include_dirs == (root / "include", target / "include")  # cccl: nvcc's job
    assert toolkit.library_dirs == (root / "lib64", target / "lib")


def test_cuda_home_set_but_wrong_stops_the_search(tmp_path: Path) -> None:
    good = make_fake_toolkit(tmp_path / "good")
    env = {"PATH": str(good / "bin"), "CUDA_HOME": str(tmp_path / "nope")}
    assert find_cuda(env, **ISOLATED) is None
    said = re.escape(f"CUDA_HOME={tmp_path / 'nope'}: no {tmp_path / 'nope' / 'bin' / 'nvcc'}")
    with pytest.raises(ToolchainError, match=said) as error:
        require_cuda(env, **ISOLATED)
    message = str(error.value)
    assert "CUDA_HOME is set, so nothing else was tried" in message


def test_nvcc_that_fails_version_is_rejected(tmp_path: Path) -> None:
    dryrun = '[ "$1" = -dryrun ] && echo "#$ TOP=${0%/*}/.." >&2 && exit 0\n'
    write_script(tmp_path / "cuda" / "bin" / "nvcc", dryrun + "echo 'segfault' >&2; exit 139\n")
    with pytest.raises(ToolchainError, match=r"--version failed: segfault"):
        require_cuda({"PATH": "", "CUDA_PATH": str(tmp_path / "cuda")}, **ISOLATED)


def test_search_paths_candidate(tmp_path: Path) -> None:
    root = make_fake_toolkit(tmp_path / "opt-cuda")
    toolkit = require_cuda({"PATH": ""}, search_paths=[tmp_path / "missing", root], nvidia_dirs=[])
    assert toolkit.found_via == str(root)


def test_not_found_lists_every_place_and_the_fixes(tmp_path: Path) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    (tmp_path / "usr-cuda").mkdir()
    with pytest.raises(ToolchainError, match=r"^no usable CUDA toolkit \(nvcc\) found\.") as error:
        require_cuda(
            {"PATH": str(empty_bin)},
            search_paths=[tmp_path / "nowhere", tmp_path / "usr-cuda"],
            nvidia_dirs=[],
            torch_cuda="12.8",
        )
    message = str(error.value)
    for expected in (
        "CUDA_HOME: not set",
        "CUDA_PATH: not set",
        "nvcc on PATH: not found",
        f"{tmp_path / 'nowhere'}: does not exist",
        f"{tmp_path / 'usr-cuda'}: no {tmp_path / 'usr-cuda' / 'bin' / 'nvcc'}",
        "nvidia-cuda-nvcc wheel: no nvidia/cu*/bin/nvcc",
        "no 'nvidia' package in this Python environment",
        "set CUDA_HOME",
        "CUDA_HOME=/usr/local/cuda-12.8",
        "pip install 'nvidia-cuda-nvcc-cu12==12.8.*'",
        "[build-system] requires",
    ):
        assert expected in message, expected
    assert message.index("CUDA_HOME: not set") < message.index("nvcc on PATH") < message.index(
        "nvidia-cuda-nvcc wheel"
    )


def test_nvcc_wheel_requirements() -> None:
    assert nvcc_wheel_requirements(None) == ["nvidia-cuda-nvcc"]
    assert nvcc_wheel_requirements("12.8") == ["nvidia-cuda-nvcc-cu12==12.8.*"]
    assert nvcc_wheel_requirements("13.0") == [
        "nvidia-cuda-nvcc==13.0.*",
        "nvidia-nvvm==13.0.*",
        "nvidia-cuda-crt==13.0.*",
    ]


# ----------------------------------------------------------------------------- wheel layouts


def make_fake_site(site: Path, *, nvcc_version: str = "13.0") -> Path:
    """site-packages with the cu13 layout (nvcc + cudart + crt), torch's cuBLAS, a cu12 tree."""
    cu13 = site / "nvidia" / "cu13"
    write_fake_nvcc(cu13 / "bin" / "nvcc", version=nvcc_version)
    for sub in ("include/crt", "include/cccl", "lib", "nvvm/bin"):
        (cu13 / sub).mkdir(parents=True, exist_ok=True)
    (cu13 / "include" / "cuda_runtime.h").write_text("")
    (cu13 / "include" / "cublas_v2.h").write_text("")
    (cu13 / "lib" / "libcudart.so.13").write_text("")
    for layout in ("nvidia/cudnn/include", "nvidia/cudnn/lib", "nvidia/cu12/include"):
        (site / layout).mkdir(parents=True)
    for dist in ("nvidia_cuda_nvcc-13.0.88", "nvidia_nvvm-13.0.88", "nvidia_cuda_crt-13.0.88"):
        (site / f"{dist}.dist-info").mkdir()
    return site / "nvidia"


def test_wheel_layout(tmp_path: Path) -> None:
    nvidia = make_fake_site(tmp_path / "site-packages")
    cu13 = nvidia / "cu13"
    toolkit = require_cuda({"PATH": ""}, search_paths=[], nvidia_dirs=[nvidia])
    assert toolkit.found_via == "nvidia-cuda-nvcc wheel"
    assert toolkit.root == cu13 and toolkit.nvcc == cu13 / "bin" / "nvcc"
    assert toolkit.version == (13, 0)
    # nvcc.profile only knows targets/<triple>/include, which wheels lack: cccl is ours to add
    assert toolkit.include_dirs == (cu13 / "include", cu13 / "include" / "cccl")
    assert toolkit.library_dirs == (cu13 / "lib",)
    # cu13's own dirs are not repeated; the cu12 tree is another CUDA major
    assert toolkit.extra_include_dirs == (nvidia / "cudnn" / "include",)
    assert toolkit.extra_library_dirs == (nvidia / "cudnn" / "lib",)


def test_wheel_layout_found_through_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_fake_site(tmp_path / "site-packages")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    importlib.invalidate_caches()
    toolkit = require_cuda({"PATH": ""}, search_paths=[])
    assert toolkit.found_via == "nvidia-cuda-nvcc wheel"
    assert toolkit.root == tmp_path / "site-packages" / "nvidia" / "cu13"


def test_wheel_with_mismatched_nvvm_is_rejected(tmp_path: Path) -> None:
    nvidia = make_fake_site(tmp_path / "site-packages")
    (tmp_path / "site-packages" / "nvidia_nvvm-13.0.88.dist-info").rename(
        tmp_path / "site-packages" / "nvidia_nvvm-13.5.37.dist-info"
    )
    said = re.escape("nvcc is 13.0 but nvidia-nvvm 13.5")
    with pytest.raises(ToolchainError, match=said) as error:
        require_cuda({"PATH": ""}, search_paths=[], nvidia_dirs=[nvidia])
    assert "pip install 'nvidia-nvvm==13.0.*'" in str(error.value)


def test_cuda12_per_package_wheel_layout(tmp_path: Path) -> None:
    nvidia = tmp_path / "site-packages" / "nvidia"
    write_fake_nvcc(nvidia / "cuda_nvcc" / "bin" / "nvcc", version="12.8", codes=["sm_90"])
    for layout in ("cuda_nvcc/include/crt", "cuda_runtime/include", "cuda_runtime/lib",
                   "cublas/include", "cublas/lib", "cu13/include"):
        (nvidia / layout).mkdir(parents=True)
    toolkit = require_cuda({"PATH": ""}, search_paths=[], nvidia_dirs=[nvidia])
    assert toolkit.found_via == "nvidia-cuda-nvcc wheel" and toolkit.version == (12, 8)
    assert toolkit.include_dirs == (nvidia / "cuda_nvcc" / "include",)
    assert toolkit.extra_include_dirs == (
        nvidia / "cublas" / "include",
        nvidia / "cuda_runtime" / "include",
    )
    assert toolkit.extra_library_dirs == (
        nvidia / "cublas" / "lib",
        nvidia / "cuda_runtime" / "lib",
    )


def test_nvidia_wheel_dirs(tmp_path: Path) -> None:
    nvidia = make_fake_site(tmp_path / "site-packages")
    includes, libs = nvidia_wheel_dirs(nvidia_dirs=[nvidia])
    assert includes == (nvidia / "cu12" / "include", nvidia / "cu13" / "include",
                        nvidia / "cudnn" / "include")
    assert libs == (nvidia / "cu13" / "lib", nvidia / "cudnn" / "lib")
    includes_13, _ = nvidia_wheel_dirs(13, nvidia_dirs=[nvidia])
    assert nvidia / "cu12" / "include" not in includes_13
    assert nvidia_wheel_dirs(nvidia_dirs=[]) == ((), ())


def test_system_toolkit_gets_wheel_extras(tmp_path: Path) -> None:
    nvidia = make_fake_site(tmp_path / "site-packages")
    root = make_fake_toolkit(tmp_path / "cuda")
    env = {"PATH": "", "CUDA_HOME": str(root)}
    toolkit = require_cuda(env, search_paths=[], nvidia_dirs=[nvidia])
    assert toolkit.root == root
    assert toolkit.extra_include_dirs == (nvidia / "cu13" / "include", nvidia / "cudnn" / "include")
    assert toolkit.extra_library_dirs == (nvidia / "cu13" / "lib", nvidia / "cudnn" / "lib")


# --------------------------------------------------------------------------- version checks


@pytest.mark.parametrize("torch_cuda", [None, "13.0", "13.0.1"])
def test_versions_that_match(tmp_path: Path, torch_cuda: str | None) -> None:
    assert check_versions(fake_toolkit_obj(tmp_path), torch_cuda, allow_mismatch=False) == []


def test_minor_difference_warns_once(tmp_path: Path) -> None:
    warnings = check_versions(fake_toolkit_obj(tmp_path), "13.2", allow_mismatch=False)
    assert len(warnings) == 1 and "13.2" in warnings[0] and "nvcc 13.0" in warnings[0]


def test_major_difference_is_an_error_naming_both_and_the_override(tmp_path: Path) -> None:
    mismatch = re.escape("does not match the CUDA 12.8 torch was built with")
    with pytest.raises(ToolchainError, match=mismatch) as error:
        check_versions(
            fake_toolkit_obj(tmp_path), "12.8", allow_mismatch=False,
            override_key="tool.torch-ext.allow-cuda-version-mismatch",
        )
    message = str(error.value)
    for expected in (
        "nvcc 13.0",
        "CUDA 12.8",
        "set tool.torch-ext.allow-cuda-version-mismatch = true",
        "nvidia-cuda-nvcc-cu12==12.8.*",
    ):
        assert expected in message, expected
    # a face with no way to set the override (the JIT) is not told to set one
    with pytest.raises(ToolchainError, match=mismatch) as error:
        check_versions(fake_toolkit_obj(tmp_path), "12.8", allow_mismatch=False)
    assert "build anyway" not in str(error.value) and "tool.torch-ext" not in str(error.value)


def test_major_difference_with_override_warns(tmp_path: Path) -> None:
    warnings = check_versions(fake_toolkit_obj(tmp_path), "12.8", allow_mismatch=True)
    assert len(warnings) == 1 and "12.8" in warnings[0]


# ---------------------------------------------------------------------------- host compiler


def test_host_compiler_limits_from_header(tmp_path: Path) -> None:
    toolkit = fake_toolkit_obj(tmp_path)
    check_host_compiler(toolkit, "gcc", (15, 9), [])
    check_host_compiler(toolkit, "clang", (20, 1, 8), [])
    said = re.escape("host compiler gcc 16.1.0 is newer than nvcc 13.0")
    with pytest.raises(ToolchainError, match=said) as error:
        check_host_compiler(toolkit, "gcc", (16, 1, 0), [])
    message = str(error.value)
    for expected in ("gcc 16.1.0", "nvcc 13.0", "gcc 15 at most", "CC=", "-ccbin",
                     "-allow-unsupported-compiler", "extra_cuda_cflags"):
        assert expected in message, expected
    with pytest.raises(ToolchainError, match=r"clang 21\.0 is newer than nvcc 13\.0"):
        check_host_compiler(toolkit, "clang", (21, 0), [])


@pytest.mark.parametrize("flag", ["-allow-unsupported-compiler", "--allow-unsupported-compiler"])
def test_allow_unsupported_compiler_flag_skips_the_check(tmp_path: Path, flag: str) -> None:
    toolkit = fake_toolkit_obj(tmp_path)
    with pytest.raises(ToolchainError, match=r"gcc 16\.1 is newer than nvcc 13\.0"):
        check_host_compiler(toolkit, "gcc", (16, 1), ["-O3"])
    check_host_compiler(toolkit, "gcc", (16, 1), ["-O3", flag])  # the same gcc, let through


def test_older_header_style(tmp_path: Path) -> None:
    toolkit = fake_toolkit_obj(tmp_path, version=(12, 4))
    (toolkit.root / "include" / "crt" / "host_config.h").write_text(
        "#if __GNUC__ > 13\n#error -- unsupported GNU version! gcc versions later than 13\n#endif\n"
        "#if defined(__clang__)\n#if (__clang_major__ >= 18) || (__clang_major__ < 3)\n"
        "#error -- unsupported clang version! clang version must be less than 18\n#endif\n#endif\n"
    )
    check_host_compiler(toolkit, "gcc", (13, 3), [])
    with pytest.raises(ToolchainError, match="gcc 13 at most"):
        check_host_compiler(toolkit, "gcc", (14, 1), [])
    with pytest.raises(ToolchainError, match="clang 17 at most"):
        check_host_compiler(toolkit, "clang", (18, 1), [])


def test_no_header_no_check(tmp_path: Path) -> None:
    toolkit = fake_toolkit_obj(tmp_path)
    with pytest.raises(ToolchainError, match=r"gcc 99 is newer than nvcc 13\.0"):
        check_host_compiler(toolkit, "gcc", (99,), [])
    headerless = replace(toolkit, include_dirs=(tmp_path / "empty",))
    check_host_compiler(headerless, "gcc", (99,), [])  # no host_config.h to hold it against


# ------------------------------------------------------------------------------------ GPUs

SMI_ROWS = ["0, GPU-aaaa-1111, 8.6", "1, GPU-bbbb-2222, 9.0", "2, GPU-cccc-3333, 8.6"]


def test_no_nvidia_smi_means_no_gpus(tmp_path: Path) -> None:
    assert visible_gpu_archs({"PATH": str(tmp_path)}) == []


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        (None, ["8.6", "9.0"]),
        ("", []),
        ("1", ["9.0"]),
        ("0,2", ["8.6"]),
        ("GPU-bbbb", ["9.0"]),
        ("2,7,1", ["8.6"]),  # CUDA ignores everything from the first invalid entry on
        ("MIG-1234", ["8.6", "9.0"]),
    ],
)
def test_visible_gpus(tmp_path: Path, visible: str | None, expected: list[str]) -> None:
    write_fake_nvidia_smi(tmp_path, SMI_ROWS)
    env = {"PATH": str(tmp_path)}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    assert visible_gpu_archs(env) == expected


def test_nvidia_smi_without_devices(tmp_path: Path) -> None:
    write_fake_nvidia_smi(tmp_path, ["No devices were found"], exit_code=6)
    assert visible_gpu_archs({"PATH": str(tmp_path)}) == []


def test_nvidia_smi_that_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_script(tmp_path / "nvidia-smi", "exec sleep 30\n")
    monkeypatch.setattr(cuda_checks, "_NVIDIA_SMI_TIMEOUT_S", 0.3)
    assert visible_gpu_archs({"PATH": str(tmp_path)}) == []


# --------------------------------------------------------------------- opt-in: real wheels


@pytest.mark.cuda
@pytest.mark.skipif(
    os.environ.get("PEP517_TORCH_TEST_CUDA_WHEELS") != "1",
    reason="installs nvidia-cuda-nvcc from the index; set PEP517_TORCH_TEST_CUDA_WHEELS=1",
)
def test_real_nvcc_wheel_in_a_venv(tmp_path: Path) -> None:
    """pip install nvidia-cuda-nvcc into a fresh venv, find it there and compile with it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    wheels = nvcc_wheel_requirements("13.0")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *wheels],
        check=True,
    )
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    probe = f"""
import json, subprocess, sys
sys.path.insert(0, {str(ROOT)!r})
from pep517_torch.core.cuda.toolkit import require_cuda
from pep517_torch.core.cuda.checks import check_host_compiler
t = require_cuda({{"PATH": {SYSTEM_PATH!r}}}, search_paths=[])
check_host_compiler(t, "gcc", (12, 2), [])
includes = [f"-I{{d}}" for d in (*t.include_dirs, *t.extra_include_dirs)]
subprocess.run([str(t.nvcc), "-c", {str(source)!r}, "-o", {str(tmp_path / "k.o")!r}, *includes,
                "-gencode=arch=compute_80,code=sm_80"], check=True, env={{"PATH": {SYSTEM_PATH!r}}})
print(json.dumps({{"found_via": t.found_via, "root": str(t.root), "version": t.version}}))
"""
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["found_via"] == "nvidia-cuda-nvcc wheel"
    assert found["root"].endswith("site-packages/nvidia/cu13")
    assert found["version"] == [13, 0]
    assert (tmp_path / "k.o").stat().st_size > 0

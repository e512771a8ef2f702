"""The CUDA-torch tier, without compiling: torch 2.14.1+cu130 against nvcc, and the arch default.

torch's CUDA version against nvcc's: equal passes; another major is one error before anything
compiles, naming both (a stand-in nvcc that reports 12.8); another minor is a warning. With no
GPU, the arch default is torch's own arch list as far as nvcc builds it, said in one line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pep517_torch.core import plan as core_plan
from pep517_torch.core.cuda import checks as cuda_checks
from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.errors import ToolchainError
from tests.cuda_tools import SYSTEM_PATH, make_fake_toolkit, require_cuda_torch
from tests.tiny_project import pyproject

TORCH, TOOLKIT = require_cuda_torch()

pytestmark = [pytest.mark.cuda, pytest.mark.timeout(600)]

KERNEL = "#include <cuda_runtime.h>\n__global__ void k(float* x) { x[0] = 1; }\n"


def env_without_gpu(**extra: str) -> dict[str, str]:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", **extra}


def test_torch_is_2_14_1_built_with_the_cuda_nvcc_has() -> None:
    assert TOOLKIT is not None
    assert TORCH.version.startswith("2.14.1") and TORCH.cuda == "13.0", TORCH
    assert TOOLKIT.version[:2] == (13, 0), TOOLKIT
    assert cuda_checks.check_versions(TOOLKIT, TORCH.cuda, allow_mismatch=False) == []
    # The cross-version helpers' CPU interpreter, as run.sh exports it.
    cpu_python = os.environ.get("PEP517_TORCH_CPU_PYTHON")
    if cpu_python and Path(cpu_python).exists():
        out = subprocess.run(
            [cpu_python, "-c", "import torch.version as v; print(v.__version__, v.cuda)"],
            capture_output=True, text=True, check=True, timeout=300,
        ).stdout.split()
        assert out[0].startswith("2.13.0") and out[1] == "None", out


def test_torchs_arch_list_is_read_without_importing_torch() -> None:
    read = cuda_checks.torch_arch_list(TORCH.library_dir)
    code = "import torch; print(' '.join(torch.cuda.get_arch_list()))"
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, timeout=300).stdout.split()
    assert list(read) == imported and "sm_90" in read, (read, imported)


def test_no_gpu_default_is_torchs_arch_list_that_nvcc_builds_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(KERNEL)
    spec = ExtensionSpec("defaultarch", (tmp_path / "k.cu",))
    plan = core_plan.prepare([spec], BuildOptions(build_dir=tmp_path / "b", env=env_without_gpu()))
    notes = [n for n in plan.notes if "architectures" in n]
    torch_archs = cuda_checks.torch_arch_list(TORCH.library_dir)
    buildable = [a for a in torch_archs if f"{a[3:-1]}.{a[-1]}" in TOOLKIT.supported_archs]
    expected = ";".join(f"{a[3:-1]}.{a[-1]}" for a in buildable) + "+PTX"
    assert notes == [
        f"no GPU visible and no architectures chosen: building for {expected} (torch's own arch"
        f" list {' '.join(torch_archs)}; PTX for the newest); set cuda_arch_list to choose"
    ]
    graph = (tmp_path / "b" / "build.ninja").read_text()
    for arch in buildable:
        assert f"-gencode=arch=compute_{arch[3:]},code={arch}" in graph
    newest = buildable[-1][3:]
    assert f"-gencode=arch=compute_{newest},code=compute_{newest}" in graph
    assert not list((tmp_path / "b").glob("**/*.o"))  # planned, nothing compiled


def stand_in_nvcc(tmp_path: Path, version: str) -> dict[str, str]:
    root = make_fake_toolkit(tmp_path / f"cuda-{version}", version=version)
    return env_without_gpu(CUDA_HOME=str(root), PATH=f"{root / 'bin'}:{SYSTEM_PATH}")


def test_another_cuda_major_is_one_error_before_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pep517_torch

    env = stand_in_nvcc(tmp_path, "12.8")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "k.cu").write_text(KERNEL)
    said = re.escape("does not match the CUDA 13.0 torch was built with")
    with pytest.raises(ToolchainError, match=said) as failure:
        pep517_torch.load("mismatch", [str(tmp_path / "k.cu")], build_directory=str(tmp_path / "jit"))
    message = str(failure.value)
    assert "\n" not in message
    assert "nvcc 12.8 (" in message
    assert "pip install 'nvidia-cuda-nvcc==13.0.*'" in message  # the toolkit torch's CUDA needs
    assert not list((tmp_path / "jit").glob("**/*.o"))
    # The build backend's command line says the same in one line, with no traceback.
    project = tmp_path / "project"
    (project / "csrc").mkdir(parents=True)
    (project / "csrc" / "k.cu").write_text(KERNEL)
    (project / "pyproject.toml").write_text(
        pyproject("mismatch", 'name = "mismatch_C"\nsources = ["csrc/k.cu"]', version="1", packages=())
    )
    result = subprocess.run(
        [sys.executable, "-m", "pep517_torch", "wheel", str(project)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if "does not match" in line]
    assert len(errors) == 1 and "nvcc 12.8" in errors[0] and "CUDA 13.0" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not list(project.glob("**/*.o")) and not list(project.glob("**/*.whl"))


def test_another_cuda_minor_is_a_warning_as_torch_gives(tmp_path: Path) -> None:
    env = stand_in_nvcc(tmp_path, "13.2")
    (tmp_path / "k.cu").write_text(KERNEL)
    spec = ExtensionSpec("minor", (tmp_path / "k.cu",))
    plan = core_plan.prepare(
        [spec], BuildOptions(build_dir=tmp_path / "b", env=env, cuda_arch_list=("9.0",))
    )
    minor = [n for n in plan.notes if "minor version" in n]
    assert len(minor) == 1 and "nvcc 13.2" in minor[0] and "CUDA 13.0" in minor[0], plan.notes


@pytest.mark.parametrize(("cxx", "nvcc", "refused"), [
    (["-std=c++17"], [], "extra_cflags[0]"), ([], ["-std=c++17"], "extra_cuda_cflags[0]"),
    (["-std=gnu++17"], [], "extra_cflags[0]"), ([], ["--std", "c++17"], "extra_cuda_cflags[0]"),
    (["-std=c++20"], ["-std=c++20"], None),
])
def test_a_std_older_than_torch_2_14_needs_is_refused_before_compiling(
    tmp_path: Path, cxx: list[str], nvcc: list[str], refused: str | None
) -> None:
    """torch 2.14.1's headers need C++20 (issue 35 item 6): -std=c++17 fails here, naming both
    standards, instead of in every compile (where it was taken for PCH trouble)."""
    from pep517_torch.errors import ConfigError

    (tmp_path / "a.cpp").write_text("#include <torch/extension.h>\nint f() { return 1; }\n")
    (tmp_path / "k.cu").write_text("#include <torch/types.h>\n" + KERNEL)
    spec = ExtensionSpec("stdcheck", (tmp_path / "a.cpp", tmp_path / "k.cu"),
                         extra_cflags=tuple(cxx), extra_cuda_cflags=tuple(nvcc))
    options = BuildOptions(build_dir=tmp_path / "build", env=env_without_gpu(), compiler_launcher="none")
    if refused is None:
        core_plan.check([spec], options)
        return
    with pytest.raises(ConfigError) as caught:
        core_plan.check([spec], options)
    assert caught.value.key == refused
    assert "older than C++20, which torch 2.14.1" in str(caught.value)
    assert not (tmp_path / "build").exists()

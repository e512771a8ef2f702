"""What migrate and doctor say about published projects (#35 items 14, 15, 16): what the build
will say, what the wheel will carry, flags that depend on the machine migrate ran on. Nothing
is compiled: each build here stops before its first compile, or prepares metadata only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pep517_torch.migrate import main
from tests.conftest import count
from tests.cuda_tools import SYSTEM_PATH, make_fake_toolkit
from tests.migrate_helpers import clean_env, project_with, unset_fixture_variables  # noqa: F401

# -- 14. a CUDA-only project against a CPU torch -----------------------------------------------

# flash-attention / apex-style: CUDAExtensions built unconditionally, kernels that use torch's
# CUDA API (no `torch.cuda.is_available()` branch, so migrate sees one shape).
CUDA_ONLY = """
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
setup(name="p", version="1.0", packages=["p"],
      ext_modules=[CUDAExtension("p._C", ["api.cpp", "k.cu"], extra_compile_args={
                       "cxx": ["-O3"], "nvcc": ["-O3", "--use_fast_math"]}),
                   CUDAExtension("p._fused", ["fused.cu"])],
      cmdclass={"build_ext": BuildExtension})
"""
CUDA_ONLY_FILES = {
    "api.cpp": "#include <torch/extension.h>\n",
    "k.cu": "#include <ATen/cuda/CUDAContext.h>\n__global__ void k(float* x) { x[0] = 1; }\n",
    "fused.cu": "#include <c10/cuda/CUDAStream.h>\n__global__ void f(float* x) { x[0] = 2; }\n",
}
SKIPPED = "every extension is skipped, so the wheel would hold none"


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pep517_torch", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("nvcc", ["fake nvcc 13.0", "no nvcc"])
def test_a_cuda_only_project_on_a_cpu_torch_is_said_by_migrate_doctor_and_the_build(
    tmp_path: Path, nvcc: str
) -> None:
    """Before: `migrate --write` exited 0 and doctor printed `ok`; the build then failed with
    "every extension is skipped". Now all three say the build's one line (exit 1)."""
    (tmp_path / "p").mkdir()
    project = project_with(tmp_path / "p", CUDA_ONLY, CUDA_ONLY_FILES)
    bin_dir = Path(sys.executable).parent
    env = clean_env(PATH=f"{bin_dir}:{SYSTEM_PATH}")
    env.pop("CUDA_HOME", None)
    if nvcc != "no nvcc":
        env["CUDA_HOME"] = str(make_fake_toolkit(tmp_path / "cuda"))
    migrated = _cli(["migrate", "--write"], project, env)
    assert migrated.returncode == 1, migrated.stderr
    [warning] = [line for line in migrated.stderr.splitlines() if line.startswith("warning:")]
    assert SKIPPED in warning
    header = "".join(line.removeprefix("#").replace(" ", "") for line in
                     (project / "pyproject.toml").read_text().splitlines() if line.startswith("#"))
    assert warning.split("fails: ", 1)[1].replace(" ", "") in header

    doctor = _cli(["doctor", str(project)], tmp_path, env)
    [line] = [line for line in doctor.stdout.splitlines() if " project p 1.0" in line]
    assert doctor.returncode == 1 and line.startswith("fail "), doctor.stdout
    build = _cli(["wheel", str(project), "-o", str(tmp_path / "dist")], tmp_path, env)
    assert build.returncode != 0 and not (tmp_path / "dist").exists()
    [error] = [line for line in build.stderr.splitlines() if SKIPPED in line]
    # the same words everywhere: the build's error, from the same function
    said = error.removeprefix("pep517_torch: error: ")
    assert warning.endswith(said), (warning, said)
    assert line.endswith(f"a build here fails: {said}"), line
    assert not (project / "build").exists()  # nothing compiled, no build folder
    count("CUDA-only setup.py files migrated and doctored against a CPU torch")

"""`python -m pep517_torch doctor`: the project resolved with the environment doctor runs in, and
the failure a build would hit reported as one, not "ok" (#14 item 9)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.cuda_tools import SYSTEM_PATH, make_fake_toolkit

PYPROJECT = """\
[project]
name = "demo"
version = "1.0"
dynamic = ["dependencies"]

[tool.torch-ext]
packages = ["demo"]

[[tool.torch-ext.extension]]
name = "demo._C"
sources = ["csrc/ops.cpp"]

[tool.torch-ext.extension.cuda]
sources = ["csrc/streams.cu"]

[[tool.torch-ext.extension]]
name = "demo._gpu_only"
sources = ["csrc/ops.cpp"]
if.cuda = true

[[tool.torch-ext.overrides]]
if.env.FORCE_CUDA = "1"
cuda = true
"""


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "p"
    (root / "demo").mkdir(parents=True)
    (root / "demo" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "ops.cpp").write_text("int ops() { return 1; }\n")
    (root / "csrc" / "streams.cu").write_text(textwrap.dedent("""\
        #include <c10/cuda/CUDAStream.h>
        __global__ void k(float* x) { x[0] = 1.0f; }
        """))
    (root / "pyproject.toml").write_text(PYPROJECT)
    cuda_home = make_fake_toolkit(tmp_path / "cuda")  # a fake nvcc 13.0: nothing compiles
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_CUDA", "CUDA_PATH")}
    bin_dir = Path(sys.executable).parent
    return root, {**env, "CUDA_HOME": str(cuda_home), "PATH": f"{bin_dir}:{SYSTEM_PATH}"}


def doctor(root: Path, env: dict[str, str]) -> tuple[int, dict[str, str]]:
    """Exit status and the project line (verdict, text)."""
    result = subprocess.run(
        [sys.executable, "-m", "pep517_torch", "doctor", str(root)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    [line] = [line for line in result.stdout.splitlines() if " project demo " in line]
    verdict, _, text = line.partition(" ")
    return result.returncode, {"verdict": verdict, "text": text.strip(), "all": result.stdout}


def test_doctor_on_a_cpu_torch_lists_why_cuda_is_off(project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    status, line = doctor(root, env)
    assert (status, line["verdict"]) == (0, "ok"), line["all"]
    assert line["text"].endswith(
        "; skipped demo._gpu_only: tool.torch-ext.extension[1].if.cuda = true does not hold"
        " (torch 2.13.0+cpu is a CPU build, so CUDA is off although nvcc 13.0 was found)"
    )
    assert "extensions demo._C;" in line["text"]


def test_doctor_under_force_cuda_reports_the_build_failure(
    project: tuple[Path, dict[str, str]],
) -> None:
    root, env = project
    status, line = doctor(root, {**env, "FORCE_CUDA": "1"})
    assert (status, line["verdict"]) == (1, "fail"), line["all"]
    assert "extensions demo._C, demo._gpu_only;" in line["text"]
    assert line["text"].endswith(
        "a build here fails: "
        f"{root / 'csrc' / 'streams.cu'}:1 includes <c10/cuda/CUDAStream.h>, but torch"
        " 2.13.0+cpu is a CPU build without torch's CUDA headers and libraries (c10_cuda,"
        " torch_cuda). Extension 'demo._C' needs a CUDA build of torch (on Linux x86_64, PyPI's"
        " torch==2.13.0 is one; download.pytorch.org has +cuXYZ builds), or guard those includes"
    )
    assert not (root / "build").exists()  # doctor writes nothing


def test_doctor_reports_an_arch_flag_nvcc_cannot_build(
    project: tuple[Path, dict[str, str]],
) -> None:
    root, env = project
    (root / "csrc" / "streams.cu").write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    text = PYPROJECT.replace(
        'sources = ["csrc/streams.cu"]', 'sources = ["csrc/streams.cu"]\nextra-cuda-cflags = ["-arch=sm_60"]'
    )
    (root / "pyproject.toml").write_text(text)
    status, line = doctor(root, {**env, "FORCE_CUDA": "1"})
    assert (status, line["verdict"]) == (1, "fail"), line["all"]
    assert "a build here fails: tool.torch-ext.extension[0].cuda.extra-cuda-cflags[0]:" in line["text"]


@pytest.mark.parametrize(
    ("change", "key", "fragment"),
    [
        # a module of a package that is not shipped
        (lambda root: (root / "pyproject.toml").write_text(
            PYPROJECT.replace('name = "demo._C"', 'name = "other._C"')),
         "tool.torch-ext.packages", "lives in package 'other', which is not one of the packages"),
        # a shipped .py file of the extension's name
        (lambda root: (root / "demo" / "_C.py").write_text(""),
         "tool.torch-ext.extension[0].name", "are both the module demo._C"),
    ],
)
def test_shipping_problems_are_config_errors_before_any_compile(
    project: tuple[Path, dict[str, str]], change: Any, key: str, fragment: str
) -> None:
    """What the wheel would ship is decided by the config layer: doctor and prepare_metadata
    report these, not only a wheel build after compiling."""
    from pep517_torch.backend import pipeline
    from pep517_torch.errors import ConfigError

    root, env = project
    change(root)
    result = subprocess.run(
        [sys.executable, "-m", "pep517_torch", "doctor", str(root)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    failed = [line for line in result.stdout.splitlines() if line.startswith("fail ")]
    assert result.returncode == 1 and len(failed) == 1, result.stdout
    assert f" {key}: " in failed[0] and fragment in failed[0], failed
    with pytest.raises(ConfigError, match=re.escape(fragment)) as error:
        pipeline.prepare_metadata(root, root.parent / "meta", None)
    assert error.value.key == key
    assert not (root.parent / "meta").exists() and not (root / "build").exists()

"""The issue's own matrix (issue 45), CPU and CUDA cells: `python -m pep517_torch matrix` from
pep517_torch's wheel, uv offline against a local index holding torch 2.13.0+cpu (the cpu
flavour's index) and torch 2.14.1 with its nvidia-* wheels (the 13.0 flavour's: linked where pip
finds them on this disk, never copied or downloaded). uv unpacks the CUDA torch into this
test's own cache once (~6 GB, ~20 s here) and hard-links it into the build and test
environments. lightops carries a CUDA kernel, so the cu130 cell runs nvcc and its wheel holds
the import check of its variant; both cells' tests pass, from outside the project.

Runs in the CUDA-torch tier (sys.executable: torch 2.14.1+cu130).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.cuda_torch.two_torches import CPU_PYTHON, MARKS, light_cuda_project
from tests.installed.uv_index import Unavailable, resolved_index
from tests.installed.venvs import installed_env, own_wheel
from tests.test_matrix_uv import Local, matrix, rows

pytestmark = [*MARKS, pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                                         reason="the local wheels are for Python 3.11")]

TABLE = """
[tool.torch-ext.matrix]
python = ["3.11"]
torch = ["2.13", "2.14"]
cuda = ["cpu", "13.0"]
exclude = [{{ torch = "2.13", cuda = "13.0" }}, {{ torch = "2.14", cuda = "cpu" }}]
test-requires = ["pytest"]
test-command = "pytest {{project}}/tests -q -s -p no:cacheprovider"
torch-index = {{ cpu = "{cpu}", "13.0" = "{cuda}" }}
"""
TEST = """\
import torch, lightops

def test_scale_under_the_cells_torch():
    print("where:", torch.__version__, lightops.__file__)
    assert torch.ops.lightops.scale(torch.ones(2), 2.0).tolist() == [2.0, 2.0]
"""


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Local:
    base = tmp_path_factory.mktemp("matrix-cuda")
    try:
        resolved_index(base / "simple", ["torch==2.14.1", "pytest"], skip=("torch",))
        resolved_index(base / "simple-cpu", ["torch==2.13.0"], only=("torch",))
        resolved_index(base / "simple-cu130", ["torch==2.14.1"])
    except Unavailable as why:
        pytest.skip(str(why))
    if not list((base / "simple-cpu").glob("torch/index.html")):
        pytest.skip("no torch 2.13.0 among pip's local sources")
    assert CPU_PYTHON is not None  # the caller's own torch is no cell's: the CPU venv serves
    python = installed_env(base / "venv", own_wheel(base / "own"), CPU_PYTHON)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("UV_", "PIP_", "PEP517_TORCH_")) and key not in (
               "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(UV_CACHE_DIR=str(base / "uv-cache"), UV_OFFLINE="1", UV_PYTHON_DOWNLOADS="never",
               UV_DEFAULT_INDEX=(base / "simple").as_uri(), XDG_CONFIG_HOME=str(base / "config"),
               XDG_CONFIG_DIRS=str(base / "config"), PEP517_TORCH_CACHE_DIR=str(base / "cache"),
               CUDA_VISIBLE_DEVICES="")
    return Local(python, base / "simple-cpu", env, base)


def test_the_issues_matrix_cpu_and_cuda_cells(local: Local, tmp_path: Path) -> None:
    root = light_cuda_project(tmp_path / "lightops", 'local-version = "torch"')
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text + TABLE.format(
        cpu=local.cpu_index.as_uri(), cuda=(local.base / "simple-cu130").as_uri()))
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / "test_scale.py").write_text(TEST)
    done = matrix(local, root, "-o", tmp_path / "wheelhouse", "-Cpch=false",
                  "-Ccuda-arch-list=9.0", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    print(done.stdout[done.stdout.rindex("\ncell "):])  # the run's time per cell, for the record
    table = rows(done.stdout)
    cpu, cuda = table["cp311-torch2.13-cpu"], table["cp311-torch2.14-cu130"]
    assert cpu[1:3] == ["2.13.0+cpu", "-"] and cpu[5] == "passed"
    assert cuda[1:3] == ["2.14.1+cu130", "13.0"] and cuda[5] == "passed"
    wheels = sorted(p.name for p in (tmp_path / "wheelhouse").glob("*.whl"))
    assert [re.sub(r"-cp.*", "", w) for w in wheels] == ["lightops-0.3.0+pt213cpu",
                                                         "lightops-0.3.0+pt214cu130"]
    for variant in ("2.13.0+cpu", "2.14.1+cu130"):
        page = (tmp_path / "wheelhouse" / f"torch-{variant}.html").read_text()
        assert page.count(".whl#sha256=") == 1
    envs = local.base / "cache" / "matrix-envs"
    seen = re.findall(r"^where: (\S+) (\S+)$", done.stdout, re.M)
    assert [torch for torch, _ in seen] == ["2.13.0+cpu", "2.14.1+cu130"]
    assert all(Path(module).is_relative_to(envs) for _, module in seen), seen

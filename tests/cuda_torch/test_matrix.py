"""docs/publishing.md's matrix, run as written (#21): from one checkout, torch 2.13.0+cpu and
torch 2.14.1+cu130 each build a wheel (`wheel --python A --python B`), `index` writes one
find-links page per variant, and in each environment `pip install -f <its page>` installs its
wheel, leaves torch alone, and the op computes. The CUDA wheel links c10_cuda (a tiny kernel in
the extension's `cuda` table), so its import check compares the CUDA variant, for real. And the
same matrix from pep517_torch as users install it (#34): its own wheel in a fresh venv.

Runs in the CUDA-torch tier: sys.executable has torch 2.14.1+cu130, PEP517_TORCH_CPU_PYTHON
names an interpreter with torch 2.13.0+cpu. Each environment pip installs into is a light venv
that sees that torch through a .pth file (torch itself is never installed or changed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from pep517_torch.core.postlink import guard_patch
from tests.conftest import ROOT
from tests.cuda_torch.two_torches import CPU_PYTHON, MARKS, TORCH, light_cuda_project
from tests.installed.venvs import installed_env, own_wheel
from tests.tiny_project import write_project

PAGE = ROOT / "docs" / "publishing.md"

pytestmark = MARKS


def section_commands() -> list[str]:
    """The sh blocks of `## A torch × CUDA matrix`, in order."""
    section = PAGE.read_text().split("## A torch × CUDA matrix", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```sh\n(.*?)^```", section, re.M | re.S)


def light_env(base: Path, python: str) -> Path:
    """A venv whose site-packages sees ``python``'s (its torch) through a .pth file."""
    site = subprocess.run([python, "-c", "import torch, os; print(os.path.dirname("
                           "os.path.dirname(torch.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", base], check=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(base)}))
    (purelib / "torch_from.pth").write_text(site + "\n")
    return base / "bin" / "python"


def test_publishing_matrix_runs_as_written(tmp_path: Path) -> None:
    light_cuda_project(tmp_path / "lightops", 'local-version = "torch"')  # the page builds it
    assert CPU_PYTHON is not None
    cpu_env = light_env(tmp_path / "cpu-env", CPU_PYTHON)
    cuda_env = light_env(tmp_path / "cuda-env", sys.executable)
    pip_cpu, pip_cuda = (f"{sys.executable} -m pip --python {env}" for env in (cpu_env, cuda_env))
    script = "\n".join(section_commands())
    # The page's environments: builds run with the real interpreters, installs go into the
    # light venvs (pip from this interpreter, `--python` pointing at them).
    script = script.replace('"$CPU_PYTHON" -m pip', pip_cpu).replace('"$CUDA_PYTHON" -m pip',
                                                                    pip_cuda)
    script = script.replace('"$CUDA_PYTHON" -c', f"{cuda_env} -c")
    env = {**os.environ, "CPU_PYTHON": CPU_PYTHON, "CUDA_PYTHON": sys.executable,
           "PIP_CONFIG_FILE": os.devnull, "PYTHONPATH": str(ROOT)}
    env.pop("PIP_FIND_LINKS", None)
    done = subprocess.run(["bash", "-ec", script.replace("python -m pep517_torch",
                                                         f"{sys.executable} -m pep517_torch")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    wheelhouse = tmp_path / "wheelhouse"
    wheels = sorted(p.name for p in wheelhouse.glob("*.whl"))
    assert [re.sub(r"-cp.*", "", w) for w in wheels] == [
        "lightops-0.3.0+pt213cpu", "lightops-0.3.0+pt214cu130"]
    table = done.stdout[done.stdout.index("interpreter"):]
    assert "2.13.0+cpu" in table and "2.14.1+cu130" in table and "13.0" in table
    for variant, label in (("2.13.0+cpu", "pt213cpu"), ("2.14.1+cu130", "pt214cu130")):
        page = (wheelhouse / f"torch-{variant}.html").read_text()
        assert label in page and page.count(".whl#sha256=") == 1
    assert "tensor([3., 3.])" in done.stdout
    for env_python, label, torch_version in ((cpu_env, "pt213cpu", "2.13.0+cpu"),
                                             (cuda_env, "pt214cu130", TORCH.version)):
        check = subprocess.run(
            [env_python, "-c", "import importlib.metadata as m, torch, lightops;"
             " print(m.version('lightops'), torch.__version__,"
             " torch.ops.lightops.scale(torch.ones(2), 2.0).tolist())"],
            capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert check.stdout.split() == [f"0.3.0+{label}", torch_version, "[2.0,", "2.0]"], (
            check.stderr)
    for label, checked in (("pt214cu130", True), ("pt213cpu", False)):
        with zipfile.ZipFile(next(wheelhouse.glob(f"*{label}*.whl"))) as archive:
            (module,) = [n for n in archive.namelist() if n.startswith("lightops/_C")]
            assert module.endswith(".so")  # never a .py in front of it
            # CUDA code carries the check of its variant inside; CPU code: the pin is enough
            assert (guard_patch.MAGIC in archive.read(module)) is checked, label


def test_an_installed_matrix_builds_each_wheel_with_its_own_torch(tmp_path: Path) -> None:
    """pep517_torch's own wheel installed (not editable) beside torch 2.13.0+cpu, run from
    outside the checkout: `--python` that venv and one seeing torch 2.14.1+cu130 give a
    `+pt213cpu` and a `+pt214cu130` wheel, each recording its own torch and computing there; a
    venv without torch and an interpreter named twice are refused first, one line each."""
    assert CPU_PYTHON is not None
    caller = installed_env(tmp_path / "cpu", own_wheel(tmp_path / "own"), CPU_PYTHON)
    other = light_env(tmp_path / "cuda-env", sys.executable)
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    root = write_project(tmp_path / "proj", "tinyops")
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(
        text.replace("[tool.torch-ext]\n", '[tool.torch-ext]\nlocal-version = "torch"\n', 1))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    refused = subprocess.run(
        [caller, "-m", "pep517_torch", "wheel", root, "--python", caller, "--python",
         bare / "bin" / "python", "--python", other, "--python", other],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout + refused.stderr
    assert refused.stderr.splitlines() == [
        f"pep517_torch: error: --python: {bare / 'bin' / 'python'}: torch is not installed there"
        f" ({bare / 'bin' / 'python'} -m pip install torch)",
        f"pep517_torch: error: --python: {other}: Python 3.{sys.version_info[1]} with torch"
        f" {TORCH.version} again ({other} has them): it would build the same wheel",
    ]
    assert not (root / "build").exists()
    done = subprocess.run(
        [caller, "-m", "pep517_torch", "wheel", root, "--python", caller, "--python", other,
         "-o", tmp_path / "wheelhouse"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    wheels = sorted((tmp_path / "wheelhouse").glob("*.whl"))
    assert [re.sub(r"-cp.*", "", w.name) for w in wheels] == ["tinyops-1.0+pt213cpu",
                                                               "tinyops-1.0+pt214cu130"]
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[-2:]}
    assert rows[str(caller)][1:4] == ["2.13.0+cpu", "-", wheels[0].name]
    assert rows[str(other)][1:4] == [TORCH.version, TORCH.cuda, wheels[1].name]
    for wheel, python, torch_version, torch_cuda in (
            (wheels[0], caller, "2.13.0+cpu", None), (wheels[1], other, TORCH.version, TORCH.cuda)):
        with zipfile.ZipFile(wheel) as archive:
            (record,) = [n for n in archive.namelist() if n.endswith(".dist-info/pep517_torch.json")]
            built = json.loads(archive.read(record))
        assert (built["torch"], built["torch_cuda"]) == (torch_version, torch_cuda)
        site = tmp_path / f"site-{torch_version}"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                        "--target", site, wheel], check=True, capture_output=True, timeout=300)
        computed = subprocess.run(
            [python, "-c", "import torch, tinyops; print(torch.__version__, tinyops.value())"],
            capture_output=True, text=True, cwd=tmp_path, timeout=300,
            env={**env, "PYTHONPATH": str(site)})
        assert computed.stdout.split() == [torch_version, "0"], computed.stderr

"""The two-torch matrix as wheel variants (issue #38, done-when): `wheel --python A --python B`
with `variant = "torch"` writes one variant wheel per torch (torch 2.13.0+cpu: `pt213cpu`;
torch 2.14.1+cu130: `pt214cu130`, its properties naming CUDA 13.0 and the archs its fatbin
holds), `variantlib analyze-wheel` accepts both, `index` writes the `-variants.json`, and uv
0.13's preview, under each torch, does what docs/publishing.md says: with only these variants,
nothing (it implements no `abi_dependency` provider); with a plain wheel beside them, that one.

Runs in the CUDA-torch tier: sys.executable has torch 2.14.1+cu130, PEP517_TORCH_CPU_PYTHON
names an interpreter with torch 2.13.0+cpu. The CUDA wheel's kernel is one `<cuda_runtime.h>`
file; the operators use `<torch/library.h>`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from pep517_torch.abi.fatbin import read_device_code
from tests.conftest import ROOT
from tests.cuda_torch.two_torches import CPU_PYTHON, MARKS, light_cuda_project

VARIANTLIB = Path(sys.executable).parent / "variantlib"

pytestmark = MARKS


def uv() -> str:
    import uv as uv_package

    return uv_package.find_uv_bin()


def env_for(base: Path, python: str) -> Path:
    """A venv whose site-packages sees ``python``'s (its torch) through a .pth file."""
    site = subprocess.run([python, "-c", "import torch, os; print(os.path.dirname("
                           "os.path.dirname(torch.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([uv(), "venv", "-q", "--python", python, str(base)], check=True)
    version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (base / "lib" / f"python{version}" / "site-packages" / "torch_from.pth").write_text(site + "\n")
    return base / "bin" / "python"


def uv_install(python: Path, folder: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [uv(), "pip", "install", "-v", "--python", str(python), "--preview-features",
         "wheel-variants", "--offline", "--no-index", "--find-links", str(folder), "--no-deps",
         "lightops"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "UV_CACHE_DIR": str(cache), "CUDA_VISIBLE_DEVICES": ""})


def test_two_torch_variant_matrix(tmp_path: Path) -> None:
    project = light_cuda_project(tmp_path / "lightops", 'variant = "torch"')
    wheelhouse = tmp_path / "wheelhouse"
    assert CPU_PYTHON is not None
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-m", "pep517_torch", "wheel", str(project), "--python", CPU_PYTHON,
         "--python", sys.executable, "-o", str(wheelhouse), "-Cpch=false",
         "-Ccuda-arch-list=9.0+PTX"],
        capture_output=True, text=True, env=env, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    wheels = sorted(p.name for p in wheelhouse.glob("*.whl"))
    assert [re.sub(r"-cp\d+-cp\d+-[a-z0-9_]+-", "-TAG-", w) for w in wheels] == [
        "lightops-0.3.0-TAG-pt213cpu.whl", "lightops-0.3.0-TAG-pt214cu130.whl"], wheels
    assert "device code of lightops._C: sm_90 " in done.stdout  # the CUDA build's summary
    table = done.stdout[done.stdout.index("interpreter"):]
    assert wheels[0] in table and wheels[1] in table
    documents = {}
    for name in wheels:
        checked = subprocess.run([str(VARIANTLIB), "analyze-wheel", "-i", str(wheelhouse / name)],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
        with zipfile.ZipFile(wheelhouse / name) as archive:
            (member,) = [n for n in archive.namelist() if n.endswith(".dist-info/variant.json")]
            documents[name] = json.loads(archive.read(member))
            so = [n for n in archive.namelist() if n.endswith(".so")]
            if "cu130" in name:  # what variant.json says is what the library holds
                unpacked = tmp_path / "unpacked"
                archive.extractall(unpacked)
                code = read_device_code(unpacked / so[0])
                assert code.cubin_archs == ("90",) and code.ptx_archs == ("90",)
        lines = [line for line in checked.stdout.splitlines() if " :: " in line]
        if "cu130" in name:
            assert lines == ["abi_dependency :: torch :: 2.14",
                             "nvidia :: cuda_version_lower_bound :: 13.0",
                             "nvidia :: sm_arch :: 90_real", "nvidia :: sm_arch :: 90_virtual"]
        else:
            assert lines == ["abi_dependency :: torch :: 2.13"]
    indexed = subprocess.run([sys.executable, "-m", "pep517_torch", "index", str(wheelhouse)],
                             capture_output=True, text=True, env=env)
    assert indexed.returncode == 0, indexed.stderr
    merged = json.loads((wheelhouse / "lightops-0.3.0-variants.json").read_text())
    assert set(merged["variants"]) == {"pt213cpu", "pt214cu130"}
    assert "pip skips variant wheels and finds no plain wheel of lightops 0.3.0" in indexed.stdout
    # uv, under each torch: no variant it can select (abi_dependency is not implemented)...
    envs = {"cpu": env_for(tmp_path / "cpu-env", CPU_PYTHON),
            "cuda": env_for(tmp_path / "cuda-env", sys.executable)}
    for python in envs.values():
        tried = uv_install(python, wheelhouse, tmp_path / "uv-cache")
        assert tried.returncode != 0
        assert "lightops==0.3.0 has only unsupported wheel variants" in tried.stderr, tried.stderr
    # ... and with a plain wheel (the CPU torch's, -Cvariant=none) beside them, that one
    plain = subprocess.run(
        [CPU_PYTHON, "-m", "pep517_torch", "wheel", str(project), "-o", str(wheelhouse),
         "-Cpch=false", "-Cvariant=none"],
        capture_output=True, text=True, env=env, timeout=1800)
    assert plain.returncode == 0, plain.stdout[-3000:] + plain.stderr[-3000:]
    (plain_wheel,) = [p.name for p in wheelhouse.glob("*.whl") if p.name.endswith("_64.whl")]
    tried = uv_install(envs["cpu"], wheelhouse, tmp_path / "uv-cache")
    assert tried.returncode == 0, tried.stderr
    assert f"({plain_wheel})" in tried.stderr
    check = subprocess.run([str(envs["cpu"]), "-c", "import torch, lightops; print("
                            "torch.__version__, torch.ops.lightops.scale(torch.ones(2), 2.0).tolist())"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert check.stdout.split() == ["2.13.0+cpu", "[2.0,", "2.0]"], check.stderr
    # under torch 2.14 the plain wheel (built for 2.13) is what uv picks too: its pin refuses
    tried = uv_install(envs["cuda"], wheelhouse, tmp_path / "uv-cache")
    assert f"({plain_wheel})" in tried.stderr

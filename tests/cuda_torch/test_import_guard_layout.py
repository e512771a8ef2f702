"""The import check inside the library, on op libraries laid out as published graph-learning
packages lay them out (fixtures/findspec_ops: ``_version_cpu``/``_version_cuda``,
``_ops_cpu``/``_ops_cuda`` modules found with ``PathFinder().find_spec(...)`` and loaded with
``torch.ops.load_library(spec.origin)``), built with the defaults against torch 2.14.1+cu130.

Issue 35 item 1: the check once turned each CUDA module into a ``.py`` shim, whose ``.origin``
torch.ops.load_library could not load. Now every file keeps its name and its origin, the CUDA
ones carry the check inside, the package imports and computes under the CUDA torch, and under
torch 2.13.0+cpu (``PEP517_TORCH_CPU_PYTHON``) it fails naming both torches: never
``undefined symbol``, never ``cannot open shared object file``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from pep517_torch.core.postlink import guard_patch
from pep517_torch.core.toolchain import tools as toolchain
from tests.conftest import FIXTURES
from tests.cuda_tools import require_cuda_torch

TORCH, TOOLKIT = require_cuda_torch()
CPU_PYTHON = os.environ.get("PEP517_TORCH_CPU_PYTHON", "")

pytestmark = [pytest.mark.cuda, pytest.mark.compile, pytest.mark.timeout(2700)]
needs_cpu_python = pytest.mark.skipif(not (CPU_PYTHON and Path(CPU_PYTHON).exists()),
                                      reason="needs PEP517_TORCH_CPU_PYTHON (the torch 2.13.0 interpreter)")

COMPUTE = """
import importlib.machinery, os.path as osp, torch, findspec_ops
here = osp.dirname(findspec_ops.__file__)
origins = [importlib.machinery.PathFinder().find_spec(n, [here]).origin
           for n in ("_version_cpu", "_version_cuda", "_ops_cpu", "_ops_cuda")]
print(all(o.endswith(".so") for o in origins), sorted(osp.basename(p) for p in torch.ops.loaded_libraries)
      == sorted(osp.basename(o) for o in origins if "_cuda" in o))
print(findspec_ops.cuda_version, findspec_ops.scale(torch.arange(4.0), 1.5).tolist())
print(torch._C._dispatch_has_kernel_for_dispatch_key("findspec_ops::scale", "CUDA"))
if torch.cuda.is_available():
    y = torch.randn(1 << 16, device="cuda")
    print(torch.equal(findspec_ops.scale(y, 3.0), y * 3.0))
"""


@dataclass(frozen=True)
class Built:
    wheel: Path
    site: Path
    log: str


def build(python: str, root: Path, *settings: str) -> Built:
    project = root / "findspec_ops"
    shutil.copytree(FIXTURES / "findspec_ops", project, ignore=shutil.ignore_patterns("build", "dist"))
    result = subprocess.run([python, "-m", "pep517_torch", "wheel", str(project), "-o", str(root / "dist"),
                             *settings], capture_output=True, text=True, timeout=2400)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-6000:]
    (wheel,) = (root / "dist").glob("findspec_ops-1.0.0-*.whl")
    zipfile.ZipFile(wheel).extractall(root / "site")
    return Built(wheel, root / "site", log)


def run(python: str, site: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(site)}, cwd=site)


@pytest.fixture(scope="module")
def cuda_built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(sys.executable, tmp_path_factory.mktemp("findspec-cuda"))  # the defaults


def carries_the_check(library: Path) -> bool:
    return guard_patch.MAGIC in library.read_bytes()


def test_every_library_keeps_its_name_and_the_cuda_ones_carry_the_check(cuda_built: Built) -> None:
    package = cuda_built.site / "findspec_ops"
    names = sorted(p.name for p in package.iterdir() if p.name != "__pycache__")
    stems = ["_ops_cpu", "_ops_cuda", "_version_cpu", "_version_cuda"]
    assert [n.split(".")[0] for n in names] == ["__init__", *stems]
    assert all(n.endswith(".so") for n in names if n != "__init__.py")  # no .py beside them
    for library in package.glob("*.so"):
        needed = subprocess.run(["readelf", "-dW", library], capture_output=True, text=True).stdout
        if "_cuda" in library.name:
            assert carries_the_check(library), library
            # torch's CUDA libraries come with libtorch.so: none is NEEDED of its own
            assert "libtorch.so" in needed and "libc10_cuda" not in needed and "libcudart" not in needed
        else:
            assert not carries_the_check(library), library  # "auto": no CUDA, the pin says it all
    record = zipfile.ZipFile(cuda_built.wheel).read("findspec_ops-1.0.0.dist-info/pep517_torch.json")
    built_for = json.loads(record)
    ops = built_for.pop("ops")  # the libraries' ops, listed under this CUDA torch
    assert built_for == {"cuda": "13", "torch": TORCH.version, "torch_cuda": TORCH.cuda}
    assert ops["torch"] == TORCH.version
    assert {op["name"] for op in ops["ops"]} == {"findspec_ops::scale", "findspec_ops_version::cuda_version"}
    # each _cuda variant defines its _cpu twin's namespace again: the package loads one of the
    # two, and so does the listing (the first), saying so of the other
    assert [problem.split(" ", 1)[0] for problem in ops["problems"]] == [
        "findspec_ops._version_cuda", "findspec_ops._ops_cuda"]
    assert all("not loaded beside the artifacts before it" in p for p in ops["problems"])


def test_the_package_finds_loads_and_computes_under_the_cuda_torch(cuda_built: Built) -> None:
    result = run(sys.executable, cuda_built.site, COMPUTE)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "True True"  # find_spec's origins are the libraries; the _cuda ones loaded
    version, scaled = lines[1].split(" ", 1)
    assert version.startswith(TORCH.cuda.split(".")[0]) and scaled == "[0.0, 1.5, 3.0, 4.5]"
    assert lines[2] == "True"  # the CUDA kernel registered
    assert lines[3:] in ([], ["True"])


@needs_cpu_python
def test_under_a_cpu_torch_of_another_release_one_line_names_both(cuda_built: Built) -> None:
    cpu_torch = run(CPU_PYTHON, cuda_built.site, "import torch; print(torch.__version__)").stdout.strip()
    result = run(CPU_PYTHON, cuda_built.site, "import findspec_ops")
    assert result.returncode == 1
    said = [line for line in result.stderr.splitlines() if line and not line.startswith((" ", "Traceback"))]
    assert said[0] == (
        f"ImportError: findspec_ops._version_cuda was built against torch {TORCH.version}, but torch"
        f" {cpu_torch} is installed. Install a build of this package made for your torch (or build it"
        " from source with `--no-build-isolation`), or install the torch it was built for:"
        f" `pip install torch=={TORCH.version.split('+')[0]}`.")
    # torch.ops.load_library wraps whatever ctypes raises (CPython: a SystemError around ours)
    assert said[-1].startswith("OSError: Could not load this library: ")
    assert "undefined symbol" not in result.stderr and "cannot open shared object" not in result.stderr


@needs_cpu_python
def test_built_against_2_13_imported_under_2_14_one_line(tmp_path: Path) -> None:
    built = build(CPU_PYTHON, tmp_path, "-Ctorch-import-check=true")
    assert "skipping extension findspec_ops._ops_cuda" in built.log  # no CUDA under that torch
    assert all(carries_the_check(p) for p in (built.site / "findspec_ops").glob("*.so"))
    cpu_torch = run(CPU_PYTHON, built.site, "import torch, findspec_ops as f; print(torch.__version__,"
                    " f.scale(torch.ones(2), 2.0).tolist())")
    assert cpu_torch.returncode == 0 and cpu_torch.stdout.split(" ", 1)[1] == "[2.0, 2.0]\n", cpu_torch.stderr
    result = run(sys.executable, built.site, "import findspec_ops")
    assert result.returncode == 1
    built_torch = cpu_torch.stdout.split()[0]
    assert (f"ImportError: findspec_ops._version_cpu was built against torch {built_torch}, but torch"
            f" {TORCH.version} is installed.") in result.stderr
    assert "undefined symbol" not in result.stderr


def test_a_patched_library_still_says_what_it_links(cuda_built: Built) -> None:
    """What the platform tag and auditwheel read: the libraries it keeps, the symbols it needs
    (torch's now weak, read by the stable-ABI audit), as toolchain readers see them."""
    library = next((cuda_built.site / "findspec_ops").glob("_ops_cuda*.so"))
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", library], capture_output=True, text=True).stdout
    weak = [line.split()[-1] for line in symbols.splitlines() if " WEAK " in line and " UND " in line]
    assert any("getCurrentCUDAStream" in name for name in weak), weak
    assert any(name.startswith(("cuda", "__cuda")) for name in weak), weak  # the CUDA runtime
    assert toolchain.find_torch().version == TORCH.version

"""Wheel variants (PEP 825) and size budgets, with the real tools (issue #38).

One small operator project (fixtures/light: `<torch/library.h>` and `<ATen/core/Tensor.h>`, plus
a `<cuda_runtime.h>`-only kernel in its `cuda` table) is built three times under torch 2.13.0+cpu:
`-Cvariant=torch` without and with CUDA (nvcc 13 builds the kernel; no GPU needed), and once
plain. fixtures/stable (the stable ABI) is built with CUDA as a variant and without as a plain
wheel. Then what the issue asks, each by its real tool:

- `variantlib analyze-wheel` (variantlib 0.2, a test extra) accepts every variant wheel;
- `index` writes `<name>-<version>-variants.json` equal to `variantlib generate-index-json`'s;
- uv 0.13's preview (`--preview-features wheel-variants`, offline, `--find-links`) installs what
  it can select here, and we say exactly what: a torch-bound variant never (uv skips the
  `abi_dependency` provider, so such a variant is "unsupported"): the plain wheel when there is
  one; a stable-ABI CUDA variant when the NVIDIA provider sees a driver and GPU that fit
  (simulated with its `NV_VARIANT_PROVIDER_FORCE_*` variables: this machine has no GPU);
- plain pip skips variant wheels.

The two-torch matrix (2.13.0+cpu and 2.14.1+cu130) is tests/cuda_torch/test_variant_matrix.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.cuda import toolkit as cuda
from pep517_torch.distribution.wheel_variant import variant_wheel_name
from tests.commands import run, run_cli
from tests.conftest import FIXTURES

TORCH = toolchain.find_torch()
TOOLKIT = cuda.find_cuda(os.environ)
BIN = Path(sys.executable).parent
VARIANTLIB = BIN / "variantlib"  # the test extra's console script
RELEASE = ".".join(TORCH.version.split("+")[0].split(".")[:2])  # "2.13"
PT = "pt" + RELEASE.replace(".", "")  # "pt213"

pytestmark = [
    pytest.mark.skipif(TOOLKIT is None, reason="needs nvcc (the CUDA variants' kernels)"),
    pytest.mark.compile,
    pytest.mark.cuda,
]

KERNEL = """\
#include <cuda_runtime.h>
__global__ void lightops_touch(float* x) { x[threadIdx.x] += 0.0f; }
extern "C" int lightops_cuda_ready() { return cudaGetDeviceCount(nullptr) == cudaSuccess; }
"""
UV_VARIANTS = ("--preview-features", "wheel-variants", "--offline", "--no-index")
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


def uv() -> str:
    import uv as uv_package  # the test extra (uv 0.13: the wheel-variants preview)

    return uv_package.find_uv_bin()


def built(out: Path, label: str | None, name: str = "lightops") -> Path:
    """The one wheel of ``name`` in ``out`` with this variant label (None: the plain one)."""
    found = [p for p in out.glob(f"{name}-*.whl")
             if (variant_wheel_name(p.name) or (p.name, None))[1] == label]
    assert len(found) == 1, (label, sorted(p.name for p in out.iterdir()))
    return found[0]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every wheel this module checks, by role; the folders hold nothing else."""
    base = tmp_path_factory.mktemp("variants")
    light = base / "lightops"
    shutil.copytree(FIXTURES / "light", light, ignore=shutil.ignore_patterns("build", "dist"))
    (light / "csrc" / "cuda").mkdir()
    (light / "csrc" / "cuda" / "touch.cu").write_text(KERNEL)
    with (light / "pyproject.toml").open("a") as text:
        text.write('\n[tool.torch-ext.extension.cuda]\nsources = ["csrc/cuda/*.cu"]\n')
    stable = base / "stableops"
    shutil.copytree(FIXTURES / "stable", stable, ignore=shutil.ignore_patterns("build", "dist"))
    out, stable_out = base / "wheelhouse", base / "stablehouse"
    common = ["-Cpch=false", "-Ccuda-arch-list=8.0;9.0+PTX"]
    for project, target, settings in (
        (light, out, ["-Cvariant=torch", "-Ccuda=false"]),
        (light, out, ["-Cvariant=torch", "-Ccuda=true"]),
        (light, out, ["-Ccuda=false"]),
        (stable, stable_out, ["-Cvariant=torch", "-Ccuda=true"]),
        (stable, stable_out, ["-Cvariant=torch", "-Ccuda=false"]),
    ):
        done = run_cli("wheel", project, "-o", target, *common, *settings, env=NO_GPU, timeout=1200)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        (target / f"build-{len(list(target.glob('*.whl')))}.log").write_text(done.stdout)
    return {
        "cpu": built(out, f"{PT}cpu"), "cuda": built(out, f"{PT}cu130"), "plain": built(out, None),
        "stable_cuda": built(stable_out, "cu130", "stableops"),
        "stable_plain": built(stable_out, None, "stableops"),
        "light": light, "stable": stable,
    }


def variant_json(wheel: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/variant.json")]
        return json.loads(archive.read(name))


# -------------------------------------------------------------------- what the wheels say


def test_labels_and_properties_come_from_the_build(wheels: dict[str, Path]) -> None:
    assert wheels["cpu"].name.endswith(f"-linux_x86_64-{PT}cpu.whl") or re.search(
        rf"-manylinux_\d+_\d+_x86_64-{PT}cpu\.whl$", wheels["cpu"].name)
    cpu, gpu = variant_json(wheels["cpu"]), variant_json(wheels["cuda"])
    assert cpu["variants"] == {f"{PT}cpu": {"abi_dependency": {"torch": [RELEASE]}}}
    assert gpu["variants"] == {f"{PT}cu130": {
        "abi_dependency": {"torch": [RELEASE]},
        # the arch list asked for 8.0 and 9.0+PTX; these are read from the library's fatbin
        "nvidia": {"cuda_version_lower_bound": ["13.0"],
                   "sm_arch": ["80_real", "90_real", "90_virtual"]},
    }}
    for document in (cpu, gpu):  # one namespace list and provider table: the wheels merge
        assert document["$schema"] == "https://variants-schema.wheelnext.dev/v0.2.0.json"
        assert document["default-priorities"] == {"namespace": ["abi_dependency", "nvidia"]}
        assert document["providers"]["abi_dependency"] == {"builtin": "abi_dependency"}
        assert document["providers"]["nvidia"]["plugin-api"] == (
            "nvidia_variant_provider.plugin:NvidiaVariantPlugin")
    stable = variant_json(wheels["stable_cuda"])
    assert stable["variants"] == {"cu130": {"nvidia": {  # the stable ABI: no torch property
        "cuda_version_lower_bound": ["13.0"], "sm_arch": ["80_real", "90_real", "90_virtual"]}}}
    with zipfile.ZipFile(wheels["stable_plain"]) as archive:  # no device code: one plain wheel
        assert not [n for n in archive.namelist() if n.endswith("variant.json")]
    log = "".join(p.read_text() for p in wheels["cpu"].parent.glob("build-*.log"))
    assert (f"wheel variant {PT}cu130: abi_dependency :: torch :: {RELEASE}, nvidia ::"
            " cuda_version_lower_bound :: 13.0, nvidia :: sm_arch :: 80_real") in log
    assert re.search(r"device code of lightops\._C: sm_80 [\d.]+ KiB, sm_90 [\d.]+ KiB, PTX"
                     r" compute_90 ", log), log


def test_variantlib_accepts_every_variant_wheel(wheels: dict[str, Path]) -> None:
    for role in ("cpu", "cuda", "stable_cuda"):
        done = run(VARIANTLIB, "analyze-wheel", "-i", wheels[role])
        said = [line for line in done.stdout.splitlines() if " :: " in line]
        assert said == [line for prop in sorted(variant_json(wheels[role])["variants"].items())
                        for ns, features in sorted(prop[1].items())
                        for feature, values in sorted(features.items())
                        for line in (f"{ns} :: {feature} :: {v}" for v in values)], done.stdout
        label = variant_wheel_name(wheels[role].name)[1]  # type: ignore[index]
        assert f"Variant: `{label}`" in done.stdout


def test_index_writes_what_variantlib_writes(wheels: dict[str, Path], tmp_path: Path) -> None:
    folder = wheels["cpu"].parent
    done = run_cli("index", folder)
    assert done.returncode == 0, done.stderr
    ours = (folder / f"lightops-0.3.0-variants.json").read_text()
    theirs_dir = tmp_path / "theirs"
    theirs_dir.mkdir()
    for role in ("cpu", "cuda"):
        shutil.copy2(wheels[role], theirs_dir)
    run(VARIANTLIB, "generate-index-json", "-d", theirs_dir)
    assert ours == (theirs_dir / "lightops-0.3.0-variants.json").read_text()
    assert set(json.loads(ours)["variants"]) == {f"{PT}cpu", f"{PT}cu130"}
    assert (folder / "index.html").is_file()  # the pages stay
    assert (f"pep517_torch: lightops-0.3.0-variants.json: pip skips variant wheels; for lightops"
            f" 0.3.0 it installs a plain one: {wheels['plain'].name}") in done.stdout


# ---------------------------------------------------------------- what installers do with them


def light_env(base: Path) -> Path:
    """A venv that sees this interpreter's torch through a .pth file."""
    run(uv(), "venv", "-q", "--python", sys.executable, base)
    site = Path(TORCH.root).parent
    (base / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
     / "torch_from.pth").write_text(f"{site}\n")
    return base / "bin" / "python"


def uv_selects(python: Path, folder: Path, name: str, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    return run(uv(), "pip", "install", "-v", "--dry-run", "--python", python, *UV_VARIANTS,
               "--find-links", folder, "--no-deps", name,
               env={"UV_CACHE_DIR": str(folder.parent / "uv-cache"), **NO_GPU, **(env or {})},
               check=False)


def selected(done: subprocess.CompletedProcess[str]) -> str | None:
    found = re.findall(r"Selecting: \S+ \[compatible\] \((\S+\.whl)\)", done.stderr)
    return found[-1] if found else None


def test_uv_preview_here(wheels: dict[str, Path], tmp_path: Path) -> None:
    python = light_env(tmp_path / "env")
    only_variants = tmp_path / "only-variants"
    only_variants.mkdir()
    for role in ("cpu", "cuda"):
        shutil.copy2(wheels[role], only_variants)
    assert run_cli("index", only_variants).returncode == 0
    done = uv_selects(python, only_variants, "lightops")
    # uv 0.13 implements no abi_dependency provider: both torch-bound variants are unsupported
    assert done.returncode != 0
    assert "lightops==0.3.0 has only unsupported wheel variants" in done.stderr, done.stderr
    assert ("Skipping unsupported wheel variant provider `abi_dependency` for namespace"
            " `abi_dependency`") in done.stderr
    # with a plain wheel beside them, that is what uv installs, for real, and it computes
    folder = wheels["cpu"].parent
    assert selected(uv_selects(python, folder, "lightops")) == wheels["plain"].name
    run(uv(), "pip", "install", "--python", python, *UV_VARIANTS, "--find-links", folder,
        "--no-deps", "lightops", env={"UV_CACHE_DIR": str(tmp_path / "uv-cache")})
    check = run(python, "-c", "import torch, lightops; print(torch.ops.lightops.scale("
                "torch.ones(2), 2.0).tolist())", cwd=tmp_path)
    assert check.stdout.split() == ["[2.0,", "2.0]"]
    # a stable-ABI CUDA variant is selected by GPU: none here, so the plain wheel; a driver for
    # CUDA 13.0 and an sm_90 GPU (as uv's NVIDIA provider would see an H200): the variant
    stable = wheels["stable_cuda"].parent
    assert run_cli("index", stable).returncode == 0
    assert selected(uv_selects(python, stable, "stableops")) == wheels["stable_plain"].name
    h200 = {"NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0",
            "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "9.0"}
    assert selected(uv_selects(python, stable, "stableops", h200)) == wheels["stable_cuda"].name
    for too_old in ({**h200, "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "12.8"},
                    {**h200, "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "7.5"}):
        assert selected(uv_selects(python, stable, "stableops", too_old)) == (
            wheels["stable_plain"].name), too_old


def test_plain_pip_skips_variant_wheels(wheels: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "variants-only"
    folder.mkdir()
    for role in ("cpu", "cuda"):
        shutil.copy2(wheels[role], folder)
    done = run(sys.executable, "-m", "pip", "download", "--no-deps", "--no-index", "-f", folder,
               "-d", tmp_path / "got", "lightops", env={"PIP_CONFIG_FILE": os.devnull},
               unset=("PIP_FIND_LINKS",), check=False)
    assert done.returncode != 0 and "No matching distribution found for lightops" in done.stderr
    shutil.copy2(wheels["plain"], folder)
    run(sys.executable, "-m", "pip", "download", "--no-deps", "--no-index", "-f", folder,
        "-d", tmp_path / "got", "lightops", env={"PIP_CONFIG_FILE": os.devnull},
        unset=("PIP_FIND_LINKS",))
    assert [p.name for p in (tmp_path / "got").iterdir()] == [wheels["plain"].name]


# -------------------------------------------------------------------------- refusals, budgets


def test_variant_and_local_label_together_are_refused(wheels: dict[str, Path], tmp_path: Path) -> None:
    done = run_cli("wheel", wheels["light"], "-o", tmp_path / "out", "-Cvariant=torch",
                   "-Clocal-version=torch")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pep517_torch: error: variant: with local-version = \"torch\" too"), lines
    assert "local-version" in lines[0] and not (tmp_path / "out").exists()


def test_max_wheel_size_names_the_largest_members(wheels: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    size = wheels["cuda"].stat().st_size
    done = run_cli("wheel", wheels["light"], "-o", out, "-Cpch=false", "-Cvariant=torch",
                   "-Ccuda=true", "-Ccuda-arch-list=8.0;9.0+PTX", f"-Cmax-wheel-size={size - 1}",
                   env=NO_GPU, timeout=1200)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr
    (line,) = [l for l in done.stderr.splitlines() if l.startswith("pep517_torch: error:")]
    assert re.match(rf"pep517_torch: error: {re.escape(wheels['cuda'].name)} would be [\d.]+ KiB,"
                    r" over max-wheel-size \([\d.]+ KiB\): not written; largest members:"
                    r" lightops/_C\.cpython-\S+\.so [\d.]+ KiB \(sm_80 [\d.]+ KiB, sm_90 [\d.]+"
                    r" KiB, PTX compute_90 ", line), line
    assert not list(out.glob("*")), list(out.iterdir())  # nothing half-written, no temporary
    fits = run_cli("wheel", wheels["light"], "-o", out, "-Cpch=false", "-Cvariant=torch",
                   "-Ccuda=true", "-Ccuda-arch-list=8.0;9.0+PTX", f"-Cmax-wheel-size={size}",
                   env=NO_GPU, timeout=1200)
    assert fits.returncode == 0, fits.stderr
    assert [p.name for p in out.glob("*.whl")] == [wheels["cuda"].name]


def test_frontends_building_a_variant(wheels: dict[str, Path], tmp_path: Path) -> None:
    """Through the PEP 517 hooks: uv build takes the variant wheel's name; pip refuses it (pip
    knows no variant label), after the backend built it. docs/publishing.md says which to use."""
    settings = ["-C", "variant=torch", "-C", "cuda=true", "-C", "cuda-arch-list=8.0;9.0+PTX",
                "-C", "pch=false"]
    built_by_uv = run(uv(), "build", "--wheel", "--offline", "--no-build-isolation", "--python",
                      sys.executable, "-o", tmp_path / "uv", *settings, wheels["stable"],
                      env={"UV_CACHE_DIR": str(tmp_path / "uv-cache"), **NO_GPU}, timeout=1200)
    assert [p.name for p in (tmp_path / "uv").glob("*.whl")] == [wheels["stable_cuda"].name], (
        built_by_uv.stderr)
    by_pip = run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                 "-w", tmp_path / "pip", *settings, wheels["stable"], env=NO_GPU, check=False,
                 timeout=1200)
    assert by_pip.returncode != 0
    assert f"{wheels['stable_cuda'].name} is not a valid wheel filename" in (
        by_pip.stdout + by_pip.stderr)

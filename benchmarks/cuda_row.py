"""The CUDA row: a cold wheel under a CUDA torch, fixtures/cuda_torch's .cpp + .cu for three
archs against torch's CUDAExtension, and where the .cu's time goes (nvcc --time)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from children import CUDA_PYPROJECT, CUDA_SETUP_PY, THEIRS_PYPROJECT
from steps import (
    CUDA_ARCHS,
    CUDA_FIXTURE,
    FIXTURE,
    WORK,
    empty,
    fresh_copy,
    pip_wheel,
    wait_background,
)
from timelines import phases


def cuda_kernel_project(target: Path, *, ours: bool) -> Path:
    """fixtures/cuda_torch's _C alone (ops.cpp + kernels.cu), as a pyproject or a setup.py."""
    shutil.rmtree(target, ignore_errors=True)
    (target / "cudatorchops").mkdir(parents=True)
    shutil.copytree(CUDA_FIXTURE / "csrc", target / "csrc")
    (target / "cudatorchops" / "__init__.py").write_text("")
    if ours:
        (target / "pyproject.toml").write_text(CUDA_PYPROJECT)
    else:
        (target / "pyproject.toml").write_text(THEIRS_PYPROJECT.replace("benchops", "cudatorchops"))
        (target / "setup.py").write_text(CUDA_SETUP_PY)
    return target


def is_cuda_torch(python: Path) -> bool:
    if not python.exists():
        return False
    probe = subprocess.run([str(python), "-c", "import torch.version as v; print(v.cuda)"],
                           capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout.strip() not in ("", "None")


def cuda_home() -> dict[str, str]:
    """CUDA_HOME for both sides: torch takes the folder above the first nvcc on PATH, which is
    wrong where that nvcc is a wrapper script (its headers are then not found); ours sees
    through it. Given as found, so that both compile against one toolkit."""
    if os.environ.get("CUDA_HOME"):
        return {}
    from pep517_torch.core.cuda.toolkit import find_cuda

    toolkit = find_cuda(os.environ)
    return {"CUDA_HOME": str(toolkit.root)} if toolkit else {}


def nvidia_wheel_headers(python: Path) -> dict[str, str]:
    """CPATH for torch's side: the headers of the nvidia-* wheels a CUDA torch installs
    (cusparse.h, cublas_v2.h, which ATen/cuda includes), searched after every -I as ours
    searches them (core/cuda/toolkit.py), where the system toolkit lacks them (a trimmed one)."""
    found = subprocess.run(  # every nvidia/*/include on its path (a layered venv's too)
        [str(python), "-c", "import glob, os, nvidia; print(os.pathsep.join(sorted(p for d in"
         " nvidia.__path__ for p in glob.glob(os.path.join(d, '*', 'include')))))"],
        capture_output=True, text=True,
    ).stdout.strip()
    if not found:
        return {}
    return {"CPATH": os.pathsep.join(filter(None, [os.environ.get("CPATH"), found]))}


def bench_cuda(results: dict[str, dict[str, float]], python: Path) -> None:
    """Under a CUDA torch, interleaved: torch's setup.py, then ours, per row."""
    if not is_cuda_torch(python):
        print(f"  cuda: skipped: {python} has no CUDA build of torch (make test-cuda-torch makes one)")
        return
    archs = {"TORCH_CUDA_ARCH_LIST": CUDA_ARCHS, **cuda_home()}
    cases = {
        "cuda_cold": (lambda ours: fresh_copy(FIXTURE, WORK / f"cuda-bench4-{ours}", ours=ours), {}),
        "cuda_cu3": (lambda ours: cuda_kernel_project(WORK / f"cuda-cu3-{ours}", ours=ours), archs),
    }
    theirs = nvidia_wheel_headers(python)
    for key, (make, env) in cases.items():
        seconds = {}
        for who in ("torch", "ours"):
            ours = who == "ours"
            print(f"  {key}: {'pep517_torch' if ours else 'torch'} ...", flush=True)
            cache = empty(WORK / f"pch-cache-{key}") if ours else None
            try:
                project = make(ours)
                seconds[who], _ = pip_wheel(project, cache, python=python,
                                            env=env if ours else {**env, **theirs})
                results.setdefault("phases", {}).setdefault(key, {})["ours" if ours else "theirs"] = {
                    "total": seconds[who], "steps": phases(project)}
                if cache is not None:
                    wait_background(cache)  # the next row's builds run alone
            except SystemExit as failed:  # one side cannot build here: say so, keep the run
                errors = re.findall(r"^.*error:.*$", str(failed), re.MULTILINE)
                print(f"  {key}: {who}'s build failed, row left out: {(errors or ['see above'])[0].strip()}",
                      flush=True)
                break
        else:
            results[key] = seconds
            print(f"  {key}: torch {seconds['torch']:.1f} s, pep517_torch {seconds['ours']:.1f} s", flush=True)
    if "cuda_cu3" in results:  # where the .cu's time goes: each side's compiles again, alone
        print("  cuda_cu3: each side's .cu (nvcc --time, one thread) and .cpp again, alone ...", flush=True)
        ours_dir = next(d for d in (WORK / "cuda-cu3-True" / "build").iterdir() if (d / "build.ninja").exists())
        theirs_dir = next((WORK / "cuda-cu3-False" / "build").glob("temp.*"))
        results["cu3_anatomy"] = {"ours": nvcc_phases(ours_dir, archs),
                                  "torch": nvcc_phases(theirs_dir, {**archs, **theirs})}


def compile_command(build_dir: Path, suffix: str) -> tuple[str, str]:
    """The command ninja runs for the object whose name ends with ``suffix`` (relative to
    ``build_dir``, where it runs), and that object."""
    from pep517_torch.core.toolchain.tools import find_ninja

    ninja = str(find_ninja({}))
    targets = subprocess.run([ninja, "-C", str(build_dir), "-t", "targets", "all"],
                             capture_output=True, text=True, check=True).stdout
    target = next(line.split(":")[0] for line in targets.splitlines() if line.split(":")[0].endswith(suffix))
    command = subprocess.run([ninja, "-C", str(build_dir), "-t", "commands", "-s", target],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    return command, target


def cpu_seconds(command: str, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one shell command, alone."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(command, shell=True, cwd=cwd, env={**os.environ, **env}, check=True,
                   capture_output=True)
    wall = time.perf_counter() - start
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


NVCC_HOST = {"gcc (preprocessing 4)": "host: preprocessing", "cudafe++": "host: cudafe++ (torch's headers, EDG)",
             "gcc (compiling)": "host: gcc on cudafe++'s output"}


def nvcc_phases(build_dir: Path, env: dict[str, str]) -> dict[str, float]:
    """The .cu of ``build_dir`` compiled again alone, one thread (nvcc --time): seconds per
    phase, each arch's device pass (preprocessing, cicc, ptxas) summed, and the .cpp beside it."""
    command, target = compile_command(build_dir, "kernels.cu.o") if any(
        build_dir.glob("obj/**/kernels.cu.o")) else compile_command(build_dir, "kernels.o")
    scratch = build_dir / "anatomy"
    scratch.mkdir(exist_ok=True)
    csv = scratch / "nvcc-time.csv"
    csv.unlink(missing_ok=True)
    command = re.sub(r" --threads \d+", "", command).replace(f" -o {target}", f" -o {scratch}/k.o")
    cu_wall, cu_cpu = cpu_seconds(f"{command} --threads 1 --time {csv}", build_dir, env)
    phases: dict[str, float] = {}
    for line in csv.read_text().splitlines()[1:]:
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 8 or fields[7] != "ms":
            continue
        name, arch, ms = fields[1], fields[4], float(fields[6])
        if name in NVCC_HOST:
            key = NVCC_HOST[name]
        elif name in ("gcc (preprocessing 1)", "cicc", "ptxas"):
            key = f"device pass, sm_{re.sub(r'[^0-9]', '', arch)}"
        else:
            key = name
        phases[key] = phases.get(key, 0.0) + ms / 1000
    phases["the .cu alone, one thread: wall"] = cu_wall
    phases["the .cu alone, one thread: CPU"] = cu_cpu
    cpp, cpp_target = compile_command(build_dir, "ops.cpp.o") if any(
        build_dir.glob("obj/**/ops.cpp.o")) else compile_command(build_dir, "ops.o")
    # as the cold build compiled it: without the PCH the background step has made since
    cpp = re.sub(r" -include \S*pch\.h( -fpch-preprocess)?", "", cpp.replace(f" -o {cpp_target}", f" -o {scratch}/ops.o"))
    phases["the .cpp alone: wall"], phases["the .cpp alone: CPU"] = cpu_seconds(cpp, build_dir, env)
    return phases

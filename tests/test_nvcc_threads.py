"""nvcc --threads within the jobs budget (core/toolchain/jobs.py), and the ninja text that carries it;
nothing is compiled."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pep517_torch.core import plan as core_plan
from pep517_torch.core.toolchain import jobs
from pep517_torch.core.cuda import toolkit as cuda
from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.errors import ToolchainError

TOOLKIT = cuda.find_cuda(os.environ)
needs_nvcc = pytest.mark.skipif(TOOLKIT is None, reason="needs nvcc (CUDA_HOME or nvcc on PATH)")


def plan(cores: int, memory_gib: float, monkeypatch: pytest.MonkeyPatch) -> jobs.JobPlan:
    monkeypatch.setattr(jobs, "cpu_count", lambda: cores)
    monkeypatch.setattr(jobs, "memory_available", lambda: int(memory_gib * 1024**3))
    return jobs.plan_jobs(None)


def test_threads_use_only_what_the_budget_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    two_cores = plan(2, 24, monkeypatch)
    # 2 cores never run 2 x k device compiles: one .cu + one .cpp already fill both.
    assert jobs.nvcc_threads(3, 2, two_cores) == 1
    assert jobs.nvcc_threads(3, 1, two_cores) == 2  # a lone .cu gets the second core
    # Unless it is the longest compile: the .cpp beside it ends first, and its core is the .cu's.
    assert jobs.nvcc_threads(3, 2, two_cores, longest=True) == 2
    assert jobs.nvcc_threads(3, 3, two_cores, longest=True) == 1  # more compiles than cores
    assert jobs.nvcc_threads(3, 2, plan(2, 4.5, monkeypatch), longest=True) == 1  # memory for 2
    big = plan(64, 256, monkeypatch)
    assert jobs.nvcc_threads(4, 2, big) == 4  # 2 files x 4 archs: all 8 at once
    assert jobs.nvcc_threads(4, 40, big) == 1  # 40 files keep 64 cores busy already
    assert jobs.nvcc_threads(8, 10, big) == 6  # 10 x 6 <= 64
    # Memory bounds it like torch TUs: 64 cores but 9 GiB free = 4 heavy slots.
    starved = plan(64, 9, monkeypatch)
    assert jobs.nvcc_threads(4, 1, starved) == 4 and jobs.nvcc_threads(4, 2, starved) == 2
    assert jobs.nvcc_threads(1, 1, big) == 1  # one target: nothing to split
    assert jobs.nvcc_threads(4, 1, jobs.plan_jobs(1)) == 1  # MAX_JOBS=1 is the whole budget


def test_nvcc_threads_variable_is_honoured_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    two_cores = plan(2, 24, monkeypatch)
    assert jobs.nvcc_threads(3, 8, two_cores, requested="4") == 4
    assert jobs.nvcc_threads(1, 1, two_cores, requested="0") == 0  # nvcc: one per core
    with pytest.raises(ToolchainError, match=r"NVCC_THREADS='four' is not a whole number"):
        jobs.nvcc_threads(3, 1, two_cores, requested="four")


def _cuda_project(tmp_path: Path, *, extra: tuple[str, ...] = ()) -> list[ExtensionSpec]:
    src = tmp_path / "src"
    src.mkdir(parents=True)
    (src / "k.cu").write_text("__global__ void k() {}\n")
    return [ExtensionSpec("pkg._C", (src / "k.cu",), cuda_arch_list=("8.0", "9.0", "10.0"),
                          extra_cuda_cflags=extra)]


def _commands(build_dir: Path) -> str:
    ninja = core_plan.toolchain.find_ninja({})
    listed = subprocess.run([str(ninja), "-C", str(build_dir), "-t", "commands"],
                            capture_output=True, text=True, check=True)
    return listed.stdout


@needs_nvcc
def test_ninja_text_carries_threads_for_a_lone_cu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan(16, 64, monkeypatch)
    monkeypatch.delenv("NVCC_THREADS", raising=False)
    env = {"CUDA_VISIBLE_DEVICES": ""}
    built = core_plan.prepare(_cuda_project(tmp_path), BuildOptions(build_dir=tmp_path / "b", env=env))
    text = built.ninja_file.read_text()
    assert "$cuflags $tuning $threads -c" in text and "  threads = --threads 3" in text
    nvcc_line = next(line for line in _commands(tmp_path / "b").splitlines() if "k.cu" in line)
    assert " --threads 3 " in nvcc_line  # what ninja runs: three architectures at once

    # On two cores beside a second, shorter compile, the core that one frees; beside a .cu as
    # long as it, none; the flag the user wrote wins.
    plan(2, 24, monkeypatch)
    spec = _cuda_project(tmp_path / "two")[0]
    other = tmp_path / "two" / "src" / "x.cpp"
    other.write_text("int x() { return 1; }\n")
    spec = core_plan.dataclasses.replace(spec, sources=(*spec.sources, other))
    two = core_plan.prepare([spec], BuildOptions(build_dir=tmp_path / "c", env=env))
    assert "  threads = --threads 2" in two.ninja_file.read_text()
    twin = other.with_name("k2.cu")  # as long as k.cu: neither is the longest
    twin.write_text("__global__ void k2() {}\n")
    spec = core_plan.dataclasses.replace(spec, sources=(*spec.sources, twin))
    twins = core_plan.prepare([spec], BuildOptions(build_dir=tmp_path / "c2", env=env))
    assert "--threads" not in twins.ninja_file.read_text()
    own = core_plan.prepare(_cuda_project(tmp_path / "own", extra=("--threads=2",)),
                             BuildOptions(build_dir=tmp_path / "d", env=env))
    assert "threads = " not in own.ninja_file.read_text()

    monkeypatch.setenv("NVCC_THREADS", "5")  # flash-attention's knob
    plan(2, 24, monkeypatch)
    given = core_plan.prepare(_cuda_project(tmp_path / "given"), BuildOptions(build_dir=tmp_path / "e", env=env))
    assert "  threads = --threads 5" in given.ninja_file.read_text()


@needs_nvcc
def test_a_cu_that_includes_torch_gets_the_host_compilers_tuning(tmp_path: Path) -> None:
    [spec] = _cuda_project(tmp_path)
    (tmp_path / "src" / "k.cu").write_text("#include <ATen/core/Tensor.h>\n__global__ void k() {}\n")
    (tmp_path / "src" / "light.cu").write_text("__global__ void light() {}\n")
    spec = core_plan.dataclasses.replace(spec, sources=(*spec.sources, tmp_path / "src" / "light.cu"))
    env = {"CUDA_VISIBLE_DEVICES": "", "CXX": "g++"}
    built = core_plan.prepare([spec], BuildOptions(build_dir=tmp_path / "b", env=env))
    commands = {line.split(" -c ")[1].split()[0]: line for line in _commands(tmp_path / "b").splitlines()
                if " -c " in line and ".cu" in line}
    tuning = "-Xcompiler=--param=ggc-min-expand=400,--param=ggc-min-heapsize=1048576"
    assert tuning in commands[str(tmp_path / "src" / "k.cu")]  # its host pass parses torch
    assert tuning not in commands[str(tmp_path / "src" / "light.cu")]
    assert "nvcc_heavy_tuning = " + tuning in built.ninja_file.read_text()

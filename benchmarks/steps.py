"""The benchmarks' steps: the fixtures, running a command, a `pip wheel`, fresh copies, edits,
and the background PCH waited for (benchmarks/run.py drives them)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench"
FIXTURE = ROOT / "fixtures" / "bench4"
HEADER_FIXTURE = ROOT / "fixtures" / "bench4h"
CUDA_FIXTURE = ROOT / "fixtures" / "cuda_torch"
CUDA_ARCHS = "8.0;9.0;10.0"
# Ours builds with a machine-wide PCH cache of the benchmark's own (emptied where a row says
# "empty") and no compiler cache: torch's path has neither.
OURS_ENV = {"PEP517_TORCH_COMPILER_LAUNCHER": "none"}
# torch >= 2.13 puts ccache or sccache in front of its compiler when one is installed (as
# `make tools` does): off for every command, so both sides compile without a compiler cache.
NO_CACHES = {"TORCH_NO_COMPILER_WRAPPER": "1"}
PYTHON = sys.executable
sys.path.insert(0, str(Path(__file__).resolve().parent))
from children import PIP_FLOOR_BACKEND, PIP_FLOOR_PYPROJECT, THEIRS_PYPROJECT  # noqa: E402


def run(args: list[str | Path], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        stdout_only: bool = False) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                            env={**os.environ, **NO_CACHES, **(env or {})})
    elapsed = time.perf_counter() - start
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise SystemExit(f"command failed: {args}\n{output[-4000:]}")
    return elapsed, result.stdout if stdout_only else output


def pip_wheel(project: Path, pch_cache: Path | None = None, *, python: str | Path = PYTHON,
              env: dict[str, str] | None = None, settings: tuple[str, ...] = ()) -> tuple[float, str]:
    env = {**(env or {}), **({**OURS_ENV, "PEP517_TORCH_CACHE_DIR": str(pch_cache)} if pch_cache else {})}
    return run([python, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
                *(f"--config-settings={setting}" for setting in settings),
                "-w", project / "wheelhouse", project], cwd=project, env=env)


def warm_cache(fixture: Path, cache: Path) -> None:
    """What an editable install or the JIT leaves in the machine cache: a file-by-file build of
    a scratch copy, one heavy job (so that the PCH is worth making), makes the fixture's PCH."""
    pip_wheel(fresh_copy(fixture, WORK / f"warm-{fixture.name}", ours=True), cache,
              env={"MAX_JOBS": "1"}, settings=("unity=false",))


def fresh_copy(fixture: Path, target: Path, *, ours: bool) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(fixture, target, ignore=shutil.ignore_patterns("build", "dist", "wheelhouse"))
    if ours:
        (target / "setup.py").unlink()
    else:
        (target / "pyproject.toml").write_text(THEIRS_PYPROJECT)
    return target


def empty(directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


def backend_seconds(output: str) -> float | None:
    found = re.findall(r"\(ninja [\d.]+ s, pep517_torch ([\d.]+) s[,)]", output)
    return float(found[-1]) if found else None


def edit(project: Path, k: int) -> None:
    norm = project / "csrc" / "norm.cpp"
    text = re.sub(r"variance \+ eps(?: \* \d+)?", f"variance + eps * {k}", norm.read_text())
    norm.write_text(text)


def edit_header(project: Path, k: int) -> None:
    """A declaration added to csrc/ops.h, which every file of bench4 includes."""
    header = project / "csrc" / "ops.h"
    header.write_text(header.read_text() + f"torch::Tensor unused_{k}(const torch::Tensor& x);\n")


def ninja_seconds(output: str) -> float | None:
    found = re.findall(r"\(ninja ([\d.]+) s, pep517_torch [\d.]+ s[,)]", output)
    return float(found[-1]) if found else None


def wait_background(cache: Path) -> tuple[float, float] | None:
    """Wait for the PCH a wheel build left to be made in the background (core/pch/background.py)
    in the machine cache ``cache``; how long it took to make, wall and CPU seconds (None: no
    background step ran, or it made nothing)."""
    from pep517_torch.core.pch import background as pch_background
    from pep517_torch.shipped_runtime.lock import FileLock

    root = cache / "pch"
    log = root / pch_background.LOG
    if not log.exists():
        return None
    time.sleep(0.5)  # the detached maker takes its lock within its interpreter's start
    lock = FileLock(root / pch_background.LOCK)
    lock.acquire()
    lock.release()
    made = re.findall(r"^made .* in ([\d.]+) s \(([\d.]+) CPU-s\)$", log.read_text(errors="replace"),
                      re.MULTILINE)
    return (float(made[-1][0]), float(made[-1][1])) if made else None


def pip_floor_project(wheel: Path) -> Path:
    """What a no-op `pip wheel` costs whatever the backend does: pip, its two hook processes,
    and an in-tree backend that only copies ``wheel`` (our cold build's)."""
    project = empty(WORK / "pip-floor")
    (project / "pyproject.toml").write_text(PIP_FLOOR_PYPROJECT)
    (project / "copy_backend.py").write_text(PIP_FLOOR_BACKEND)
    (project / "kept").mkdir()
    shutil.copy(wheel, project / "kept")
    return project

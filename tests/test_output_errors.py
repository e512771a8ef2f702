"""A read-only or full output directory: one line naming the file and the cause, nothing left.

Tests run as root, which ignores mode bits, so the directories are real read-only or tiny
tmpfs mounts (the ``tmpfs`` fixture skips where mounting is not permitted).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import pep517_torch as backend
from pep517_torch.errors import OutputError
from tests.commands import run_cli
from tests.tiny_project import pyproject

WHEEL = "pkg-1.0-py3-none-any.whl"
SDIST = "pkg-1.0.tar.gz"
PYPROJECT = pyproject("pkg", tool='package-data = { pkg = ["blob.bin"] }')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A pure-Python project whose wheel and sdist hold 200 KB that do not compress."""
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "blob.bin").write_bytes(os.urandom(200_000))
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


@pytest.mark.parametrize(("command", "artifact"), [("wheel", WHEEL), ("sdist", SDIST)])
@pytest.mark.parametrize(("size", "read_only", "cause"), [
    ("1m", True, "Read-only file system"),
    ("64k", False, "No space left on device"),
])
def test_cli_names_the_file_and_the_cause(
    tmpfs, project: Path, command: str, artifact: str, size: str, read_only: bool, cause: str  # type: ignore[no-untyped-def]
) -> None:
    out = tmpfs(size, read_only=read_only)
    result = run_cli(command, project, "-o", out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr == f"pep517_torch: error: cannot write {out / artifact}: {cause}\n"
    assert os.listdir(out) == []
    assert os.statvfs(out).f_bfree == os.statvfs(out).f_blocks  # no unnamed file holds space


def test_cli_names_an_output_directory_it_cannot_create(tmpfs, project: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmpfs("1m", read_only=True) / "dist"
    result = run_cli("wheel", project, "-o", out)
    assert result.returncode == 1
    assert result.stderr == f"pep517_torch: error: cannot write {out}: Read-only file system\n"


@pytest.mark.parametrize("hook", ["build_wheel", "build_sdist", "prepare_metadata_for_build_wheel"])
def test_hooks_print_the_message_and_exit_1(
    tmpfs, project: Path, hook: str, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmpfs("1m", read_only=True)
    monkeypatch.chdir(project)
    with pytest.raises(SystemExit, match="^1$") as exit_:  # the exit status, as its message
        getattr(backend, hook)(str(out))
    assert exit_.value.code == 1 and isinstance(exit_.value.__cause__, OutputError)
    written = {"build_wheel": WHEEL, "build_sdist": SDIST,
               "prepare_metadata_for_build_wheel": "pkg-1.0.dist-info/METADATA"}[hook]
    assert capsys.readouterr().err == (
        f"pep517_torch: error: cannot write {out / written}: Read-only file system\n"
    )
    assert os.listdir(out) == []


def test_a_full_disk_during_the_wheel_leaves_room_for_the_next_try(tmpfs, project: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmpfs("64k")
    assert run_cli("wheel", project, "-o", out).returncode == 1
    (project / "pkg" / "blob.bin").write_bytes(b"small now")
    result = run_cli("wheel", project, "-o", out)
    assert result.returncode == 0, result.stderr
    assert os.listdir(out) == [WHEEL]

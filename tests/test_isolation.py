"""Builds against a frontend's throwaway torch: the note they print and the folder they use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline, stages
from pep517_torch.core import build as core_build
from pep517_torch.core.toolchain import isolation, tools as toolchain

from .tiny_project import write_project
from .torch_doubles import version_only_torch


@pytest.fixture
def isolated_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> toolchain.TorchInstall:
    """The torch pip installs into its build environment, found by the build."""
    site_packages = tmp_path / "pip-build-env-x1y2" / "overlay/lib/python3.11/site-packages"
    torch = version_only_torch(site_packages, "2.11.0+cpu")
    monkeypatch.setattr(toolchain, "find_torch", lambda *args: torch)
    return torch


@pytest.fixture
def user_venv(tmp_path: Path) -> Path:
    """The virtualenv the user ran pip from, holding the torch they run with."""
    venv = tmp_path / "venv"
    version_only_torch(venv / "lib/python3.11/site-packages", "2.13.0+cpu")
    return venv


def test_markers_of_pip_build_and_uv() -> None:
    for parent in ("/tmp/pip-build-env-ab12/overlay", "/tmp/build-env-cd34",
                   "/root/.cache/uv/builds-v0/.tmpXY"):
        torch = toolchain.TorchInstall(Path(parent) / "lib/site-packages/torch", "2.13.0", None, None)
        assert isolation.is_isolated(torch), parent
    assert not isolation.is_isolated(
        toolchain.TorchInstall(Path("/home/me/venv/lib/site-packages/torch"), "2.13.0", None, None))


def test_note_warns_of_the_other_torch_in_the_callers_environment(
    isolated_torch: toolchain.TorchInstall, user_venv: Path
) -> None:
    note = isolation.isolation_note(isolated_torch, {"VIRTUAL_ENV": str(user_venv)})
    assert note is not None and note.startswith(
        f"WARNING: your environment {user_venv} has torch 2.13.0+cpu, but building against"
        " torch 2.11.0+cpu from an isolated build environment")
    same = isolation.isolation_note(isolated_torch, {})
    assert same is not None and not same.startswith("WARNING")


def test_build_prints_the_warning_from_the_callers_environment(
    tmp_path: Path, isolated_torch: toolchain.TorchInstall, user_venv: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """Regression: the note was given the build's pass-through environment, which never
    holds VIRTUAL_ENV, so the warning could not print."""
    root = write_project(tmp_path / "proj", "tinyiso")

    class Stop(Exception):
        pass

    def stop(*args: object, **kwargs: object) -> None:
        # compile nothing: the note is printed before the build starts
        raise Stop("the build began")

    monkeypatch.setattr(core_build, "build", stop)
    env = {**os.environ, "VIRTUAL_ENV": str(user_venv)}
    loaded = pipeline.load(root, None, env)
    assert "VIRTUAL_ENV" not in loaded.project.options.env  # what the build passes on
    with pytest.raises(Stop, match="^the build began$"):
        stages.compile_extensions(loaded, editable=False)
    out = capsys.readouterr().out
    assert f"pep517_torch: WARNING: your environment {user_venv} has torch 2.13.0+cpu" in out


def test_isolated_builds_never_share_the_default_build_folder(
    tmp_path: Path, isolated_torch: toolchain.TorchInstall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: an isolated build rewrote build.ninja in the folder the editable install
    rebuilds from, pointing it at a torch deleted after the build."""
    root = write_project(tmp_path / "proj", "tinyiso")
    isolated = pipeline.load(root, None, dict(os.environ)).project.options.build_dir
    monkeypatch.undo()
    normal = pipeline.load(root, None, dict(os.environ)).project.options.build_dir
    assert isolated != normal
    assert isolated.name.endswith("-torch2.11.0+cpu-isolated")
    assert normal.name.endswith(f"-torch{toolchain.find_torch().version}")


def test_the_setuptools_face_gives_an_isolated_torch_its_own_build_folder(
    tmp_path: Path, isolated_torch: toolchain.TorchInstall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: setup.py's BuildExtension filled the build-dir placeholders itself and lost
    the isolated build's suffix, so an isolated build rewrote the folder of the torch the user
    runs with. Both faces now name it from the same values."""
    import setuptools
    from setuptools.dist import Distribution

    from pep517_torch.setuptools import BuildExtension
    from pep517_torch.setuptools.options import persistent_build_dir

    monkeypatch.chdir(tmp_path)
    dist = Distribution({"name": "x", "ext_modules": [setuptools.Extension("p._C", ["a.cpp"])]})
    command = BuildExtension(dist)
    command.ensure_finalized()
    user_torch = toolchain.TorchInstall(
        Path("/home/me/venv/lib/site-packages/torch"), isolated_torch.version, None, None)
    isolated = persistent_build_dir(command, isolated_torch)
    normal = persistent_build_dir(command, user_torch)
    assert isolated.name.endswith("-torch2.11.0+cpu-isolated")
    assert normal.name.endswith("-torch2.11.0+cpu") and isolated.parent == normal.parent
    root = write_project(tmp_path / "proj", "tinyiso")
    pyproject_face = pipeline.load(root, None, dict(os.environ)).project.options.build_dir
    assert pyproject_face.name == isolated.name

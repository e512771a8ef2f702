"""A version from git through setuptools-scm (issue 43 item 11): a real repository, a real
tag, commits after it; the sdist carries the version it was made with (PKG-INFO), so a wheel
builds from it outside git; setuptools-scm is a build requirement only where it is used; and
migrate keeps such a project's dynamic version instead of writing setuptools' 0.0.0.
Tiny sources (Python.h only)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from pep517_torch import buildapi
from tests.commands import run, run_python
from tests.migrate_helpers import migrate_main, project_with, unset_fixture_variables  # noqa: F401
from tests.tiny_project import set_value, wheel_value, write_project

pytestmark = pytest.mark.compile

SCM = '\n[tool.setuptools_scm]\nversion_file = "tiny/_version.py"\n'


def git(repo: Path, *args: str) -> str:
    return run("git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
               "-c", "init.defaultBranch=main", *args, cwd=repo).stdout.strip()


def scm_project(root: Path, table: str = SCM) -> Path:
    """The tiny project, its version dynamic and from [tool.setuptools_scm] (``table``), in a
    git repository tagged v1.2.3 and two commits on: `git describe` says v1.2.3-2-g<hash>."""
    write_project(root, "tiny")
    text = (root / "pyproject.toml").read_text().replace('version = "1.0"\n', "")
    text = text.replace('dynamic = ["dependencies"]', 'dynamic = ["version", "dependencies"]')
    (root / "pyproject.toml").write_text(text + table)
    (root / ".gitignore").write_text("build/\ntiny/_version.py\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "first")
    git(root, "tag", "v1.2.3")
    for value in (1, 2):
        set_value(root, value)
        git(root, "commit", "-qam", f"value {value}")
    return root


def cli(*args: str | Path, cwd: Path) -> str:
    result = run(sys.executable, "-m", "pep517_torch", *args, cwd=cwd, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_the_wheel_and_sdist_carry_the_version_git_gives(tmp_path: Path) -> None:
    project = scm_project(tmp_path / "tiny")
    commit = git(project, "rev-parse", "--short=9", "HEAD")
    assert git(project, "describe", "--tags").startswith("v1.2.3-2-g")
    expected = f"1.2.4.dev2+g{commit}"
    cli("wheel", project, "-o", tmp_path / "dist", cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.startswith(f"tiny-{expected}-"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(f"tiny-{expected}.dist-info/METADATA").decode()
        shipped = archive.read("tiny/_version.py").decode()  # written before files were listed
    assert f"Version: {expected}\n" in metadata and f"'{expected}'" in shipped, names
    assert wheel_value(wheel, tmp_path / "site", "tiny") == 2

    cli("sdist", project, "-o", tmp_path / "sdist", cwd=tmp_path)
    [sdist] = (tmp_path / "sdist").glob("*.tar.gz")
    assert sdist.name == f"tiny-{expected}.tar.gz"
    # outside git: the sdist unpacked where no repository is, its PKG-INFO the only record
    elsewhere = tmp_path / "no git here"
    elsewhere.mkdir()
    assert run("git", "rev-parse", cwd=elsewhere, check=False).returncode != 0
    shutil.copy(sdist, elsewhere)
    cli("wheel", elsewhere / sdist.name, "-o", elsewhere / "dist", cwd=elsewhere)
    [from_sdist] = (elsewhere / "dist").glob("*.whl")
    assert from_sdist.name == wheel.name
    with tarfile.open(sdist) as archive:
        assert f"tiny-{expected}/.git" not in archive.getnames()
        archive.extractall(elsewhere / "unpacked", filter="data")
    root = elsewhere / "unpacked" / f"tiny-{expected}"
    assert buildapi.get_requires_for_build_wheel.__module__  # the hook, from the unpacked root
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        assert buildapi.get_requires_for_build_wheel() == ["setuptools-scm>=8"]


def test_a_new_commit_is_a_new_version_never_a_replayed_wheel(tmp_path: Path) -> None:
    """The no-op replay keeps no record of a git version: a commit or a tag that changes no
    file of the tree (no version file either) still names a new version."""
    project = scm_project(tmp_path / "tiny", "\n[tool.setuptools_scm]\n")
    hook = f"from pep517_torch import buildapi; print(buildapi.build_wheel({str(tmp_path / 'out')!r}))"

    def build_wheel() -> str:  # the PEP 517 hook, as a frontend calls it: it replays no-ops
        return run_python(hook, cwd=project, env={"PEP517_TORCH_CACHE_DIR": str(tmp_path / "cache")}
                          ).stdout.splitlines()[-1]

    first = build_wheel()
    assert first == build_wheel()  # nothing changed: the same wheel
    git(project, "commit", "-q", "--allow-empty", "-m", "nothing but a commit")
    second = build_wheel()
    assert "1.2.4.dev2+" in first and "1.2.4.dev3+" in second
    git(project, "tag", "v2.0.0")
    assert build_wheel().startswith("tiny-2.0.0-")


def test_setuptools_scm_is_asked_for_only_where_it_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = write_project(tmp_path / "plain", "tiny")
    monkeypatch.chdir(plain)
    assert buildapi.get_requires_for_build_wheel() == []
    assert buildapi.get_requires_for_build_sdist() == []
    scm = scm_project(tmp_path / "scm")
    monkeypatch.chdir(scm)
    for hook in ("wheel", "sdist", "editable"):
        assert getattr(buildapi, f"get_requires_for_build_{hook}")() == ["setuptools-scm>=8"]
    # an explicit source wins over the table: no setuptools-scm
    text = (scm / "pyproject.toml").read_text()
    (scm / "pyproject.toml").write_text(text + '\n[tool.torch-ext.version]\nbase = "3.0"\n')
    assert buildapi.get_requires_for_build_wheel() == []
    (scm / "pyproject.toml").write_text("[project\n")  # broken: the build will say so
    assert buildapi.get_requires_for_build_wheel() == []


def test_no_version_anywhere_is_one_line_naming_the_table(tmp_path: Path) -> None:
    project = write_project(tmp_path / "tiny", "tiny")
    text = (project / "pyproject.toml").read_text().replace('version = "1.0"\n', "")
    (project / "pyproject.toml").write_text(
        text.replace('dynamic = ["dependencies"]', 'dynamic = ["version", "dependencies"]') + SCM)
    result = run(sys.executable, "-m", "pep517_torch", "sdist", project, "-o", tmp_path / "d",
                 cwd=tmp_path, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr  # a config error
    [line] = result.stderr.strip().splitlines()
    assert "tool.setuptools_scm" in line and "found no version" in line, line
    assert not (tmp_path / "d").exists()


SETUP_PY = """
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
setup(packages=["p"],{keyword} ext_modules=[CppExtension("p._C", ["a.cpp"])])
"""
A_CPP = ('#include <Python.h>\nstatic PyModuleDef m = {PyModuleDef_HEAD_INIT, "_C"};\n'
         "PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&m); }\n")


@pytest.mark.parametrize("shape", ["pyproject-table", "use_scm_version"])
def test_migrate_keeps_a_version_from_git(tmp_path: Path, shape: str) -> None:
    """Before: `version = "0.0.0"` (setuptools' default: setuptools-scm gave the version
    inside setup(), which migrate intercepts), and the wheel said 0.0.0."""
    keyword = ' name="p", use_scm_version=True,' if shape == "use_scm_version" else ""
    (tmp_path / "p").mkdir()
    project = project_with(tmp_path / "p", SETUP_PY.format(keyword=keyword), {"a.cpp": A_CPP})
    if shape == "pyproject-table":
        (project / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\n'
            'build-backend = "setuptools.build_meta"\n\n'
            '[project]\nname = "p"\ndynamic = ["version"]\n\n[tool.setuptools_scm]\n')
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "first")
    git(project, "tag", "v0.7.0")
    assert migrate_main([str(project), "--write"]) == 0
    written = (project / "pyproject.toml").read_text()
    assert "0.0.0" not in written and re.search(r'dynamic = \["version"', written), written
    git(project, "add", ".")
    git(project, "commit", "-qm", "migrated")
    cli("wheel", project, "-o", tmp_path / "dist", cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("*.whl")
    commit = git(project, "rev-parse", "--short=9", "HEAD")
    assert wheel.name.startswith(f"p-0.7.1.dev1+g{commit}-"), wheel.name

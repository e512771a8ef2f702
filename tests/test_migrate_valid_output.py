"""migrate's output passes the backend's own validation (issue 43 item 10): the file it
writes is checked as an sdist build checks it (config and `[project]`, PEP 621 and PEP 639;
no torch needed), and a license table kept from pyproject.toml never gets `license-files`
beside it. Nothing is compiled: metadata is prepared, sdists written."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.migrate import migrate
from tests.migrate_helpers import migrate_main as main
from tests.migrate_helpers import project_with, unset_fixture_variables  # noqa: F401

SETUP = """
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
setup(name="p", version="1.0", packages=["p"],{keywords}
      ext_modules=[CppExtension("p._C", ["a.cpp"])])
"""
CUSTOM = "Custom license: use it kindly.\n"


@pytest.mark.parametrize(("keywords", "table", "license_line"), [
    # setup.py's license files beside the file's license table (the case)
    (' license_files=["LICENSE.txt"],', 'license = { file = "LICENSE.txt" }', CUSTOM.strip()),
    # no license_files: setuptools' default globs (LICEN[CS]E*) found LICENSE.txt
    ("", 'license = { file = "LICENSE.txt" }', CUSTOM.strip()),
    ("", 'license = { text = "Custom" }', "Custom"),
    # setup.py's non-SPDX license (a text table) beside the file's license-files
    (' license="Custom terms",', 'license-files = ["LICENSE.txt"]', None),
], ids=["license-files-given", "default-globs", "text-table", "their-license-files"])
def test_a_license_table_kept_from_pyproject_builds(
    tmp_path: Path, keywords: str, table: str, license_line: str | None
) -> None:
    """Before: migrate wrote `license-files = [...]` beside `license = { file = ... }`; the
    build then failed ("project.license-files" must not be used when "project.license" is not
    a SPDX license expression) and migrate exited 1."""
    project = project_with(tmp_path, SETUP.format(keywords=keywords), {"LICENSE.txt": CUSTOM})
    (project / "pyproject.toml").write_text(f'[project]\nname = "p"\nversion = "1.0"\n{table}\n')
    assert main([str(project), "--write"]) == 0
    name = pipeline.prepare_metadata(project, tmp_path / "meta", None)
    metadata = (tmp_path / "meta" / name / "METADATA").read_text()
    sdist = pipeline.build_sdist(project, tmp_path / "dist", None)
    with tarfile.open(tmp_path / "dist" / sdist) as archive:
        assert "p-1.0/LICENSE.txt" in archive.getnames()
    if license_line is None:  # the file's license-files won: the license file ships as one
        assert "License-File: LICENSE.txt" in metadata and "License:" not in metadata
    else:
        assert f"License: {license_line}" in metadata and "License-File" not in metadata


def test_what_the_tables_cannot_fix_is_said_without_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file's own mistake (both keys its own) stays, and the backend's validation names
    it even where no torch is installed (before, only a build here said anything, and only
    with torch)."""
    from pep517_torch.backend import discovery

    project = project_with(tmp_path, SETUP.format(keywords=""), {"LICENSE.txt": CUSTOM})
    (project / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "1.0"\nlicense = { text = "Custom" }\n'
        'license-files = ["LICENSE.txt"]\n')
    monkeypatch.setattr(discovery, "torch_or_none", lambda: None)
    migration = migrate(project)
    assert migration.fails_here == []  # no torch: no build here to ask
    [problem] = migration.problems
    assert '"project.license-files" must not be used' in problem
    assert main([str(project)]) == 1

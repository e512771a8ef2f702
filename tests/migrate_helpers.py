"""Helpers shared by the migrate tests: projects from setup.py text, a clean environment."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from pep517_torch.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "migrate"


def migrate_main(argv: list[str]) -> int:
    """``python -m pep517_torch migrate ARGV``, in this process (the command line is cli's)."""
    return cli_main(["migrate", *argv])

# Read by the fixtures' setup.py files; the expected output assumes them unset.
VARIABLES = ("USE_CUDA", "BOTHBR_CPU_ONLY", "BOTHBR_KEEP_SYMBOLS", "SUFFIXED_VERSION_SUFFIX",
             "P_SUFFIX", "P_STREAMS", "CUDA_HOME", "CUDA_PATH")


@pytest.fixture(autouse=True)
def unset_fixture_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def clean_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in VARIABLES}, **extra}


def project_with(tmp_path: Path, setup_py: str, files: Mapping[str, str] | None = None) -> Path:
    """A project in ``tmp_path``: this setup.py, a package ``p``, an empty ``a.cpp``, ``files``."""
    (tmp_path / "setup.py").write_text(setup_py)
    for name, text in {"p/__init__.py": "", "a.cpp": "", **(files or {})}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def written(tmp_path: Path, source: Path | str, files: Mapping[str, str] | None = None) -> Path:
    """A copy of the fixture ``source`` (or a project from setup.py text), migrated with --write."""
    if isinstance(source, Path):
        project = tmp_path / source.name
        shutil.copytree(source, project)
    else:
        project = project_with(tmp_path, source, files)
    assert migrate_main([str(project), "--write", "--force"]) == 0
    return project


def metadata_version(project: Path, env: dict[str, str]) -> str:
    """The version a build with ``env`` writes into METADATA (nothing compiled)."""
    from pep517_torch.backend import pipeline as glue

    return glue.load(project, None, env=clean_env(**env)).metadata.version

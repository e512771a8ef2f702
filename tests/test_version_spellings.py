"""Versions written as torch and PEP 440 spell them (issue 35 item 12): ``stable-abi = "02.10"``
is the target 2.10 (``torch>=2.10``, as packaging normalises every other version the config
reads), and ``local-version = "torch"`` never doubles the label a version already ends in; a
version naming another torch's label is refused (the wheel would name two torches)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.distribution.torch_requirement import with_local_label
from pep517_torch.errors import ConfigError
from tests.commands import run_cli
from tests.conftest import count
from tests.test_stable_abi import stable_project
from tests.tiny_project import write_project


@pytest.mark.parametrize(("project_keys", "extension_keys"), [
    ('stable-abi = "02.10"', ""), ('stable-abi = "2.010"', ""), ('stable-abi = "002.0010"', ""),
    ("", 'stable-abi = "02.10"'), ('stable-abi = "2.12"', 'stable-abi = "02.10"'),
])
def test_a_stable_abi_target_is_normalised(tmp_path: Path, project_keys: str, extension_keys: str) -> None:
    loaded = pipeline.load(stable_project(tmp_path, project_keys, extension_keys), None)
    (spec,) = loaded.project.extensions
    assert spec.stable_abi == "2.10"
    assert [str(r) for r in loaded.metadata.standard.dependencies] == ["torch>=2.10"]
    count("item 12: stable-abi spellings normalised")


def test_the_jit_normalises_it_too() -> None:
    from pep517_torch.jit.api import _check_stable_abi

    assert _check_stable_abi("02.10") == "2.10" and _check_stable_abi("2.10") == "2.10"
    with pytest.raises(ConfigError, match="older than torch 2.10"):
        _check_stable_abi("02.09")
    count("item 12: stable-abi spellings normalised", 2)


@pytest.mark.parametrize(("version", "label", "expected"), [
    ("1.0", "pt213cpu", "1.0+pt213cpu"),
    ("1.0+pt213cpu", "pt213cpu", "1.0+pt213cpu"),
    ("1.0+PT213CPU", "pt213cpu", "1.0+pt213cpu"),
    ("1.0+pt214cu130", "pt214cu130", "1.0+pt214cu130"),
    ("1.0+abc", "pt213cpu", "1.0+abc.pt213cpu"),
    ("1.0+abc.pt213cpu", "pt213cpu", "1.0+abc.pt213cpu"),
    ("1.0+pt213cpu.abc", "pt213cpu", "1.0+pt213cpu.abc"),
    ("1.0+pt213cpu-1", "pt213cpu", "1.0+pt213cpu.1"),  # PEP 440 spells the separator '.'
    ("1.0+pt2131", "pt213cpu", "1.0+pt2131.pt213cpu"),  # not a torch label
])
def test_the_local_label_is_added_once(version: str, label: str, expected: str) -> None:
    assert with_local_label(version, label) == expected
    count("item 12: local labels")


@pytest.mark.parametrize("version", ["1.0+pt212cpu", "1.0+pt214cu130", "1.0+abc.pt212cpu", "1.0+pt213cu128"])
def test_another_torchs_label_is_refused(version: str) -> None:
    with pytest.raises(ConfigError, match="already names the torch variant") as caught:
        with_local_label(version, "pt213cpu")
    assert caught.value.key == "project.version"
    count("item 12: local labels")


@pytest.mark.compile
def test_a_wheel_of_a_labelled_version_keeps_one_label(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", "labelled")
    text = (root / "pyproject.toml").read_text().replace('version = "1.0"', 'version = "1.0+pt213cpu"')
    (root / "pyproject.toml").write_text(text)
    result = run_cli("wheel", str(root), "-Clocal-version=torch")
    assert result.returncode == 0, result.stderr
    (wheel,) = (root / "dist").glob("*.whl")
    assert wheel.name.startswith("labelled-1.0+pt213cpu-"), wheel.name
    count("item 12: local labels")

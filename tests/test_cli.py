"""The command line as a newcomer meets it: --version, usage lines, -C help, links in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pep517_torch
from pep517_torch.config import config_setting_fields
from tests.commands import run_cli

ROOT = Path(__file__).resolve().parent.parent
PROG = "python -m pep517_torch"


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"pep517_torch {pep517_torch.__version__}"


@pytest.mark.parametrize("args", [["--help"], ["wheel", "--help"], ["sdist", "--help"],
                                  ["doctor", "--help"], ["migrate", "--help"], ["bogus"],
                                  ["wheel", "--bogus"]])
def test_every_usage_line_names_one_program(args: list[str]) -> None:
    result = run_cli(*args)
    usage = [line for line in (result.stdout + result.stderr).splitlines()
             if line.startswith("usage:")]
    assert usage, result
    assert all(line.startswith(f"usage: {PROG}") for line in usage), usage
    assert "pep517-torch" not in result.stdout + result.stderr


def test_wheel_help_lists_every_config_setting_from_the_model() -> None:
    text = run_cli("wheel", "--help").stdout
    listed = re.findall(r"^  ([a-z-]+)=", text, re.M)
    assert listed == list(config_setting_fields())
    assert "build-type=release|debug|relwithdebinfo|none" in text
    assert "MAX_JOBS" in text and "TORCH_CUDA_ARCH_LIST" in text


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S)  # no headings in code
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_relative_links_in_the_docs_reach_a_file_and_heading(page: Path) -> None:
    text = page.read_text()
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not broken, broken

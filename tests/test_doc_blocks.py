"""The installed tier's reading of the docs (tests/installed/doc_blocks.py), checked in make
test where it costs nothing: every marker in the four docs marks something and names what
exists, and a shown output is compared as the conventions say."""

from __future__ import annotations

import re

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.installed.doc_blocks import (TORCHES, DocError, Files, Run, Write, line_matches,
                                        mismatch, steps)
from tests.installed.test_docs import DOCS


@pytest.mark.parametrize("doc", DOCS)
def test_every_marker_in_the_docs_marks_a_block_and_names_what_exists(doc: str) -> None:
    found = steps(ROOT / doc)
    runs = [step for step in found if isinstance(step, Run)]
    assert runs, f"{doc} marks no block runnable"
    assert all(run.torch in TORCHES and run.script.strip() for run in runs)
    for step in found:
        if isinstance(step, Files):
            assert (ROOT / step.source).exists(), step


def test_the_conventions(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- files: fixtures/stable -> stableops -->\n"
        '```toml title="p/pyproject.toml"\n[project]\n```\n'
        '```toml title="p/pyproject.toml (the parts that matter)"\n[x]\n```\n'
        "<!-- runnable -->\n```sh\ncd p\nls\n```\n\n```text\npyproject.toml\n```\n"
        "<!-- runnable torch=2.14.1 -->\n```sh\npython -V\n```\nprose\n```text\nnot shown\n```\n"
        "```sh\nnot marked\n```\n")
    assert steps(doc) == [
        Files("fixtures/stable", "stableops"), Write("p/pyproject.toml", "[project]\n"),
        Run(9, "2.13.0", "cd p\nls\n", ("pyproject.toml",)),
        Run(18, "2.14.1", "python -V\n", None)]


@pytest.mark.parametrize(("text", "says"), [
    ("<!-- runnable -->\n```python\nx\n```\n", "must stand right before a ```sh block"),
    ("<!-- runnable -->\n\n```sh\nx\n```\n", "must stand right before a ```sh block"),
    ("<!-- runnable torch=2.99 -->\n```sh\nx\n```\n", "VERSION one of 2.13.0, 2.14.1"),
    ("<!-- runnable: yes -->\n```sh\nx\n```\n", "a runnable marker is"),
    ("<!-- files: ../secret -> x -->\n", "'../secret' is not a relative path"),
    ('```toml title="../x.toml"\n```\n', "'../x.toml' is not a relative path"),
    ("<!-- runnable -->\n```sh\nx\n", "a block that never ends"),
])
def test_a_marker_that_marks_nothing_is_an_error(tmp_path: Path, text: str, says: str) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(text)
    with pytest.raises(DocError, match=says.replace("(", r"\(").replace(")", r"\)")):
        steps(doc)


@pytest.mark.parametrize(("shown", "printed", "same"), [
    ("stableops-1.0.0-cp310-abi3-manylinux_2_34_x86_64.whl",
     "stableops-1.0.0-cp310-abi3-manylinux_2_34_x86_64.whl  ", True),
    ("stableops-1.0.0-cp310-abi3-manylinux_2_34_x86_64.whl",
     "stableops-1.0.0-cp310-abi3-manylinux_2_28_x86_64.whl", False),
    ("the last build (a wheel build, …) ran 2 steps:",
     "the last build (a wheel build, 2026-12-04 13:40:37) ran 2 steps:", True),
    ("the last build (a wheel build, …) ran 2 steps:", "the last build ran 2 steps:", False),
    ("…/torch-2.13.0/bin/python     2.13.0+cpu    -     x.whl    …",
     "/tmp/b/envs/torch-2.13.0/bin/python  2.13.0+cpu    -     x.whl  27.8", True),
    ("a  b", "ab", False),
    ("-----  ---", "------------  ----  ---", True),
    ("-----  ---", "interpreter", False),
    ("tensor([1., 3., 5., 7.])", "tensor([1., 3., 5., 8.])", False),
])
def test_a_shown_line_against_a_printed_line(shown: str, printed: str, same: bool) -> None:
    assert line_matches(shown, printed) is same


def test_a_shown_output_is_the_tail_of_what_was_printed() -> None:
    printed = "Processing x.whl\nInstalled\n2.13.0+cpu tensor([1., 3.])\n\n"
    assert mismatch(("2.13.0+cpu tensor([1., 3.])",), printed) is None
    assert mismatch(("Installed", "2.13.0+cpu tensor([1., 3.])", ""), printed) is None
    problem = mismatch(("Processing x.whl", "2.13.0+cpu tensor([1., 3.])"), printed)
    assert problem is not None and "the block printed" in problem and "  Installed" in problem
    assert mismatch(("a", "b", "c", "d", "e"), "b\nc\nd\ne\n") is not None


def test_every_command_of_the_publishing_page_runs_in_the_installed_tier() -> None:
    """Issue 43 item 9: the variants section's command was printed but never run (it was
    refused). Every ```sh block of docs/publishing.md is marked runnable, and the variants
    section's shows the labels and the index lines it prints."""
    lines = (ROOT / "docs" / "publishing.md").read_text().splitlines()
    unmarked = [n + 1 for n, line in enumerate(lines)
                if line.strip() == "```sh" and not (n and lines[n - 1].strip().startswith(
                    ("<!-- runnable", "<!-- not runnable here")))]
    assert unmarked == []
    # A block that cannot run here names the test that runs it (offline) instead.
    elsewhere = [re.search(r"(tests/\S+\.py) runs", line) for line in lines
                 if line.strip().startswith("<!-- not runnable here")]
    assert all(found and (ROOT / found[1]).is_file() for found in elsewhere), elsewhere
    variants = [run for run in steps(ROOT / "docs" / "publishing.md")
                if isinstance(run, Run) and "-Cvariant=torch" in run.script]
    assert len(variants) == 1 and variants[0].expected is not None
    assert "-Clocal-version=none" in variants[0].script  # the page's pyproject sets it
    shown = "\n".join(variants[0].expected)
    assert "-pt213cpu.whl" in shown and "-pt214cpu.whl" in shown and "skipped" not in shown

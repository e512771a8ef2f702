"""The command line as a newcomer meets it: --version, usage lines, -C help, links in the docs."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

import pep517_torch
from pep517_torch.config import config_setting_fields
from tests.commands import run_cli
from tests.conftest import count

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


# -- issue 43 item 7: no traceback when the reader of stdout leaves early ------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny project built once (its build folder, trace and ledger), a folder with its wheel
    for index, a setup.py for migrate."""
    from tests.tiny_project import write_project

    base = tmp_path_factory.mktemp("closed-stdout")
    root = write_project(base / "proj", "piped")
    done = run_cli("wheel", root, "-o", base / "wheels")
    assert done.returncode == 0, done.stdout + done.stderr
    (base / "setuppy" / "csrc").mkdir(parents=True)
    (base / "setuppy" / "csrc" / "a.cpp").write_text("int a() { return 1; }\n")
    (base / "setuppy" / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension\n"
        "setup(name='piped', version='1.0', ext_modules=[CppExtension('piped._C', ['csrc/a.cpp'])])\n")
    (build_dir,) = (root / "build").iterdir()
    declared = base / "declared"
    shutil.copytree(root, declared, ignore=shutil.ignore_patterns("build"))
    with (declared / "pyproject.toml").open("a") as file:
        file.write('\n[tool.torch-ext.matrix]\npython = ["3.11"]\ntorch = ["2.13"]\ncuda = ["cpu"]\n')
    return {"root": root, "wheels": base / "wheels", "build": build_dir, "base": base,
            "setuppy": base / "setuppy", "declared": declared}


PRINTING = {
    "--version": ["--version"], "--help": ["--help"], "wheel --help": ["wheel", "--help"],
    "wheel": ["wheel", "{root}", "-o", "{base}/w2"], "sdist": ["sdist", "{root}", "-o", "{base}/s"],
    "index": ["index", "{wheels}"], "doctor": ["doctor", "{root}"], "cache": ["cache"],
    "trace": ["trace", "{build}"], "explain": ["explain", "{root}"],
    "migrate": ["migrate", "{setuppy}/setup.py"],
    "wheel --python": ["wheel", "{root}", "--python", sys.executable, "-o", "{base}/w3"],
    "matrix --list": ["matrix", "{declared}", "--list"], "ops": ["ops", "{root}"],
}


ARGPARSE = {"--version", "--help", "wheel --help"}


@pytest.mark.parametrize("command", list(PRINTING))
def test_every_command_that_prints_ends_quietly_on_a_closed_stdout(built: dict[str, Path],
                                                                    command: str) -> None:
    """`python -m pep517_torch explain | head -1`: the reader is gone before the first line
    (its end of the pipe closed at once): no BrokenPipeError, no traceback, status 141."""
    import subprocess

    args = [part.format(**built) for part in PRINTING[command]]
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([sys.executable, "-m", "pep517_torch", *args], stdout=writer,
                              stderr=subprocess.PIPE, text=True, timeout=600, cwd=built["base"])
    finally:
        os.close(writer)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    # argparse's own --help and --version swallow the write's error and exit 0
    assert done.returncode == 141 or (command in ARGPARSE and done.returncode == 0), (
        done.returncode, done.stderr)
    count("issue 43 item 7: a closed stdout")


def test_wheel_python_into_a_file_is_the_one_line_of_a_plain_wheel(built: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("not a folder")
    plain = run_cli("wheel", built["root"], "-o", target)
    matrix = run_cli("wheel", built["root"], "--python", sys.executable, "-o", target)
    expected = f"pep517_torch: error: cannot write {target}: File exists"
    assert plain.stderr.strip().splitlines()[-1] == expected, plain.stderr
    assert matrix.stderr.strip() == expected and matrix.returncode == plain.returncode, matrix
    count("issue 43 item 7: --python -o FILE")

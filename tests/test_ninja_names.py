"""Names ninja cannot hold, and globs that loop.

`|` has no escape in a ninja build line (it starts the implicit inputs: `'…/csrc/pi', needed by
…, missing`), and ninja's reader of compiler dependency files ends a path at control characters
(a file named with one is never up to date). Every path that becomes a build-line path — a
source, the project directory, the build directory, a JIT source or build directory — holding
one is refused by name before anything is written. The printable characters ninja misreads in
depfiles (DEPFILE_REBUILDS) build correctly and are documented as rebuilt every time. A `**` glob enters each
real directory once: a link to an ancestor is no cycle to follow, and one file compiles once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import pep517_torch
from pep517_torch.config import ResolvedProject
from pep517_torch.core.ninja.syntax import DEPFILE_REBUILDS, escape_path, unnameable_character
from pep517_torch.core.toolchain.tools import find_ninja
from pep517_torch.errors import ConfigError
from tests.config_helpers import resolve
from tests.conftest import count

EXT = "tool.torch-ext.extension[0]"
FAMILY = ["|", "\t", "\x01", "\x1b", "\x7f"]


def resolve_sources(root: Path, sources: list[str], **settings: Any) -> ResolvedProject:
    """Resolve one extension of these source globs, with these -C settings."""
    return resolve(root, {"extension": [{"name": "_C", "sources": sources}]}, settings or None)


@pytest.mark.parametrize("char", FAMILY)
def test_a_source_named_with_a_character_ninja_cannot_read_is_refused(tmp_path: Path, char: str) -> None:
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / f"pi{char}pe.cpp").write_text("")
    with pytest.raises(ConfigError, match=re.escape(repr(char))) as error:
        resolve_sources(tmp_path, ["csrc/*.cpp"])
    assert error.value.key == f"{EXT}.sources[0]"
    assert "\n" not in str(error.value)
    count("characters ninja cannot read refused in source names")


def test_a_folder_named_with_a_pipe_is_refused_and_named(tmp_path: Path) -> None:
    (tmp_path / "cs|rc").mkdir()
    (tmp_path / "cs|rc" / "ops.cpp").write_text("")
    with pytest.raises(ConfigError, match=r"'cs\|rc/ops.cpp'.*'\|', which ninja reads"):
        resolve_sources(tmp_path, ["**/*.cpp"])


@pytest.mark.parametrize("char", ["|", "\x02"])
def test_the_project_and_build_directories(tmp_path: Path, char: str) -> None:
    root = tmp_path / f"my{char}proj"
    root.mkdir()
    (root / "a.cpp").write_text("")
    with pytest.raises(ConfigError, match="the project directory") as error:
        resolve_sources(root, ["a.cpp"])
    assert error.value.key is None
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.cpp").write_text("")
    with pytest.raises(ConfigError, match="the build directory") as error:
        resolve_sources(plain, ["a.cpp"], **{"build-dir": f"build/x{char}y"})
    assert error.value.key == "build-dir"


@pytest.mark.parametrize("control", ["\x01", "\t", "\x1b", "\x7f"])
def test_a_control_character_in_the_build_dir_setting(tmp_path: Path, control: str) -> None:
    (tmp_path / "a.cpp").write_text("")
    said = f"contains the control character {re.escape(repr(control))}"
    with pytest.raises(ConfigError, match=said) as error:
        resolve_sources(tmp_path, ["a.cpp"], **{"build-dir": f"/tmp/b{control}c"})
    assert error.value.key == "build-dir"
    count("control characters refused in -Cbuild-dir")


def test_the_jit_refuses_them_before_writing(tmp_path: Path) -> None:
    source = tmp_path / "pi|pe.cpp"
    source.write_text("")
    with pytest.raises(ConfigError, match="'\\|'") as error:
        pep517_torch.load("ops", [str(source)], build_directory=str(tmp_path / "b"))
    assert error.value.key == "sources"
    said = r"contains '\|', which ninja reads as the start"
    with pytest.raises(ConfigError, match=said) as error:
        pep517_torch.load_inline("ops", "int f() { return 1; }",
                                 build_directory=str(tmp_path / "b|c"))
    assert error.value.key == "build_directory"
    assert not (tmp_path / "b").exists() and not (tmp_path / "b|c").exists()


def test_the_writer_guards_against_a_pipe() -> None:
    with pytest.raises(ValueError, match="'|' cannot be written into a build line"):
        escape_path("csrc/pi|pe.cpp")


NINJAS = sorted({str(find_ninja(os.environ)), *filter(None, [shutil.which("ninja")])})


@pytest.mark.parametrize("ninja", NINJAS)
def test_the_refused_family_is_what_ninja_misreads(tmp_path: Path, ninja: str) -> None:
    """The lists are measured, not guessed: with a compiler that writes a depfile naming a
    header with each character (unescaped, as gcc writes it), ninja finds the header missing and
    rebuilds for the refused characters (tab) and the documented DEPFILE_REBUILDS only, and
    every ninja since 1.11 for `* ; < > ^` and backtick; a `|` in a build line names another file."""
    misread = []
    for index, char in enumerate("|!#$%&'()*+,;<=>?@[]^`{}~\"\t:\\ "):
        work = tmp_path / f"t{index}"
        work.mkdir()
        header = f"h{char}x.h"
        (work / header).write_text("")
        depfile = "out: " + header.replace(" ", "\\ ").replace("$", "$$").replace("#", "\\#")
        (work / "dep.txt").write_text(depfile + "\n")
        (work / "build.ninja").write_text(
            "rule fake\n  command = cp dep.txt out.d && touch out\n  depfile = out.d\n"
            "  deps = gcc\nbuild out: fake\n"
        )
        subprocess.run([ninja], cwd=work, check=True, capture_output=True)
        again = subprocess.run([ninja, "-n"], cwd=work, capture_output=True, text=True)
        if "no work to do" not in again.stdout:
            misread.append(char)
    assert set("|*;<>^`\t") <= set(misread), misread  # every ninja since 1.11
    assert set(misread) <= DEPFILE_REBUILDS | {"|", "\t"}, misread
    assert unnameable_character("a\tb") and unnameable_character("a|b")
    assert not any(unnameable_character(f"a{c}b") for c in "!#$%()+,=@[]{}~: \\&'*;<>?^`\"")
    count("characters measured against a real ninja's depfile reader", len(misread))
    (tmp_path / "pipe").mkdir()
    (tmp_path / "pipe" / "build.ninja").write_text(
        "rule fake\n  command = touch out\nbuild out: fake csrc/pi|pe.cpp\n"
    )
    (tmp_path / "pipe" / "csrc").mkdir()
    (tmp_path / "pipe" / "csrc" / "pi|pe.cpp").write_text("")
    broken = subprocess.run([ninja], cwd=tmp_path / "pipe", capture_output=True, text=True)
    assert broken.returncode != 0 and "'csrc/pi', needed by 'out', missing" in broken.stderr


def test_a_glob_through_a_link_to_an_ancestor_compiles_each_file_once(tmp_path: Path) -> None:
    (tmp_path / "csrc" / "sub").mkdir(parents=True)
    (tmp_path / "csrc" / "ops.cpp").write_text("")
    (tmp_path / "csrc" / "sub" / "more.cpp").write_text("")
    (tmp_path / "csrc" / "loop").symlink_to("..", target_is_directory=True)
    (tmp_path / "csrc" / "sub" / "up").symlink_to("../..", target_is_directory=True)
    (tmp_path / "csrc" / "again").symlink_to("sub", target_is_directory=True)
    resolved = resolve_sources(tmp_path, ["csrc/**/*.cpp", "csrc/again/*.cpp"])
    (spec,) = resolved.extensions
    real = sorted(os.path.realpath(source) for source in spec.sources)
    assert real == [str(tmp_path / "csrc" / "ops.cpp"), str(tmp_path / "csrc" / "sub" / "more.cpp")]
    count("files reached through directory cycles compiled once", 2)

"""A line break (or CR, or NUL) in anything that reaches build.ninja is a ConfigError naming the
key, variable or JIT argument, raised before anything is written. The ninja writer's
ValueError only guards against bugs: no user input may reach it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pep517_torch
from pep517_torch.core.ninja.syntax import escape_path
from pep517_torch.errors import ConfigError
from tests.config_helpers import resolve, resolve_error
from tests.conftest import count

EXT = "tool.torch-ext.extension[0]"
LF = "-DX=a\nb"
ROOT_FILES = dict.fromkeys(["demo/__init__.py", "demo/a.cpp", "inc/pch.h"], "")


def extension(**keys: Any) -> dict[str, Any]:
    return {"extension": [{"name": "demo._C", "sources": ["demo/*.cpp"], **keys}]}


@pytest.mark.parametrize(
    ("tool", "key"),
    [
        (extension(**{"extra-cflags": ["-O2", LF]}), f"{EXT}.extra-cflags[1]"),
        (extension(**{"extra-cuda-cflags": ["-lineinfo\r"]}), f"{EXT}.extra-cuda-cflags[0]"),
        (extension(**{"extra-ldflags": ["-Wl,--as-needed\0"]}), f"{EXT}.extra-ldflags[0]"),
        (extension(**{"define-macros": {"VALUE": "a\nb"}}), f"{EXT}.define-macros.VALUE"),
        (extension(**{"define-macros": {"A\nB": "1"}}), f'{EXT}.define-macros."A\\nB"'),
        (extension(**{"include-dirs": ["inc\nx"]}), f"{EXT}.include-dirs[0]"),
        (extension(**{"include-dirs": ["/usr/include\n"]}), f"{EXT}.include-dirs[0]"),
        (extension(**{"library-dirs": ["lib\n"]}), f"{EXT}.library-dirs[0]"),
        (extension(**{"runtime-library-dirs": ["$ORIGIN\n/lib"]}), f"{EXT}.runtime-library-dirs[0]"),
        (extension(**{"libraries": ["m\nc"]}), f"{EXT}.libraries[0]"),
        (extension(sources=["demo/a.cpp\n"]), f"{EXT}.sources[0]"),
        (extension(**{"pch-header": "inc/pch.h\n"}), f"{EXT}.pch-header"),
        ({**extension(), "pch-header": "inc/\npch.h"}, "tool.torch-ext.pch-header"),
        (extension(cuda={"extra-cflags": [LF]}), f"{EXT}.cuda.extra-cflags[0]"),
        (extension(**{"cuda-arch-list": "8.0\n9.0"}), f"{EXT}.cuda-arch-list"),
        ({**extension(), "build-dir": "build\n{wheel_tag}"}, "tool.torch-ext.build-dir"),
        ({**extension(), "compiler-launcher": "ccache\n"}, "tool.torch-ext.compiler-launcher"),
        ({**extension(), "overrides": [{"if": {}, "append": {"extension": {"*": {
            "extra-cflags": [LF]}}}}]},
         'tool.torch-ext.overrides[0].append.extension."*".extra-cflags[0]'),
    ],
)
def test_toml_values_are_one_line(root: Path, tool: dict[str, Any], key: str) -> None:
    error = resolve_error(root, tool, match="contains a .*one line|not a valid name")
    count("line breaks refused by the config layer")
    assert error.key == key


@pytest.mark.parametrize(
    ("settings", "env", "key"),
    [
        ({"build-dir": "/tmp/b\nc"}, {}, "build-dir"),
        ({"compiler-launcher": "sccache\r"}, {}, "compiler-launcher"),
        ({"cuda-arch-list": "8.0\n"}, {}, "cuda-arch-list"),
        (None, {"TORCH_CUDA_ARCH_LIST": "8.0\n9.0"}, "TORCH_CUDA_ARCH_LIST"),
        (None, {"CXX": "g++\n-O2"}, "CXX"),
        (None, {"CC": "gcc\r"}, "CC"),
        (None, {"CUDA_HOME": "/usr/local/cuda\n"}, "CUDA_HOME"),
        (None, {"CUDA_PATH": "/opt/cuda\0"}, "CUDA_PATH"),
    ],
)
def test_config_settings_and_environment_are_one_line(
    root: Path, settings: dict[str, Any] | None, env: dict[str, str], key: str
) -> None:
    error = resolve_error(root, extension(), settings, env=env, match="contains a ")
    count("line breaks refused by the config layer")
    assert error.key == key


def test_a_source_file_whose_name_has_a_line_break(root: Path) -> None:
    (root / "demo" / "b\nc.cpp").write_text("")
    error = resolve_error(root, extension(), match="whose name contains a newline")
    count("line breaks refused by the config layer")
    assert error.key == f"{EXT}.sources[0]"
    assert str(error) == (
        f"{EXT}.sources[0]: 'demo/*.cpp' matches 'demo/b\\nc.cpp', whose name contains a"
        " newline: no compiler command can name it; rename the file"
    )


def test_the_project_directory_itself(tmp_path: Path) -> None:
    root = tmp_path / "my\nproject"
    root.mkdir()
    (root / "a.cpp").write_text("")
    tool = {"extension": [{"name": "_C", "sources": ["a.cpp"]}]}
    error = resolve_error(root, tool, match="the project directory")
    count("line breaks refused by the config layer")
    assert error.key is None and "\\n" in str(error)
    del tool["extension"]  # a pure-Python project compiles nothing: it may live there
    assert resolve(root, tool).extensions == ()


def test_strings_that_never_reach_a_command_may_span_lines(root: Path) -> None:
    tool = {**extension(**{"if": {"env": {"BANNER": "two\nlines"}}}),
            "version": {"pattern": "(?x) version \\s* = \\s* '([^']+)'  # verbose\n"}}
    project = {"name": "demo", "dynamic": ["version"]}
    resolved = resolve(root, tool, project=project, env={"BANNER": "two\nlines"})
    assert [spec.name for spec in resolved.extensions] == ["demo._C"]


def test_the_ninja_writer_still_guards_against_bugs() -> None:
    with pytest.raises(ValueError, match="a newline cannot be written into build.ninja"):
        escape_path("a\nb")


def test_cli_prints_one_line_and_writes_nothing(root: Path, tmp_path: Path) -> None:
    """Before the config layer refused them, these reached the ninja writer's ValueError: a
    traceback, after the build directory was created."""
    (root / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "1"\ndynamic = ["dependencies"]\n\n'
        '[tool.torch-ext]\npackages = ["demo"]\n\n'
        '[[tool.torch-ext.extension]]\nname = "demo._C"\nsources = ["demo/a.cpp"]\n'
        'extra-cflags = ["-O2", """-DX=a\nb"""]\n'
    )
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(root), "-o",
                             str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f'pep517_torch: error: {EXT}.extra-cflags[1]: "-DX=a\\nb" contains a newline: a'
        " setting becomes file names and command-line arguments, which must each be one line\n"
    )
    assert not (root / "build").exists()


@pytest.mark.parametrize(
    ("arguments", "argument"),
    [
        ({"extra_cflags": ["-O2 '-DX=a\nb'"]}, "extra_cflags"),
        ({"extra_cuda_cflags": ["'-lineinfo\r'"]}, "extra_cuda_cflags"),
        ({"extra_ldflags": ["'-lm\n'"]}, "extra_ldflags"),
        ({"extra_include_paths": ["inc\nlude"]}, "extra_include_paths"),
        ({"build_directory": "build\ndir"}, "build_directory"),
    ],
)
@pytest.mark.parametrize("function", ["load", "load_inline"])
def test_jit_arguments_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arguments: dict[str, Any], argument: str,
    function: str,
) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.cpp").write_text("")
    with pytest.raises(ConfigError, match="contains a ") as error:
        if function == "load":
            pep517_torch.load("ops", [str(tmp_path / "ops.cpp")], **arguments)
        else:
            pep517_torch.load_inline("ops", "int f() { return 1; }", **arguments)
    assert error.value.key == argument
    assert sorted(os.listdir(tmp_path)) == ["ops.cpp"]  # nothing written, not even a directory
    count("line breaks refused by the JIT")


def test_jit_source_and_extensions_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "o\nps.cpp"
    source.write_text("")
    said = re.escape("ps.cpp' contains a newline: rename or move it")
    with pytest.raises(ConfigError, match=said) as error:
        pep517_torch.load("ops", [str(source)], build_directory=str(tmp_path / "b"))
    assert error.value.key == "sources"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext\ns"))
    with pytest.raises(ConfigError, match="ext\\\\ns' contains a newline") as error:
        pep517_torch.load_inline("ops", "int f() { return 1; }", build_directory=str(tmp_path / "b"))
    assert error.value.key == "TORCH_EXTENSIONS_DIR"
    assert not (tmp_path / "b").exists()


def test_jit_environment_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ops.cpp").write_text("")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("CXX", "g++\n-O2")
    with pytest.raises(ConfigError, match=r'"g\+\+\\n-O2" contains a newline') as error:
        pep517_torch.load("ops", [str(tmp_path / "ops.cpp")], build_directory=str(tmp_path / "b"))
    assert error.value.key == "CXX"
    assert not (tmp_path / "b").exists()

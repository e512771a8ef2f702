"""Bad inputs once accepted, or answered with a traceback, a repeated line or a quote that says
nothing: each is now one line naming its key, file or program. Nothing here compiles."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config import read_pyproject
from pep517_torch.errors import ConfigError
from tests.commands import run_cli
from tests.config_helpers import resolve, resolve_error
from tests.conftest import count, write

EXT = "tool.torch-ext.extension[0]"
ROOT_FILES = dict.fromkeys(["demo/__init__.py", "csrc/ops.cpp"], "")


def project_with(root: Path, build_system: str) -> Path:
    """A [build-system] of the caller's own making (wrong shapes, another backend): literal text,
    not tests.tiny_project.pyproject, whose [build-system] is always a good one."""
    write(root / "pyproject.toml", f'[build-system]\n{build_system}\n\n[project]\nname = "demo"\n'
                                   'version = "1.0"\n')
    return root


@pytest.mark.parametrize(
    ("requires", "key", "words"),
    [
        ('"torch"', "build-system.requires", "must be a list of requirement strings"),
        ("[1, 2]", "build-system.requires", "must be a list of requirement strings"),
        ("{ a = 1 }", "build-system.requires", "must be a list of requirement strings"),
        ('["pep517_torch", "torch>>2"]', "build-system.requires[1]", "'torch>>2' is not a requirement"),
        ('["!!!"]', "build-system.requires[0]", "is not a requirement"),
    ],
)
def test_build_requirements_that_are_not_a_list_of_requirements(
    tmp_path: Path, requires: str, key: str, words: str
) -> None:
    """Before: a traceback in missing_build_requirements, or `pip install 't' 'o' 'r' ...`."""
    root = project_with(tmp_path / "p", f'requires = {requires}\nbuild-backend = "pep517_torch"')
    result = run_cli("wheel", root, "-o", tmp_path / "out")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"pep517_torch: error: {key}: ") and words in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
    count("[build-system] requires of the wrong shape refused in one line")


@pytest.mark.parametrize("command", ["wheel", "sdist"])
def test_a_project_of_another_backend_is_not_ours_to_build(tmp_path: Path, command: str) -> None:
    root = project_with(tmp_path / "p", 'requires = ["setuptools"]\n'
                                        'build-backend = "setuptools.build_meta"')
    result = run_cli(command, root, "-o", tmp_path / "out")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("pep517_torch: error: build-system.build-backend: is"
                                    " 'setuptools.build_meta', not pep517_torch")
    assert not (tmp_path / "out").exists()


def test_a_byte_order_mark_is_named(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b'\xef\xbb\xbf[project]\nname = "demo"\n')
    with pytest.raises(ConfigError, match="byte-order mark"):
        read_pyproject(tmp_path)


def ext(**keys: Any) -> dict[str, Any]:
    return {"packages": ["demo"],
            "extension": [{"name": "demo._C", "sources": ["csrc/*.cpp"], **keys}]}


@pytest.mark.parametrize(
    ("tool", "key", "words"),
    [
        ({**ext(), "sdist-include": ["/etc/passwd"]}, "tool.torch-ext.sdist-include[0]",
         "must be a relative glob inside the project"),
        ({**ext(), "sdist-include": ["../secrets/*"]}, "tool.torch-ext.sdist-include[0]",
         "must be a relative glob"),
        ({**ext(), "sdist-exclude": ["/tmp/*"]}, "tool.torch-ext.sdist-exclude[0]",
         "must be a relative glob"),
        (ext(libraries=["-lfoo"]), f"{EXT}.libraries[0]", "name the library without -l: 'foo'"),
        (ext(libraries=["m", "-Wl,--as-needed"]), f"{EXT}.libraries[1]", "not a library name"),
        (ext(**{"dlink-libraries": ["-lnvshmem"]}), f"{EXT}.dlink-libraries[0]", "without -l"),
        (ext(cuda={"libraries": ["-lcublas"]}), f"{EXT}.cuda.libraries[0]", "without -l"),
        ({**ext(), "pch-cache-size": "5P"}, "tool.torch-ext.pch-cache-size",
         "K, M, G or T (powers of 1024)"),
        ({**ext(), "build-dir": "demo/build"}, "tool.torch-ext.build-dir",
         "the directory of package 'demo'"),
        ({**ext(), "build-dir": "csrc"}, "tool.torch-ext.build-dir",
         "holds the sources 'csrc/*.cpp' matches ('csrc/ops.cpp')"),
    ],
)
def test_accepted_though_wrong(root: Path, tool: dict[str, Any], key: str, words: str) -> None:
    error = resolve_error(root, tool, match=re.escape(words))
    assert error.key == key, str(error)
    assert "\n" not in str(error)
    count("wrong settings once accepted (or blamed on another key) refused by the config layer")


def test_every_size_unit_the_parser_takes_is_documented(root: Path) -> None:
    """`pch-cache-size = "5T"` was taken while the docs listed K, M and G only."""
    assert resolve(root, {**ext(), "pch-cache-size": "5T"}).extensions
    docs = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    section = docs[docs.index("#### `pch-cache-size`"):][:800]
    assert "`K`, `M`, `G` or `T` (powers of 1024)" in section


def test_a_wheel_refuses_what_the_sdist_refuses(root: Path, tmp_path: Path) -> None:
    """`sdist-include = ["/etc/passwd"]` failed the sdist only: `wheel` took it."""
    write(root / "pyproject.toml", '[project]\nname = "demo"\nversion = "1"\n'
                                   '[tool.torch-ext]\nsdist-include = ["/etc/passwd"]\n')
    for command in ("wheel", "sdist"):
        result = run_cli(command, root, "-o", tmp_path / "out")
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(
            "pep517_torch: error: tool.torch-ext.sdist-include[0]: '/etc/passwd' must be a relative"
        ), result.stderr


@pytest.mark.parametrize(
    ("cxx", "said"),
    [("/nonexistent/g++", "C++ compiler not found (CXX='/nonexistent/g++')"),
     ("/bin/false", "CXX=/bin/false: `--version` failed (exit 1; it said 'false (GNU coreutils)")],
)
def test_doctor_says_a_compiler_failure_once_and_meaningfully(
    tmp_path: Path, cxx: str, said: str
) -> None:
    if cxx == "/bin/false" and not Path(cxx).exists():
        pytest.skip("no /bin/false here")
    root = tmp_path / "p"
    write(root / "pyproject.toml", '[project]\nname = "demo"\nversion = "1"\n'
                                   'dynamic = ["dependencies"]\n[tool.torch-ext]\n'
                                   'packages = ["demo"]\n[[tool.torch-ext.extension]]\n'
                                   'name = "demo._C"\nsources = ["csrc/*.cpp"]\n')
    write(root / "demo" / "__init__.py")
    write(root / "csrc" / "ops.cpp")
    result = run_cli("doctor", root, env={"CXX": cxx})
    assert result.returncode == 1
    failures = [line for line in result.stdout.splitlines() if line.startswith("fail")]
    assert len(failures) == 1, result.stdout
    if "false (GNU" in said and "coreutils" not in subprocess.run(
            [cxx, "--version"], capture_output=True, text=True).stdout:
        said = said.split("; it said")[0]  # another libc's false
    assert said in failures[0] and "Jim Meyering" not in result.stdout

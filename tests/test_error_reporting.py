"""What a user sees when a build fails: our message alone, through every frontend and the CLI.

pip, build and uv run the hooks in a subprocess and show its output; an exception would end in
their hook runner's traceback, so the hooks print the message and exit 1 (as meson-python does).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.commands import run, run_cli
from tests.tiny_project import pyproject

pytestmark = pytest.mark.compile
BIN = Path(sys.executable).parent
OFFLINE_UV = {"UV_OFFLINE": "1", "UV_NO_CONFIG": "1"}
EXTENSION = 'name = "pkg._C"\nsources = ["csrc/ops.cpp"]\nkind = "library"'
GOOD_SOURCE = "int answer() { return 42; }\n"
BAD_SOURCE = "int answer() {\n  return undeclared_name;\n}\n"
# failure -> (pyproject extra lines, source, environment, words that must be printed)
FAILURES = {
    "config": ('build-dirr = "b"\n', GOOD_SOURCE, {},
               "pep517_torch: error: tool.torch-ext.build-dirr: unknown key 'build-dirr'"
               " (did you mean 'build-dir'?)"),
    "toolchain": ("", GOOD_SOURCE, {"CXX": "/nonexistent/g++"},
                  "pep517_torch: error: C++ compiler not found (CXX='/nonexistent/g++')"),
    "not_a_compiler": ("", GOOD_SOURCE, {"CXX": "/bin/true"},
                       "pep517_torch: error: CXX=/bin/true printed no version: not a C/C++"
                       " compiler"),
    "build": ("", BAD_SOURCE, {}, "pep517_torch: error: build: compiling csrc/ops.cpp failed (full log: "),
}


def make_project(root: Path, failure: str) -> tuple[Path, dict[str, str]]:
    extra, source, env, _ = FAILURES[failure]
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "ops.cpp").write_text(source)
    (root / "pyproject.toml").write_text(pyproject("pkg", EXTENSION, tool=extra))
    return root, env


def frontend_command(frontend: str, project: Path, out: Path) -> list[str]:
    if frontend == "pip":
        return [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                "--no-index", "-w", str(out), str(project)]
    if frontend == "build":
        return [sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(project)]
    return [str(BIN / "uv"), "build", "--no-build-isolation", "--python", sys.executable,
            "--out-dir", str(out), str(project)]


def assert_only_our_words(result: subprocess.CompletedProcess[str], failure: str) -> str:
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    assert FAILURES[failure][3] in output, output
    if failure == "build":  # the compiler's first error, file:line, is the last thing we print
        ours = output[output.index(FAILURES[failure][3]):]
        assert "csrc/ops.cpp:2:" in ours and "undeclared_name" in ours, output
    return output


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("frontend", ["pip", "build", "uv"])
def test_frontends_show_our_message_without_a_traceback(
    tmp_path: Path, frontend: str, failure: str
) -> None:
    project, env = make_project(tmp_path / "project", failure)
    out = tmp_path / "out"
    result = run(*frontend_command(frontend, project, out), cwd=tmp_path, env={**OFFLINE_UV, **env},
                 check=False, timeout=600)
    assert_only_our_words(result, failure)
    assert not list(out.glob("*.whl"))


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_cli_prints_one_message(tmp_path: Path, failure: str) -> None:
    project, env = make_project(tmp_path / "project", failure)
    result = run_cli("wheel", project, "-o", tmp_path / "o", cwd=tmp_path,
                     env={**OFFLINE_UV, **env}, timeout=600)
    output = assert_only_our_words(result, failure)
    assert result.returncode == (2 if failure == "config" else 1)
    assert result.stderr.count("pep517_torch: error:") == 1, output


def test_hook_prints_the_message_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pep517_torch as backend
    from pep517_torch.errors import ConfigError

    project, _ = make_project(tmp_path / "project", "config")
    monkeypatch.chdir(project)
    with pytest.raises(SystemExit, match="^1$") as exit_:  # the exit status, as its message
        backend.build_sdist(str(tmp_path / "out"))
    assert exit_.value.code == 1 and isinstance(exit_.value.__cause__, ConfigError)
    assert capsys.readouterr().err == textwrap.dedent(
        """\
        pep517_torch: error: tool.torch-ext.build-dirr: unknown key 'build-dirr' (did you mean 'build-dir'?)
        """
    )

"""migrate on odd setup.py files (#35 item 11): each run of setup.py happens in a process of
its own, so whatever the script does to its process (exits, hangs, forks, closes its streams,
reads stdin, prints forever) is one line and an exit status, nothing is written, and no
process it started outlives migrate. Nothing is built."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pep517_torch.config.pyproject import tomllib
from tests.migrate_helpers import migrate_main as main
from tests.conftest import count
from tests.migrate_helpers import clean_env, project_with, unset_fixture_variables  # noqa: F401

HEAD = """import os, signal, subprocess, sys, time
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
def note_pid(pid):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pids"), "a") as f:
        f.write(f"{pid}\\n")
"""
SETUP = """setup(name="p", version="1.0", packages=["p"],
      ext_modules=[CppExtension("p._C", ["a.cpp"])], cmdclass={"build_ext": BuildExtension})
"""


def _project(tmp_path: Path, before: str = "", after: str = "") -> Path:
    return project_with(tmp_path, f"{HEAD}{before}\n{SETUP}{after}\n")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


def _left_running(project: Path) -> list[int]:
    """The processes setup.py noted that still run (given a moment to be reaped)."""
    pids = [int(p) for p in (project / "pids").read_text().split()] if (
        project / "pids").exists() else []
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _migrate(project: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """migrate's exit status and stderr; its temporary folder is checked empty afterwards
    (before: each run that skipped Python's clean-up left a pep517-migrate-gpu-* folder)."""
    temporary = project.with_name(f"{project.name}.tmp")
    temporary.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(temporary))
        status = main([str(project), "--write", *args])
    err = capsys.readouterr().err
    assert sorted(p.name for p in temporary.iterdir()) == [], "migrate left temporary files"
    return status, err


# (code before setup(), code after it, exit status, the error's words; None: it works)
ODD = {
    "os._exit before setup()": ("os._exit(0)", "", 2,
                                "setup.py ended its process with os._exit(0) (line 7) before"
                                " calling setup()"),
    "os._exit(0) after setup()": ("", "os._exit(0)", 0, None),
    "os._exit(5) after setup()": ("", "os._exit(5)", 2,
                                  "setup.py ended its process with os._exit(5) (line 10)"),
    "raise KeyboardInterrupt": ("raise KeyboardInterrupt", "", 2,
                                "setup.py raised KeyboardInterrupt (line 7: raise"
                                " KeyboardInterrupt)"),
    "sys.exit(message)": ("sys.exit('no CUDA here')", "", 2,
                          "setup.py exited with the message 'no CUDA here' (status 1) (line 7:"
                          " sys.exit('no CUDA here')) before calling setup()"),
    "exit(3) before setup()": ("exit(3)", "", 2,
                               "setup.py exited with status 3 (line 7: exit(3)) before calling"
                               " setup()"),
    "exit(0) before setup()": ("exit(0)", "", 2,
                               "setup.py exited with status 0 (line 7: exit(0)) before calling"
                               " setup()"),
    "killed by a signal": ("os.kill(os.getpid(), signal.SIGKILL)", "", 2,
                           "setup.py's process was killed by SIGKILL before migrate had its"
                           " record"),
    "input() on stdin": ("name = input('name? ')", "", 2,
                         "setup.py raised EOFError: EOF when reading a line (line 7: name ="
                         " input('name? '))"),
    "a background process": ("note_pid(subprocess.Popen(['sleep', '300']).pid)", "", 0, None),
    "a process in a session of its own": (
        "note_pid(subprocess.Popen(['sleep', '300'], start_new_session=True).pid)", "", 0, None),
    "a fork that outlives setup()": ("", "pid = os.fork()\nif pid == 0:\n    time.sleep(300)\n"
                                     "note_pid(pid)", 0, None),
    "a fork that sys.exit()s": ("", "if os.fork() == 0:\n    note_pid(os.getpid())\n"
                                "    sys.exit(0)", 0, None),
    "a daemon (double fork)": (
        "if os.fork():\n    os._exit(0)\nos.setsid()\nif os.fork():\n    os._exit(0)\n"
        "note_pid(os.getpid())", "", 2,
        "setup.py ended its process with os._exit(0) (line 8) before calling setup()"),
}


@pytest.mark.parametrize("case", list(ODD))
def test_odd_setup_py_is_one_line_nothing_written_nothing_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """Before: os._exit(0) ended migrate itself with status 0 (nothing written, nothing said);
    KeyboardInterrupt was a traceback; a setup.py that forked went on running migrate's code
    in the copy; background processes outlived migrate; stdin was the terminal's."""
    before, after, expected_status, words = ODD[case]
    project = _project(tmp_path, before, after)
    me = os.getpid()
    status, err = _migrate(project, capsys)
    if os.getpid() != me:  # a copy setup.py forked came back from migrate into this test
        (project / "a copy came back").touch()
        os._exit(0)
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == expected_status, err
    if words is None:
        assert tomllib.loads((project / "pyproject.toml").read_text())["project"]["name"] == "p"
    else:
        assert lines == [f"error: {project / 'setup.py'}: {words}"
                         + (" (a crash, a signal, or an exit that skips Python's clean-up)"
                            if "killed by" in words else "")], err
        assert not (project / "pyproject.toml").exists()
    assert _left_running(project) == []
    assert not (project / "a copy came back").exists()
    count("odd setup.py files migrated (exits, signals, forks, daemons, stdin)")


@pytest.mark.parametrize("loop", ["time.sleep(1)", "print('x' * 4096)", "pass"])
def test_a_setup_py_that_never_ends_times_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loop: str
) -> None:
    """Before: migrate waited forever (and endless output went to its own stdout)."""
    project = _project(tmp_path, "note_pid(subprocess.Popen(['sleep', '300']).pid)\n"
                       f"while True:\n    {loop}")
    started = time.monotonic()
    status, err = _migrate(project, capsys, "--timeout", "3")
    assert time.monotonic() - started < 60
    assert status == 2 and err.splitlines() == [
        f"error: {project / 'setup.py'}: setup.py did not finish within 3 s (migrate --timeout):"
        " it and every process it started were stopped; nothing was written"], err
    assert not (project / "pyproject.toml").exists()
    assert _left_running(project) == []
    count("setup.py files that never end, stopped by --timeout")


def test_the_timeout_is_checked_and_has_a_default(capsys: pytest.CaptureFixture[str]) -> None:
    from pep517_torch.cli.arguments import parser

    assert 60 <= parser().parse_args(["migrate"]).timeout <= 600  # a few minutes
    for bad in ("0", "-1", "soon", "inf", "nan"):
        with pytest.raises(SystemExit) as exit_:
            main(["--timeout", bad])
        assert exit_.value.code == 2
        assert f"argument --timeout: {bad!r} is not a number of seconds above 0" in \
            capsys.readouterr().err
    count("bad --timeout values refused", 5)


# -- migrate's own streams closed, stdin left open: as a user runs it ---------------------------

def _cli(project: Path, args: list[str], redirect: str = "") -> subprocess.CompletedProcess[str]:
    command = f"{sys.executable} -m pep517_torch migrate {project} {' '.join(args)} {redirect}"
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                          env=clean_env(), cwd=project.parent, timeout=300)


def test_migrate_with_its_stdout_or_stderr_closed(tmp_path: Path) -> None:
    """Before: `>&-` gave rc 1 and an AttributeError traceback on stderr; `2>&-` said
    nothing of a failure (and a file migrate opened could take the closed descriptor)."""
    project = _project(tmp_path)
    printed = _cli(project, [], ">&-")
    assert printed.returncode == 2 and printed.stderr.splitlines() == [
        "error: stdout is closed, so the tables cannot be printed: pass --write to write them"
        " into pyproject.toml"], printed.stderr
    written = _cli(project, ["--write"], ">&-")
    assert written.returncode == 0 and "Traceback" not in written.stderr
    assert "[[tool.torch-ext.extension]]" in (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").unlink()
    quiet = _cli(project, ["--write"], "2>&-")
    assert quiet.returncode == 0 and (project / "pyproject.toml").exists()
    assert tomllib.loads(quiet.stdout or "x = 1")  # nothing but TOML on stdout, if anything
    text = (project / "pyproject.toml").read_text()
    assert text.startswith("# Converted from setup.py") and "Traceback" not in text
    failing = _project(tmp_path / "f", "os._exit(0)") if (tmp_path / "f").mkdir() is None else None
    assert failing is not None
    assert _cli(failing, ["--write"], "2>&- <&-").returncode == 2
    assert not (failing / "pyproject.toml").exists()
    count("ways to run migrate with its own streams closed", 4)


STREAMS = {
    "os.close(1) and os.close(2)": "os.close(1); os.close(2)",
    "sys.stdout and sys.stderr closed": "sys.stdout.close(); sys.stderr.close()",
    "output to fds 1 and 2, and a child's": "os.write(1, b'[not toml\\n'); os.write(2, b'x\\n')"
                                            "; subprocess.call(['echo', '[x'])",
    "stdin read to its end (a terminal nobody types into)": "assert sys.stdin.read() == ''",
    "a line read from stdin": "assert sys.stdin.readline() == ''",
}


@pytest.mark.parametrize("case", list(STREAMS))
def test_what_setup_py_does_to_its_streams_stays_out_of_migrates(tmp_path: Path, case: str) -> None:
    """Before: setup.py's os.close(1) closed migrate's own stdout (rc 1, a traceback), what it
    or a child wrote to fd 1 landed in the printed TOML, and stdin was migrate's own (a
    terminal: `input()` waited forever). Printed tables are now all of stdout."""
    project = _project(tmp_path, STREAMS[case])
    read, write = os.pipe()  # an open stdin nobody writes to
    try:
        result = subprocess.run([sys.executable, "-m", "pep517_torch", "migrate", str(project)],
                                stdin=read, capture_output=True, text=True, env=clean_env(),
                                timeout=120)
    finally:
        os.close(read)
        os.close(write)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert tomllib.loads(result.stdout)["project"]["name"] == "p"
    count("setup.py doings to its stdin/stdout/stderr kept from migrate's own streams")

"""The listing child started while a build compiles (ops/early.py, backend/op_listing.py,
issue 46): its `import torch` overlaps the compile and it answers after the link; a build that
fails or is interrupted leaves no such child behind; a build that compiles nothing starts its
child after the link, as before; a child that cannot serve is replaced by one started then."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pep517_torch.ops.early import EarlyChild
from pep517_torch.ops.listing import Contents, list_ops
from tests.commands import run_cli
from tests.conftest import FIXTURES, write_tree
from tests.test_ops_table import STAND_IN
from tests.tiny_project import pyproject

# The processes running the listing child as an early one (``child.py -``) whose environment
# holds MARK: this test's, whatever else runs on the machine. Zombies are gone already.
FINDER = '''
def early_children(mark):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                args = handle.read().split(b"\\0")
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read().split(b"\\0")
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if (state != b"Z" and any(a.endswith(b"ops/child.py") for a in args)
                and b"-" in args and f"EARLY_MARK={mark}".encode() in environ):
            found.append(int(entry))
    return found
'''
_FOUND: dict[str, object] = {"os": os}
exec(FINDER, _FOUND)  # early_children(), here as in the launcher below
early_children = _FOUND["early_children"]

# A compiler launcher that, on a compile, waits for the build's early child to run, notes it
# in SEEN, then fails ("fail") or hangs ("hang") instead of compiling.
LAUNCHER = '''#!{python}
import os, sys, time
{finder}
if "-c" in sys.argv:
    deadline = time.monotonic() + 300
    while not early_children({mark!r}) and time.monotonic() < deadline:
        time.sleep(0.05)
    with open({seen!r}, "w") as handle:
        handle.write(f"{{os.getpid()}} {{early_children({mark!r})}}")
    if {mode!r} == "fail":
        print("error: this compile fails on purpose", file=sys.stderr)
        sys.exit(1)
    time.sleep(600)
os.execvp(sys.argv[1], sys.argv[1:])
'''


def _stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> str:
    script = tmp_path / "python"
    script.write_text(f"#!{sys.executable}\n{STAND_IN}")
    script.chmod(0o755)
    monkeypatch.setenv("STAND_IN", mode)
    return str(script)


def test_the_early_child_answers_the_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = _stand_in(tmp_path, monkeypatch, "good")
    with EarlyChild(python, scratch=tmp_path) as child:
        child.start()
        answer = list_ops(Contents(files=()), python, scratch=tmp_path, early=child.take())
        assert child.take() is None  # handed over once
    assert answer.early and [op.name for op in answer.table.ops] == ["ns::f"]
    assert not list(tmp_path.glob(".pep517_torch-ops-*"))  # both scratch folders removed


def test_an_early_child_that_is_not_running_is_replaced_after_the_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One that exited before it was asked (here `true`), or never started (no such
    interpreter): the listing starts its own child, as a build without one does."""
    python = _stand_in(tmp_path, monkeypatch, "good")
    for broken in ("/bin/true", str(tmp_path / "no-such-python")):
        with EarlyChild(broken, scratch=tmp_path) as child:
            child.start()
            time.sleep(0.2)
            answer = list_ops(Contents(files=()), python, scratch=tmp_path, early=child.take())
        assert not answer.early and [op.name for op in answer.table.ops] == ["ns::f"]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return True
    return state == b"Z"  # killed, its parent's to reap


def test_a_child_never_asked_is_killed_with_what_it_started(tmp_path: Path) -> None:
    python = tmp_path / "python"
    pids = tmp_path / "pids"
    python.write_text(f"#!/bin/sh\nsleep 600 &\necho $$ $! > {pids}\nexec sleep 600\n")
    python.chmod(0o755)
    child = EarlyChild(str(python), scratch=tmp_path)
    with child:
        child.start()
        deadline = time.monotonic() + 30
        while not pids.exists() or not pids.read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.05)
    started = [int(pid) for pid in pids.read_text().split()]
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in started)
    assert not list(tmp_path.glob(".pep517_torch-ops-*"))


# -- real builds -------------------------------------------------------------------------------


def _gated_project(tmp_path: Path, mode: str) -> tuple[Path, dict[str, str], Path]:
    """An op library whose compile goes through LAUNCHER; the CLI's environment; SEEN."""
    mark, seen = uuid.uuid4().hex, tmp_path / "seen"
    launcher = tmp_path / "launcher"
    launcher.write_text(LAUNCHER.format(python=sys.executable, finder=FINDER, mark=mark,
                                        seen=str(seen), mode=mode))
    launcher.chmod(0o755)
    project = write_tree(tmp_path / "proj", {
        "pyproject.toml": pyproject("earlyops", 'name = "earlyops._C"\nkind = "library"\n'
                                    'sources = ["csrc/ops.cpp"]'),
        "earlyops/__init__.py": "",
        # what the sources say is all the listing's guess reads: TORCH_LIBRARY, so a child
        "csrc/ops.cpp": "// TORCH_LIBRARY(earlyops, m) comes later\nint answer() { return 42; }\n",
    })
    env = {"EARLY_MARK": mark, "PEP517_TORCH_COMPILER_LAUNCHER": str(launcher)}
    return project, env, seen


@pytest.mark.compile
def test_a_failed_compile_leaves_no_listing_child(tmp_path: Path) -> None:
    project, env, seen = _gated_project(tmp_path, "fail")
    result = run_cli("wheel", project, "-o", tmp_path / "out", env=env, timeout=600)
    assert result.returncode != 0 and "fails on purpose" in result.stdout + result.stderr
    launcher_pid, _, children = seen.read_text().partition(" ")
    assert children != "[]", "no listing child was running during the compile"
    assert early_children(env["EARLY_MARK"]) == []  # type: ignore[operator]


@pytest.mark.compile
def test_an_interrupted_build_leaves_no_listing_child(tmp_path: Path) -> None:
    project, env, seen = _gated_project(tmp_path, "hang")
    builder = subprocess.Popen(
        [sys.executable, "-m", "pep517_torch", "wheel", str(project), "-o", str(tmp_path / "out")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **env},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    launcher = None
    try:
        deadline = time.monotonic() + 300
        while not (seen.exists() and seen.read_text()):
            assert time.monotonic() < deadline and builder.poll() is None, builder.communicate()
            time.sleep(0.05)
        launcher, _, children = seen.read_text().partition(" ")
        assert children != "[]", "no listing child was running during the compile"
        builder.send_signal(signal.SIGINT)  # Ctrl-C: KeyboardInterrupt in the build
        builder.communicate(timeout=120)
        assert builder.returncode != 0
        assert early_children(env["EARLY_MARK"]) == []  # type: ignore[operator]
    finally:
        if builder.poll() is None:
            builder.kill()
            builder.communicate()
        if launcher is not None and not _gone(int(launcher)):
            os.kill(int(launcher), signal.SIGKILL)


@pytest.mark.compile
def test_a_build_that_compiles_lists_with_the_child_started_before_its_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The answer comes from the child started when ninja got to work, before the link wrote
    the artifact; the next build, with nothing to compile, starts its child after it."""
    import shutil

    from pep517_torch.backend import pipeline

    root = tmp_path / "opsnofake"
    shutil.copytree(FIXTURES / "opsnofake", root, ignore=shutil.ignore_patterns("build", "dist"))
    monkeypatch.setenv("PEP517_TORCH_NO_REPLAY", "1")
    started: list[EarlyChild] = []
    listed = []
    start, list_build_ops = EarlyChild.start, pipeline.list_build_ops

    def spy_start(self: EarlyChild) -> None:
        start(self)
        started.append(self)

    def spy_list(*args, **kwargs):  # type: ignore[no-untyped-def]
        listed.append(list_build_ops(*args, **kwargs))
        return listed[-1]

    monkeypatch.setattr(EarlyChild, "start", spy_start)
    monkeypatch.setattr(pipeline, "list_build_ops", spy_list)
    pipeline.build_wheel(root, tmp_path / "out", None)
    (artifact,) = (root / "build").glob("*/out/nofakeops/_C*.so")
    (child,) = started
    assert child.started_at is not None and child.started_at < artifact.stat().st_mtime
    assert listed[0].early and [op.name for op in listed[0].table.ops] == ["nofakeops::scale"]
    assert child.process is None and child.taken is None and child.work is None  # all ended
    said = capsys.readouterr().out
    assert "of which listing the operators" in said

    dead = artifact.parents[2] / ".pep517_torch-ops-early-killed"  # a SIGKILLed build's
    (dead / "log").mkdir(parents=True)
    pipeline.build_wheel(root, tmp_path / "out", None)  # nothing to compile: no early child
    assert not dead.exists()
    assert len(started) == 1
    assert not listed[1].early and [op.name for op in listed[1].table.ops] == ["nofakeops::scale"]


def test_the_guess_reads_the_sources_the_headers_they_reach_and_the_python(tmp_path: Path) -> None:
    """Before the compile: a registration macro in a source or a project header it includes, or
    a shipped module using torch.library, starts the child; a plain extension does not."""
    from pep517_torch.backend.op_listing import _may_register
    from pep517_torch.backend.stages import load

    project = write_tree(tmp_path / "proj", {
        "pyproject.toml": pyproject("guessops", 'name = "guessops._C"\nsources = ["csrc/a.cpp"]\n'
                                    'include-dirs = ["csrc"]'),
        "guessops/__init__.py": "",
        "csrc/a.cpp": '#include "reg.h"\nint answer() { return 42; }\n',
        "csrc/reg.h": "#pragma once\n",
    })
    assert not _may_register(load(project, {}), editable=False)
    (project / "csrc" / "reg.h").write_text("#pragma once\n#define REGISTER TORCH_LIBRARY_IMPL\n")
    assert _may_register(load(project, {}), editable=False)
    (project / "csrc" / "reg.h").write_text("#pragma once\n")
    (project / "guessops" / "fake.py").write_text("import torch\ntorch.library.register_fake('x::y')\n")
    assert _may_register(load(project, {}), editable=False)

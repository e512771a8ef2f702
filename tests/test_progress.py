"""Progress a person can follow (issue #15 item 3, #14 item 8): a line when each step starts,
its own duration when it ends, a heartbeat while it runs, and the whole log in build.log.

Real ninja runs (the one on PATH and the one from the ``ninja`` package, which find_ninja
prefers: 1.11 and 1.13 here) build steps that wait for a file the test creates only when the
line it expects has been said, so each test proves the order of events, not a timing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.ninja.report import run_ninja
from pep517_torch.shipped_runtime import ninja as progress
from pep517_torch.errors import BuildError


def _ninjas() -> list[str]:
    found: dict[str, str] = {}
    for candidate in (shutil.which("ninja"), str(toolchain.find_ninja({"PATH": ""}))
                      if _has_ninja_package() else None):
        if candidate:
            version = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
            found.setdefault(version.strip(), candidate)
    return list(found.values())


def _has_ninja_package() -> bool:
    import importlib.util

    return importlib.util.find_spec("ninja") is not None


NINJAS = _ninjas()

# Waits (at most ~5 minutes) until the test creates $go, then writes $out.
WAITING_BUILD = """\
rule wait
  command = i=0; while [ ! -e $go ]; do i=$$((i+1)); if [ $$i -gt 6000 ]; then exit 3; fi; sleep 0.05; done; echo made $out > $out
  description = making $out
rule fail
  command = echo "x.cpp:1:2: error: boom"; echo "    1 | boom"; exit 1
  description = compiling x.cpp
"""


class Said(list[str]):
    """The lines said, with actions to run when a line starting with a prefix is said."""

    def __init__(self) -> None:
        super().__init__()
        self.actions: dict[str, object] = {}

    def __call__(self, line: str) -> None:
        self.append(line)
        for prefix, action in list(self.actions.items()):
            if line.startswith(prefix):
                del self.actions[prefix]
                action()  # type: ignore[operator]


def _project(tmp_path: Path, edges: str) -> Path:
    build = tmp_path / "build"
    build.mkdir()
    (build / "build.ninja").write_text(WAITING_BUILD + edges)
    return build


def _touch(path: Path):  # type: ignore[no-untyped-def]
    return lambda: path.write_text("")


@pytest.mark.parametrize("ninja", NINJAS)
def test_a_step_is_said_when_it_starts_and_with_its_own_time_when_it_ends(
    ninja: str, tmp_path: Path
) -> None:
    build = _project(tmp_path, "build a.txt: wait\n  go = go-a\nbuild b.txt: wait\n  go = go-b\n")
    said = Said()
    # Neither step may finish before both have started: each start is said while it runs.
    said.actions["[2/2] making "] = lambda: [_touch(build / go)() for go in ("go-a", "go-b")]
    result = run_ninja(Path(ninja), build, jobs=2, log=said, log_file=build / "build.log")
    assert sorted(said[:2]) == ["[1/2] making a.txt...", "[2/2] making b.txt..."] or sorted(
        said[:2]) == ["[1/2] making b.txt...", "[2/2] making a.txt..."]
    done = sorted(line.split("] ", 1)[1].split(": done in ")[0] for line in said[2:])
    assert done == ["making a.txt", "making b.txt"] and len(said) == 4
    assert sorted(result.steps) == ["making a.txt", "making b.txt"]
    log = (build / "build.log").read_text()
    assert all(line in log for line in said)
    assert (build / "a.txt").read_text() == "made a.txt\n"


@pytest.mark.parametrize("ninja", NINJAS)
def test_a_long_step_gets_a_heartbeat(ninja: str, tmp_path: Path) -> None:
    build = _project(tmp_path, "build a.txt: wait\n  go = go-a\n")
    said = Said()
    said.actions["still making a.txt ("] = _touch(build / "go-a")  # only a heartbeat ends it
    run_ninja(Path(ninja), build, jobs=1, log=said, heartbeat=0.2)
    assert said[0] == "[1/1] making a.txt..."
    assert said[1].startswith("still making a.txt (") and said[1].endswith(" s)")
    assert said[-1].startswith("[1/1] making a.txt: done in ")


@pytest.mark.parametrize("ninja", NINJAS)
def test_a_failure_names_the_log_which_holds_the_output(ninja: str, tmp_path: Path) -> None:
    build = _project(tmp_path, "build x.o: fail\n")
    said = Said()
    first_line = f"build: compiling x.cpp failed (full log: {build / 'build.log'}):"
    with pytest.raises(BuildError, match="^" + re.escape(first_line)) as failure:
        run_ninja(Path(ninja), build, jobs=1, log=said, log_file=build / "build.log",
                  descriptions={"x.o": "compiling x.cpp"})
    message = str(failure.value)
    assert said[0] == "[1/1] compiling x.cpp..." and said[1].startswith("[1/1] compiling x.cpp: failed after ")
    assert message.endswith("x.cpp:1:2: error: boom\n    1 | boom")
    log = (build / "build.log").read_text()
    assert "x.cpp:1:2: error: boom" in log and "FAILED: " in log
    assert "\x1b" not in log and "\r" not in log and "\x1b" not in message  # no colours, no \r
    assert "FAILED: x.o" in failure.value.output or "FAILED: [code=1] x.o" in failure.value.output


@pytest.mark.parametrize("ninja", NINJAS)
def test_nothing_to_do_says_nothing_and_keeps_the_last_log(ninja: str, tmp_path: Path) -> None:
    build = _project(tmp_path, "build a.txt: wait\n  go = go-a\n")
    (build / "go-a").write_text("")
    run_ninja(Path(ninja), build, jobs=1, log=lambda line: None, log_file=build / "build.log")
    before = (build / "build.log").read_text()
    said = Said()
    result = run_ninja(Path(ninja), build, jobs=1, log=said, log_file=build / "build.log",
                       header="pep517_torch: building...")
    assert said == [] and result.steps == [] and result.log_file is None
    assert (build / "build.log").read_text() == before and "making a.txt: done" in before


def test_without_a_terminal_ninja_is_still_followed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """No pseudo-terminal (none left, or a platform without): finishes only, times unknown."""
    monkeypatch.setattr(progress, "_terminal", lambda: None)
    build = _project(tmp_path, "build a.txt: wait\n  go = go-a\n")
    (build / "go-a").write_text("")
    said = Said()
    result = run_ninja(Path(NINJAS[0]), build, jobs=1, log=said)
    assert said == ["[1/1] making a.txt: done"] and result.steps == ["making a.txt"]


# -- the reader alone, on ninja's own bytes ---------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ninja 1.11 on a terminal, -j3 (recorded; the \r\n of a terminal's output processing is off)
SMART = [
    b"\r[1/0/4] compiling a.cpp\x1b[K\r[2/0/4] compiling b.cpp\x1b[K\r[3/0/4] compiling c.cpp\x1b[K",
    b"\r[3/1/4] compiling b.cpp\x1b[K\nb.cpp:2:2: warning: #warning hi [-Wcpp]\n",
    b"\r[3/2/4] compiling c.cpp\x1b[K\r[3/2/4] compiling a.cpp\x1b[K",  # a redraw: nothing new
    b"\r[3/3/4] compiling a.cpp\x1b[K",
    b"\r[4/3/4] linking ops\x1b[K",
    b"\r[4/4/4] linking ops\x1b[K\n",
]


@pytest.mark.parametrize("chunk", [1, 3, 7, 1000])
def test_the_reader_times_each_step_on_its_own(chunk: int, tmp_path: Path) -> None:
    """A step's time is its own, not the time since the build started (#14 item 8), however
    the bytes are split."""
    clock, said = Clock(), []
    follower = progress.Progress(said.append, clock=clock, heartbeat=0,
                                 log_path=str(tmp_path / "build.log"), header="building...")
    times = [1600.0, 1612.5, 1700.0, 1740.25, 1741.0, 1742.5]  # the build started at 1000
    for data, now in zip(SMART, times):
        clock.now = now
        for i in range(0, len(data), chunk):
            follower.feed(data[i:i + chunk])
        follower.flush()  # ninja is quiet for a while after each of these writes
    follower.close()
    assert said == [
        "building...",
        "[1/4] compiling a.cpp...",
        "[2/4] compiling b.cpp...",
        "[3/4] compiling c.cpp...",
        "[2/4] compiling b.cpp: done in 12.5 s",
        "b.cpp:2:2: warning: #warning hi [-Wcpp]",
        "[3/4] compiling c.cpp: done in 100.0 s",
        "[1/4] compiling a.cpp: done in 140.2 s",
        "[4/4] linking ops...",
        "[4/4] linking ops: done in 1.5 s",
    ]
    assert follower.finished == ["compiling b.cpp", "compiling c.cpp", "compiling a.cpp", "linking ops"]
    assert follower.output == ["b.cpp:2:2: warning: #warning hi [-Wcpp]"]
    assert (tmp_path / "build.log").read_text().splitlines() == said


def test_the_reader_shows_commands_under_their_start_lines() -> None:
    said: list[str] = []
    follower = progress.Progress(said.append, heartbeat=0, echo_output=False,
                                 commands={"compiling a.cpp": "c++ -c a.cpp -o a.o"})
    follower.feed(b"\r[1/1/2] compiling a.cpp\x1b[K")  # a finish, its start unseen
    follower.feed(b"\x1b[31mFAILED: \x1b[0ma.o \nerror: x\n")
    follower.feed(b"\r[1/0/2] compiling a.cpp\x1b[K")  # (a start after a finish: a redraw)
    follower.close()
    assert said == ["[1/2] compiling a.cpp: failed"]
    starting: list[str] = []
    follower = progress.Progress(starting.append, heartbeat=0,
                                 commands={"compiling a.cpp": "c++ -c a.cpp -o a.o"})
    follower.feed(b"\r[1/0/1] compiling a.cpp\x1b[K\x1b[31mFAILED: \x1b[0ma.o \nerror: x\n")
    follower.close()
    assert starting == ["[1/1] compiling a.cpp...", "  $ c++ -c a.cpp -o a.o", "FAILED: a.o", "error: x"]


@pytest.mark.compile
def test_a_slow_compiler_gets_a_heartbeat_in_a_real_build(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Through the compile core: a compiler that waits (here until the heartbeat is said)."""
    import os

    from pep517_torch.core.build import build
    from pep517_torch.core.spec import BuildOptions, ExtensionSpec
    from tests.tiny_project import NAMED_MODULE

    go = tmp_path / "go"
    slow = tmp_path / "slow-c++"
    slow.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" -c "*) i=0; while [ ! -e "{go}" ]; do i=$((i+1));'
        " if [ $i -gt 6000 ]; then exit 3; fi; sleep 0.05; done;; esac\n"
        f'exec {shutil.which("c++")} "$@"\n'
    )
    slow.chmod(0o755)
    source = tmp_path / "slow_mod.cpp"
    source.write_text(NAMED_MODULE)
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.2)
    said = Said()
    said.actions["still compiling slow_mod.cpp ("] = _touch(go)
    options = BuildOptions(build_dir=tmp_path / "build", env={**os.environ, "CXX": str(slow)},
                           compiler_launcher="none", pch=False)
    result = build([ExtensionSpec("slow_mod", (source,))], options, log=said)
    assert said[0] == "[1/2] compiling slow_mod.cpp..."
    assert said[1].startswith("still compiling slow_mod.cpp (")
    done = next(i for i, line in enumerate(said) if line.startswith("[1/2] compiling slow_mod.cpp: done in "))
    assert all(line.startswith("still compiling slow_mod.cpp (") for line in said[1:done])
    assert result.run.compiled == 1 and result.run.log_file == options.build_dir / "build.log"

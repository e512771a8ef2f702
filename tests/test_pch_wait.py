"""A build that needs the PCH the background is making waits for it or compiles without it,
never both slow (issue 47 item 2): core/pch/wait.py decides with what this machine measured,
core/pch/timings.py. Nothing here compiles: the maker is a process that sleeps, its PCH a file
the test writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pep517_torch.core.pch import timings, wait
from pep517_torch.core.toolchain import priority
from pep517_torch.core.pch.plan import PchPlan
from pep517_torch.shipped_runtime.trace import Step, Timeline

INFO = {"header": "torch/extension.h", "compiler": "gcc 12.2.0", "torch": "2.13.0", "flags": ["-O3"]}


@pytest.mark.parametrize(("remaining", "saving", "users", "slots", "waits"), [
    (5.0, 10.0, 2, 2, True),  # one wave: 5 s of waiting saves 10
    (12.0, 10.0, 2, 2, False),  # one wave: waiting 12 s to save 10 is slower
    (12.0, 10.0, 4, 2, True),  # two waves save 20
    (30.0, 10.0, 4, 2, False),
    (10.0, 10.0, 1, 1, False),  # a tie: compile now, no risk taken
    (5.0, None, 2, 2, False),  # never measured: compile now
    (None, 10.0, 2, 2, False),
    (5.0, 0.0, 2, 2, False),
])
def test_it_waits_only_when_the_rest_of_the_pch_is_shorter_than_what_it_saves(
    remaining: float | None, saving: float | None, users: int, slots: int, waits: bool
) -> None:
    choice = wait.choose(remaining_s=remaining, saving_s=saving, users=users, slots=slots)
    assert (choice.wait_s > 0) is waits, choice
    if waits:
        assert remaining is not None and saving is not None
        # Long enough for the estimate, never longer than what the PCH saves: a wrong estimate
        # costs at most what waiting could have gained.
        assert remaining < choice.wait_s <= -(-users // slots) * saving


def test_the_deadline_is_the_estimate_with_slack_when_that_is_shorter() -> None:
    assert wait.choose(remaining_s=4.0, saving_s=40.0, users=2, slots=2).wait_s == 4.0 * wait.SLACK + wait.GRACE_S


def test_a_pch_past_its_estimate_is_nearly_done_not_negative(tmp_path: Path) -> None:
    making = wait.Making(pid=2, birth="1", pgid=2**22 + 1, started=100.0)  # no such group: wall time
    assert wait.remaining(making, 60.0, now=130.0) == 30.0
    assert wait.remaining(making, 60.0, now=200.0) == 1.0
    assert wait.remaining(making, None, now=130.0) is None


def step(name: str, output: str, start: float, end: float, **args: object) -> Step:
    return Step(name, (output,), int(start * 1000), int(end * 1000), 0, {"kind": "compile", **args})


def entry(tmp_path: Path) -> PchPlan:
    directory = tmp_path / "pch" / "k"
    directory.mkdir(parents=True, mode=0o700)
    return PchPlan("k", directory, "#include <torch/extension.h>", ("-O3",), False, True, dict(INFO),
                   build=False)


def test_a_build_records_what_its_tus_took_with_and_without_the_pch(tmp_path: Path) -> None:
    pch = entry(tmp_path)
    details = {"a.o": {"kind": "compile", "pch_output": str(pch.output)},
               "b.o": {"kind": "compile", "pch_output": str(pch.output)},
               "c.o": {"kind": "compile"}}
    cold = Timeline((step("a", "a.o", 0, 25), step("b", "b.o", 0, 24), step("c", "c.o", 0, 3)))
    [(info, samples)] = timings.build_samples([pch], {pch.output: False}, details, cold)
    assert info == INFO and samples == {"pch": [], "without": [25.0, 24.0], "with": []}
    # A PCH that appeared while the build ran (the background's): nobody knows who used it.
    pch.output.write_bytes(b"gch")
    assert timings.build_samples([pch], {pch.output: False}, details, cold) == []
    warm = Timeline((step("a", "a.o", 0, 14), step("b", "b.o", 0, 13, cache="hit")))
    assert timings.build_samples([pch], {pch.output: True}, details, warm)[0][1]["with"] == [14.0]
    # A PCH the build made itself: its step, and each TU by whether it started after it.
    details[str(pch.output)] = {"kind": "pch"}
    own = Timeline((Step("precompiling", (str(pch.output),), 0, 50_000, 0, {"kind": "pch"}),
                    step("a", "a.o", 0, 26), step("b", "b.o", 50, 63)))
    assert timings.build_samples([pch], {pch.output: False}, details, own)[0][1] == {
        "pch": [50.0], "without": [26.0], "with": [13.0]}

    root = tmp_path / "pch"
    timings.record_build(root, [pch], {pch.output: False}, details, own)
    timings.add(root, INFO, {"without": [24.0], "with": [14.0]})
    assert timings.estimate(root, INFO) == timings.Estimate(50.0, 24.0 - 13.0)
    assert timings.estimate(root, {**INFO, "header": "torch/library.h"}) == timings.Estimate(None, None)
    for _ in range(3 * timings.KEEP):
        timings.add(root, INFO, {"pch": [70.0]})
    assert timings.read(root)[timings.record_key(INFO)]["pch"] == [70.0] * timings.KEEP


@pytest.mark.parametrize("hostile", [
    "not json", "[]", '{"records": []}', '{"records": {"k": {"pch": [-1]}}}',
    '{"records": {"k": {"pch": [1e400]}}}', '{"records": {"k": {"pch": [true]}}}',
    '{"records": {"k": {"other": [1]}}}', '{"records": {"k": {"pch": "12"}}}',
    '{"records": {"k": {"pch": [1, 2, 3, 4, 5, 6, 7, 8, 9]}}}', "[" * 100_000 + "]" * 100_000,
])
def test_a_timings_file_that_is_not_ours_reads_as_no_measurement(tmp_path: Path, hostile: str) -> None:
    root = tmp_path / "pch"
    root.mkdir(mode=0o700)
    (root / timings.FILE).write_text(hostile)
    os.chmod(root / timings.FILE, 0o600)
    assert timings.read(root) == {}
    timings.add(root, INFO, {"pch": [60.0]})  # and the next measurement replaces it
    assert timings.estimate(root, INFO).pch_seconds == 60.0


def test_a_timings_file_others_may_write_or_a_symlink_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "pch"
    root.mkdir(mode=0o700)
    timings.add(root, INFO, {"pch": [60.0]})
    assert timings.read(root)
    os.chmod(root / timings.FILE, 0o666)
    assert timings.read(root) == {}
    os.chmod(root / timings.FILE, 0o600)
    (root / timings.FILE).rename(root / "elsewhere.json")
    (root / timings.FILE).symlink_to(root / "elsewhere.json")
    assert timings.read(root) == {}


MAKER = """
import subprocess, sys, time
from pep517_torch.core.pch import wait
compiler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], process_group=0)
wait.write_making(__import__("pathlib").Path(sys.argv[1]), compiler.pid, time.time())
time.sleep(120)
"""


@pytest.fixture
def maker(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A stand-in for the background maker: a process whose "compiler" sleeps, announced in
    the entry's making.json as background.py announces its own."""
    pch = entry(tmp_path)
    process = subprocess.Popen([sys.executable, "-c", MAKER, str(pch.directory)], start_new_session=True)
    deadline = time.monotonic() + 60
    while wait.read_making(pch.directory) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    making = wait.read_making(pch.directory)
    yield pch
    if making is not None:
        os.killpg(making.pgid, 9)  # the stand-in compiler: a process group of its own
    os.killpg(process.pid, 9)
    process.wait()


def run_wait(pch: PchPlan, users: int = 2) -> tuple[list[str], float]:
    details = {f"{i}.o": {"kind": "compile", "pch_output": str(pch.output)} for i in range(users)}
    lines: list[str] = []
    started = time.monotonic()
    wait.wait_for_background([pch], pch.directory.parent, details, 2, lines.append)
    return lines, time.monotonic() - started


def test_a_build_waits_for_a_pch_nearly_made_and_uses_it(maker: PchPlan) -> None:
    timings.add(maker.directory.parent, INFO, {"pch": [3.0], "without": [25.0], "with": [14.0]})
    threading.Timer(1.0, maker.output.write_bytes, [b"gch"]).start()
    lines, took = run_wait(maker)
    assert "waiting up to" in lines[0] and "<torch/extension.h>" in lines[0], lines
    assert "PCH ready after" in lines[1], lines
    assert 0.9 < took < 5


def test_a_build_does_not_wait_for_a_pch_far_from_made(maker: PchPlan) -> None:
    timings.add(maker.directory.parent, INFO, {"pch": [60.0], "without": [25.0], "with": [14.0]})
    lines, took = run_wait(maker)
    assert len(lines) == 1 and "compiling without the PCH of <torch/extension.h>" in lines[0], lines
    assert "~60 s left; it saves ~11 s a TU, 2 TUs" in lines[0]
    assert took < 1


def test_a_build_never_measured_here_does_not_wait(maker: PchPlan) -> None:
    lines, took = run_wait(maker)
    assert "not measured on this machine yet" in lines[0] and took < 1


def test_a_pch_later_than_its_estimate_is_given_up_at_the_deadline(
    maker: PchPlan, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wait, "GRACE_S", 0.5)
    timings.add(maker.directory.parent, INFO, {"pch": [1.0], "without": [25.0], "with": [14.0]})
    lines, took = run_wait(maker)
    assert "not ready after" in lines[1] and "compiling without it" in lines[1], lines
    assert 1.2 < took < 4  # 1 s left, with slack: 1.75 s


def test_no_wait_for_a_maker_that_is_gone_or_a_record_that_lies(tmp_path: Path) -> None:
    pch = entry(tmp_path)
    timings.add(pch.directory.parent, INFO, {"pch": [3.0], "without": [25.0], "with": [14.0]})
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True)
    gone = int(done.stdout)
    me = {"pid": os.getpid(), "birth": priority.start_time(os.getpid()), "pgid": os.getpid(), "started": time.time()}
    (pch.directory / wait.MAKING).write_text(json.dumps(me))
    assert wait.read_making(pch.directory) == wait.Making(**me)  # type: ignore[arg-type]
    for record in ({**me, "pid": gone, "birth": "123"},  # exited
                   {**me, "birth": "1"},  # pid reused
                   {**me, "pgid": "1"}, {**me, "started": float("nan")}, {**me, "pid": True}, [1, 2]):
        (pch.directory / wait.MAKING).write_text(json.dumps(record))
        assert wait.read_making(pch.directory) is None
        assert run_wait(pch)[0] == []

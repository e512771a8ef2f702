"""Background work yields to the build in front of it, whatever the kernel's autogroup setting
(issue 47 item 1, core/toolchain/priority.py): the PCH maker started as a wheel build starts it
(core/pch/background.py), beside a foreground "build" in a session of its own as ninja runs
one, gets a small share of the CPU they contend for.

What is measured are shares between processes this test starts, pinned to one CPU so that they
contend whatever the machine's size; other work on that CPU slows all of them alike. The
maker's "compiler" is a busy loop (nothing is compiled); before the fix (nice 10 in a session
of its own, the compiler in yet another) it took more than each foreground loop, here 1.3-2×.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pep517_torch.core.pch import background as pch_background
from pep517_torch.core.toolchain import priority

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists() or not hasattr(os, "sched_setaffinity"),
                                reason="Linux /proc and CPU affinity needed")

SPIN = "while True:\n    pass\n"
FOREGROUND = (
    "import subprocess, sys, time\n"
    f"loops = [subprocess.Popen([sys.executable, '-c', {SPIN!r}]) for _ in range(2)]\n"
    "print(' '.join(str(p.pid) for p in loops), flush=True)\n"
    "time.sleep(600)\n"
)


def start_maker(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The real background maker, its one entry's compiler a busy loop: (maker, compiler pid)."""
    root = tmp_path / "cache" / "pch"
    entry = root / "0123456789abcdef"
    entry.mkdir(parents=True, mode=0o700)
    spec = {"root": str(root), "limit": 1 << 30, "entries": [{
        "directory": str(entry), "stub": "#include <torch/library.h>\n",
        "info": {"header": "torch/library.h", "compiler": "busy loop"},
        "argv": [sys.executable, "-c", SPIN]}]}
    maker = pch_background._spawn(pch_background.maker_argv(spec), root, dict(os.environ))
    children = Path(f"/proc/{maker.pid}/task/{maker.pid}/children")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            found = children.read_text().split()
        except OSError:
            found = []
        if found:
            return maker, int(found[0])
        time.sleep(0.1)
    maker.kill()
    raise AssertionError((root / pch_background.LOG).read_text())


def cpu(pids: list[int]) -> list[float]:
    found = [priority.process_cpu_seconds(pid) for pid in pids]
    assert all(f is not None for f in found)
    return [f for f in found if f is not None]


def test_the_background_maker_gets_a_small_share_beside_a_foreground_build(tmp_path: Path) -> None:
    foreground = subprocess.Popen([sys.executable, "-c", FOREGROUND], stdout=subprocess.PIPE,
                                  text=True, start_new_session=True)
    maker, compiler = None, 0
    try:
        loops = [int(pid) for pid in foreground.stdout.readline().split()]  # type: ignore[union-attr]
        maker, compiler = start_maker(tmp_path)
        # Everything the maker starts stays in its session (its autogroup) at its priority.
        assert os.getsid(compiler) == maker.pid
        if hasattr(os, "SCHED_IDLE"):
            assert os.sched_getscheduler(compiler) == os.SCHED_IDLE
        autogroup = Path(f"/proc/{compiler}/autogroup")
        if autogroup.exists():
            assert autogroup.read_text().split()[-1] == str(priority.AUTOGROUP_NICE)
        one = {min(os.sched_getaffinity(0))}
        for pid in (*loops, compiler):
            os.sched_setaffinity(pid, one)
        time.sleep(0.5)
        before, started = cpu([*loops, compiler]), time.monotonic()
        while True:  # until the foreground had a second of CPU each: a loaded machine is slower
            time.sleep(1.0)
            used = [a - b for a, b in zip(cpu([*loops, compiler]), before)]
            if min(used[:2]) >= 1.0 or time.monotonic() - started > 60:
                break
        each = sum(used[:2]) / 2
        assert each > 0.2, f"the foreground loops got no CPU: {used}"
        share = used[2] / each
        print(f"background {used[2]:.2f} CPU-s, foreground {used[0]:.2f} + {used[1]:.2f}: {share:.3f}×")
        assert share < 0.25, (f"the background compiler took {share:.2f}× each foreground loop's"
                              f" CPU ({used[2]:.2f} s against {used[0]:.2f} s and {used[1]:.2f} s)")
    finally:
        os.killpg(foreground.pid, 9)
        foreground.wait()
        if maker is not None:
            if compiler:
                os.kill(compiler, 9)
            maker.wait(timeout=60)
    log = (tmp_path / "cache" / "pch" / pch_background.LOG).read_text()
    assert "yielding to foreground work: " in log and "SCHED_IDLE" in log, log


def test_yielding_is_what_an_unprivileged_user_may_do(tmp_path: Path) -> None:
    """SCHED_IDLE, nice 19 and the autogroup's nice 19 need no capability: checked as user
    nobody where the test runs as root (the privileges a build's user has)."""
    script = (
        "import os, sys\nos.setsid()\n"
        f"sys.path.insert(0, {str(Path(pch_background.__file__).resolve().parents[3])!r})\n"
        "from pep517_torch.core.toolchain import priority\n"
        "print(','.join(priority.yield_to_foreground()))\n"
    )
    command = [sys.executable, "-c", script]
    if os.getuid() == 0:
        setpriv = "/usr/bin/setpriv"
        if not os.path.exists(setpriv):
            pytest.skip("setpriv is needed to drop root's privileges")
        python = Path(sys.base_prefix) / "bin" / Path(sys.executable).name
        readable = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                                   str(python), "-c", "import pep517_torch"], capture_output=True,
                                  cwd=tmp_path)
        if readable.returncode != 0 and b"Permission denied" in readable.stderr:
            pytest.skip(f"user nobody cannot run {python}")
        command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", str(python), "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    applied = done.stdout.strip().split(",")
    assert "nice 19" in applied and ("SCHED_IDLE" in applied or not hasattr(os, "SCHED_IDLE"))
    if Path("/proc/self/autogroup").exists():
        assert "autogroup nice 19" in applied

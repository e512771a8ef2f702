"""Builds of one tree at the same time, and killed builds: one build directory, one builder.

The project (tests/tiny_project.py) compiles in about a second; every trial edits one source,
so each trial really compiles and links again.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests import tiny_project
from tests.conftest import count
from tests.test_frontends import venv  # noqa: F401 (a fixture: a fresh venv seeing ours)
from tests.tiny_project import set_value, write_project

pytestmark = pytest.mark.compile

WAITING = re.compile(r"waiting for process (\d+), which is building (.+) in ")
LIMIT = 600  # seconds for a handful of one-second compiles, on a machine 10x slower than ours


def racer_project(root: Path) -> Path:
    return write_project(root, "racer")


def start(*args: str | Path, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)  # type: ignore[call-overload]


def cli_wheel(project: Path, out: Path, **kwargs: object) -> subprocess.Popen[str]:
    return start(sys.executable, "-m", "pep517_torch", "wheel", project, "-o", out, **kwargs)


def pip_wheel(project: Path, out: Path) -> subprocess.Popen[str]:
    return start(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                 "--no-index", "-w", out, project)


def finish(processes: list[subprocess.Popen[str]]) -> list[str]:
    """Wait for all; each one's stdout and stderr together. Any failure fails the test."""
    outputs = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=LIMIT)
        outputs.append(stdout + stderr)
        assert process.returncode == 0, f"{process.args} failed:\n{stdout}\n{stderr}"
    return outputs


def the_wheel(out: Path) -> Path:
    (wheel,) = out.glob("racer-1.0-*.whl")
    return wheel


def wheel_value(wheel: Path, target: Path) -> int:
    return tiny_project.wheel_value(wheel, target, "racer")


def compiles_of_value(outputs: list[str]) -> int:
    return sum(out.count("compiling csrc/value.cpp: done") for out in outputs)


def test_concurrent_cli_builds_take_turns_and_give_identical_wheels(tmp_path: Path) -> None:
    project = racer_project(tmp_path / "racer")
    waits = 0
    for trial in range(1, 4):
        set_value(project, trial)
        outs = [tmp_path / f"trial{trial}" / f"w{i}" for i in range(4)]
        builders = [cli_wheel(project, out) for out in outs]
        outputs = finish(builders)
        assert compiles_of_value(outputs) == 1, outputs  # one compiled, three found it done
        wheels = {the_wheel(out).read_bytes() for out in outs}
        assert len(wheels) == 1  # byte-identical
        assert wheel_value(the_wheel(outs[0]), tmp_path / f"site{trial}") == trial
        for output in outputs:
            for pid, what in WAITING.findall(output):
                assert int(pid) in {b.pid for b in builders}
                assert what == "a wheel of racer 1.0"
                waits += 1
        count("trials of 4 concurrent CLI wheel builds of one tree")
    assert waits > 0  # at least one waiter said whom it waited for


def test_cli_pip_and_editable_import_build_one_tree_together(tmp_path: Path, venv: Path) -> None:  # noqa: F811
    project = racer_project(tmp_path / "racer")
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install",
                    "--no-build-isolation", "--no-deps", "--no-index", "-e", project],
                   check=True, capture_output=True, timeout=LIMIT)
    for trial in range(1, 3):
        set_value(project, 10 + trial)
        outs = [tmp_path / f"trial{trial}" / name for name in ("cli1", "pip", "cli2")]
        builders = [
            cli_wheel(project, outs[0]),
            pip_wheel(project, outs[1]),
            start(python, "-c", "import racer; print(racer.value())", cwd=tmp_path),
            cli_wheel(project, outs[2]),
        ]
        outputs = finish(builders)
        assert outputs[2].split()[0] == str(10 + trial)  # the editable install rebuilt on import
        wheels = {the_wheel(out).read_bytes() for out in outs}
        assert len(wheels) == 1
        assert wheel_value(the_wheel(outs[0]), tmp_path / f"site{trial}") == 10 + trial
        count("trials of CLI + pip wheel + editable import building one tree at once")


def wait_until(condition, what: str, timeout: float = LIMIT) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting until {what}"
        time.sleep(0.05)


def lock_owner(project: Path) -> str:
    owners = list((project / "build").glob("*/.pep517_torch.lock.owner"))
    return owners[0].read_text() if owners else ""


def test_sigkilled_wheel_build_never_blocks_the_next(tmp_path: Path) -> None:
    project = racer_project(tmp_path / "racer")
    set_value(project, 5)
    victim = cli_wheel(project, tmp_path / "victim", start_new_session=True)
    wait_until(lambda: lock_owner(project).startswith(f"{victim.pid} "), "the victim holds the lock")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.communicate()
    survivor = cli_wheel(project, tmp_path / "out")
    output = finish([survivor])[0]  # a held lock would block here until the timeout
    assert not WAITING.search(output)  # the lock was free: nobody waited for the dead holder
    assert wheel_value(the_wheel(tmp_path / "out"), tmp_path / "site") == 5


SLOW_CXX = """\
#!/bin/sh
# A compiler that takes a while: every compile registers its pid, sleeps, then compiles.
case " $* " in *" -c "*) echo $$ >> "{log}"; sleep 60;; esac
exec g++ "$@"
"""


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker`` (every process of one build)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # gone, or a zombie
    return found


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killing_the_builders_group_stops_its_compilers(tmp_path: Path, sig: int) -> None:
    """SIGKILL of the builder's process group, or Ctrl-C (SIGINT to the foreground group):
    no compiler of that build survives it, and none writes an object afterwards."""
    project = racer_project(tmp_path / "racer")
    log = tmp_path / "compilers.log"
    slow = tmp_path / "slow-c++"
    slow.write_text(SLOW_CXX.format(log=log))
    slow.chmod(0o755)
    marker = f"PEP517_TORCH_TEST_BUILD={os.getpid()}-{sig}-{time.monotonic_ns()}"
    env = {**os.environ, "CXX": str(slow), marker.split("=")[0]: marker.split("=")[1]}
    victim = cli_wheel(project, tmp_path / "victim", env=env, start_new_session=True,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_until(lambda: log.exists() and log.read_text().strip(), "a compiler runs")
        compiler = int(log.read_text().split()[0])
        os.killpg(victim.pid, sig)
        output = "".join(victim.communicate(timeout=LIMIT))
        assert victim.returncode != 0
        if sig == signal.SIGINT:
            assert "Traceback" not in output
        wait_until(lambda: not processes_with(marker), "no process of the build remains")
        assert not Path(f"/proc/{compiler}").exists() or "Z" in stat_state(compiler)
        assert sorted(p.name for p in (project / "build").glob("*/obj/*/*/*.o")) == []
        assert not list((project / "build").glob("*/out/**/*.so"))
    finally:
        for pid in processes_with(marker):  # on failure: leave no sleeper behind
            os.kill(pid, signal.SIGKILL)
    survivor = cli_wheel(project, tmp_path / "out")
    finish([survivor])
    assert wheel_value(the_wheel(tmp_path / "out"), tmp_path / "site") == 0
    count(f"wheel builds whose process group got {signal.Signals(sig).name} mid-compile")


def stat_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"



def test_editable_rebuild_and_wheel_build_share_one_build_state(tmp_path: Path) -> None:
    """The hook runs the ninja that wrote the build directory, not another one on PATH (whose
    log format may differ and throw away what is built), so the next wheel compiles nothing."""
    project = racer_project(tmp_path / "racer")
    editable = tmp_path / "editable"
    build_editable = f"from pep517_torch import buildapi; buildapi.build_editable({str(editable)!r})"
    subprocess.run([sys.executable, "-c", build_editable], cwd=project, check=True,
                   capture_output=True, timeout=LIMIT)
    (wheel,) = editable.glob("racer-1.0-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(editable / "site")
    other = tmp_path / "other-bin"
    other.mkdir()
    used = tmp_path / "other-ninja-used"
    (other / "ninja").write_text(f'#!/bin/sh\necho "$@" >> "{used}"\nexec /nonexistent "$@"\n')
    (other / "ninja").chmod(0o755)
    set_value(project, 3)
    code = f"import site; site.addsitedir({str(editable / 'site')!r}); import racer; print(racer.value())"
    imported = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                              env={**os.environ, "PATH": f"{other}:{os.environ['PATH']}"},
                              text=True, timeout=LIMIT)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "3" and "rebuilt racer" in imported.stderr
    assert not used.exists()
    output = finish([cli_wheel(project, tmp_path / "out")])[0]
    assert re.search(r"extension: 0 compiled( \(.*\))?, 0 linked", output), output
    assert wheel_value(the_wheel(tmp_path / "out"), tmp_path / "site") == 3


HOLDER = """
import sys
from pathlib import Path
from pep517_torch.core.lock import build_lock
with build_lock(Path(sys.argv[1]), "a wheel of demo 1.0"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_editable_hook_and_core_lock_exclude_each_other(tmp_path: Path) -> None:
    """The stdlib-only hook flocks the core's lock file and names the holder while it waits."""
    from tests.test_distribution_editable import Project, make_stale

    project = Project(tmp_path)
    project.install()
    (project.root / "input.txt").write_text("two\n")
    make_stale(project)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, project.build], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline() == "held\n"
        script = f"import site; site.addsitedir({str(project.site)!r})\nimport myproj; print(myproj.VALUE)"
        importer = start(sys.executable, "-S", "-c", script, cwd=project.root.parent)
        assert importer.stderr is not None
        line = importer.stderr.readline()  # blocks until the hook says it waits
        assert line == (f"pep517_torch: waiting for process {holder.pid}, which is building"
                        f" a wheel of demo 1.0 in {project.build}...\n")
        assert importer.poll() is None  # still waiting, and nothing rebuilt meanwhile
        assert project.artifact.read_text() == "one\n"
    finally:
        holder.communicate("\n", timeout=LIMIT)
    stdout, stderr = importer.communicate(timeout=LIMIT)
    assert (importer.returncode, stdout) == (0, "two\n"), stderr

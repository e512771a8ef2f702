"""The build folder's ledger as users meet it (issue 35 items 2 and 3, issue 36's `explain`): a
copied or moved project builds its own sources, a compile variable that changed rebuilds,
`explain` says why the last build did what it did, and a build folder holds one state file of
ours. tests/tiny_project.py's module compiles in about a second.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pep517_torch.shipped_runtime import ledger
from tests.commands import run, run_cli, run_python
from tests.conftest import count
from tests.test_state_files import HOSTILE, STORES
from tests.tiny_project import NAMED_MODULE, set_value, wheel_value, write_project

pytestmark = pytest.mark.compile

NAME = "ledgered"
LEDGER = next(store for store in STORES if store.name == "ledger")


class Project:
    def __init__(self, root: Path, out: Path) -> None:
        self.root, self.out, self.builds = root, out, 0

    def wheel(self, **env: str) -> tuple[Path, str]:
        """``python -m pep517_torch wheel``: the wheel and what the build said."""
        self.builds += 1
        out = self.out / f"w{self.builds}"
        result = run_cli("wheel", self.root, "-o", out, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        (wheel,) = out.glob("*.whl")
        return wheel, result.stdout + result.stderr

    def value(self, wheel: Path) -> int:
        self.builds += 1
        return wheel_value(wheel, self.out / f"unpacked{self.builds}", NAME)

    def explain(self, **env: str) -> str:
        result = run_cli("explain", self.root, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    @property
    def build_dir(self) -> Path:
        (found,) = (self.root / "build").iterdir()
        return found


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = write_project(tmp_path / "proj", NAME)
    (root / "csrc" / "value.cpp").write_text(
        "#if __has_include(<offset.h>)\n#include <offset.h>\n#endif\n#ifndef OFFSET\n#define OFFSET 0\n"
        "#endif\nint value() { return OFFSET; }\n")
    return Project(root, tmp_path / "out")


@pytest.mark.parametrize("how", ["cp -r", "cp -a", "mv"])
def test_a_copied_or_moved_project_builds_its_own_sources(project: Project, tmp_path: Path, how: str) -> None:
    """`cp -r proj proj2` (new mtimes), `cp -a` (a CI cache restoring build/ with its mtimes
    into another checkout) or `mv`, then an edit: the copy builds its own edit, never the old
    tree's objects. Even an edit whose mtime is set back, which ninja cannot see."""
    first, _ = project.wheel()
    assert project.value(first) == 0
    copy = tmp_path / "proj2"
    subprocess.run([*how.split(), str(project.root), str(copy)], check=True)
    moved = Project(copy, tmp_path / "out2")
    old = (copy / "csrc" / "value.cpp").stat()
    (copy / "csrc" / "value.cpp").write_text("int value() { return 5; }\n")
    os.utime(copy / "csrc" / "value.cpp", ns=(old.st_atime_ns, old.st_mtime_ns))  # mtime kept
    wheel, said = moved.wheel()
    assert moved.value(wheel) == 5
    assert "2 compiled" in said and "0 compiled" not in said, said
    assert "the build folder was made at" in moved.explain()


def test_a_compile_variable_is_an_input(project: Project, tmp_path: Path) -> None:
    """CPLUS_INCLUDE_PATH (CPATH, C_INCLUDE_PATH, LIBRARY_PATH alike) reaches no command line:
    a change of its value rebuilds, and explain names it with both values."""
    for value in (1, 2):
        (tmp_path / f"inc{value}").mkdir()
        (tmp_path / f"inc{value}" / "offset.h").write_text(f"#define OFFSET {value}\n")
    first, _ = project.wheel(CPLUS_INCLUDE_PATH=str(tmp_path / "inc1"))
    assert project.value(first) == 1
    second, _ = project.wheel(CPLUS_INCLUDE_PATH=str(tmp_path / "inc2"))
    assert project.value(second) == 2
    said = project.explain(CPLUS_INCLUDE_PATH=str(tmp_path / "inc2"))
    assert f"every step, because CPLUS_INCLUDE_PATH changed: '{tmp_path / 'inc1'}' -> '{tmp_path / 'inc2'}'" in said
    assert "since then" not in said
    third, _ = project.wheel()  # unset again
    assert project.value(third) == 0


def test_explain_says_why_each_step_ran_or_that_nothing_changed(project: Project) -> None:
    project.wheel()
    set_value(project.root, 3)
    (project.root / "csrc" / "value.cpp").write_text("int value() { return 3; }\n")
    assert "since then: csrc/value.cpp changed; the next build redoes what reads it" in project.explain()
    project.wheel()
    said = project.explain()
    assert "the last build (a wheel build," in said and "ran 2 steps:" in said, said
    assert "compiling csrc/value.cpp: csrc/value.cpp changed" in said, said
    assert f"linking {NAME}._C: an input it reads was rebuilt" in said, said
    project.wheel()
    assert "ran no step" in project.explain()
    # through pip: the hooks' no-op replays the wheel
    for _ in range(3):
        run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
            "-w", project.out / "pip", project.root)
        if "the wheel was replayed" in project.explain():
            break
    else:
        pytest.fail(project.explain())


def test_a_build_folder_holds_one_state_file_of_ours(project: Project) -> None:
    project.wheel()
    ours = sorted(p.name for p in project.build_dir.iterdir()
                  if p.name.startswith(".") and not p.name.startswith(".ninja"))
    assert [n for n in ours if not n.startswith(".pep517_torch-last-")] == [
        ".pep517_torch.lock", ".pep517_torch.lock.owner", ledger.NAME], ours
    shown = sorted(p.name for p in project.build_dir.glob("*.json") if not p.name.startswith("."))
    assert shown == ["build-trace.json", "compile_commands.json"]  # for people and editors
    whole = ledger.load(project.build_dir)
    assert whole["root"] == str(project.root) and whole["build_dir"] == str(project.build_dir)
    assert {"compile", "steps", "platform", "explain"} <= set(whole)


def test_the_jit_rebuilds_when_a_compile_variable_changes(tmp_path: Path, jit_env: Path) -> None:
    source = tmp_path / "answer.cpp"
    source.write_text('#include <answer.h>\n' + NAMED_MODULE.replace("PyLong_FromLong(42)", "PyLong_FromLong(ANSWER)"))
    for value in (1, 2):
        (tmp_path / f"inc{value}").mkdir()
        (tmp_path / f"inc{value}" / "answer.h").write_text(f"#define ANSWER {value}\n")
    code = ("import pep517_torch, sys\n"
            f"print(pep517_torch.load('answered', [{str(source)!r}]).answer())")
    for value in (1, 2, 1):
        result = run_python(code, env={"CPLUS_INCLUDE_PATH": str(tmp_path / f"inc{value}"),
                                       "TORCH_EXTENSIONS_DIR": str(jit_env)})
        assert result.stdout.strip() == str(value), result.stderr


# -- issue 43: what the ledger says is untrusted input -------------------------------------------


def _forge(project: Project, change: dict) -> None:
    """Edit the ledger as a careless or hostile user would: section by section."""
    path = project.build_dir / ledger.NAME
    whole = json.loads(path.read_text())
    for section, values in change.items():
        whole[section] = {**whole[section], **values}
    path.write_text(json.dumps(whole))


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_bad_ledger_is_named_and_rebuilds_everything(project: Project, case: str) -> None:
    """explain names the ledger file and why (never "no build has run", never a hang or a
    memory blow-up); the next build says it once and runs every step."""
    project.wheel()
    path = project.build_dir / ledger.NAME
    path.unlink()
    HOSTILE[case](path, LEDGER)
    said = run_cli("explain", project.root, timeout=60)
    assert said.returncode == 0 and "Traceback" not in said.stderr, said
    (line,) = said.stdout.splitlines()
    assert line.startswith(f"pep517_torch: {path}: ") and "no build has run" not in line, line
    assert "the next build runs every step" in line, line
    _, built = project.wheel()
    assert "2 compiled" in built and "1 linked" in built, built
    assert f"{path}: " in built and built.count(f"{path}: ") == 1, built
    count("issue 43 item 5: a hostile ledger, through explain and a build")


@pytest.mark.parametrize("decision", [[["x"], 5], ["manylinux_2_17_x86_64", "forged"],
                                      ["../../../../tmp/PWN", "manylinux_2_5: forged"],
                                      ["linux_x86_64", "manylinux_2_5: the strictest holds"]])
def test_a_forged_platform_decision_never_names_the_wheel(project: Project, decision: list) -> None:
    first, _ = project.wheel()
    _forge(project, {"platform": {"decision": decision}})
    wheel, said = project.wheel()
    assert wheel.name == first.name, said  # decided again: the binaries' own tag
    assert "Traceback" not in said and not (project.out.parent.parent / "tmp" / "PWN").exists()
    (line,) = [line for line in said.splitlines() if str(project.build_dir / ledger.NAME) in line]
    assert "PWN" not in said.replace(line, "") and "['x']" not in said.replace(line, ""), said
    count("issue 43 item 2: a forged platform decision")


def test_explain_names_the_object_an_interrupted_build_left_missing_and_the_edit(project: Project) -> None:
    """An interrupted build leaves the object it was compiling missing (the compiler removes
    it) and the record of the build before it: the next build's reason names that object,
    and the edit that started it."""
    project.wheel()
    obj = next(project.build_dir.glob("obj/**/value.cpp.o"))
    relative = obj.relative_to(project.build_dir).as_posix()
    obj.unlink()  # no edit: ninja's own reason, naming the object
    project.wheel()
    said = project.explain()
    assert f"compiling csrc/value.cpp: its output {relative} did not exist" in said, said
    (project.root / "csrc" / "value.cpp").write_text("int value() { return 5; }\n")
    obj.unlink()  # what a build of this edit leaves when it is interrupted while compiling it
    wheel, _ = project.wheel()
    assert project.value(wheel) == 5
    said = project.explain()
    assert (f"compiling csrc/value.cpp: csrc/value.cpp changed (its content) (its output"
            f" {relative} was missing") in said, said
    count("issue 43 item 14: an interrupted build's reasons", 2)


HOOKS = """
import sys
sys.executable = sys.argv[1]  # the interpreter of a frontend's isolated environment
from pep517_torch import buildapi
print(buildapi.build_wheel(sys.argv[2]))
"""


def test_explain_describes_a_replay_by_another_interpreter_and_the_build_after_it(
        project: Project, tmp_path: Path) -> None:
    """`python -m build` runs the hooks in its own environment's interpreter: its no-op replay
    is the last build explain describes; a build after it is described, not the replay."""
    isolated = tmp_path / "isolated" / "bin" / "python"
    isolated.parent.mkdir(parents=True)
    isolated.symlink_to(sys.executable)
    for _ in range(4):  # a build records once its inputs are not a moment old; the next replays
        done = run(sys.executable, "-c", HOOKS, isolated, project.out / "hooks", cwd=project.root)
        if "nothing changed since the last build" in done.stdout:
            break
    else:
        pytest.fail(done.stdout)
    said = project.explain()
    assert "the wheel was replayed" in said and "ran no step" in said, said
    (project.root / "csrc" / "value.cpp").write_text("int value() { return 6; }\n")
    project.wheel()
    said = project.explain()
    assert "ran 2 steps" in said and "replayed" not in said, said
    count("issue 43 item 14: explain after a replay", 2)


def test_explain_shows_what_the_ledger_says_escaped(project: Project) -> None:
    """Issue 43 item 6: a step name or reason in the ledger is text from disk: never raw."""
    project.wheel()
    path = project.build_dir / ledger.NAME
    whole = json.loads(path.read_text())
    whole["explain"].update(outcome="built", everything=None,
                            steps=[["compiling \x1b[2J\x1b]0;owned\x07", "a\nfake line"]])
    path.write_text(json.dumps(whole))
    said = project.explain()
    assert "\x1b" not in said and "\x07" not in said, said
    assert "compiling \\x1b[2J\\x1b]0;owned\\x07: a\\nfake line" in said, said
    assert len(said.splitlines()) == 2, said
    count("issue 43 item 6: explain's text from disk")


def test_explain_says_why_the_last_wheel_was_not_replayed(project: Project) -> None:
    """A no-op hook that does not replay keeps its reason (the record's why_stale) for the
    build after it, and explain says it: a touched pyproject.toml (ninja then has nothing to
    do), a flags variable (the steps it is on run again)."""
    def hooks(**env: str) -> str:
        return run(sys.executable, "-c", HOOKS, sys.executable, project.out / "hooks", cwd=project.root,
                   env=env).stdout

    for _ in range(4):  # a build records once its inputs are not a moment old; the next replays
        if "nothing changed since the last build" in hooks():
            break
    else:
        pytest.fail(project.explain())
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text())  # touched: the same bytes, another mtime
    hooks()
    said = project.explain()
    assert "ran no step, and did not replay the last wheel, because pyproject.toml changed" in said, said
    hooks(CXXFLAGS="-DX=1")
    said = project.explain(CXXFLAGS="-DX=1")
    assert "ran 3 steps:" in said and (
        "  not a replay of the last wheel, because CXXFLAGS changed: unset -> '-DX=1'") in said, said
    count("issue 44: why a replay did not happen", 2)

"""The compile core's part of the ledger (core/compile_record.py) on plain files: which outputs
a change discards, what makes every step run again (a copied folder, a compile variable, the
compiler), and when ninja would have nothing to do."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from pep517_torch.core import compile_record
from pep517_torch.shipped_runtime import build_inputs, ledger
from tests.machine_changes import Machine, cases, change

ENV = {"PATH": os.environ.get("PATH", ""), "CPLUS_INCLUDE_PATH": "/opt/a"}


def record(build: Path, deps: dict[str, list[Path]], exclude: list[Path] | None = None, *,
           root: Path | None = None, env: dict[str, str] = ENV, started_ns: int | None = None,
           facts: dict[str, object] | None = None) -> None:
    compile_record.record(build, root, deps, exclude or [], started_ns=started_ns or time.time_ns(),
                          env=env, now=facts if facts is not None else {})


def discard(build: Path, *, root: Path | None = None, env: dict[str, str] = ENV) -> compile_record.Changes:
    return compile_record.discard_changed(build, root, env, {})


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """A source, a header, a build dir with a.o (from both) and b.o (from the header only)."""
    src, build = tmp_path / "src", tmp_path / "build"
    (build / "obj").mkdir(parents=True)
    src.mkdir()
    (src / "a.cpp").write_text("int a = 1;\n")
    (src / "h.h").write_text("#define H 1\n")
    (build / "build.ninja").write_text(
        f"build obj/a.o: cc {src / 'a.cpp'}\nbuild obj/b.o: cc {src / 'h.h'}\n")
    (build / ".ninja_log").write_text("# ninja log v5\n")
    for name in ("a.o", "b.o"):
        (build / "obj" / name).write_text("object")
    deps = {"obj/a.o": [src / "a.cpp", src / "h.h"], "obj/b.o": [src / "h.h"]}
    record(build, deps, root=tmp_path)
    return src / "a.cpp", src / "h.h", build / "obj" / "a.o", build / "obj" / "b.o"


def date_back(path: Path, before: Path) -> None:
    past = before.stat().st_mtime - 100
    os.utime(path, (past, past))


def test_changed_content_with_an_old_mtime_discards_exactly_its_outputs(tree) -> None:
    source, header, a, b = tree
    root = source.parent.parent
    source.write_text("int a = 2;\n")
    date_back(source, a)
    changes = discard(a.parent.parent, root=root)
    assert changes.everything is None
    assert changes.outputs == {"obj/a.o": f"{source} changed (its content; its mtime is not newer)"}
    assert not a.exists() and b.exists()
    assert source.read_text() == "int a = 2;\n"  # the user's file is untouched
    header.write_text("#define H 2\n")
    date_back(header, b)
    again = discard(b.parent.parent, root=root).outputs
    assert b.exists() is False and list(again) == ["obj/a.o", "obj/b.o"]
    # a.o is already gone (as an interrupted build leaves it): its reason names the edit too
    assert again["obj/a.o"].startswith(f"{source} changed (its content") and "obj/a.o was missing" in again["obj/a.o"]


def test_equal_content_and_outputs_built_after_the_change_are_kept(tree) -> None:
    source, header, a, b = tree
    root = source.parent.parent
    source.write_text(source.read_text())  # new ctime, same bytes
    date_back(source, a)
    assert discard(a.parent.parent, root=root).outputs == {}
    header.write_text("#define H 3\n")
    later = header.stat().st_ctime_ns + 1_000_000_000
    for output in (a, b):  # rebuilt after the change (e.g. by the editable hook's ninja)
        os.utime(output, ns=(later, later))
    assert discard(a.parent.parent, root=root).outputs == {}
    assert a.exists() and b.exists()


def test_a_file_changed_during_the_build_is_rebuilt_next_time(tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "obj").mkdir(parents=True)
    (build / "build.ninja").write_text("")
    source = tmp_path / "a.cpp"
    (build / "obj" / "a.o").write_text("object")
    started = time.time_ns()
    source.write_text("edited while compiling\n")
    record(build, {"obj/a.o": [source]}, started_ns=started)
    assert discard(build).outputs == {"obj/a.o": f"{source} changed while it was read"}
    assert not compile_record.current(build, None, ENV)


def test_tracks_only_project_files(tmp_path: Path) -> None:
    build, torch_root = tmp_path / "build", tmp_path / "torch"
    (build / "pch").mkdir(parents=True)
    (build / "build.ninja").write_text("")
    torch_root.mkdir()
    for path in (tmp_path / "a.cpp", torch_root / "t.h", build / "pch" / "pch.h",
                 tmp_path / "shared.h.gch"):
        path.write_text("x")
    deps = {"obj/a.o": [tmp_path / "a.cpp", torch_root / "t.h", Path("pch/pch.h"),
                        build / "pch" / "pch.h", tmp_path / "shared.h.gch"]}
    record(build, deps, [torch_root])
    assert compile_record.recorded_inputs(build) == {"obj/a.o": [tmp_path / "a.cpp"]}


def test_nothing_to_do_while_every_file_keeps_its_identity(tree) -> None:
    source, header, a, _ = tree
    build, root = a.parent.parent, source.parent.parent
    (build / ".ninja_log").write_text("# ninja log v5\n")
    record(build, {"obj/a.o": [source, header], "obj/b.o": [header]}, root=root)
    assert compile_record.current(build, root, ENV)
    assert not compile_record.current(build, root, {**ENV, "CPLUS_INCLUDE_PATH": "/opt/b"})
    assert not compile_record.current(build, tmp := root / "elsewhere", ENV) and not tmp.exists()
    header.write_text("#define H 1\n")  # the same bytes, another identity: ninja would look
    assert not compile_record.current(build, root, ENV)


@pytest.mark.parametrize("content", [b"{not json", b'{"format": 1, "compile": {"files": []}}',
                                     b'{"format": 1, "build_dir": 3, "compile": []}', b"[" * 100000])
def test_a_damaged_ledger_is_ignored(tmp_path: Path, content: bytes) -> None:
    (tmp_path / ledger.NAME).write_bytes(content)
    assert discard(tmp_path).outputs == {}
    assert compile_record.recorded_inputs(tmp_path) == {}
    assert not compile_record.current(tmp_path, None, ENV)


def test_a_copied_or_moved_build_folder_runs_every_step_again(tree, tmp_path: Path) -> None:
    """A build folder knows the folder and project it was made for: in a copy (cp -r, a CI
    cache restored elsewhere) nothing it recorded holds, and ninja forgets its log."""
    source, _, a, _ = tree
    root = source.parent.parent
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    build = copy / "build"
    assert not compile_record.current(build, copy, ENV)
    changes = discard(build, root=copy)
    assert changes.everything == f"the build folder was made at {a.parent.parent} (copied or moved since)"
    assert not (build / ".ninja_log").exists()  # ninja runs every step: no command is known
    assert (a.parent.parent / ".ninja_log").exists()  # the original is untouched
    # another project writing into the same folder: the same
    other = discard(a.parent.parent, root=tmp_path / "another")
    assert other.everything == f"the build folder belongs to the project at {root}"


@pytest.mark.parametrize("name", ["CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "LIBRARY_PATH",
                                  "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"])
def test_a_compile_variable_that_changed_runs_every_step_again(tree, name: str) -> None:
    source, _, a, _ = tree
    build, root = a.parent.parent, source.parent.parent
    changed = {**ENV, name: "/somewhere/else"}
    changes = discard(build, root=root, env=changed)
    assert changes.everything == f"{name} changed: {ENV.get(name) and repr(ENV[name]) or 'unset'} -> '/somewhere/else'"
    assert not (build / ".ninja_log").exists()
    assert discard(build, root=root, env=changed).everything is None  # said once, then recorded anew


def test_another_compiler_runs_every_step_again(tree, tmp_path: Path) -> None:
    source, _, a, _ = tree
    build, root = a.parent.parent, source.parent.parent
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    compiler = bin_dir / "c++"
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    env = {"PATH": str(bin_dir)}
    (build / ".ninja_log").write_text("# ninja log v5\n")
    record(build, {"obj/a.o": [source]}, root=root, env=env, facts={"compiler": build_inputs.compiler(env)})
    assert compile_record.current(build, root, env)
    compiler.write_text("#!/bin/sh\n# another version\n")
    assert not compile_record.current(build, root, env)
    assert discard(build, root=root, env=env).everything == f"the C++ compiler {compiler} changed"


def test_a_touched_input_still_lets_ninja_decide(tree) -> None:
    """A touch (same bytes, newer mtime) needs no deletion, but ninja, which decides by mtime,
    must still run: the content record is refreshed, "nothing to do" is not claimed."""
    source, header, a, _ = tree
    build, root = a.parent.parent, source.parent.parent
    (build / ".ninja_log").write_text("# ninja log v5\n")
    record(build, {"obj/a.o": [source, header], "obj/b.o": [header]}, root=root)
    assert compile_record.current(build, root, ENV)
    time.sleep(0.01)
    header.write_text(header.read_text())
    assert discard(build, root=root).outputs == {}
    assert not compile_record.current(build, root, ENV)


@pytest.mark.parametrize("case", cases("compiler", "nvcc", "torch", "CPLUS_INCLUDE_PATH"))
def test_a_changed_fact_runs_every_step_again_and_is_named(
        tree, tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The facts a compile depends on (the compiler, nvcc, torch) and a compile variable, each
    changed for real (tests/machine_changes.py): ninja has work, every step runs again, and the
    reason names it, as explain and the editable hook read it (ledger.compile_change)."""
    source, _, a, _ = tree
    build, root = a.parent.parent, source.parent.parent
    machine = Machine(tmp_path / "machine")
    (build / ".ninja_log").write_text("# ninja log v5\n")
    record(build, {"obj/a.o": [source]}, root=root, env=machine.env, facts=machine.facts())
    assert compile_record.current(build, root, machine.env)
    words = change(case, machine, monkeypatch)
    assert compile_record.why_not_current(build, root, machine.env).startswith(words)
    assert ledger.compile_change(build, root, machine.env)[0].startswith(words)
    assert discard(build, root=root, env=machine.env).everything.startswith(words)
    assert not (build / ".ninja_log").exists()

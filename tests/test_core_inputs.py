"""Content-hash bookkeeping (core/inputs.py) on plain files: which outputs a change discards."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pep517_torch.core import inputs


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """A source, a header, a build dir with a.o (from both) and b.o (from the header only)."""
    src, build = tmp_path / "src", tmp_path / "build"
    (build / "obj").mkdir(parents=True)
    src.mkdir()
    (src / "a.cpp").write_text("int a = 1;\n")
    (src / "h.h").write_text("#define H 1\n")
    for name in ("a.o", "b.o"):
        (build / "obj" / name).write_text("object")
    deps = {"obj/a.o": [src / "a.cpp", src / "h.h"], "obj/b.o": [src / "h.h"]}
    inputs.record(build, deps, [], started_ns=time.time_ns())
    return src / "a.cpp", src / "h.h", build / "obj" / "a.o", build / "obj" / "b.o"


def date_back(path: Path, before: Path) -> None:
    past = before.stat().st_mtime - 100
    os.utime(path, (past, past))


def test_changed_content_with_an_old_mtime_discards_exactly_its_outputs(tree) -> None:
    source, header, a, b = tree
    source.write_text("int a = 2;\n")
    date_back(source, a)
    assert inputs.discard_changed(a.parent.parent) == ["obj/a.o"]
    assert not a.exists() and b.exists()
    assert source.read_text() == "int a = 2;\n"  # the user's file is untouched
    header.write_text("#define H 2\n")
    date_back(header, b)
    assert inputs.discard_changed(b.parent.parent) == ["obj/b.o"]  # a.o is already gone


def test_equal_content_and_outputs_built_after_the_change_are_kept(tree) -> None:
    source, header, a, b = tree
    source.write_text(source.read_text())  # new ctime, same bytes
    date_back(source, a)
    assert inputs.discard_changed(a.parent.parent) == []
    header.write_text("#define H 3\n")
    later = header.stat().st_ctime_ns + 1_000_000_000
    for output in (a, b):  # rebuilt after the change (e.g. by the editable hook's ninja)
        os.utime(output, ns=(later, later))
    assert inputs.discard_changed(a.parent.parent) == []
    assert a.exists() and b.exists()


def test_a_file_changed_during_the_build_is_rebuilt_next_time(tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "obj").mkdir(parents=True)
    source = tmp_path / "a.cpp"
    (build / "obj" / "a.o").write_text("object")
    started = time.time_ns()
    source.write_text("edited while compiling\n")
    inputs.record(build, {"obj/a.o": [source]}, [], started_ns=started)
    assert inputs.discard_changed(build) == ["obj/a.o"]


def test_tracks_only_project_files(tmp_path: Path) -> None:
    build, torch_root = tmp_path / "build", tmp_path / "torch"
    (build / "pch").mkdir(parents=True)
    torch_root.mkdir()
    for path in (tmp_path / "a.cpp", torch_root / "t.h", build / "pch" / "pch.h",
                 tmp_path / "shared.h.gch"):
        path.write_text("x")
    deps = {"obj/a.o": [tmp_path / "a.cpp", torch_root / "t.h", Path("pch/pch.h"),
                        build / "pch" / "pch.h", tmp_path / "shared.h.gch"]}
    inputs.record(build, deps, [torch_root], started_ns=time.time_ns())
    assert inputs.recorded_inputs(build) == {"obj/a.o": [tmp_path / "a.cpp"]}


@pytest.mark.parametrize("content", [b"{not json", b'{"version": 1, "files": [], "outputs": {}}',
                                     b'{"version": 1, "files": {"x": [1]}, "outputs": {}}'])
def test_a_damaged_record_is_ignored(tmp_path: Path, content: bytes) -> None:
    (tmp_path / inputs.INPUT_HASHES_NAME).write_bytes(content)
    assert inputs.discard_changed(tmp_path) == []
    assert inputs.recorded_inputs(tmp_path) == {}

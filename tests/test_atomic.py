"""atomic.py: files written in place appear whole or not at all, and leave no temporary behind."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pep517_torch import atomic


def test_readers_see_the_old_or_the_new_file_never_half(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    contents = [b"a" * 3_000_000, b"b" * 2_000_000]
    atomic.write_atomic(target, contents[0])
    seen: set[bytes] = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.add(target.read_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for round_ in range(40):
            atomic.write_atomic(target, contents[round_ % 2], durable=round_ % 3 == 0)
    finally:
        stop.set()
        reader.join()
    assert seen <= set(contents) and seen
    assert os.listdir(tmp_path) == ["state.json"]


def test_concurrent_writers_use_their_own_temporary_names(tmp_path: Path) -> None:
    target = tmp_path / "owner"
    names = {atomic.temporary_name(target) for _ in range(200)}
    assert len(names) == 200
    assert all(n.parent == tmp_path and n.name.startswith(f".owner.{os.getpid()}-") for n in names)

    def write(text: str) -> None:
        for _ in range(50):
            atomic.write_atomic(target, text * 1000)

    writers = [threading.Thread(target=write, args=(c,)) for c in "xyz"]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert target.read_text() in {c * 1000 for c in "xyz"}
    assert os.listdir(tmp_path) == ["owner"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "build.ninja"
    target.write_text("old\n")

    def refuse(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        atomic.write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["build.ninja"]


def test_write_if_changed_keeps_an_unchanged_file_untouched(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "build.ninja"
    assert atomic.write_if_changed(target, "rule cc\n")
    os.utime(target, ns=(1_000_000_000, 1_000_000_000))
    assert not atomic.write_if_changed(target, "rule cc\n")
    assert target.stat().st_mtime_ns == 1_000_000_000
    assert atomic.write_if_changed(target, "rule cxx\n")
    assert target.read_text() == "rule cxx\n"


def test_symlink_replaces_a_link_or_a_file(tmp_path: Path) -> None:
    link = tmp_path / "_C.so"
    first, second = tmp_path / "one.so", tmp_path / "two.so"
    atomic.symlink_atomic(link, first)
    assert os.readlink(link) == str(first)
    atomic.symlink_atomic(link, second)
    assert os.readlink(link) == str(second)
    assert sorted(os.listdir(tmp_path)) == ["_C.so"]


def test_copy_replaces_the_destination_with_mode_and_times(tmp_path: Path) -> None:
    source, destination = tmp_path / "built.so", tmp_path / "pkg" / "_C.so"
    source.write_bytes(b"\x7fELF new")
    source.chmod(0o755)
    os.utime(source, ns=(2_000_000_000, 2_000_000_000))
    destination.parent.mkdir()
    destination.write_bytes(b"old")
    atomic.copy_atomic(source, destination)
    assert destination.read_bytes() == b"\x7fELF new"
    assert destination.stat().st_mode & 0o777 == 0o755
    assert destination.stat().st_mtime_ns == 2_000_000_000
    assert os.listdir(destination.parent) == ["_C.so"]

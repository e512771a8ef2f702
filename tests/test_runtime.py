"""pep517_torch/shipped_runtime/ on its own: the flock modes, the waiter's notice, the yes/no words,
the torch release reading. The faces that use them are tested where they run (concurrency,
PCH cache, editable hook, JIT)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pep517_torch.shipped_runtime.environment import switch
from pep517_torch.shipped_runtime.lock import OWNER_NAME, BuildDirLock, FileLock
from pep517_torch.shipped_runtime.torch_release import major_minor, same_release


def test_shared_holders_share_and_an_exclusive_one_waits_for_them(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    first, second, exclusive = FileLock(path), FileLock(path), FileLock(path)
    assert first.acquire(shared=True) and second.acquire(shared=True, wait=0)
    assert not exclusive.acquire(wait=0.1)  # gave up: both shared holders still hold it
    first.release()
    second.release()
    assert exclusive.acquire(wait=0) and not FileLock(path).acquire(shared=True, wait=0)
    exclusive.release()


def test_a_lock_knows_when_its_file_was_renamed_away(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "lock")
    lock.acquire(shared=True)
    assert lock.names_the_held_file()
    os.rename(tmp_path / "lock", tmp_path / "gone")
    assert not lock.names_the_held_file()
    lock.release()


def test_a_waiter_names_the_holder_then_says_when_it_got_the_lock(tmp_path: Path) -> None:
    holder = BuildDirLock(tmp_path, "a wheel of demo 1.0")
    holder.__enter__()
    assert (tmp_path / OWNER_NAME).read_text() == f"{os.getpid()} a wheel of demo 1.0\n"
    said: list[str] = []
    threading.Timer(0.5, holder.release).start()
    with BuildDirLock(tmp_path, "'ext'", notice_after=0.05, say=said.append):
        assert (tmp_path / OWNER_NAME).read_text() == f"{os.getpid()} 'ext'\n"
    assert said[0] == (f"pep517_torch: waiting for process {os.getpid()}, which is building"
                       f" a wheel of demo 1.0 in {tmp_path}...")
    assert said[1].startswith("pep517_torch: lock acquired after ") and len(said) == 2


def test_a_lock_taken_at_once_says_nothing(tmp_path: Path) -> None:
    said: list[str] = []
    with BuildDirLock(tmp_path, "x", say=said.append):
        pass
    assert said == []


@pytest.mark.parametrize(("value", "default", "expected"), [
    (None, True, True), ("0", True, False), ("Off", True, False), (" no ", True, False),
    ("maybe", True, True), (None, False, False), ("Y", False, True), ("TRUE", False, True),
    ("1", False, True), ("", False, False),
])
def test_yes_and_no_words(value: str | None, default: bool, expected: bool) -> None:
    env = {} if value is None else {"V": value}
    assert switch(env, "V", default=default) is expected


def test_the_same_release_is_the_same_major_minor() -> None:
    assert major_minor("2.13.1+cu130") == (2, 13) and major_minor("v2.14") == (2, 14)
    assert major_minor("nightly") is None
    assert same_release("2.13.0+cpu", "2.13.1") and not same_release("2.13.0", "2.14.0")

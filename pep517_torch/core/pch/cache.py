"""The machine-wide cache of precompiled torch headers, shared by wheel builds and the JIT.

One directory per key (compiler, torch build, flags, header; see ``pch.py``)::

    <root>/pch/<key>/pch.h        the stub that includes the torch header
                    /pch.h.gch    written by ninja under a temporary name, then renamed
                    /pch.h.gch.seal  the entry's seal, written before that rename (seal.py)
                    /entry.json   what the entry is made with (the flag set), for `cache` too
                    /lock         builds hold it shared; its mtime is the entry's last use

A build holds each entry it uses with a shared ``flock`` from before ninja starts to after it
ends; eviction takes the lock exclusively without waiting, so an entry in use is never removed,
and a removed entry is renamed away first, so nobody ever sees half of one. Last use is
recorded by the build (access times are unreliable: noatime, relatime). After each build, the
least recently used entries go until the cache fits its bound.

A build checks each entry before it uses it (:func:`damage`): its seal (the .gch, the stub and
the flag set as they were made), the stub and flag set this build expects, and who may write
it: the cache is private (folders made ``0700``), and an entry another user owns, or one others
may write to, is not trusted. A damaged entry is removed (or, while another build holds it, not
used); an untrusted one is not used. A PCH the cache cannot keep (its bound, or the free space
of its disk, is smaller than one: :func:`room_for`) is not made at all.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from ...atomic import write_if_changed
from ...shipped_runtime.environment import cache_root
from ...shipped_runtime.lock import FileLock
from ...shipped_runtime.state_file import Map, Unreadable, read_bytes, read_json
from ...shipped_runtime.user_line import format_size  # noqa: F401 (the CLI's and doctor's)
from . import seal as pch_seal

LOCK = "lock"
INFO, GCH = pch_seal.INFO, pch_seal.GCH
# What one PCH of a torch umbrella takes when this cache holds none of that header to measure
# (gcc 12, -O3, torch 2.13: <torch/library.h>, the smallest, is 224 MiB): a floor, not a promise.
_TYPICAL_SIZE = {"torch/library.h": 200 << 20}
_DEFAULT_SIZE = 250 << 20
_TRASH = ".trash-"
_SMALL = 64 << 10  # bytes: the stub and the flag set are a few hundred


def pch_root(env: Mapping[str, str]) -> Path:
    return cache_root(env) / "pch"


def make_private(directory: Path) -> None:
    """``directory`` and its missing parents, made readable by this user alone."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)


def untrusted(path: Path) -> str | None:
    """Why this user must not trust what ``path`` holds (None: it may): another user owns it,
    or others may write to it."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if st.st_uid != os.getuid():
        return f"user {st.st_uid} owns it"
    if st.st_mode & 0o022:
        return "others may write to it"
    return None


def unwritable(root: Path) -> str | None:
    """Why the cache at ``root`` cannot be used (None: it can)."""
    try:
        make_private(root)
        probe = root / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return f"the machine-wide cache {root} is not writable ({exc.strerror or exc})"
    return None


@dataclass(frozen=True)
class Entry:
    directory: Path
    size: int  # bytes on disk, partial files included
    last_used: float  # seconds since the epoch
    info: dict[str, object]

    @property
    def key(self) -> str:
        return self.directory.name


def _size(directory: Path) -> int:
    total = 0
    for path in directory.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_blocks * 512
        except OSError:
            pass
    return total


def _read_info(directory: Path) -> dict[str, object]:
    """The entry's flag set ({} when it has none, or one that is not an object of strings,
    numbers and lists: read as untrusted input, state_file.py)."""
    try:
        return read_json(directory / INFO, _SMALL, Map((str, int, bool, None, [str]))) or {}
    except Unreadable:
        return {}


def entries(root: Path) -> list[Entry]:
    """Every entry, least recently used first (leftovers of an interrupted removal are removed)."""
    found = []
    try:
        children = list(root.iterdir())
    except OSError:
        return []
    for child in children:
        if child.name.startswith(_TRASH):
            shutil.rmtree(child, ignore_errors=True)
            continue
        if not child.is_dir() or child.is_symlink():
            continue
        try:
            last_used = (child / LOCK).stat().st_mtime
        except OSError:
            last_used = 0.0  # never held: an entry some interrupted build started
        found.append(Entry(child, _size(child), last_used, _read_info(child)))
    return sorted(found, key=lambda e: (e.last_used, e.key))


def damage(directory: Path, expected_stub: str | None = None,
           expected_info: Mapping[str, object] | None = None) -> str | None:
    """Why the entry is not to be used (None: it is sound, or not made yet): made or writable
    by someone else, changed since it was sealed, or not the stub and flag set (``expected_``)
    the build would make it with."""
    for path in (directory, directory / pch_seal.STUB, directory / GCH, directory / INFO):
        reason = untrusted(path)
        if reason is not None:
            return f"{path.name} is not to be trusted ({reason})"
    if expected_stub is not None:
        try:
            stub = read_bytes(directory / pch_seal.STUB, _SMALL)
        except Unreadable as error:
            return f"its stub {pch_seal.STUB} cannot be used ({error.why})"
        if stub is not None and stub != expected_stub.encode("utf-8"):
            return f"its stub {pch_seal.STUB} is not the one this build writes"
    if expected_info is not None and (directory / INFO).exists():
        if _read_info(directory) != json.loads(json.dumps(dict(expected_info))):
            return f"its flag set ({INFO}) is not the one this build uses"
    return pch_seal.damage(str(directory / GCH))


def expected_size(root: Path, header: str) -> int:
    """About how many bytes a PCH of ``header`` takes: the largest this cache holds of it,
    else a typical size."""
    sizes = [e.size for e in entries(root) if e.info.get("header") == header and e.size > 0]
    return max(sizes) if sizes else _TYPICAL_SIZE.get(header, _DEFAULT_SIZE)


def room_for(root: Path, header: str, limit: int) -> str | None:
    """Why a new PCH of ``header`` cannot be kept in the cache at ``root`` (None: it can):
    the bound ``limit`` is smaller than one, or the disk has less free space than one."""
    needed = expected_size(root, header)
    if limit < needed:
        return (f"the machine-wide cache's bound ({format_size(limit)}, PEP517_TORCH_PCH_CACHE_SIZE"
                f" or pch-cache-size) is smaller than one (about {format_size(needed)})")
    try:
        free = shutil.disk_usage(root).free
    except OSError:
        return None
    if free < needed:
        return (f"the disk of the machine-wide cache {root} has {format_size(free)} free, and one"
                f" takes about {format_size(needed)}")
    return None


def write_info(directory: Path, info: Mapping[str, object]) -> None:
    write_if_changed(directory / INFO, json.dumps(dict(info), indent=1, sort_keys=True))


class Hold:
    """Shared locks on the entries a build uses, from ``with`` to its end; records their use."""

    def __init__(self, directories: Iterable[Path]) -> None:
        self.directories = sorted(set(directories))
        self._locks: list[FileLock] = []

    def __enter__(self) -> Hold:
        for directory in self.directories:
            self._locks.append(_hold_shared(directory))
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        for lock in self._locks:
            lock.release()
        self._locks.clear()


def _hold_shared(directory: Path) -> FileLock:
    """A shared lock on ``directory``'s lock file, which is still the entry's once held."""
    while True:
        make_private(directory)
        lock = FileLock(directory / LOCK)
        lock.acquire(shared=True)
        if lock.names_the_held_file():  # not evicted between open and lock
            try:
                os.utime(lock.path)  # last use: now
            except BaseException:
                lock.release()
                raise
            return lock
        lock.release()  # evicted: try again on a fresh entry


def remove(entry: Entry) -> bool:
    """Remove an entry nobody holds; False when a build is using it."""
    lock = FileLock(entry.directory / LOCK)
    try:
        if not lock.acquire(wait=0):
            return False
    except OSError:
        return False
    try:
        trash = entry.directory.with_name(f"{_TRASH}{os.getpid()}-{time.time_ns()}-{entry.key}")
        try:
            os.rename(entry.directory, trash)
        except OSError:
            return False
    finally:
        lock.release()
    shutil.rmtree(trash, ignore_errors=True)
    return True


def evict(root: Path, limit: int) -> list[Entry]:
    """Remove least recently used entries until the cache holds at most ``limit`` bytes."""
    found = entries(root)
    total = sum(e.size for e in found)
    removed = []
    for entry in found:
        if total <= limit:
            break
        if remove(entry):
            total -= entry.size
            removed.append(entry)
    return removed


def clear(root: Path) -> tuple[list[Entry], list[Entry]]:
    """Remove every entry not in use: (removed, in use)."""
    removed, busy = [], []
    for entry in entries(root):
        (removed if remove(entry) else busy).append(entry)
    return removed, busy


def count_text(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"

"""One builder per build directory, across processes and faces, with locks the OS releases.

Wheel builds, editable rebuild-on-import and the JIT all take this lock on the build directory
(the editable hook, which may not import pep517_torch, flocks the same file with the standard
library and writes the same owner line). filelock takes an flock(2) lock: when the holder dies,
even by SIGKILL, the kernel drops it, so a killed build can never leave a lock that hangs the
next build forever (torch's O_EXCL lock file does: pytorch#189245). A waiter says whom it is
waiting for.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import filelock

from ..atomic import write_atomic, writing
from ..errors import ToolchainError
from ..project_tree import mark_build_dir

LOCK_NAME = ".pep517_torch.lock"
OWNER_NAME = f"{LOCK_NAME}.owner"  # "<pid> <what>": who holds the lock, for waiters' messages


def _describe_owner(build_dir: Path, fallback: str) -> tuple[str, str]:
    """(whom, what) from the owner file: ``("process 123", "lightops 0.3.0")``."""
    try:
        pid, _, what = (build_dir / OWNER_NAME).read_text().strip().partition(" ")
    except OSError:
        return "another process", fallback
    return (f"process {pid}" if pid.isdigit() else "another process"), (what or fallback)


def _write_owner(build_dir: Path, what: str) -> None:
    write_atomic(build_dir / OWNER_NAME, f"{os.getpid()} {what}\n")  # never half a line


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def build_lock(
    build_dir: Path, what: str, *, notice_after: float = 0.2, say: Callable[[str], None] = _stderr
) -> Iterator[None]:
    """Hold the build directory's lock; ``what`` says what we build, for whoever waits on us.

    A wait is said through ``say`` (the quiet JIT passes a no-op)."""
    try:
        build_dir.mkdir(parents=True, exist_ok=True)
        mark_build_dir(build_dir)  # tagged from its creation: no sdist ever packs it
        lock = filelock.FileLock(str(build_dir / LOCK_NAME))
    except OSError as exc:
        raise ToolchainError(f"build directory {build_dir} is not writable: {exc}") from None
    try:
        lock.acquire(timeout=notice_after)
    except filelock.Timeout:
        whom, theirs = _describe_owner(build_dir, what)
        say(f"pep517_torch: waiting for {whom}, which is building {theirs} in {build_dir}...")
        started = time.monotonic()
        lock.acquire()
        say(f"pep517_torch: lock acquired after {time.monotonic() - started:.1f} s")
    except OSError as exc:
        raise ToolchainError(f"cannot lock build directory {build_dir}: {exc}") from None
    try:
        with writing(build_dir):  # a full disk: one line naming it, not a traceback
            _write_owner(build_dir, what)
        yield
    finally:
        lock.release()

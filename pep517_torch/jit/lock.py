"""One builder per build directory, across processes, with locks the OS releases.

filelock takes an flock(2) lock: when the holder dies, even by SIGKILL, the kernel drops it,
so a killed build can never leave a lock that hangs the next ``load()`` forever (torch's
O_EXCL lock file does: pytorch#189245). A waiter says whom it is waiting for.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import filelock

from ..errors import ToolchainError

LOCK_NAME = ".pep517_torch.lock"


def _owner_file(build_dir: Path) -> Path:
    return build_dir / f"{LOCK_NAME}.owner"


def _describe_owner(build_dir: Path) -> str:
    try:
        pid = _owner_file(build_dir).read_text().strip()
    except OSError:
        return "another process"
    return f"process {pid}" if pid else "another process"


@contextlib.contextmanager
def build_lock(build_dir: Path, what: str, *, notice_after: float = 0.2) -> Iterator[None]:
    try:
        build_dir.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(build_dir / LOCK_NAME))
    except OSError as exc:
        raise ToolchainError(f"build directory {build_dir} is not writable: {exc}") from None
    try:
        lock.acquire(timeout=notice_after)
    except filelock.Timeout:
        owner = _describe_owner(build_dir)
        print(
            f"pep517_torch: waiting for {owner}, which is building {what} in {build_dir}...",
            file=sys.stderr,
            flush=True,
        )
        started = time.monotonic()
        lock.acquire()
        waited = time.monotonic() - started
        print(f"pep517_torch: lock acquired after {waited:.1f} s", file=sys.stderr, flush=True)
    except OSError as exc:
        raise ToolchainError(f"cannot lock build directory {build_dir}: {exc}") from None
    try:
        _owner_file(build_dir).write_text(str(os.getpid()))
        yield
    finally:
        lock.release()

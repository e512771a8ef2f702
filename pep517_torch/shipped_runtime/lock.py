"""flock(2) locks, which the OS releases: one builder per build directory, and the PCH cache's
entries held while builds use them.

The kernel drops an flock when its holder's file is closed, so a holder that dies, even by
SIGKILL, never blocks the next process (torch's O_EXCL lock file does: pytorch#189245). A build
directory's lock is exclusive: wheel builds, the editable hook's rebuilds and the JIT take
the same file, write an owner line (``<pid> <what>``) once they hold it, and a waiter says
whom it waits for (through ``say``: the quiet JIT passes a no-op). Cache entries are held
shared by builds and exclusively, without waiting, by eviction. Without fcntl (Windows) a
lock holds nothing, as a plain ninja run takes none.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from .files import write_atomic
from .build_inputs import same_file
from .state_file import Unreadable, read_bytes
from .user_line import print_line, shown, user_line

LOCK_NAME = ".pep517_torch.lock"
OWNER_NAME = f"{LOCK_NAME}.owner"  # "<pid> <what>": who holds the lock, for waiters' messages
_POLL_S = 0.05


class FileLock:
    """An flock on ``path`` (created if missing), held from :meth:`acquire` to :meth:`release`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, *, shared: bool = False, wait: float | None = None) -> bool:
        """Take the lock (``shared``: beside other shared holders). ``wait``: give up after
        that many seconds (0: at once) and return False. OSError when the file cannot be opened."""
        try:
            import fcntl
        except ImportError:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        deadline = None if wait is None else time.monotonic() + wait
        try:
            while True:
                try:
                    fcntl.flock(fd, mode if deadline is None else mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is None or time.monotonic() >= deadline:
                        os.close(fd)
                        return False
                    time.sleep(_POLL_S)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return True

    def names_the_held_file(self) -> bool:
        """Whether ``path`` still names the file this lock holds (not renamed away or replaced
        since it was opened)."""
        try:
            return self.fd is None or same_file(os.fstat(self.fd), os.stat(self.path))
        except OSError:
            return False

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)  # closing releases the lock

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class BuildDirLock:
    """The exclusive lock on ``build_dir`` (which must exist), taken for ``what`` (``"a wheel
    of demo 1.0"``); a wait past ``notice_after`` seconds is said through ``say``, naming the
    holder. ``acquire`` then ``write_owner``; OSError from either."""

    def __init__(
        self, build_dir: Path, what: str, *, notice_after: float = 0.2,
        say: Callable[[str], None] = print_line,
    ) -> None:
        self.build_dir, self.what, self.notice_after, self.say = build_dir, what, notice_after, say
        self.lock = FileLock(build_dir / LOCK_NAME)

    def acquire(self) -> None:
        if self.lock.acquire(wait=self.notice_after):
            return
        whom, theirs = self.owner()
        self.say(user_line(f"waiting for {whom}, which is building {theirs} in {self.build_dir}..."))
        started = time.monotonic()
        self.lock.acquire()
        self.say(user_line(f"lock acquired after {time.monotonic() - started:.1f} s"))

    def owner(self) -> tuple[str, str]:
        """(whom, what) from the owner file: ``("process 123", "lightops 0.3.0")``. Read as
        untrusted input (state_file.py: a regular file, 4 KiB at most), shown sanitised."""
        try:
            data = read_bytes(self.build_dir / OWNER_NAME, 4096)
        except Unreadable:
            data = None
        if data is None:
            return "another process", self.what
        pid, _, what = data.decode("utf-8", "replace").strip().partition(" ")
        whom = f"process {pid}" if pid.isdigit() and len(pid) <= 10 else "another process"
        return whom, shown(what) if what else self.what

    def write_owner(self) -> None:
        write_atomic(self.build_dir / OWNER_NAME, f"{os.getpid()} {self.what}\n")  # never half a line

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> BuildDirLock:
        self.acquire()
        try:
            self.write_owner()
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

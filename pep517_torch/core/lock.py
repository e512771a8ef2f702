"""One builder per build directory, across processes and faces: shipped_runtime/lock.py's flock (which
the editable hook takes too), with the compile core's errors and the build directory's tag.

A SIGKILLed holder never blocks the next build (the kernel drops an flock with its holder); a
waiter says whom it is waiting for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from ..atomic import writing
from ..errors import ToolchainError
from ..project_tree import make_build_dir
from ..shipped_runtime.lock import BuildDirLock
from ..shipped_runtime.user_line import print_line


@contextlib.contextmanager
def build_lock(
    build_dir: Path, what: str, *, notice_after: float = 0.2, say: Callable[[str], None] = print_line
) -> Iterator[None]:
    """Hold the build directory's lock; ``what`` says what we build, for whoever waits on us.

    A wait is said through ``say`` (the quiet JIT passes a no-op)."""
    make_build_dir(build_dir)
    lock = BuildDirLock(build_dir, what, notice_after=notice_after, say=say)
    try:
        lock.acquire()
    except OSError as exc:
        raise ToolchainError(f"cannot lock build directory {build_dir}: {exc}") from None
    try:
        with writing(build_dir):  # a full disk: one line naming it, not a traceback
            lock.write_owner()
        yield
    finally:
        lock.release()

"""Files that appear complete or not at all: every layer's one way to write a file in place.

A file is written under a unique hidden name beside its destination (pid and random bytes,
so concurrent writers never share one), then renamed over it: a reader sees the old file or
the new one, never half of either. ``durable`` also fsyncs the file before the rename, for
files whose loss or truncation after a crash would hurt (a user's own file). Archives are
streamed through :class:`AtomicFile` instead. The plain writes are shipped_runtime/files.py's (the
editable hook writes with them too). A leaf module: it imports nothing above ``errors`` and
the runtime.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import OutputError
from .shipped_runtime.files import copy_atomic, symlink_atomic, temporary_name, write_atomic

__all__ = [
    "AtomicFile", "copy_atomic", "symlink_atomic", "temporary_name", "write_atomic",
    "write_if_changed", "writing",
]


def write_if_changed(path: Path, data: str) -> bool:
    """Write only when the content differs (an untouched file keeps its mtime, so ninja and
    the JIT's stamps see nothing new); whether it wrote."""
    content = data.encode()
    try:
        if path.read_bytes() == content:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, content)
    return True


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Writes into an output directory: an OSError (read-only, full, over quota, not a
    directory...) becomes an OutputError naming the path and the cause."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


class _OutputStream(io.BufferedRandom):
    """The file behind an :class:`AtomicFile`: a failed write or flush (a full disk) raises
    OutputError naming the destination, whichever archive writer was writing."""

    def __init__(self, fd: int, destination: Path) -> None:
        super().__init__(io.FileIO(fd, "r+b"))
        self.destination = destination

    def write(self, data: bytes) -> int:  # type: ignore[override]
        with writing(self.destination):
            return super().write(data)

    def flush(self) -> None:
        with writing(self.destination):
            super().flush()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        with writing(self.destination):  # seeking flushes what is buffered
            return super().seek(offset, whence)


class AtomicFile:
    """A streamed file that appears at ``destination`` complete, or not at all.

    On Linux it is created unnamed (O_TMPFILE) and linked into place by :meth:`publish`, so
    even a SIGKILL mid-write leaves nothing in the output directory; elsewhere it is a hidden
    temporary name renamed into place, removed by :meth:`discard` on errors.
    """

    def __init__(self, destination: Path) -> None:
        self.destination = Path(destination)
        self._temp: Path | None = None
        fd = None
        if hasattr(os, "O_TMPFILE"):
            try:
                fd = os.open(self.destination.parent, os.O_TMPFILE | os.O_RDWR, 0o644)
            except OSError:  # a filesystem without O_TMPFILE
                fd = None
        if fd is None:
            self._temp = temporary_name(self.destination)
            with writing(self.destination):
                fd = os.open(self._temp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        self.file: BinaryIO = _OutputStream(fd, self.destination)

    def publish(self) -> None:
        try:
            with writing(self.destination):
                self.file.flush()
                if self._temp is None:
                    self._link_unnamed()
                else:
                    os.replace(self._temp, self.destination)
                    self._temp = None
        finally:
            self.discard()

    def _link_unnamed(self) -> None:
        # A directory fd makes os.link use linkat(..., AT_SYMLINK_FOLLOW), which can name an
        # O_TMPFILE file through /proc; plain link() would try to link the /proc symlink.
        source = f"/proc/self/fd/{self.file.fileno()}"
        directory = os.open(self.destination.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                os.link(source, self.destination.name, dst_dir_fd=directory)
            except FileExistsError:  # replace an older file atomically, through a hidden name
                temp = temporary_name(self.destination)
                os.link(source, temp.name, dst_dir_fd=directory)
                os.replace(temp, self.destination)
        finally:
            os.close(directory)

    def discard(self) -> None:
        if not self.file.closed:
            try:
                self.file.close()
            except OutputError:  # the unflushed rest of a file being thrown away
                pass
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)
            self._temp = None

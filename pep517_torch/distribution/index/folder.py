"""Writes that stay inside one folder and touch only what ``index`` wrote there.

Every path is walked from the folder's descriptor one checked name at a time (no ``/``, never
``.`` or ``..``), and no name is ever followed through a symlink (``O_NOFOLLOW``): a file is
written under a fresh name (``O_EXCL``) and renamed over the old entry, so a symlink standing
there is never written through. Which files are ours is a manifest of our own in the folder,
``.pep517_torch-index.json``: each file we wrote with the hashes of what we wrote. A file is
replaced or removed only while its content is one we wrote and its name one ``index`` writes
(``ours``: a page, a ``-variants.json``; never a wheel); anything else (a hand-written page, a
symlink, a folder in the way) is left as it is and reported. The manifest lists every hash
before the pages are written, so an interrupted run leaves nothing it would disown.

The manifest is the folder's, so it is read as untrusted input: a regular file only (never
through a symlink, never a FIFO or device), up to ``MANIFEST_LIMIT``, and checked whole (our
generator, every name one ``index`` writes or makes, every hash a sha256); one that fails is
named in one line with why and read as absent: no file of the folder counts as ours.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ...atomic import writing
from ...errors import OutputError
from ...shipped_runtime.state_file import Unreadable, read_bytes

MANIFEST = ".pep517_torch-index.json"
GENERATOR = "pep517_torch index"
_NAME = re.compile(r"\.?[A-Za-z0-9][A-Za-z0-9._+-]*")  # never '.', '..', a '/' or empty
_NAMES = re.compile(rf"{_NAME.pattern}(?:/{_NAME.pattern})*")
_PAGE_LIMIT = 64 * 1024 * 1024
MANIFEST_LIMIT = 4 * 1024 * 1024  # a few hundred bytes per page: thousands of pages
_SHA256 = re.compile(r"[0-9a-f]{64}")


class Refused(Exception):
    """An entry ``index`` will not read, replace or remove; the message says why."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _parts(relative: str) -> list[str]:
    parts = relative.split("/")
    if not all(_NAME.fullmatch(part) for part in parts):
        raise ValueError(f"not a name index writes: {relative!r}")
    return parts


def _open_flags(directory: bool) -> int:
    return (os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
            | (os.O_DIRECTORY if directory else 0))


@dataclass
class Folder:
    """An open folder (its descriptor, held and locked while ``index`` runs) and what of it
    is ours (``owned``: relative path -> hashes of contents we wrote; ``folders`` we made).
    ``ours`` and ``our_folders`` say which names ``index`` writes and makes: no other is ever
    taken from the manifest, replaced or removed."""

    fd: int
    path: Path
    ours: Callable[[str], bool]
    our_folders: Callable[[str], bool]
    owned: dict[str, set[str]] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    @classmethod
    @contextmanager
    def opened(cls, path: Path, ours: Callable[[str], bool],
               our_folders: Callable[[str], bool]) -> Iterator[Folder]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            reason = "no such directory" if error.errno == errno.ENOENT else (
                "not a directory" if error.errno == errno.ENOTDIR else error.strerror)
            raise OutputError(f"{path}: {reason}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # two index runs on one folder take turns
            folder = cls(fd, path, ours, our_folders)
            folder._load_manifest()
            yield folder
        finally:
            os.close(fd)

    # -- reading -----------------------------------------------------------------------------

    @contextmanager
    def _parent(self, parts: list[str], create: bool) -> Iterator[int]:
        """The descriptor of the folder holding ``parts[-1]`` (made when ``create``)."""
        fds: list[int] = []
        current = self.fd
        try:
            for depth, part in enumerate(parts[:-1]):
                if create:
                    try:
                        os.mkdir(part, 0o755, dir_fd=current)
                    except FileExistsError:
                        pass
                try:
                    current = os.open(part, _open_flags(True), dir_fd=current)
                except FileNotFoundError:
                    if create:
                        raise
                    raise FileNotFoundError(part) from None
                except OSError as error:
                    raise Refused(self._why(error, "/".join(parts[:depth + 1]), current,
                                            part)) from None
                fds.append(current)
                if create:  # a folder a page of ours is in goes once empty, whoever made it
                    self.folders.add("/".join(parts[:depth + 1]))
            yield current
        finally:
            for fd in fds:
                os.close(fd)

    def _why(self, error: OSError, relative: str, parent: int, name: str) -> str:
        """An entry we will not go through, in words: a symlink, or what it is instead."""
        try:
            link = stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
        except OSError:
            link = False
        if link or error.errno == errno.ELOOP:
            return f"{self.path / relative}: a symlink (never written through)"
        if error.errno == errno.ENOTDIR:
            return f"{self.path / relative}: not a folder"
        return f"{self.path / relative}: {error.strerror}"

    def read(self, relative: str, limit: int = _PAGE_LIMIT) -> bytes | None:
        """The file's content (None: there is none); Refused for a symlink, a folder or
        anything but a regular file."""
        parts = _parts(relative)
        try:
            with self._parent(parts, create=False) as parent:
                try:
                    fd = os.open(parts[-1], _open_flags(False), dir_fd=parent)
                except FileNotFoundError:
                    raise
                except OSError as error:
                    raise Refused(self._why(error, relative, parent, parts[-1])) from None
        except FileNotFoundError:
            return None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise Refused(f"{self.path / relative}: "
                          + ("a folder is in the way" if stat.S_ISDIR(mode) else "not a file"))
        with os.fdopen(fd, "rb") as stream:
            return stream.read(limit + 1)

    def is_ours(self, relative: str) -> bool:
        """Whether the file holds, now, a content we wrote (Refused: it is not a file)."""
        content = self.read(relative)
        return content is not None and digest(content) in self.owned.get(relative, set())

    # -- writing -----------------------------------------------------------------------------

    def _our_name(self, relative: str) -> list[str]:
        parts = _parts(relative)
        if relative != MANIFEST and not self.ours(relative):
            raise ValueError(f"not a name index writes: {relative!r}")  # a bug: never a wheel
        return parts

    def write(self, relative: str, data: bytes) -> None:
        """Put ``data`` at ``relative`` by rename (Refused: something not ours is in the way)."""
        parts = self._our_name(relative)
        with writing(self.path / relative), self._parent(parts, create=True) as parent:
            temporary = f".{parts[-1]}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644, dir_fd=parent)
            try:
                with os.fdopen(fd, "wb") as stream:
                    stream.write(data)
                os.replace(temporary, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
            except IsADirectoryError:
                raise Refused(f"{self.path / relative}: a folder is in the way") from None
            finally:
                try:
                    os.unlink(temporary, dir_fd=parent)
                except FileNotFoundError:
                    pass

    def remove(self, relative: str) -> None:
        parts = self._our_name(relative)
        with writing(self.path / relative), self._parent(parts, create=False) as parent:
            os.unlink(parts[-1], dir_fd=parent)

    def remove_folder_if_empty(self, relative: str) -> bool:
        parts = _parts(relative)
        if not self.our_folders(relative):
            return False
        try:
            with self._parent(parts, create=False) as parent:
                os.rmdir(parts[-1], dir_fd=parent)
        except (OSError, Refused):
            return False  # not empty (a file of someone else's), gone, or not a folder
        return True

    # -- the manifest ------------------------------------------------------------------------

    def _load_manifest(self) -> None:
        try:  # read as untrusted input: shipped_runtime/state_file.py
            data = read_bytes(MANIFEST, MANIFEST_LIMIT, dir_fd=self.fd, shown=self.path / MANIFEST)
        except Unreadable as refused:
            self.notes.append(f"{refused}: ignored, no file of this folder counted as ours")
            return
        if data is None:
            return
        try:
            self.owned, self.folders = self._checked_manifest(data)
        except ValueError as why:
            self.notes.append(f"{self.path / MANIFEST}: not index's manifest ({why}): ignored,"
                              " no file of this folder counted as ours")

    def _checked_manifest(self, data: bytes) -> tuple[dict[str, set[str]], set[str]]:
        """The files (with their hashes) and folders a manifest says are ours; ValueError
        saying what is wrong with it."""
        if len(data) > MANIFEST_LIMIT:
            raise ValueError(f"over {MANIFEST_LIMIT // (1024 * 1024)} MiB")
        try:
            manifest = json.loads(data)
        except (ValueError, RecursionError):  # bad UTF-8, deep nesting
            raise ValueError("not JSON") from None
        if not isinstance(manifest, dict) or manifest.get("generator") != GENERATOR:
            raise ValueError(f"not a JSON object whose generator is {GENERATOR!r}")
        files, folders = manifest.get("files"), manifest.get("folders")
        if not isinstance(files, dict) or not isinstance(folders, list):
            raise ValueError("'files' must be an object and 'folders' a list")
        for relative, hashes in files.items():
            if not (isinstance(relative, str) and _NAMES.fullmatch(relative)
                    and self.ours(relative)):
                raise ValueError(f"names {str(relative)[:100]!r}, not a file index writes")
            if not (isinstance(hashes, list) and hashes and all(
                    isinstance(h, str) and _SHA256.fullmatch(h) for h in hashes)):
                raise ValueError(f"the hashes of {relative!r} are not sha256 digests")
        for relative in folders:
            if not (isinstance(relative, str) and _NAMES.fullmatch(relative)
                    and self.our_folders(relative)):
                raise ValueError(f"names {str(relative)[:100]!r}, not a folder index makes")
        return {k: set(v) for k, v in files.items()}, set(folders)

    def save_manifest(self) -> None:
        manifest = {"generator": GENERATOR,
                    "files": {k: sorted(v) for k, v in sorted(self.owned.items())},
                    "folders": sorted(self.folders)}
        data = (json.dumps(manifest, indent=1) + "\n").encode()
        try:
            there = self.read(MANIFEST)
        except Refused:
            there = b""
        # a run that changes nothing touches nothing; one that wrote nothing leaves no manifest
        if there != data and (there is not None or self.owned or self.folders):
            try:
                self.write(MANIFEST, data)
            except Refused as refused:  # a folder there: no page it could never call its own
                raise OutputError(f"{refused}: index keeps its list of the files it wrote there;"
                                  " remove it") from None

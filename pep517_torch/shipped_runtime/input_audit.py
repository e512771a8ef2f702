"""The paths whose state decided a build, noted while it runs: what a no-op replay must re-check.

While :func:`watching` is active, every file opened for reading and every directory listed
(``open``, ``os.listdir`` and ``os.scandir``, seen through an audit hook: globs, walks and
third-party readers such as pyproject-metadata's license globs included) below the project
root is noted, and so is every path a layer passes to :func:`note` because a ``stat`` of it
decided something no listing shows (whether a folder is a package, where nvcc is, which files
a tool probe's answer rests on). Standard library only: a leaf every layer may call.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})
_WRITING_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_noted: set[str] | None = None  # the active watch's paths; None: nothing is watched
_below: str = ""  # audited paths count only below this folder (with a trailing separator)
_hooked = False


def note(path: str | os.PathLike[str]) -> None:
    """Note ``path`` (a file or a folder, existing or not) for the active watch, if any."""
    if _noted is not None:
        _noted.add(os.path.abspath(path))


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _noted is None or event not in _EVENTS:
        return
    path = args[0] if args else None
    if event == "open":
        mode, flags = args[1], args[2]
        if isinstance(mode, str) and any(c in mode for c in "wax+"):
            return
        if mode is None and isinstance(flags, int) and flags & _WRITING_FLAGS:
            return
    if path is None and event != "open":
        path = "."
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    elif isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        return  # a file descriptor
    absolute = os.path.abspath(path)
    if absolute.startswith(_below) or absolute == _below[:-1]:
        _noted.add(absolute)


@contextlib.contextmanager
def watching(root: str | os.PathLike[str]) -> Iterator[set[str]]:
    """Note what the code run inside reads below ``root`` (and every :func:`note`); the set
    fills as it runs. Watches do not nest: an inner one sees nothing for the outer."""
    global _noted, _below, _hooked
    if not _hooked:
        sys.addaudithook(_audit)  # cannot be removed: it does nothing while nothing is watched
        _hooked = True
    outer = (_noted, _below)
    found: set[str] = set()
    _noted, _below = found, os.path.join(os.path.abspath(root), "")
    try:
        yield found
    finally:
        _noted, _below = outer

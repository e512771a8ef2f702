"""Files that appear whole or not at all: a unique hidden name beside the destination, then a
rename over it (the rest of pep517_torch adds its errors and streamed archives in atomic.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path


def temporary_name(destination: Path) -> Path:
    """A unique hidden name beside ``destination``, to write to and then rename into place."""
    return destination.with_name(f".{destination.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")


def remove_leftover_temporaries(directory: Path | str) -> None:
    """Remove what killed builds left half-written in ``directory`` (recursively).

    Only for a holder of the directory's build lock: no one else is writing there then, so
    every temporary is a dead writer's."""
    import re  # the cold path's: this module is on the JIT's warm path

    # A build step's ``$out.$$.tmp`` (graph.py) and temporary_name's ``.name.<pid>-<hex>.tmp``.
    temporary = re.compile(r"\.\d+(-[0-9a-f]{8})?\.tmp$")
    for folder, _, names in os.walk(directory):
        for name in names:
            if name.endswith(".tmp") and temporary.search(name):
                try:
                    os.unlink(os.path.join(folder, name))
                except OSError:
                    pass


def write_atomic(path: Path, data: bytes | str, *, durable: bool = False) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary name and a rename;
    ``durable`` also fsyncs the file before the rename."""
    content = data.encode() if isinstance(data, str) else data
    temporary = temporary_name(path)
    try:
        fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        with open(fd, "wb") as file:
            file.write(content)
            if durable:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def symlink_atomic(link: Path, target: Path) -> None:
    """Make ``link`` a symlink to ``target``, replacing whatever link or file was there."""
    _place(link, lambda temporary: os.symlink(target, temporary))


def copy_atomic(source: Path, destination: Path) -> None:
    """Copy ``source`` (with its mode and times) over ``destination``."""
    _place(destination, lambda temporary: shutil.copy2(source, temporary))


def _place(destination: Path, make: Callable[[Path], object]) -> None:
    temporary = temporary_name(destination)
    try:
        make(temporary)
        os.replace(temporary, destination)
    finally:
        temporary.unlink(missing_ok=True)

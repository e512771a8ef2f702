"""A file's identity from one ``stat``: (mtime_ns, size, ctime_ns, inode).

mtime alone misses an edit whose mtime was set back (``cp -p``, ``rsync -t``, tar); ctime and
the inode do not. The compile core's content record (core/inputs.py), the JIT's stamps, the
tool-probe cache and the editable hook all compare files by it.
"""

from __future__ import annotations

import json
import os

INPUT_HASHES_NAME = ".pep517_torch_inputs.json"  # core/inputs.py's record, in the build directory

Identity = list[int]  # [mtime_ns, size, ctime_ns, inode]


def identity_of(st: os.stat_result) -> Identity:
    return [st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino]


def identity(path: str | os.PathLike[str]) -> Identity | None:
    """The file's identity; None when it cannot be stat'ed (missing)."""
    try:
        return identity_of(os.stat(path))
    except OSError:
        return None


def inputs_changed(build_dir: str) -> bool:
    """Whether a source or header the last core build in ``build_dir`` read changed since (any
    mtime, even an older one, which plain ninja would miss), or is gone: then only the compile
    core, which compares contents, can bring the build up to date. No record: False."""
    try:
        with open(os.path.join(build_dir, INPUT_HASHES_NAME), encoding="utf-8") as file:
            files = json.load(file)["files"]
        # A record: [*identity, sha256 or None]; None: changed while that build ran.
        return any(record[4] is None or identity(path) != record[:4] for path, record in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return False

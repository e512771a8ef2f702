"""The JIT stamp: proof, checkable without a subprocess, that an artifact is up to date.

A stamp records a key (everything the build depends on that is not a file's content: the
request, environment, compiler identity, torch and Python versions) and the (mtime, size,
ctime, inode) of every user file the build read: sources and the project headers ninja's
depfiles listed. ctime and inode catch a replaced file whose mtime was set back (``cp -p``,
``rsync -t``): the cold path then asks the compile core, which compares content hashes.
System and torch headers are covered by the compiler identity and torch version in the key.
This module is on the warm path: it imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..atomic import write_atomic
from ..config.layers import artifact_env
from ..core.identity import compiler_identity

STAMP_VERSION = 2


def fingerprint(request: Mapping[str, object], env: Mapping[str, str], *extra: str) -> str:
    """A hex digest of all non-file inputs of a JIT build."""
    from .. import __version__

    parts = [
        json.dumps(request, sort_keys=True),
        # MAX_JOBS and the like only say how a build runs: read (and checked) when it does
        repr([(k, env.get(k)) for k in artifact_env()]),
        repr(compiler_identity(env)),
        sys.version,
        sys.executable,
        __version__,
        *extra,
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _state(path: str) -> list[object]:
    try:
        st = os.stat(path)
    except OSError:
        return [path, None, None, None, None]
    return [path, st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino]


def stamp_path(build_dir: Path, target: str) -> Path:
    return build_dir / f"{target}.stamp.json"


def is_fresh(stamp: Path, key: str, artifact: Path) -> bool:
    try:
        data = json.loads(stamp.read_bytes())
    except (OSError, ValueError):
        return False
    if data.get("version") != STAMP_VERSION or data.get("key") != key:
        return False
    if not artifact.exists():
        return False
    return all(_state(entry[0]) == entry for entry in data.get("inputs", []))


def write(stamp: Path, key: str, inputs: Iterable[Path]) -> None:
    data = {
        "version": STAMP_VERSION,
        "key": key,
        "inputs": [_state(str(p)) for p in sorted(set(inputs))],
    }
    write_atomic(stamp, json.dumps(data, indent=1))


def invalidate(stamp: Path) -> None:
    try:
        stamp.unlink()
    except FileNotFoundError:
        pass

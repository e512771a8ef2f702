"""A precompiled header's seal: written when the .gch is made, checked before each build uses it.

A damaged .gch (truncated by a full disk, overwritten, a bad block) makes every compile that
uses it fail, or worse, crash the compiler. The build that makes one runs this file as a script
between the compile and the rename that publishes it (``pch_seal.py TMP FINAL``), so that a
.gch is never visible without its seal ``FINAL.seal``: its size, inode and mtime, a blake2b
of the whole file, and a blake2b of 32 blocks sampled across it.

Checking (:func:`damage`) costs two stats and 128 KiB read: the size and the sampled blocks
must match, and the whole file is hashed again only when its identity says it was touched
since it was sealed (another inode or mtime, or a ctime later than the seal's: a copy, a
restore, any write, even one whose mtime was set back), then sealed anew when its bytes are
the same. Hashing the whole file each time would read 200-400 MB per build; a write within a
minute of the sealing that misses every sampled block is the damage this does not see. Standard library only: it runs as a
script, with no package on the path.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

SUFFIX = ".seal"
VERSION = 1
_BLOCK = 4096
_SAMPLES = 32
# The .gch is renamed into place right after its seal is written; a change of its inode
# (ctime) later than this after the seal means someone wrote to it, or set its times.
_PUBLISH_NS = 5 * 10**9


def _sampled(fd: int, size: int) -> str:
    digest = hashlib.blake2b(digest_size=16)
    last = max(size - _BLOCK, 0)
    for index in range(_SAMPLES):
        offset = last * index // (_SAMPLES - 1)
        digest.update(offset.to_bytes(8, "little") + os.pread(fd, _BLOCK, offset))
    return digest.hexdigest()


def _whole(fd: int) -> str:
    digest = hashlib.blake2b(digest_size=32)
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def seal_text(path: str) -> str:
    """The seal of the file at ``path``, as JSON text."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        data = {"version": VERSION, "size": st.st_size, "ino": st.st_ino,
                "mtime_ns": st.st_mtime_ns, "sampled": _sampled(fd, st.st_size),
                "blake2b": _whole(fd)}
    finally:
        os.close(fd)
    return json.dumps(data, sort_keys=True)


def write_seal(made: str, final: str) -> None:
    """Seal ``made`` (the .gch under its temporary name) as ``final``'s: ``final.seal``."""
    target = final + SUFFIX
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(seal_text(made))
        os.replace(temporary, target)
    except BaseException:
        for leftover in (temporary, made):  # on a full disk, free what we wrote
            try:
                os.unlink(leftover)
            except OSError:
                pass
        raise


def _reseal(gch: str, seal: dict[str, object], st: os.stat_result) -> None:
    target = gch + SUFFIX
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(json.dumps({**seal, "ino": st.st_ino, "mtime_ns": st.st_mtime_ns},
                                    sort_keys=True))
        os.replace(temporary, target)
    except OSError:  # a read-only cache: checked in full again next time
        try:
            os.unlink(temporary)
        except OSError:
            pass


def damage(gch: str) -> str | None:
    """Why the .gch at ``gch`` is not the file that was sealed (None: it is, or it is absent)."""
    try:
        fd = os.open(gch, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    try:
        try:
            with open(gch + SUFFIX, encoding="utf-8") as stream:
                seal = json.load(stream)
            if not isinstance(seal, dict) or seal.get("version") != VERSION:
                raise ValueError
        except (OSError, ValueError):
            return "it has no valid checksum (made by an older pep517_torch, or its seal is damaged)"
        st = os.fstat(fd)
        if st.st_size != seal.get("size"):
            return f"it is {st.st_size} bytes, but was {seal.get('size')} when made (truncated?)"
        if _sampled(fd, st.st_size) != seal.get("sampled"):
            return "its content changed since it was made"
        sealed_at = os.stat(gch + SUFFIX).st_mtime_ns
        moved = (st.st_ino, st.st_mtime_ns) != (seal.get("ino"), seal.get("mtime_ns"))
        if moved or st.st_ctime_ns > sealed_at + _PUBLISH_NS:
            if _whole(fd) != seal.get("blake2b"):
                return "its content changed since it was made"
            _reseal(gch, seal, st)  # the same bytes (a copy, a restore): cheap again next time
        return None
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: pch_seal.py MADE FINAL", file=sys.stderr)
        return 2
    try:
        write_seal(argv[0], argv[1])
    except OSError as exc:
        print(f"cannot seal the precompiled header {argv[1]}: {exc.strerror or exc}"
              f" ({exc.filename or argv[1]})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A machine-cache PCH entry's seal: written when its .gch is made, checked before each use.

An entry is a stub header (``pch.h``, which includes the torch header), its precompiled form
(``pch.h.gch``) and what it was made with (``entry.json``: compiler, torch, the flag set). A
damaged .gch (truncated by a full disk, overwritten, a bad block) makes every compile that uses
it fail, or worse; a stub or flag set changed after the fact (a line appended to ``pch.h``) is
precompiled into every project's TUs that share the entry. So the build that makes a .gch runs
this file as a script between the compile and the rename that publishes it (``seal.py TMP
FINAL``): a .gch is never visible without its seal ``FINAL.seal``, which records (as
``shipped_runtime/build_inputs.py`` records a file) the .gch's identity, size, sha256 and a hash of
32 blocks sampled across it, and the sha256 of the stub and of ``entry.json``.

Checking (:func:`damage`) costs two stats, 128 KiB read and two small hashes: the size, the
sampled blocks, the stub and the flag set must match, and the whole .gch is hashed again only
when its identity says it was touched since it was sealed (another inode or mtime, or a ctime
later than the seal's: a copy, a restore, any write, even one whose mtime was set back), then
sealed anew when its bytes are the same. Hashing the whole file each time would read 200-400 MB
per build; a write within seconds of the sealing that misses every sampled block is the damage
this does not see. Who may write the entry is ``cache.py``'s check. Standard library and
the runtime's record only: it runs as a script, with no package on the path.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys

if __package__:
    from ...shipped_runtime import build_inputs, state_file
else:  # run as a script by the PCH edge: the runtime (standard library only) as a package
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # stdlib first
    from shipped_runtime import build_inputs, state_file  # type: ignore[no-redef]

SUFFIX = ".seal"
VERSION = 2  # bumped whenever a seal's shape changes: an older seal is no seal
STUB = "pch.h"  # an entry: the stub, its .gch, what it was made with
GCH = f"{STUB}.gch"
INFO = "entry.json"
_BLOCK = 4096
_SAMPLES = 32
# The .gch is renamed into place right after its seal is written; a change of its inode
# (ctime) later than this after the seal means someone wrote to it, or set its times.
_PUBLISH_NS = 5 * 10**9
# A seal as write_seal writes it, read as untrusted input (state_file.py); and its bound.
SHAPE = {"version": state_file.Exactly(VERSION), "gch": state_file.IDENTITY, "sampled": str,
         "sha256": (str, None), "stub": (str, None), "info": (str, None)}
LIMIT = 64 << 10


def _sampled(fd: int, size: int) -> str:
    digest = hashlib.blake2b(digest_size=16)
    last = max(size - _BLOCK, 0)
    for index in range(_SAMPLES):
        offset = last * index // (_SAMPLES - 1)
        digest.update(offset.to_bytes(8, "little") + os.pread(fd, _BLOCK, offset))
    return digest.hexdigest()


def _beside(gch: str, name: str) -> str:
    return os.path.join(os.path.dirname(gch), name)


def seal_text(made: str, final: str) -> str:
    """The seal of the .gch at ``made`` that will be ``final``, as JSON text."""
    fd = os.open(made, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        sampled = _sampled(fd, st.st_size)
    finally:
        os.close(fd)
    data = {"version": VERSION, "gch": build_inputs.identity_of(st), "sampled": sampled,
            "sha256": build_inputs.content_hash(made), "stub": build_inputs.content_hash(_beside(final, STUB)),
            "info": build_inputs.content_hash(_beside(final, INFO))}
    return json.dumps(data, sort_keys=True)


def _write(target: str, text: str) -> None:
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def write_seal(made: str, final: str) -> None:
    """Seal ``made`` (the .gch under its temporary name) as ``final``'s: ``final.seal``."""
    try:
        _write(final + SUFFIX, seal_text(made, final))
    except BaseException:
        try:
            os.unlink(made)  # on a full disk, free what we wrote
        except OSError:
            pass
        raise


def damage(gch: str) -> str | None:
    """Why the entry of the .gch at ``gch`` is not what was sealed (None: it is, or no .gch
    is made yet)."""
    try:
        fd = os.open(gch, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "it is not a regular file"
        try:
            seal = state_file.read_json(gch + SUFFIX, LIMIT, SHAPE)
        except state_file.Unreadable as error:
            return f"it has no valid checksum (its seal: {error.why})"
        if seal is None:
            return "it has no valid checksum (made by an older pep517_torch, or its seal is gone)"
        found = build_inputs.identity_of(st)
        sealed = seal["gch"]
        if st.st_size != sealed[2]:
            return f"it is {st.st_size} bytes, but was {sealed[2]} when made (truncated?)"
        if _sampled(fd, st.st_size) != seal.get("sampled"):
            return "its content changed since it was made"
        if build_inputs.content_hash(_beside(gch, STUB)) != seal.get("stub"):
            return f"its stub {STUB} changed since it was made"
        if build_inputs.content_hash(_beside(gch, INFO)) != seal.get("info"):
            return f"its flag set ({INFO}) changed since it was made"
        sealed_at = os.stat(gch + SUFFIX).st_mtime_ns
        if found[:4] != sealed[:4] or st.st_ctime_ns > sealed_at + _PUBLISH_NS:
            if build_inputs.content_hash(gch) != seal.get("sha256"):
                return "its content changed since it was made"
            try:  # the same bytes (a copy, a restore): cheap again next time
                _write(gch + SUFFIX, json.dumps({**seal, "gch": found}, sort_keys=True))
            except OSError:
                pass  # a read-only cache: checked in full again next time
        return None
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: seal.py MADE FINAL", file=sys.stderr)
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

"""The platform tag a wheel's binaries earn (``manylinux.py``), remembered in the build directory.

Reading every binary's ELF and auditwheel's policies costs a no-op build more than the rest of
the wheel (importing auditwheel and pyelftools alone). The decision depends only on the
``platform-tag`` setting, the interpreter's own tag, the binaries and object files (their
identities: mtime, size, ctime, inode), the shipped files (which of them are ELF) and the code
that decides (auditwheel and this package, by their files' identities), so it is kept in the
build folder's ledger (its ``platform`` section) under that key: while none of it changes, the
decision is read back and neither auditwheel nor pyelftools is imported. A setting the
binaries break is an error every time (errors are never kept).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..shipped_runtime import ledger
from ..shipped_runtime.ledger import identity

SECTION = "platform"
_DECIDERS = ("manylinux.py", "../elf.py")  # beside this file: the code that decides


@dataclass(frozen=True)
class Artifact:
    """A built binary, what messages call it, and its object files with their sources."""

    path: Path
    shown: str
    objects: tuple[tuple[Path, str], ...] = ()


@dataclass(frozen=True)
class PlatformTag:
    tag: str  # manylinux_2_34_x86_64, linux_x86_64
    note: str  # what decided it, for the build summary


def _auditwheel() -> list[object] | None:
    import importlib.util

    spec = importlib.util.find_spec("auditwheel")
    origin = spec.origin if spec is not None else None
    return None if origin is None else [origin, identity(origin)]


def _key(mode: str, linux_tag: str, artifacts: Sequence[Artifact],
         shipped: Sequence[tuple[str, Path]]) -> str:
    here = Path(__file__).parent
    return json.dumps([
        mode, linux_tag,
        [[str(a.path), a.shown, identity(a.path),
          [[str(o), src, identity(o)] for o, src in a.objects]] for a in artifacts],
        [[arcname, str(path), identity(path)] for arcname, path in shipped],
        [identity(here / name) for name in _DECIDERS], _auditwheel(),
    ])


def decide(
    mode: str,
    artifacts: Sequence[Artifact],
    shipped: Sequence[tuple[str, Path]],
    linux_tag: str,
    build_dir: Path | None,
) -> PlatformTag | None:
    """The platform tag of a wheel holding ``artifacts`` and the ``shipped`` files (archive
    name, path) under ``platform-tag = mode``; None when it holds no ELF file. Kept in
    ``build_dir`` (None: not kept)."""
    key = _key(mode, linux_tag, artifacts, shipped)
    if build_dir is not None:
        kept = ledger.section(build_dir, SECTION)
        try:
            if kept["key"] == key:
                return None if kept["decision"] is None else PlatformTag(*kept["decision"])
        except (KeyError, TypeError):
            pass
    decision = _decide(mode, artifacts, shipped, linux_tag)
    if build_dir is not None:
        document = {"key": key, "decision": None if decision is None else [decision.tag, decision.note]}
        try:
            ledger.update(build_dir, None, **{SECTION: document})
        except OSError:
            pass  # not kept: the next build decides again
    return decision


def _decide(mode: str, artifacts: Sequence[Artifact], shipped: Sequence[tuple[str, Path]],
            linux_tag: str) -> PlatformTag | None:
    from ..abi.elf import is_elf
    from . import manylinux

    binaries = [manylinux.Binary(a.path, a.shown, a.objects) for a in artifacts]
    binaries += [manylinux.Binary(path, arcname) for arcname, path in shipped if is_elf(path)]
    if not binaries:
        return None
    names = {binary.path.name for binary in binaries}
    found = manylinux.decide(mode, binaries, names, linux_tag)
    return PlatformTag(found.tag, found.note)

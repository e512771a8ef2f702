"""The platform tag a wheel's binaries earn (``manylinux.py``), remembered in the build directory.

Reading every binary's ELF and auditwheel's policies costs a no-op build more than the rest of
the wheel (importing auditwheel and pyelftools alone). The decision depends only on the
``platform-tag`` setting, the interpreter's own tag, the binaries and object files (their
identities: mtime, size, ctime, inode), the shipped files (which of them are ELF) and the code
that decides (auditwheel and this package, by their files' identities), so it is kept in the
build folder's ledger (its ``platform`` section) under that key: while none of it changes, the
decision is read back and neither auditwheel nor pyelftools is imported. A setting the
binaries break is an error every time (errors are never kept).

A decision read back names the wheel, so it is checked as strictly as a ``platform-tag``
setting before it is used (:func:`kept_problem`): a tag of this machine (``linux_<arch>``, or
a ``manylinux_2_X_<arch>`` no newer than its glibc), the one ``platform-tag = mode`` can give,
with the note the decision writes for it. One that fails is decided again, said in one line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..shipped_runtime import ledger
from ..shipped_runtime.build_inputs import identity
from ..shipped_runtime.user_line import say, shown

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
        if isinstance(kept, dict) and kept.get("key") == key:
            found = kept.get("decision")
            problem = None if found is None else kept_problem(found, mode, linux_tag)
            if problem is None:
                return None if found is None else PlatformTag(*found)
            say(f"{ledger.path_in(build_dir)}: its platform decision {shown(problem)}: deciding"
                " the platform tag again")
    decision = _decide(mode, artifacts, shipped, linux_tag)
    if build_dir is not None:
        document = {"key": key, "decision": None if decision is None else [decision.tag, decision.note]}
        try:
            ledger.update(build_dir, None, **{SECTION: document})
        except OSError:
            pass  # not kept: the next build decides again
    return decision


def _glibc() -> tuple[int, int] | None:
    try:
        found = re.fullmatch(r"glibc (\d+)\.(\d+).*", os.confstr("CS_GNU_LIBC_VERSION") or "")
    except (ValueError, OSError, AttributeError):
        return None
    return None if found is None else (int(found.group(1)), int(found.group(2)))


def kept_problem(decision: object, mode: str, linux_tag: str) -> str | None:
    """Why a kept ``[tag, note]`` is not a decision this machine could make under
    ``platform-tag = mode`` (None: it is): its tag none of this machine's (its architecture,
    its glibc), not the one the mode gives, or a note the decision would not write for it."""
    if not (isinstance(decision, list) and len(decision) == 2
            and all(isinstance(part, str) for part in decision)):
        return f"{decision!r} is not [tag, note]"
    tag, note = decision
    arch = linux_tag.removeprefix("linux_")
    many = re.fullmatch(rf"manylinux_(\d+)_(\d+)_{re.escape(arch)}", tag)
    glibc = _glibc()
    if tag != linux_tag and (many is None or glibc is None or not
                             (2, 5) <= (int(many.group(1)), int(many.group(2))) <= glibc):
        return f"names {tag!r}, no platform tag of this machine"
    if not note.isprintable() or len(note) > 1000:
        return "has a note that is not one line of text"
    if mode in ("linux", linux_tag):
        expected = (linux_tag, f'platform-tag = "{mode}"')
        return None if (tag, note) == expected else f"names {tag!r}, not what platform-tag = {mode!r} gives"
    if mode != "auto":
        return None if (tag, note) == (mode, f"{mode}: platform-tag") else (
            f"names {tag!r}, not what platform-tag = {mode!r} gives")
    base = tag if many is None else f"manylinux_{many.group(1)}_{many.group(2)}"
    if not note.startswith(f"{base}: ") or len(note) == len(base) + 2:
        return f"names {tag!r} with a note the decision would not write ({note!r})"
    return None


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

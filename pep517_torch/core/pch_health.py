"""What a build does about the machine-wide PCH cache's entries beyond using them: verify each
before use, make none the cache cannot keep, and tell a failure a PCH caused (the build then
retries without one). Between ``build.py``, which plans and runs, and ``pch_cache.py``, which
owns the entries."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import BuildError
from . import graph, pch, pch_cache


def check_entries(
    plans: Sequence[graph.ExtensionPlan], registry: dict[str, pch.PchPlan], notes: list[str]
) -> None:
    """Verify each machine-cache entry this build would use: a damaged or changed one is
    removed (and made again, when the build makes its PCH), or, held by another build or not
    this user's to remove, not used."""
    for key, entry in list(registry.items()):
        if not entry.shared:
            continue
        reason = pch_cache.damage(entry.directory, entry.stub_text, entry.info)
        if reason is None:
            continue
        found = pch_cache.Entry(entry.directory, 0, 0.0, {})
        if pch_cache.untrusted(entry.directory) is None and pch_cache.remove(found):
            notes.append(f"precompiled header {entry.output} was damaged ({reason}): removed")
            continue
        notes.append(f"precompiled header {entry.output} is damaged ({reason}) and cannot be"
                     " removed (in use by another build, or not ours): compiling without it")
        del registry[key]
        for plan in plans:
            for unit in plan.units:
                if unit.pch is entry:
                    unit.pch = None


def skip_unkeepable(
    entries: Iterable[pch.PchPlan], root: Path, limit: int, notes: list[str]
) -> None:
    """Do not make a PCH the machine cache cannot keep: the users compile with the header
    as text (the same objects), instead of making and evicting one on every build."""
    for entry in entries:
        if not (entry.shared and entry.build) or entry.output.exists():
            continue
        reason = pch_cache.room_for(root, entry.header.strip("<>"), limit)
        if reason is not None:
            entry.build = False
            notes.append(f"precompiled header {entry.header} not made: {reason}")


# What a compile that fails on a .gch says: gcc names the file or the PCH when it can read
# it, and crashes (an internal compiler error) when what it reads is damaged deep inside.
_PCH_TROUBLE = ("precompiled header", "PCH file", ".gch", "internal compiler error",
                "Segmentation fault", "confused by earlier errors, bailing out")
# Or it reads damaged declarations and reports nonsense inside torch's headers: an error whose
# include chain runs through a PCH stub (a user's own error is located in the user's file).
_THROUGH_STUB = re.compile(rf"^\s*(?:In file included )?from \S*/{re.escape(pch.STUB)}:\d+[:,]", re.M)


def pch_failure(
    used: Iterable[pch.PchPlan], uses_pch: bool, error: BuildError
) -> str | None:
    """Why a failed build may be a PCH's fault (None: it is not, or it used none, ``uses_pch``).
    The machine-cache entries ``used`` that its commands name, or that are damaged, are
    removed on the way."""
    if not uses_pch:
        return None
    output = error.output
    if not any(marker in output for marker in _PCH_TROUBLE) and not _THROUGH_STUB.search(output):
        return None
    for entry in used:  # the entries the failed commands used
        if str(entry.directory) in output or pch_cache.damage(entry.directory) is not None:
            pch_cache.remove(pch_cache.Entry(entry.directory, 0, 0.0, {}))
    first = (error.first_error or "a compile failed on a precompiled header").splitlines()[0]
    return f"precompiled header trouble ({first})"

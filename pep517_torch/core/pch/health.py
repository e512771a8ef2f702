"""What a build does about the machine-wide PCH cache's entries beyond using them: verify each
before use, make none the cache cannot keep, and tell a failure a PCH caused (the build then
retries without one). Between ``build.py``, which plans and runs, and ``cache.py``, which
owns the entries."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from ...errors import BuildError
from .. import graph
from . import plan as pch, cache as pch_cache
from ..ninja.report import failed_targets


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


# What gcc and clang say about a PCH itself: one they cannot read, write or use (gcc's words
# from c-pch.cc and libcpp/pch.cc; clang's for its AST files), and a crash (an internal compiler
# error) while one is in play. Not ".gch" or "precompiled header" anywhere: the failed
# command line and the step's name say those for every error, the user's own too.
_PCH_MESSAGES = (
    "PCH file", "one or more PCH files were found", "while reading precompiled header",
    "while writing precompiled header", "cannot create precompiled header", "not used because",
    "had text segment at different address", "malformed or corrupted AST file",
    "since the precompiled header",
)
_CRASHES = ("internal compiler error", "Segmentation fault", "confused by earlier errors, bailing out")
# Or it read damaged declarations and reports nonsense inside the precompiled headers: an error
# whose include chain runs through a PCH stub, in a compile that used the .gch.
_THROUGH_STUB = re.compile(rf"^\s*(?:In file included )?from \S*/{re.escape(pch.STUB)}:\d+[:,]", re.M)
_COMPILED = re.compile(r"\s-c\s+(?:'([^']*)'|(\S+))")


def _damaged_declarations(output: str) -> bool:
    """Errors only a damaged .gch explains: reached through a PCH stub in a compile that read
    the .gch (not the step that makes one: a header that does not compile with these flags
    fails the same without it), and pointing nowhere in the compiled source: a user's error,
    even in a template of the header, says where (``a.cpp:2:48:   required from here``)."""
    if not _THROUGH_STUB.search(output):
        return False
    if any(target.endswith(".gch") for target in failed_targets(output)):
        return False
    sources = [quoted or plain for quoted, plain in _COMPILED.findall(output)]
    return not any(f"{source}:" in output for source in sources)


def pch_failure(
    used: Iterable[pch.PchPlan], uses_pch: bool, error: BuildError
) -> str | None:
    """Why a failed build may be a PCH's fault (None: it is not, or it used none, ``uses_pch``):
    a compiler's words about a PCH, a crash, or damaged declarations. The machine-cache entries
    ``used`` that its commands name, or that are damaged, are removed on the way."""
    if not uses_pch:
        return None
    output = error.output
    about_pch = any(marker in output for marker in (*_PCH_MESSAGES, *_CRASHES))
    if not about_pch and not _damaged_declarations(output):
        return None
    for entry in used:  # the entries the failed commands used
        if str(entry.directory) in output or pch_cache.damage(entry.directory) is not None:
            pch_cache.remove(pch_cache.Entry(entry.directory, 0, 0.0, {}))
    first = (error.first_error or "a compile failed on a precompiled header").splitlines()[0]
    return f"precompiled header trouble ({first})"

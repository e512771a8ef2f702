"""Which unity groups an incremental build compiles: the last build's, except where an edit
makes a group recompile anyway.

A unity TU's object holds the code of every member, so an edited member's old code (its
inlined copies, its static initialisers: ``TORCH_LIBRARY`` blocks, pybind11 definitions)
lives on in it. Reusing that object beside a fresh one of the edited file would link two
versions of one file, so this module never does: every member of a group whose object is
stale is compiled again from its current text. What it chooses is only how, by wall time on
the heavy job slots, where a TU costs a fixed part (parsing torch, instantiating and compiling
what torch's inline functions use) plus each member's own code; for files of a few lines the
fixed part is nearly all of it, with or without the PCH (measured in docs/performance.md,
"The edit loop of a unity wheel"). So:

- the edited members leave their group and compile alone, the rest of the group as one TU or
  split over idle slots, when that ends at least a fifth sooner (:data:`SPLIT_GAIN`) than the
  group as it was: files with much code of their own (a few kernels each) on two or more
  slots; their next edits then cost one file each;
- otherwise the group compiles as it was: files of a few lines (one TU of them costs about
  what one of them costs: splitting would only add TUs' fixed parts, which a machine others
  share does not run for free), or one slot;
- when every file of the extension compiles anyway (a header they all include, new flags,
  a first build, a build folder with no record), the groups of a cold build come back.

Which inputs changed is the ledger's answer (``compile_record.stale_outputs``); which member
an edited header belongs to is the include scan's (``scan.reached_files``): a header it
cannot place marks every member of its group as edited. Either way each object a build links
is one ninja built from the current text, so a wrong guess costs time, never a wrong wheel.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ...shipped_runtime import ledger
from .. import scan

SECTION = "unity_groups"  # the ledger's: each extension's groups in the last plan
# A TU's cost in units of its fixed part (parsing torch, instantiating and compiling what its
# inline functions use): each member adds a little, and its own code (code tokens of its text;
# ~8000 cost about as much as torch's part).
MEMBER_COST = 0.1
TOKENS_PER_TU = 8000
# A split must end a fifth sooner than the group as it was: it costs a TU's fixed part per
# piece, which on a machine others share (or whose cores are one core's threads) is not free.
SPLIT_GAIN = 0.8

Groups = list[list[Path]]


def fingerprint(flags: Sequence[str], pch_key: str | None) -> str:
    """What a group's object depends on besides its members' text: another value, cold groups."""
    return hashlib.sha256("\0".join([*flags, pch_key or ""]).encode()).hexdigest()[:16]


def recorded(build_dir: Path, extension: str, flags_key: str) -> Groups | None:
    """The groups the last plan compiled the extension's files in, if its flags were these."""
    found = ledger.section(build_dir, SECTION)
    entry = found.get(extension) if isinstance(found, dict) else None
    if not isinstance(entry, dict) or entry.get("flags") != flags_key:
        return None
    groups = entry.get("groups")
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        return None
    return [[Path(p) for p in g if isinstance(p, str)] for g in groups]


def section(plans: Mapping[str, tuple[str, Groups]]) -> dict[str, object]:
    """The ledger section for this plan: extension -> its flags' fingerprint and groups."""
    return {name: {"flags": key, "groups": [[str(p) for p in g] for g in groups]}
            for name, (key, groups) in sorted(plans.items())}


def cost(group: Sequence[Path], tokens: Callable[[Path], int]) -> float:
    return 1.0 + sum(MEMBER_COST + tokens(p) / TOKENS_PER_TU for p in group)


def makespan(groups: Sequence[Sequence[Path]], slots: int, tokens: Callable[[Path], int]) -> float:
    """When the last of ``groups`` ends, longest first on ``slots`` job slots."""
    ends = [0.0] * max(slots, 1)
    for length in sorted((cost(g, tokens) for g in groups), reverse=True):
        heapq.heapreplace(ends, ends[0] + length)
    return max(ends)


def _chunks(members: Sequence[Path], count: int) -> Groups:
    """``members`` in ``count`` balanced runs, in their order (a using-directive stays last)."""
    count = max(1, min(count, len(members)))
    size, extra = divmod(len(members), count)
    runs, start = [], 0
    for index in range(count):
        end = start + size + (index < extra)
        runs.append(list(members[start:end]))
        start = end
    return [run for run in runs if run]


def regroup(
    cold: Groups,
    last: Groups | None,
    stale: Mapping[str, Sequence[str]] | None,
    object_of: Callable[[Sequence[Path]], Path],
    build_dir: Path,
    slots: int,
    include_dirs: Sequence[Path] = (),
    tokens: Callable[[Path], int] = lambda path: 0,
) -> tuple[Groups, Groups]:
    """The groups whose objects are up to date, and those to compile: ``cold`` (a cold build's grouping) where there is no ``last``
    plan or no record of what changed (``stale``: target -> changed inputs), else ``last``
    with each stale group kept or split, whichever ends sooner on ``slots`` (a split by at
    least :data:`SPLIT_GAIN`; ``tokens``: a file's code tokens, asked only then). ``object_of``:
    the object a group compiles to (its ninja target, relative to the build directory that
    ``build_dir`` names)."""
    files = {p for g in cold for p in g}
    if last is None or stale is None:
        return [], cold
    kept: Groups = []
    dirty: list[tuple[list[Path], set[Path]]] = []  # (a stale group's members, the edited ones)
    placed: set[Path] = set()
    for old in last:
        members = [p for p in old if p in files and p not in placed]
        placed.update(members)
        if not members:
            continue
        if len(members) < len(old):  # a member left the extension: another object anyway
            dirty.append((members, set()))
            continue
        target = object_of(members)
        if target.as_posix() not in stale and (build_dir / target).is_file():
            kept.append(members)
            continue
        changed = stale.get(target.as_posix(), ())
        dirty.append((members, _edited(members, changed, include_dirs)))
    dirty += [([p], {p}) for p in sorted(files - placed)]  # new files: alone, like an edit
    if not dirty:
        return kept, []
    if not kept:
        return [], cold  # every file compiles: the cold grouping is the cheapest
    sizes = functools.lru_cache(maxsize=None)(tokens)
    whole = [members for members, _ in dirty]  # each stale group as it was
    splits = []
    longest = max(len(members) - len(edited) for members, edited in dirty)
    for count in range(1, max(longest, 1) + 1):
        split: Groups = []
        for members, edited in dirty:  # a group nothing edited (its object gone) stays whole
            split += [[p] for p in members if p in edited]
            split += _chunks([p for p in members if p not in edited], count if edited else 1)
        splits.append(split)
    best = min(splits, key=lambda groups: (makespan(groups, slots, sizes),
                                           sum(cost(g, sizes) for g in groups)))
    if makespan(best, slots, sizes) <= SPLIT_GAIN * makespan(whole, slots, sizes):
        return kept, best
    return kept, whole


def _edited(members: Sequence[Path], changed: Sequence[str], include_dirs: Sequence[Path]) -> set[Path]:
    """The members a change is theirs: a changed member, or one that reaches a changed
    header; every member when no change can be placed (a gone object: none)."""
    if not changed:
        return set()
    changed_set = {Path(p) for p in changed}
    edited = {m for m in members if m in changed_set}
    unplaced = changed_set - set(members)
    for header in unplaced:
        reaching = {m for m in members if header in scan.reached_files([m], include_dirs)}
        if not reaching:
            return set(members)
        edited |= reaching
    return edited

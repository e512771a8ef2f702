"""What a PCH costs and saves on this machine, measured by the builds and the background maker
that ran here: the machine cache's ``timings.json``, one record per compiler and header.

- ``pch``: CPU seconds each PCH of that header took to make (the background maker's, from the
  OS), or the wall seconds of a build's own PCH step;
- ``without`` and ``with``: the seconds of each TU that used the header without its PCH and
  with it (from the build's timeline; a TU whose PCH appeared while the build ran, or a
  compiler-cache hit, says nothing and is left out).

What a build waiting for a PCH the background is making needs (``wait.py``): how long one takes
(the least of the samples: load only ever makes a compile slower), and what it saves a TU (the
least without it less the least with it: the project's own code, in both, cancels out as far as
a few samples can tell). Records are per compiler and header, not per entry: the entry a build
waits for was never made before, but others of that header were, with other flags.

The file is untrusted input like everything the cache holds: a regular file this user owns and
alone may write, bounded, every value checked; anything else reads as no measurement.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...shipped_runtime.files import write_atomic
from ...shipped_runtime.lock import FileLock
from ...shipped_runtime.trace import Timeline
from . import cache as pch_cache
from .plan import PchPlan

FILE = "timings.json"
LOCK = "timings.lock"
KEEP = 8  # samples of each kind per record, the newest
MAX_BYTES = 64 * 1024
MAX_RECORDS = 64
MAX_SECONDS = 24 * 3600.0
KINDS = ("pch", "without", "with")


@dataclass(frozen=True)
class Estimate:
    """What this machine measured of one header's PCH: None where nothing was."""

    pch_seconds: float | None  # to make it
    saving_seconds: float | None  # per TU that uses it


def record_key(info: Mapping[str, object]) -> str | None:
    compiler, header = info.get("compiler"), info.get("header")
    if not isinstance(compiler, str) or not isinstance(header, str):
        return None
    return f"{compiler} <{header}>"


def read(root: Path) -> dict[str, dict[str, list[float]]]:
    """The records, every one checked; {} for a file that is missing or not to be trusted."""
    path = root / FILE
    try:
        st = path.lstat()
    except OSError:
        return {}
    if not path.is_file() or path.is_symlink() or st.st_size > MAX_BYTES or pch_cache.untrusted(path):
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    records = document.get("records") if isinstance(document, dict) else None
    if not isinstance(records, dict) or len(records) > MAX_RECORDS:
        return {}
    found: dict[str, dict[str, list[float]]] = {}
    for key, record in records.items():
        if not isinstance(key, str) or len(key) > 300 or not isinstance(record, dict):
            return {}
        checked: dict[str, list[float]] = {}
        for kind, samples in record.items():
            if kind not in KINDS or not isinstance(samples, list) or len(samples) > KEEP:
                return {}
            if not all(_sound(s) for s in samples):
                return {}
            checked[kind] = [float(s) for s in samples]
        found[key] = checked
    return found


def _sound(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and 0 < value <= MAX_SECONDS)


def add(root: Path, info: Mapping[str, object], samples: Mapping[str, Sequence[float]]) -> None:
    """Append ``samples`` (kind -> seconds) to the record of ``info``'s compiler and header;
    never fails a build (a cache it cannot write keeps its old record)."""
    key = record_key(info)
    samples = {kind: [s for s in found if _sound(s)] for kind, found in samples.items() if kind in KINDS}
    if key is None or not any(samples.values()):
        return
    lock = FileLock(root / LOCK)
    try:
        if not lock.acquire(wait=10):
            return  # another build writing for that long: this measurement is left out
    except OSError:
        return
    try:
        records = read(root)
        record = records.pop(key, {})
        for kind, found in samples.items():
            if found:
                record[kind] = [*record.get(kind, []), *found][-KEEP:]
        records[key] = record  # the newest last: the oldest go first past the bound
        kept = dict(list(records.items())[-MAX_RECORDS:])
        write_atomic(root / FILE, json.dumps({"records": kept}, indent=1, sort_keys=True))
        os.chmod(root / FILE, 0o600)  # whatever the umask: a file others may write is not read
    except OSError:
        pass
    finally:
        lock.release()


def estimate(root: Path, info: Mapping[str, object]) -> Estimate:
    key = record_key(info)
    record = read(root).get(key, {}) if key is not None else {}
    made = min(record.get("pch", []), default=None)
    without, with_pch = min(record.get("without", []), default=None), min(record.get("with", []), default=None)
    saving = None
    if without is not None and with_pch is not None and without > with_pch:
        saving = without - with_pch
    return Estimate(made, saving)


def build_samples(
    entries: Iterable[PchPlan],
    present: Mapping[Path, bool],
    details: Mapping[str, Mapping[str, object]],
    timeline: Timeline,
) -> list[tuple[Mapping[str, object], dict[str, list[float]]]]:
    """What one build measured of each machine-cache PCH it used: ``present`` says whether each
    PCH (its output) existed when ninja started; ``details`` are the plan's step details (an
    object's ``pch_output``)."""
    finished = {out: step for step in timeline.steps for out in step.outputs}
    found = []
    for entry in entries:
        output = str(entry.output)
        samples: dict[str, list[float]] = {"pch": [], "without": [], "with": []}
        pch_step = finished.get(output)
        before = present.get(entry.output, False)
        if pch_step is not None:
            samples["pch"].append(pch_step.seconds)
        elif not before and entry.output.exists():
            continue  # made meanwhile by someone else: which TU used it, nobody knows
        for step in timeline.steps:
            if step.kind != "compile" or step.args.get("cache") == "hit":
                continue
            if not any(details.get(out, {}).get("pch_output") == output for out in step.outputs):
                continue
            served = step.start_ms >= pch_step.end_ms if pch_step is not None else before
            samples["with" if served else "without"].append(step.seconds)
        if any(samples.values()):
            found.append((entry.info, samples))
    return found


def record_build(root: Path, entries: Iterable[PchPlan], present: Mapping[Path, bool],
                 details: Mapping[str, Mapping[str, object]], timeline: Timeline | None) -> None:
    """After a build that succeeded: what it measured, into the machine cache's record."""
    if timeline is None:
        return
    for info, samples in build_samples(entries, present, details, timeline):
        add(root, info, samples)

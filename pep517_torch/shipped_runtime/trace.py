"""A build's timeline, read from ninja's own log: ``build-trace.json`` and the summary lines.

ninja appends a line to ``.ninja_log`` as each step ends (log v5, v6 and v7 alike)::

    # ninja log v5
    <start ms>\\t<end ms>\\t<mtime>\\t<output>\\t<command hash>

start and end in milliseconds since that ninja started, one line per output (a step with two
outputs writes two lines with the same times and hash). The log is cumulative: a run's steps
are the lines it appended, found from a :class:`Mark` taken before the run. When ninja
rewrote the log as it started (it recompacts a log grown to three times its outputs, and
rewrites one of an older version), the run's lines are the ones at the end that differ from
what the log held before for their output.

Each step gets the lowest job slot free at its start (greedy interval colouring, which is how
ninja's slots fill), and the timeline is written as Chrome trace-event JSON (Perfetto,
``chrome://tracing``): one complete event per step, slot = thread.

Part of the standard-library runtime: the editable hook, which runs where pep517_torch may
not be installed, writes with it the trace of the rebuilds it runs with plain ninja, naming
steps from the ``steps`` section the last core build left in the build folder's ledger. Reading a
trace back, and showing it, is core/ninja/trace_view.py's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import ledger
from .files import write_atomic
from .environment import CCACHE_STATSLOG, ccache_value, set_ccache_defaults
from .state_file import Unreadable, read_bytes

TRACE_NAME = "build-trace.json"
NINJA_LOG = ".ninja_log"
_TAIL = 512  # bytes of the old log that must still be there for "appended" to hold
_HEADER = "# ninja log v"
_LOG_LIMIT = 512 << 20  # bytes of .ninja_log or ccache's stats log read at most


def _read_log(path: Path) -> bytes:
    """A log's bytes (b"" when there is none, or it is no regular file: read as untrusted
    input, state_file.py)."""
    try:
        return read_bytes(path, _LOG_LIMIT) or b""
    except Unreadable:
        return b""


@dataclass(frozen=True)
class LogEntry:
    start_ms: int
    end_ms: int
    mtime: int
    output: str
    command_hash: str

    @property
    def edge(self) -> tuple[int, int, int, str]:
        return (self.start_ms, self.end_ms, self.mtime, self.command_hash)


def parse_log(text: str) -> list[LogEntry]:
    """The entries of a ``.ninja_log`` (v5 and later: tab-separated); malformed lines skipped."""
    entries = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 5:
            continue
        try:
            entries.append(LogEntry(int(fields[0]), int(fields[1]), int(fields[2]), fields[3], fields[4]))
        except ValueError:
            continue
    return entries


@dataclass(frozen=True)
class Mark:
    """The log as it was before a run."""

    size: int
    tail: bytes
    last: Mapping[str, tuple[int, int, int, str]]  # output -> its latest entry's edge


def mark(build_dir: Path) -> Mark:
    data = _read_log(build_dir / NINJA_LOG)
    if not data:
        return Mark(0, b"", {})
    last = {e.output: e.edge for e in parse_log(data.decode("utf-8", "replace"))}
    return Mark(len(data), data[-_TAIL:], last)


def entries_since(build_dir: Path, before: Mark) -> list[LogEntry]:
    """The log entries the run after ``before`` wrote, in the order ninja wrote them."""
    data = _read_log(build_dir / NINJA_LOG)
    if not data:
        return []
    start = before.size - len(before.tail)
    if len(data) >= before.size and data[start:before.size] == before.tail:
        return parse_log(data[before.size:].decode("utf-8", "replace"))
    # Rewritten as ninja started: what it kept comes first, what this run appended last.
    entries = parse_log(data.decode("utf-8", "replace"))
    first = len(entries)
    while first > 0 and before.last.get(entries[first - 1].output) != entries[first - 1].edge:
        first -= 1
    return entries[first:]


def edges(entries: Iterable[LogEntry]) -> list[list[LogEntry]]:
    """Entries grouped by step: the lines of one step's outputs follow each other."""
    grouped: list[list[LogEntry]] = []
    for entry in entries:
        if grouped and grouped[-1][0].edge == entry.edge:
            grouped[-1].append(entry)
        else:
            grouped.append([entry])
    return grouped


def assign_slots(intervals: Sequence[tuple[int, int]]) -> list[int]:
    """The lowest slot free at each interval's start (one that ended at that instant is free);
    intervals starting together take slots in the order given (ninja's log order)."""
    slot_ends: list[int] = []
    slots = [0] * len(intervals)
    for index in sorted(range(len(intervals)), key=lambda i: (intervals[i][0], i)):
        start, end = intervals[index]
        free = next((s for s, busy_until in enumerate(slot_ends) if busy_until <= start), None)
        if free is None:
            free = len(slot_ends)
            slot_ends.append(end)
        slot_ends[free] = end
        slots[index] = free
    return slots


@dataclass(frozen=True)
class Step:
    name: str  # "compiling csrc/a.cpp", "linking myops._C"
    outputs: tuple[str, ...]  # as ninja names them (relative to the build directory)
    start_ms: int  # since ninja started
    end_ms: int
    slot: int  # 0-based job slot
    args: Mapping[str, Any] = field(default_factory=dict)  # kind, archs, pch, launcher, cache

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000

    @property
    def kind(self) -> str:
        return str(self.args.get("kind", "other"))


@dataclass(frozen=True)
class Timeline:
    steps: tuple[Step, ...]
    jobs: int = 1  # ninja's -j

    @property
    def wall_ms(self) -> int:
        """From ninja's start to the last step's end."""
        return max((s.end_ms for s in self.steps), default=0)

    @property
    def slots(self) -> int:
        return max((s.slot + 1 for s in self.steps), default=0)

    def share(self, step: Step) -> float:
        return (step.end_ms - step.start_ms) / self.wall_ms if self.wall_ms else 0.0

    def slowest(self, count: int | None = None) -> list[Step]:
        ordered = sorted(self.steps, key=lambda s: (s.start_ms - s.end_ms, s.start_ms, s.name))
        return ordered if count is None else ordered[:count]

    def idle(self) -> tuple[int, Step | None]:
        """Slot-milliseconds the used slots stood idle from ninja's start to the last end, and
        the step the others waited for (the one running to the latest end while slots were
        free), when it accounts for most of that idle time."""
        if not self.steps:
            return 0, None
        boundaries: list[tuple[int, int, int]] = []  # (time, 0 = end / 1 = start, step)
        for index, step in enumerate(self.steps):
            boundaries += [(step.start_ms, 1, index), (step.end_ms, 0, index)]
        boundaries.sort()
        running: set[int] = set()
        idle, now = 0, 0
        blamed: dict[int, int] = {}
        for time, starts, index in boundaries:
            free = (self.slots - len(running)) * (time - now)
            if free > 0:
                idle += free
                if running:
                    last = max(running, key=lambda i: (self.steps[i].end_ms, -i))
                    blamed[last] = blamed.get(last, 0) + free
            now = time
            (running.add if starts else running.discard)(index)
        culprit = max(blamed, key=blamed.__getitem__, default=None)
        if culprit is None or blamed[culprit] * 2 < idle:
            return idle, None
        return idle, self.steps[culprit]

    # -- trace-event JSON -------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        events: list[dict[str, Any]] = [
            {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "ninja"}},
        ]
        events += [
            {"ph": "M", "pid": 1, "tid": slot + 1, "name": "thread_name",
             "args": {"name": f"slot {slot + 1}"}}
            for slot in range(self.slots)
        ]
        for step in sorted(self.steps, key=lambda s: (s.start_ms, s.slot)):
            events.append({
                "name": step.name, "cat": step.kind, "ph": "X", "pid": 1, "tid": step.slot + 1,
                "ts": step.start_ms * 1000, "dur": (step.end_ms - step.start_ms) * 1000,
                "args": {"outputs": list(step.outputs), **step.args},
            })
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"generator": "pep517_torch", "jobs": self.jobs}}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Timeline:
        steps = []
        for event in document.get("traceEvents", []):
            if event.get("ph") != "X":
                continue
            args = dict(event.get("args", {}))
            outputs = tuple(args.pop("outputs", ()))
            start = int(event["ts"]) // 1000
            steps.append(Step(str(event["name"]), outputs, start,
                              start + int(event["dur"]) // 1000, int(event["tid"]) - 1, args))
        jobs = int(document.get("otherData", {}).get("jobs", 1))
        return cls(tuple(steps), jobs)


def timeline(
    entries: Iterable[LogEntry],
    descriptions: Mapping[str, str],
    details: Mapping[str, Mapping[str, Any]],
    *,
    jobs: int,
    cache: Mapping[str, str] | None = None,
    existed: Callable[[str], bool] = lambda output: False,
) -> Timeline:
    """The steps of ``entries``, named by ``descriptions`` (ninja output -> "compiling ...")
    or their details' ``name``, with their details (kind, source, archs, pch, launcher) in
    ``args``; ``cache`` maps a compiled source (absolute) to what the compiler cache did.

    A TU that may use a PCH (its details' ``pch_output``) was served by it when it started
    after the PCH was made, or the PCH was not made in this run and ``existed``."""
    grouped = edges(entries)
    slots = assign_slots([(group[0].start_ms, group[0].end_ms) for group in grouped])
    made = {entry.output: group[0].end_ms for group in grouped for entry in group}
    steps = []
    for group, slot in zip(grouped, slots):
        outputs = tuple(e.output for e in group)
        start, end = group[0].start_ms, group[0].end_ms
        named = next((o for o in outputs if o in descriptions or o in details), outputs[0])
        args = dict(details.get(named, {}))
        name = descriptions.get(named) or args.get("name") or named
        args.pop("name", None)
        pch_output = args.pop("pch_output", None)
        if pch_output is not None:
            args["pch_served"] = start >= made[pch_output] if pch_output in made else existed(pch_output)
        source = args.get("source")
        if cache and source in cache:
            args["cache"] = cache[source]
        steps.append(Step(str(name), outputs, start, end, slot, args))
    return Timeline(tuple(steps), jobs)


def record(build_dir: Path, before: Mark, descriptions: Mapping[str, str],
           details: Mapping[str, Mapping[str, Any]], *, jobs: int,
           cache: Mapping[str, str] | None = None) -> Timeline | None:
    """Write the run's ``build-trace.json`` (an empty one after a run that built nothing);
    the timeline, or None when it could not be written: no trace is reason to fail a build."""
    found = timeline(entries_since(build_dir, before), descriptions, details, jobs=jobs,
                     cache=cache, existed=lambda output: (build_dir / output).exists())
    try:
        write_atomic(build_dir / TRACE_NAME, dumps(found.to_json()))
    except OSError:
        return None
    return found


def annotate(build_dir: Path, found: Timeline, extra: Mapping[str, Mapping[str, Any]]) -> Timeline:
    """``found`` with ``extra[output]`` added to the args of the step that made that output
    (a CUDA library's device code by arch on its linking step), written again as the build's
    ``build-trace.json``; unchanged when it cannot be written."""
    steps = tuple(
        Step(step.name, step.outputs, step.start_ms, step.end_ms, step.slot,
             {**step.args, **{k: v for out in step.outputs for k, v in extra.get(out, {}).items()}})
        for step in found.steps
    )
    annotated = Timeline(steps, found.jobs)
    try:
        write_atomic(build_dir / TRACE_NAME, dumps(annotated.to_json()))
    except OSError:
        return found
    return annotated


def dumps(document: Mapping[str, Any]) -> str:
    """Trace-event JSON with one event a line: small, and still readable with ``less``."""
    events = ",\n".join(json.dumps(event) for event in document["traceEvents"])
    rest = {key: value for key, value in document.items() if key != "traceEvents"}
    return f'{{"traceEvents": [\n{events}\n],\n{json.dumps(rest)[1:-1]}}}\n'


def ccache_results(stats_log: Path, build_dir: Path, start: int = 0) -> dict[str, str]:
    """What ccache's stats log (CCACHE_STATSLOG) says of each source it saw after its first
    ``start`` bytes: ``hit`` or ``miss`` (or ``uncached``), keyed by the source's absolute path."""
    text = _read_log(stats_log)[start:].decode("utf-8", "replace")
    found: dict[str, str] = {}
    source: str | None = None
    for line in text.splitlines():
        if line.startswith("# "):
            source = os.path.normpath(os.path.join(build_dir, line[2:].strip()))
            found[source] = "uncached"
        elif source is not None:
            if line.strip() in ("direct_cache_hit", "preprocessed_cache_hit"):
                found[source] = "hit"
            elif line.strip() == "cache_miss" and found[source] != "hit":
                found[source] = "miss"
    return found


class Recorder:
    """Around one ninja run (``with``): marks the log before, writes the run's trace after. With
    ``ccache`` (the launcher), ccache's stats log (set in ``env``, or what this run appends to
    the one the user set) says which of this run's compiles it served: never another build's
    (ccache's own totals count every build sharing the cache)."""

    STATS_LOG = ".ccache-stats.log"

    def __init__(self, build_dir: Path, descriptions: Mapping[str, str],
                 details: Mapping[str, Mapping[str, Any]], *, jobs: int,
                 env: dict[str, str], ccache: bool = False) -> None:
        self.build_dir, self.descriptions, self.details, self.jobs = build_dir, descriptions, details, jobs
        self.before = mark(build_dir)
        self.timeline: Timeline | None = None  # once finished (None: no trace was written)
        self.stats_log: Path | None = None
        self.stats_start = 0  # bytes of the stats log written before this run
        if ccache and env.get(CCACHE_STATSLOG):
            self.stats_log = Path(env[CCACHE_STATSLOG])
            try:
                self.stats_start = os.stat(self.stats_log).st_size
            except OSError:
                self.stats_start = 0
        elif ccache and CCACHE_STATSLOG not in env:
            self.stats_log = build_dir / self.STATS_LOG
            try:
                self.stats_log.unlink(missing_ok=True)
            except OSError:
                self.stats_log = None
            else:
                env[CCACHE_STATSLOG] = ccache_value(str(self.stats_log), env)

    @classmethod
    def for_hook(cls, build_dir: Path, env: dict[str, str], source_root: str | None) -> Recorder:
        """Around the editable hook's plain ninja run (ninja's default job count), with what
        the last core build recorded of its outputs; when that build ran through ccache,
        ``env`` gets the settings it had (the ninja file names ccache, not its settings)."""
        try:
            known = ledger.section(build_dir, "steps")
            descriptions, details = dict(known["descriptions"]), dict(known["details"])
            ccache = bool(known.get("ccache"))
        except (OSError, ValueError, KeyError, TypeError):
            descriptions, details, ccache = {}, {}, False
        cpus = os.cpu_count() or 1
        jobs = 2 if cpus <= 1 else 3 if cpus == 2 else cpus + 2  # ninja's GuessParallelism
        if ccache:
            set_ccache_defaults(env, source_root)
        return cls(build_dir, descriptions, details, jobs=jobs, env=env, ccache=ccache)

    def cache_hits(self) -> int | None:
        """How many of this run's compile steps ccache served (None: no stats log to say)."""
        if self.stats_log is None or self.timeline is None:
            return None
        return sum(step.name.startswith("compiling ") and step.args.get("cache") == "hit"
                   for step in self.timeline.steps)

    def remember(self) -> None:
        """Leave what this build knows of its outputs for the editable hook's rebuilds."""
        known = {"descriptions": self.descriptions, "details": self.details,
                 "ccache": self.stats_log is not None}
        try:
            ledger.update(self.build_dir, None, steps=known)
        except OSError:
            pass

    def finish(self) -> Timeline | None:
        cache = (ccache_results(self.stats_log, self.build_dir, self.stats_start)
                 if self.stats_log else None)
        self.timeline = record(self.build_dir, self.before, self.descriptions, self.details,
                               jobs=self.jobs, cache=cache)
        return self.timeline

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finish()  # a failed build's trace too: the steps that ran

"""What a person reads of a build's timeline: the trace a build wrote read back (``read``,
``steps`` for benchmarks), the summary's two lines, the ``trace`` table, and one
self-contained HTML page (inline data, inline script, inline SVG).

No network, no CDN: the page's script draws one ``<rect class="step">`` per step (its slot's
lane, start and length to scale, coloured by kind, named in a tooltip and, where it fits, in
the bar), with ``data-`` attributes a test or a person can read back, and a table below.
"""

from __future__ import annotations

import errno
import html
import json
import os
from collections.abc import Sequence
from pathlib import Path

from ...shipped_runtime.state_file import read_bytes
from ...shipped_runtime.trace import TRACE_NAME, Step, Timeline


def summary_lines(found: Timeline, trace_file: Path | None = None) -> list[str]:
    """Two lines: the three slowest steps with their share of the wall time, and how long the
    job slots stood idle (and what they waited for); none for a build that ran nothing."""
    if not found.steps:
        return []
    slowest = ", ".join(
        f"{s.name} {s.seconds:.1f} s ({found.share(s):.0%})" for s in found.slowest(3)
    )
    idle_ms, culprit = found.idle()
    wall = found.wall_ms / 1000
    slots = found.slots
    idle = f"idle job slots: {idle_ms / 1000:.1f} s of {slots} × {wall:.1f} s"
    if slots and wall:
        idle += f" ({idle_ms / (slots * found.wall_ms):.0%})"
    if culprit is not None and idle_ms:
        idle += f", most while waiting for {culprit.name}"
    if trace_file is not None:
        idle += f"; timeline: {trace_file}"
    return [f"slowest: {slowest}", idle]


def table(found: Timeline) -> str:
    """The steps, slowest first: step, seconds, slot, share of the wall time."""
    rows = [(s.name, f"{s.seconds:.2f}", str(s.slot + 1), f"{found.share(s):.0%}")
            for s in found.slowest()]
    header = ("step", "seconds", "slot", "share")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]

    def line(row: Sequence[str]) -> str:
        return "  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:]))])

    return "\n".join([line(header), *map(line, rows), overview(found)])


def overview(found: Timeline) -> str:
    """``5 steps in 20.60 s on 2 slots (-j 2); slots idle 1.92 s, most while waiting for ...``"""
    idle_ms, culprit = found.idle()
    count, slots = len(found.steps), found.slots
    return (f"{count} step{'s' * (count != 1)} in {found.wall_ms / 1000:.2f} s"
            f" on {slots} slot{'s' * (slots != 1)} (-j {found.jobs}); slots idle {idle_ms / 1000:.2f} s"
            + (f", most while waiting for {culprit.name}" if culprit and idle_ms else ""))


_STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 16px; margin: 0 0 4px; }
p.meta { margin: 0 0 12px; color: #555; }
svg text { font: 11px system-ui, sans-serif; }
rect.step { stroke: #fff; stroke-width: 1; }
text.label { fill: #111; pointer-events: none; }
text.axis, text.lane { fill: #555; }
line.tick { stroke: #ddd; }
table { border-collapse: collapse; margin-top: 14px; }
td, th { padding: 2px 10px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #f4f4f4; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
"""

_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById("trace-data").textContent);
  const colours = {compile: "#6fa8dc", pch: "#e69138", "pch-stub": "#cccccc",
                   "device-link": "#8e7cc3", link: "#93c47d", other: "#bbbbbb"};
  const ns = "http://www.w3.org/2000/svg";
  const width = 1100, left = 70, right = 20, lane = 26, top = 24;
  const slots = Math.max(data.slots, 1);
  const wall = Math.max(data.wall_ms, 1);
  const scale = (width - left - right) / wall;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", width);
  svg.setAttribute("height", top + slots * lane + 8);
  svg.setAttribute("id", "timeline");
  function add(parent, name, attributes, text) {
    const node = document.createElementNS(ns, name);
    for (const key in attributes) node.setAttribute(key, attributes[key]);
    if (text !== undefined) node.textContent = text;
    parent.appendChild(node);
    return node;
  }
  const raw = wall / 8, magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = magnitude * (raw / magnitude < 2 ? 2 : raw / magnitude < 5 ? 5 : 10);  // ~8 ticks
  const decimals = Math.max(0, -Math.floor(Math.log10(step / 1000)));
  for (let t = 0; t <= wall; t += step) {
    const x = left + t * scale;
    add(svg, "line", {class: "tick", x1: x, x2: x, y1: top - 6, y2: top + slots * lane});
    add(svg, "text", {class: "axis", x: x + 2, y: top - 10}, (t / 1000).toFixed(decimals) + " s");
  }
  for (let s = 0; s < slots; s++) {
    add(svg, "text", {class: "lane", x: 4, y: top + s * lane + lane / 2 + 4}, "slot " + (s + 1));
  }
  data.steps.forEach(function (st, index) {
    const x = left + st.start_ms * scale, y = top + st.slot * lane + 2;
    const w = Math.max((st.end_ms - st.start_ms) * scale, 1);
    const g = add(svg, "g", {});
    const rect = add(g, "rect", {
      class: "step", x: x, y: y, width: w, height: lane - 4, rx: 2,
      fill: colours[st.kind] || colours.other, "data-index": index, "data-name": st.name,
      "data-slot": st.slot + 1, "data-start-ms": st.start_ms, "data-duration-ms": st.end_ms - st.start_ms,
      "data-kind": st.kind,
    });
    const detail = Object.keys(st.args).map(function (k) {
      const v = st.args[k];  // device_code: {"sm_90": {"bytes": ..}, ..}
      return k + ": " + (v !== null && typeof v === "object" && !Array.isArray(v) ? JSON.stringify(v) : v);
    }).join("\\n");
    add(rect, "title", {}, st.name + " (" + ((st.end_ms - st.start_ms) / 1000).toFixed(2) + " s)\\n" + detail);
    if (w > 40) {
      const clip = add(g, "clipPath", {id: "clip" + index});
      add(clip, "rect", {x: x, y: y, width: w - 4, height: lane - 4});
      add(g, "text", {class: "label", x: x + 4, y: y + lane / 2 + 2, "clip-path": "url(#clip" + index + ")"},
          st.name.replace(/^(compiling|precompiling|linking|device-linking|writing) /, ""));
    }
  });
  document.getElementById("chart").appendChild(svg);
  const legend = document.getElementById("legend");
  Object.keys(colours).forEach(function (kind) {
    if (!data.steps.some(function (st) { return st.kind === kind; })) return;
    const item = document.createElement("span");
    item.innerHTML = '<i style="background:' + colours[kind] + '"></i>' + kind;
    legend.appendChild(item);
  });
  document.body.setAttribute("data-steps-drawn", document.querySelectorAll("rect.step").length);
})();
"""


def render(found: Timeline, title: str) -> str:
    """The page for ``found``; ``title`` names the build (its directory)."""
    steps = sorted(found.steps, key=lambda s: (s.start_ms, s.slot))
    data = {
        "slots": found.slots,
        "wall_ms": found.wall_ms,
        "steps": [
            {"name": s.name, "slot": s.slot, "start_ms": s.start_ms, "end_ms": s.end_ms,
             "kind": s.kind, "args": {k: v for k, v in s.args.items() if k != "kind"}}
            for s in steps
        ],
    }
    payload = json.dumps(data).replace("</", "<\\/")  # nothing in it can end the script element
    meta = overview(found)
    rows = "\n".join(
        f"<tr><td>{html.escape(s.name)}</td><td>{s.seconds:.2f}</td><td>{s.slot + 1}</td>"
        f"<td>{found.share(s):.0%}</td></tr>"
        for s in found.slowest()
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>build timeline: {html.escape(title)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>build timeline: {html.escape(title)}</h1>
<p class="meta">{html.escape(meta)}</p>
<div id="legend" class="legend"></div>
<div id="chart"></div>
<table><thead><tr><th>step</th><th>seconds</th><th>slot</th><th>share</th></tr></thead>
<tbody>
{rows}
</tbody></table>
<script type="application/json" id="trace-data">{payload}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


# What a build's own trace holds, as bounds a hostile file is held to: a week in microseconds,
# ninja's job slots (MAX_JOBS' bound).
_MAX_US = 7 * 24 * 3600 * 10**6
_MAX_SLOTS = 4096
_LIMIT = 256 << 20  # bytes: a trace of 100,000 steps is ~30 MiB


def read(build_dir: Path) -> Timeline:
    """The timeline a build wrote into ``build_dir``: what benchmarks and ``trace`` read.
    OSError when there is none, ValueError when it is not a trace: not JSON (or nested too
    deep for the reader), or an event that is not one a build writes (named below)."""
    path = build_dir / TRACE_NAME
    data = read_bytes(path, _LIMIT)  # Unreadable (a ValueError): a symlink, no regular file...
    if data is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    text = data.decode("utf-8", errors="replace")
    try:
        document = json.loads(text)
    except RecursionError:
        raise ValueError(f"{path} is not a trace-event file (nested too deeply)") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON ({exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise ValueError(f"{path} is not a trace-event file")
    problem = _document_problem(document)
    if problem:
        raise ValueError(f"{path}: malformed trace ({problem})")
    try:
        return Timeline.from_json(document)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # beyond what is checked above
        raise ValueError(f"{path}: malformed event ({exc})") from None


def _number(value: object, low: int, high: int) -> bool:
    """A JSON number (not a bool, not NaN or infinite) from ``low`` to ``high``."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and low <= value <= high)  # NaN compares false, infinity is out of bounds


def _document_problem(document: dict[str, object]) -> str | None:
    other = document.get("otherData", {})
    if not isinstance(other, dict) or not _number(other.get("jobs", 1), 1, _MAX_SLOTS):
        return "otherData.jobs is not a job count"
    for index, event in enumerate(document["traceEvents"]):  # type: ignore[arg-type]
        problem = _event_problem(event)
        if problem:
            return f"event {index}: {problem}"
    return None


def _event_problem(event: object) -> str | None:
    if not isinstance(event, dict):
        return f"{type(event).__name__}, not an object"
    if event.get("ph") != "X":
        return None  # not a step: skipped
    name = event.get("name")
    if not isinstance(name, str) or not name.isprintable():
        return "its name is not one line of printable text"
    for field, low, high in (("ts", 0, _MAX_US), ("dur", 0, _MAX_US), ("tid", 1, _MAX_SLOTS)):
        if not _number(event.get(field), low, high):
            shown = repr(event.get(field))
            shown = shown if len(shown) <= 24 else shown[:20] + "..."
            return f"{field} {shown} is not a number from {low} to {high}"
    args = event.get("args", {})
    if not isinstance(args, dict):
        return "args is not an object"
    outputs = args.get("outputs", [])
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        return "args.outputs is not a list of strings"
    return None


def steps(build_dir: Path) -> list[Step]:
    """The steps of the last build in ``build_dir``, in the order they started."""
    return sorted(read(build_dir).steps, key=lambda s: (s.start_ms, s.slot))

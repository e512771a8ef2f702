"""The benchmark's table: each measure against its goal, the machine it ran on, and
docs/performance.md's BENCH section."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from steps import CUDA_ARCHS, ROOT


GOALS = {  # measure: (unit, goal on the ratio ours/torch, or on ours alone for absolutes)
    "cold": ("s", 0.35), "noop": ("s", 0.1), "noop_pip_floor": ("s", None), "edit": ("s", 0.3),
    "edit_header": ("s", 0.5), "second": ("s", 0.15), "second_ninja": ("s", 0.6),
    "second_now": ("s", None), "second_now_ninja": ("s", 0.6),
    "background_pch": ("s", None), "jit": ("s", 0.4), "oplib": ("s", None),
    "cold_warm": ("s", 0.30), "header_cold": ("s", 0.35), "header_warm": ("s", 0.30),
    "setup_cold": ("s", None), "setup_noop": ("s", None), "setup_edit": ("s", None),
    "setup_edit_header": ("s", None), "warm": ("ms", None), "overhead": ("s", None), "warm_floor": ("ms", 2.0),
    "noop_hooks": ("s", 0.2),
    "cuda_cold": ("s", 0.35), "cuda_cu3": ("s", 0.6),
    "ops_build": ("s", None), "ops_jit": ("ms", None), "ops_beyond_torch": ("ms", None),
    "ops_per_op": ("ms", None),
}
LABELS = {
    "cold": "cold wheel (4 TUs with torch/extension.h), empty PCH cache",
    "cold_warm": "cold wheel, warm PCH cache (made by an editable install or the JIT)",
    "header_cold": "cold wheel, TUs include torch via ops.h (bench4h), empty PCH cache",
    "header_warm": "cold wheel, bench4h, warm PCH cache",
    "noop": "no-op rebuild (same command again, best of three)",
    "noop_pip_floor": "pip's own floor for that no-op: a backend that only copies a wheel",
    "edit": "one .cpp edited (best of three edits)",
    "edit_header": "a header all four files include edited (best of three edits)",
    "background_pch": "the PCH a cold wheel leaves behind, made after it in the background",
    "second_now_ninja": "a second project (bench4h) started the moment the first wheel build returned"
                        " (its PCH being made): its ninja time, with any wait for that PCH, against the first's",
    "second_now": "that second project's whole build, started right after",
    "second": "a second project (bench4h) built cold once the first wheel's PCH is made",
    "second_ninja": "that second project (built once the PCH is made): its ninja time against the first wheel's",
    "setup_cold": "setup.py, our BuildExtension: cold wheel",
    "setup_noop": "setup.py, our BuildExtension: no-op rebuild",
    "setup_edit": "setup.py, our BuildExtension: one .cpp edited",
    "setup_edit_header": "setup.py, our BuildExtension: a header all four files include edited",
    "oplib": "a dozen extensions of 1-3 files each (oplib12), cold wheel against its setup.py",
    "jit": "JIT: a second, different extension",
    "warm": "JIT warm load() in a fresh process",
    "overhead": "backend overhead (total minus ninja)",
    "warm_floor": "JIT warm load() call alone vs importlib on the cached .so (the floor), best of 5",
    "noop_hooks": "no-op prepare_metadata + build_wheel, one fresh process (import included)",
    "ops_build": "operators listed after a wheel build's link (1-op library): the child started"
                 " during the compile; beside it, one started after the link (a build that"
                 " compiled nothing; every build before) and `import torch` alone",
    "ops_jit": "operators listed by a JIT cold build (1-op library), in its own process beyond"
               " its load; beside it, the child it started before",
    "ops_beyond_torch": "that listing's own time beyond importing torch (the child's clock)",
    "ops_per_op": "each further operator listed (a 200-op library against the 1-op one)",
    "cuda_cold": "CUDA torch 2.14.1: cold wheel (4 TUs with torch/extension.h), empty PCH cache",
    "cuda_cu3": f"CUDA torch 2.14.1: .cpp + .cu on tensors, 3 archs ({CUDA_ARCHS}), cold wheel",
}


def table(results: dict[str, dict[str, float]]) -> str:
    lines = ["| measure | torch | pep517_torch | ratio | goal | met |", "| --- | ---: | ---: | ---: | --- | --- |"]
    for key, label in LABELS.items():
        if key not in results:
            continue
        unit, goal = GOALS[key]
        row = results[key]
        ours = row["ours"]
        theirs = row.get("torch")
        if key == "warm":
            procs = results["warm_subprocesses"]
            ratio = ours / theirs
            goal_text = "≤ 5 ms, 0 subprocesses"
            met = ours <= 5 and procs["ours"] == 0
            lines.append(f"| {label} | {theirs:.1f} ms ({procs['torch']:.0f} subprocesses) | "
                         f"{ours:.1f} ms ({procs['ours']:.0f} subprocesses) | {ratio:.2f} | {goal_text} | {'yes' if met else 'NO'} |")
            continue
        if key == "warm_floor":
            met = ours <= 2 * row["floor"] and row["subprocesses"] == 0
            lines.append(f"| {label} | floor {row['floor']:.2f} ms | {ours:.2f} ms"
                         f" ({row['subprocesses']:.0f} subprocesses) | {ours / row['floor']:.2f} |"
                         f" ≤ 2× the floor, 0 subprocesses | {'yes' if met else 'NO'} |")
            continue
        if key == "noop_hooks":
            met = ours <= 0.2 and row["subprocesses"] == 0
            lines.append(f"| {label} | — | {ours:.2f} s ({row['cpu']:.2f} CPU-s,"
                         f" {row['subprocesses']:.0f} processes) | — | ≤ 0.2 s, 0 processes |"
                         f" {'yes' if met else 'NO'} |")
            continue
        if key == "background_pch":
            if "ours" not in row:
                continue
            wall, cpu = ours
            lines.append(f"| {label} | — | {wall:.1f} s, {cpu:.1f} CPU-s (off the build's clock; it yields"
                         " to builds, the second project's right-after build among them) | — | — | — |")
            continue
        if key in ("second_ninja", "second_now_ninja"):
            ratio = ours / row["first"]
            said = f" ({row['decision']})" if row.get("decision") else ""
            lines.append(f"| {label} | first {row['first']:.1f} s | {ours:.1f} s{said} | {ratio_text(ratio, goal)} |"
                         f" ≤ {goal} × the first | {'yes' if ratio <= goal else 'NO'} |")
            continue
        if key == "ops_build":
            lines.append(f"| {label} | after the link {row['late']:.2f} s (import torch"
                         f" {theirs:.2f} s) | {ours:.2f} s | {ours / row['late']:.2f} | — | — |")
            continue
        if key == "ops_jit":
            lines.append(f"| {label} | a child {row['child']:.2f} s | {ours:.0f} ms |"
                         f" {ours / 1000 / row['child']:.3f} | — | — |")
            continue
        if key == "ops_beyond_torch":
            lines.append(f"| {label} | — | {ours:.0f} ms ({row['many']:.0f} ms for 200 ops) | — | — | — |")
            continue
        if key == "ops_per_op":
            lines.append(f"| {label} | — | {ours:.2f} ms ({row['many']:.2f} s for 200) | — | — | — |")
            continue
        if key == "overhead":
            lines.append(f"| {label} | — | {ours:.2f} s | — | ≤ 0.5 s | {'yes' if ours <= 0.5 else 'NO'} |")
            continue
        if theirs is None:  # ours alone (a row measured without torch's side in this run)
            lines.append(f"| {label} | — | {amount(ours)} {unit} | — | — | — |")
            continue
        ratio = ours / theirs
        if goal is None:
            lines.append(f"| {label} | {amount(theirs)} {unit} | {amount(ours)} {unit} | {ratio:.2f} | — | — |")
        else:
            lines.append(f"| {label} | {amount(theirs)} {unit} | {amount(ours)} {unit} | {ratio_text(ratio, goal)} |"
                         f" ≤ {goal} | {'yes' if ratio <= goal else 'NO'} |")
        if key == "noop_pip_floor":
            # What the backends add to pip's own floor: the part of a no-op a backend controls.
            theirs_beyond, ours_beyond = theirs - ours, results["noop"]["ours"] - ours
            lines.append(f"| {NOOP_BEYOND_FLOOR} | {theirs_beyond:.2f} s | {ours_beyond:.2f} s |"
                         f" {ours_beyond / theirs_beyond:.3f} | — | — |")
    return "\n".join(lines)


NOOP_BEYOND_FLOOR = "that no-op beyond pip's floor (each side's time minus the floor)"


def amount(value: float) -> str:
    return f"{value:.2f}" if value < 1 else f"{value:.1f}"


def ratio_text(ratio: float, goal: float) -> str:
    """Two decimals, three where two would print the goal itself (0.104 against ≤ 0.1)."""
    return f"{ratio:.3f}" if f"{ratio:.2f}" == f"{goal:.2f}" else f"{ratio:.2f}"


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from pep517_torch.core.toolchain.jobs import cpu_count, memory_available
    from pep517_torch.core.toolchain.tools import find_compiler, find_torch

    compiler = find_compiler(os.environ)
    memory = (memory_available() or 0) / 1024**3
    return (f"{cpu}, {cpu_count()} cores, {memory:.0f} GiB available; {platform.platform()}; "
            f"Python {platform.python_version()}; torch {find_torch().version}; "
            f"{compiler.family} {compiler.version_text}")


def write_docs(text: str) -> None:
    path = ROOT / "docs" / "performance.md"
    content = path.read_text()
    begin, end = "<!-- BENCH:BEGIN -->", "<!-- BENCH:END -->"
    head, _, rest = content.partition(begin)
    _, _, tail = rest.partition(end)
    path.write_text(f"{head}{begin}\n{text}\n{end}{tail}")

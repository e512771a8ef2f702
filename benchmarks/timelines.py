"""Where each measured build's time goes: its steps from its timeline (ours: build-trace.json;
torch's: what its .ninja_log gained), as tables."""

from __future__ import annotations

from pathlib import Path

from steps import CUDA_ARCHS


def ninja_marks(project: Path) -> dict[Path, object]:
    """Each ninja log of ``project`` as it is before a build (shipped_runtime/trace.py's mark)."""
    from pep517_torch.shipped_runtime.trace import mark

    return {log.parent: mark(log.parent) for log in (project / "build").glob("*/.ninja_log")}


def phases(project: Path, before: dict[Path, object] | None = None) -> list[list[object]]:
    """The steps of the last build in ``project`` as [name, start s, seconds], in start order:
    from its build-trace.json (ours), or from what its ninja log gained since ``before``
    (torch's BuildExtension drives ninja too: build/temp.*/.ninja_log)."""
    from pep517_torch.core.ninja.trace_view import steps
    from pep517_torch.shipped_runtime.trace import Mark, entries_since

    logs = sorted((project / "build").glob("*/.ninja_log"), key=lambda path: path.stat().st_mtime)
    if not logs:
        return []
    build_dir = logs[-1].parent
    if (build_dir / "build-trace.json").exists():  # ours: named as the progress lines name them
        return [[step.name, step.start_ms / 1000, step.seconds] for step in steps(build_dir)]
    entries = entries_since(build_dir, (before or {}).get(build_dir) or Mark(0, b"", {}))
    start = min((entry.start_ms for entry in entries), default=0)
    return sorted([[entry.output.removeprefix(str(build_dir) + "/"), (entry.start_ms - start) / 1000,
                    (entry.end_ms - entry.start_ms) / 1000] for entry in entries],
                  key=lambda row: row[1])


PHASE_TITLES = {
    "cold": "the cold wheel (bench4, empty PCH cache)",
    "edit": "one .cpp edited (csrc/norm.cpp)",
    "edit_header": "a header every file includes edited (csrc/ops.h)",
    "second_now": "a second project (bench4h) started as the first wheel build returned, its PCH being made",
    "second": "a second project (bench4h) once the first wheel build's PCH is made, same machine cache",
    "oplib": "a dozen extensions of 1-3 files (oplib12), cold",
    "cuda_cu3": f"CUDA: .cpp + .cu on tensors for 3 archs ({CUDA_ARCHS})",
}


def anatomy_table(results: dict[str, dict[str, object]]) -> str:
    """Where the .cu's time goes on each side (its phases alone, one thread), and the floor
    of any plan for ours: the critical path with a core per phase, the CPU over the cores."""
    found = results.get("cu3_anatomy")
    if not found:
        return ""
    ours, theirs = found["ours"], found["torch"]
    lines = ["| phase | torch | pep517_torch |", "| --- | ---: | ---: |"]
    for key in dict.fromkeys([*theirs, *ours]):
        lines.append(f"| {key} | {theirs.get(key, 0.0):.1f} s | {ours.get(key, 0.0):.1f} s |")
    device = max((v for k, v in ours.items() if k.startswith("device pass")), default=0.0)
    host_front = ours.get("host: preprocessing", 0.0) + ours.get("host: cudafe++ (torch's headers, EDG)", 0.0)
    critical = max(host_front, device) + ours.get("fatbinary", 0.0) + ours.get("host: gcc on cudafe++'s output", 0.0)
    from pep517_torch.core.toolchain.jobs import cpu_count

    cores = cpu_count()
    cpu = ours["the .cu alone, one thread: CPU"] + ours["the .cpp alone: CPU"]
    row = results.get("cuda_cu3", {})
    rest = row["ours"] - max(s[1] + s[2] for s in results["phases"]["cuda_cu3"]["ours"]["steps"]) if row else 0.0
    floor = max(critical, ours["the .cpp alone: wall"], cpu / cores) + rest
    lines.append(f"| the .cu's critical path, a core per phase (host front end or slowest arch, then"
                 f" fatbinary and the host compile) | | {critical:.1f} s |")
    lines.append(f"| CPU of the .cu and the .cpp over {cores} cores | | {cpu / cores:.1f} s |")
    if row:
        lines.append(f"| the floor of any plan for ours (the larger, plus the {rest:.1f} s outside ninja)"
                     f" against torch's {row['torch']:.1f} s | | {floor:.1f} s ({floor / row['torch']:.2f}) |")
    return "\n".join(lines)


def phases_table(results: dict[str, dict[str, object]]) -> str:
    """Where each measured build's time goes, each side's steps from its own timeline (ours:
    build-trace.json) or ninja log (torch's), and what is left outside ninja."""
    lines = ["| build | side | step | starts at | seconds |", "| --- | --- | --- | ---: | ---: |"]
    for key, title in PHASE_TITLES.items():
        for who, label in (("theirs", "torch"), ("ours", "pep517_torch")):
            row = results.get("phases", {}).get(key, {}).get(who)
            if not row:
                continue
            ninja = 0.0
            for name, start, seconds in row["steps"]:
                lines.append(f"| {title} | {label} | {name} | {start:.1f} s | {seconds:.1f} |")
                ninja = max(ninja, start + seconds)
            lines.append(f"| {title} | {label} | **ninja, first step to last** | | **{ninja:.1f}** |")
            rest = "setuptools" if who == "theirs" else "the backend"
            lines.append(f"| {title} | {label} | **the rest: pip, {rest}, the wheel** | |"
                         f" **{row['total'] - ninja:.1f}** |")
            made = results.get("background_pch", {}).get(who) if key == "cold" else None
            if made is not None:
                lines.append(f"| {title} | {label} | after the wheel, in the background: the PCH"
                             f" for the next builds | | ({made[0]:.1f}; {made[1]:.1f} CPU-s) |")
    return "\n".join(lines) if len(lines) > 2 else ""

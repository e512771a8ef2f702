"""The build timeline: build-trace.json against ninja's own log, the summary lines, the
``trace`` command's table and HTML page (drawn by a headless chromium)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pep517_torch.core.ninja import trace_view
from pep517_torch.shipped_runtime import ledger, trace
from tests.tiny_project import set_value, write_project

V5_LOG = (
    "# ninja log v5\n"
    "0\t2384\t1796191217219577887\tobj/a.o\tee794ef899615064\n"
    "16\t226\t1796191217238092520\tobj/b.o\t7f2ebba323d17109\n"
    "2384\t2732\t1796191219603577774\tout/x.so\t1c51b2b1d80926d2\n"
)


def entry(start: int, end: int, output: str, command_hash: str = "abc", mtime: int = 7) -> str:
    return f"{start}\t{end}\t{mtime}\t{output}\t{command_hash}\n"


def test_only_the_lines_this_run_appended_are_its_steps(tmp_path: Path) -> None:
    log = tmp_path / ".ninja_log"
    log.write_text(V5_LOG)
    before = trace.mark(tmp_path)
    with log.open("a") as file:  # a step with two outputs writes a line for each
        file.write(entry(3, 950, "obj/k.o", "h1") + entry(3, 950, "obj/k.o.d", "h1"))
        file.write(entry(5, 40, "obj/b.o", "h2") + entry(950, 1200, "out/x.so", "h3"))
    found = trace.timeline(trace.entries_since(tmp_path, before), {"out/x.so": "linking x"},
                           {"obj/k.o": {"kind": "compile", "archs": ["sm_80"]}}, jobs=2)
    assert [(s.outputs, s.start_ms, s.end_ms, s.slot) for s in found.steps] == [
        (("obj/k.o", "obj/k.o.d"), 3, 950, 0),
        (("obj/b.o",), 5, 40, 1),
        (("out/x.so",), 950, 1200, 0),  # slot 1 is free again the instant k.o ends
    ]
    assert found.steps[0].args == {"kind": "compile", "archs": ["sm_80"]}
    assert found.steps[2].name == "linking x" and found.wall_ms == 1200
    assert trace.entries_since(tmp_path, trace.mark(tmp_path)) == []  # nothing new: no steps


def test_a_log_ninja_rewrote_at_its_start_still_yields_only_this_runs_steps(tmp_path: Path) -> None:
    log = tmp_path / ".ninja_log"
    log.write_text(V5_LOG + entry(0, 10, "obj/gone.o") * 300)
    before = trace.mark(tmp_path)
    # Recompacted (one line per live output, in any order), then this run's lines appended.
    kept = [line + "\n" for line in V5_LOG.splitlines()[1:]]
    log.write_text("# ninja log v7\n" + kept[2] + kept[0] + kept[1]
                   + entry(0, 300, "obj/b.o", "new") + entry(300, 420, "out/x.so", "new2"))
    assert [e.output for e in trace.entries_since(tmp_path, before)] == ["obj/b.o", "out/x.so"]
    log.unlink()  # a log deleted since: whatever is there now is this run's
    log.write_text("# ninja log v6\n" + entry(0, 5, "obj/a.o"))
    assert [e.output for e in trace.entries_since(tmp_path, before)] == ["obj/a.o"]


def test_slots_are_the_lowest_free_lane() -> None:
    assert trace.assign_slots([(0, 10), (0, 4), (4, 8), (2, 3), (10, 12), (3, 20)]) == [0, 1, 1, 2, 0, 2]


def test_idle_slots_name_the_step_the_others_waited_for() -> None:
    steps = (
        trace.Step("precompiling <torch/extension.h>", ("p",), 0, 8000, 0, {"kind": "pch"}),
        trace.Step("compiling a.cpp", ("a",), 8000, 11000, 0, {"kind": "compile"}),
        trace.Step("compiling b.cpp", ("b",), 8000, 10000, 1, {"kind": "compile"}),
        trace.Step("linking x", ("x",), 11000, 12000, 0, {"kind": "link"}),
    )
    found = trace.Timeline(steps, jobs=4)
    assert found.idle() == (8000 + 1000 + 1000, steps[0])
    slowest, idle = trace_view.summary_lines(found, Path("b/build-trace.json"))
    assert slowest == ("slowest: precompiling <torch/extension.h> 8.0 s (67%),"
                       " compiling a.cpp 3.0 s (25%), compiling b.cpp 2.0 s (17%)")
    assert idle == ("idle job slots: 10.0 s of 2 × 12.0 s (42%), most while waiting for"
                    " precompiling <torch/extension.h>; timeline: b/build-trace.json")
    assert trace_view.summary_lines(trace.Timeline(())) == []
    rows = trace_view.table(found).splitlines()
    assert rows[0].split() == ["step", "seconds", "slot", "share"]
    assert rows[1].split()[-3:] == ["8.00", "1", "67%"] and rows[4].startswith("linking x")
    assert trace.Timeline.from_json(json.loads(trace.dumps(found.to_json()))) == found


def test_a_tu_started_before_its_pch_was_made_was_not_served_by_it() -> None:
    lines = [entry(0, 900, "pch/k/pch.h.gch", "p"), entry(1, 700, "obj/a.o", "a"),
             entry(900, 1500, "obj/b.o", "b")]
    details = {o: {"kind": "compile", "pch": "<torch/extension.h>", "pch_output": "pch/k/pch.h.gch"}
               for o in ("obj/a.o", "obj/b.o", "obj/c.o")}
    found = trace.timeline(trace.parse_log("".join(lines)), {}, details, jobs=2)
    assert [s.args.get("pch_served") for s in found.steps] == [None, False, True]
    later = trace.timeline(trace.parse_log(entry(0, 5, "obj/c.o", "c")), {}, details, jobs=2,
                           existed=lambda output: output == "pch/k/pch.h.gch")
    assert later.steps[0].args["pch_served"] is True  # made by an earlier build


def test_ccache_stats_log_says_which_compiles_it_served(tmp_path: Path) -> None:
    log = tmp_path / "stats.log"
    log.write_text("# ../../csrc/a.cpp\ncache_miss\nlocal_storage_write\n"
                   "# /abs/b.cpp\ndirect_cache_hit\n# ../../csrc/c.cpp\npreprocessed_cache_hit\n")
    found = trace.ccache_results(log, tmp_path / "build" / "x")
    assert found == {str(tmp_path / "csrc/a.cpp"): "miss", "/abs/b.cpp": "hit",
                     str(tmp_path / "csrc/c.cpp"): "hit"}


# -- a real build, checked against ninja's own log -------------------------------------------


def ninja_log(build_dir: Path) -> list[tuple[str, int, int]]:
    """(output, start, end) of every line in .ninja_log, read here without pep517_torch."""
    rows = []
    for line in (build_dir / ".ninja_log").read_text().splitlines():
        if not line.startswith("#"):
            start, end, _mtime, output, _hash = line.split("\t")
            rows.append((output, int(start), int(end)))
    return rows


def traced(build_dir: Path) -> dict[str, tuple[int, int, int]]:
    """output -> (start ms, duration ms, lane) of each complete event in build-trace.json."""
    events = json.loads((build_dir / trace.TRACE_NAME).read_text())["traceEvents"]
    found = {}
    for event in events:
        if event["ph"] == "X":
            for output in event["args"]["outputs"]:
                found[output] = (event["ts"] // 1000, event["dur"] // 1000, event["tid"])
    return found


def wheel(project: Path, out: Path) -> str:
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", project, "-o", out],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def assert_matches_log(build_dir: Path, entries: list[tuple[str, int, int]]) -> None:
    found = traced(build_dir)
    assert sorted(found) == sorted(output for output, _, _ in entries)
    for output, start, end in entries:
        assert abs(found[output][1] - (end - start)) <= 10, output
        assert abs(found[output][0] - start) <= 10, output
    lanes: dict[int, list[tuple[int, int]]] = {}
    for start, duration, lane in found.values():
        lanes.setdefault(lane, []).append((start, start + duration))
    for intervals in lanes.values():  # one step at a time on a lane
        intervals.sort()
        assert all(a[1] <= b[0] for a, b in zip(intervals, intervals[1:]))


@pytest.mark.compile
def test_trace_matches_ninjas_log_cold_incremental_noop_and_recompacted(tmp_path: Path) -> None:
    project = write_project(tmp_path / "timed", "timed")
    (project / "csrc" / "third.cpp").write_text("int third() { return 3; }\n")
    output = wheel(project, tmp_path / "w1")
    (build_dir,) = (project / "build").iterdir()
    assert_matches_log(build_dir, ninja_log(build_dir))  # a fresh directory: all of it
    assert len(traced(build_dir)) == 4  # three compiles and the link
    lines = output.splitlines()
    (summary,) = [i for i, line in enumerate(lines) if line.startswith("pep517_torch: 1 extension: ")]
    slowest, idle = lines[summary + 1], lines[summary + 2]  # the summary's own last two lines
    assert slowest.startswith("pep517_torch: slowest: ")
    assert slowest.count(" s (") == 3
    assert re.match(r"pep517_torch: idle job slots: \d+\.\d s of \d × \d+\.\d s", idle)
    assert str(build_dir / trace.TRACE_NAME) in idle

    set_value(project, 7)
    before = len(ninja_log(build_dir))
    wheel(project, tmp_path / "w2")
    appended = ninja_log(build_dir)[before:]
    assert sorted(o for o, _, _ in appended) == sorted(
        ["obj/timed._C/csrc/value.cpp.o", f"out/timed/{Path(appended[-1][0]).name}"])
    assert_matches_log(build_dir, appended)

    output = wheel(project, tmp_path / "w3")  # nothing to do: an empty timeline
    assert traced(build_dir) == {} and "slowest:" not in output

    # Enough dead lines that ninja rewrites the log as it starts (recompaction).
    with (build_dir / ".ninja_log").open("a") as log:
        log.write(entry(0, 10, "obj/gone.o", "0") * 400)
    set_value(project, 8)
    wheel(project, tmp_path / "w4")
    rows = ninja_log(build_dir)
    assert len(rows) < 100, "ninja did not recompact its log"
    outputs = {"obj/timed._C/csrc/value.cpp.o", appended[-1][0]}
    assert set(traced(build_dir)) == outputs
    assert_matches_log(build_dir, [r for r in rows if r[0] in outputs][-2:])


@pytest.mark.compile
def test_ccache_hits_are_in_the_trace(tmp_path: Path) -> None:
    if shutil.which("ccache") is None:
        pytest.skip("ccache is not installed (make tools installs it)")
    from pep517_torch.core.build import build
    from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind

    (tmp_path / "a.cpp").write_text("int a() { return 1; }\n")
    (tmp_path / "b.cpp").write_text("int b() { return 2; }\n")
    spec = ExtensionSpec("cached", (tmp_path / "a.cpp", tmp_path / "b.cpp"), kind=Kind.LIBRARY,
                         python_abi_suffix=False, pch=False)
    env = {"CCACHE_DIR": str(tmp_path / "ccache"), "PEP517_TORCH_COMPILER_LAUNCHER": "ccache"}
    results = []
    for build_dir in (tmp_path / "b1", tmp_path / "b2"):
        options = BuildOptions(build_dir=build_dir, source_root=tmp_path, env=env,
                               compiler_launcher="ccache")
        result = build([spec], options, log=lambda _: None)
        assert result.run.timeline is not None
        results.append({s.name: s.args.get("cache") for s in result.run.timeline.steps
                        if s.kind == "compile"})
    assert results == [{"compiling a.cpp": "miss", "compiling b.cpp": "miss"},
                       {"compiling a.cpp": "hit", "compiling b.cpp": "hit"}]


# -- the trace command and its page -----------------------------------------------------------

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--no-first-run", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (make tools installs it)")
    return found


def synthetic(build_dir: Path) -> trace.Timeline:
    steps = (
        trace.Step("precompiling <torch/extension.h>", ("pch.h.gch",), 0, 4000, 0, {"kind": "pch"}),
        trace.Step("compiling csrc/</script><b>x.cpp", ("a.o",), 10, 900, 1, {"kind": "compile"}),
        trace.Step("compiling csrc/kernels é.cu", ("k.o",), 4000, 9000, 0,
                   {"kind": "compile", "archs": ["sm_80", "compute_90"]}),
        trace.Step("device-linking ops._C", ("dlink.o",), 9000, 9400, 0, {"kind": "device-link"}),
        trace.Step("linking ops._C", ("ops.so",), 9400, 9800, 0, {"kind": "link"}),
    )
    found = trace.Timeline(steps, jobs=2)
    build_dir.mkdir()
    (build_dir / trace.TRACE_NAME).write_text(trace.dumps(found.to_json()))
    return found


def test_trace_command_prints_the_table_sorted(tmp_path: Path) -> None:
    synthetic(tmp_path / "b")
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "trace", tmp_path / "b"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["step", "seconds", "slot", "share"]
    assert [float(re.findall(r"  (\d+\.\d\d)  ", line)[0]) for line in lines[1:6]] == [
        5.0, 4.0, 0.89, 0.4, 0.4]
    assert lines[1].startswith("compiling csrc/kernels é.cu") and lines[1].endswith("51%")
    assert lines[6].startswith("5 steps in 9.80 s on 2 slots (-j 2)")
    missing = subprocess.run([sys.executable, "-m", "pep517_torch", "trace", tmp_path / "none"],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "build-trace.json" in missing.stderr and "Traceback" not in missing.stderr
    # Without BUILD_DIR: the newest trace under ./build.
    os.makedirs(tmp_path / "proj" / "build")
    synthetic(tmp_path / "proj" / "build" / "x")
    found = subprocess.run([sys.executable, "-m", "pep517_torch", "trace"], cwd=tmp_path / "proj",
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 0 and found.stdout == result.stdout


def test_the_html_page_draws_every_step_in_headless_chromium(tmp_path: Path) -> None:
    browser = chromium()
    found = synthetic(tmp_path / "b")
    page = tmp_path / "timeline.html"
    result = subprocess.run(
        [sys.executable, "-m", "pep517_torch", "trace", tmp_path / "b", "--html", page],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")  # nothing to fetch
    assert "https://" not in text and "<script src" not in text
    dom = subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    drawn = re.findall(r'<rect class="step"[^>]*>', dom)
    assert len(drawn) == len(found.steps)
    names = {re.search(r'data-name="([^"]*)"', rect).group(1) for rect in drawn}
    import html
    assert {html.unescape(name) for name in names} == {s.name for s in found.steps}
    slots = sorted((html.unescape(re.search(r'data-name="([^"]*)"', r).group(1)),
                    int(re.search(r'data-slot="(\d+)"', r).group(1)),
                    int(re.search(r'data-duration-ms="(\d+)"', r).group(1))) for r in drawn)
    assert slots == sorted((s.name, s.slot + 1, s.end_ms - s.start_ms) for s in found.steps)
    assert 'data-steps-drawn="5"' in dom


def test_an_empty_timeline_renders(tmp_path: Path) -> None:
    page = trace_view.render(trace.Timeline(()), "empty")
    assert "0 steps in 0.00 s" in page


def test_the_editable_hooks_plain_ninja_rebuild_writes_its_trace(tmp_path: Path) -> None:
    """The hook runs ninja itself, where pep517_torch may not be installed: the runtime's
    trace module, shipped with it, writes the rebuild's timeline, named from what the last
    core build left in the build directory."""
    from pep517_torch.distribution.editable import RebuildCommand, editable_members
    from tests.test_distribution_editable import NINJA, Project, make_stale, write_members

    if NINJA is None:
        pytest.skip("needs ninja on PATH")
    project = Project(tmp_path)
    subprocess.run([NINJA, "-C", project.build], check=True, capture_output=True)
    project.link.symlink_to(project.artifact)
    ledger.update(project.build, None, steps={
        "descriptions": {"out/data.txt": "copying input.txt"},
        "details": {"out/data.txt": {"kind": "link"}}})
    (project.build / trace.TRACE_NAME).write_text("an older build's trace")
    command = RebuildCommand(Path(NINJA), project.build, ("out/data.txt",))
    members = editable_members("MyProj", package_roots={"myproj": project.root / "src" / "myproj"},
                               artifacts=[(project.artifact, project.link)], rebuild=command,
                               torch_version=None)
    assert dict(members)["_pep517_torch_editable_myproj/runtime/trace.py"] == Path(trace.__file__).read_bytes()
    write_members(project.site, members)
    (project.root / "input.txt").write_text("two\n")
    make_stale(project)
    before = len(ninja_log(project.build))
    result = project.python("import sys, myproj; print(myproj.VALUE, 'pep517_torch' in sys.modules)")
    assert (result.returncode, result.stdout) == (0, "two False\n"), result.stderr
    assert_matches_log(project.build, ninja_log(project.build)[before:])
    (event,) = [e for e in json.loads((project.build / trace.TRACE_NAME).read_text())["traceEvents"]
                if e["ph"] == "X"]
    assert (event["name"], event["cat"]) == ("copying input.txt", "link")
    result = project.python("import myproj")  # nothing to do: an empty timeline
    assert result.returncode == 0 and traced(project.build) == {}


def test_a_cuda_plans_steps_carry_archs_kinds_and_the_launcher(tmp_path: Path) -> None:
    """What the plan tells the trace of each output (no compile: prepare writes build.ninja),
    and the steps a log of that graph becomes."""
    from pep517_torch.core import plan as core_plan
    from pep517_torch.core.spec import BuildOptions
    from tests.test_dlink import TOOLKIT, build_env, dlink_spec

    if TOOLKIT is None:
        pytest.skip("needs nvcc (CUDA_HOME or nvcc on PATH)")
    options = BuildOptions(build_dir=tmp_path / "b", env=build_env(), cuda_arch_list=("8.0", "9.0+PTX"),
                           compiler_launcher="/usr/bin/env")
    plan = core_plan.prepare([dlink_spec()], options)
    archs = ["sm_80", "sm_90", "compute_90"]
    cu = plan.steps["obj/dlinkops._C/scale.cu.o"]
    assert cu["kind"] == "compile" and cu["archs"] == archs and cu["launcher"] == "env"
    assert "archs" not in plan.steps["obj/dlinkops._C/module.cpp.o"]
    assert plan.steps["obj/dlinkops._C/dlink.o"] == {"kind": "device-link", "archs": archs}
    (link,) = [o for o, d in plan.steps.items() if d["kind"] == "link"]
    log = "".join([entry(0, 900, "obj/dlinkops._C/scale.cu.o", "1"),
                   entry(1, 200, "obj/dlinkops._C/module.cpp.o", "2"),
                   entry(900, 950, "obj/dlinkops._C/dlink.o", "3"), entry(950, 990, link, "4")])
    found = trace.timeline(trace.parse_log(log), plan.descriptions, plan.steps, jobs=2)
    assert [(s.name, s.kind, s.slot) for s in found.steps] == [
        ("compiling scale.cu", "compile", 0), ("compiling module.cpp", "compile", 1),
        ("device-linking dlinkops._C", "device-link", 0), ("linking dlinkops._C", "link", 0)]
    assert found.steps[0].args["archs"] == archs

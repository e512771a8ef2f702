"""The benchmark's rows of other projects on the same machine: a second project built right
after the first wheel (while the PCH that build left behind is made in the background, as a
user meets it) and once that PCH is made; and a multi-extension operator library (fixtures/
oplib12) against its own setup.py, cold."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from children import THEIRS_PYPROJECT
from steps import (
    FIXTURE,
    HEADER_FIXTURE,
    ROOT,
    WORK,
    empty,
    fresh_copy,
    ninja_seconds,
    pip_wheel,
    wait_background,
)
from timelines import phases

OPLIB_FIXTURE = ROOT / "fixtures" / "oplib12"


def waited(output: str) -> float:
    """The seconds a build spent waiting for a PCH the background was making (core/pch/wait.py
    says so in a line), before its ninja started: counted with its ninja time."""
    return sum(float(s) for s in re.findall(r"PCH (?:not )?ready after ([\d.]+) s", output))


def decision(output: str) -> str:
    """What the build did about the PCH being made, in the words it printed."""
    found = re.search(r"pep517_torch: ((?:waiting up to|compiling without) [^\n]*)", output)
    return found.group(1) if found else "no PCH was being made for it"


def bench_second_right_after(results: dict[str, dict[str, object]], cache: Path, first_output: str) -> None:
    """bench4h built cold the moment the first wheel build of bench4 returned (its PCH being
    made in the background): its ninja time (and any wait for that PCH) against the first's."""
    print("  second_now: pep517_torch, bench4h cold right after bench4's wheel ...", flush=True)
    project = fresh_copy(HEADER_FIXTURE, WORK / "ours-second-now", ours=True)
    seconds, output = pip_wheel(project, cache)
    ninja = (ninja_seconds(output) or seconds) + waited(output)
    first = ninja_seconds(first_output) or 0.0
    results["second_now_ninja"] = {"ours": ninja, "first": first, "decision": decision(output)}
    results["second_now"] = {"ours": seconds}
    results.setdefault("phases", {})["second_now"] = {"ours": {"total": seconds, "steps": phases(project)}}
    print(f"  second_now: {seconds:.1f} s (ninja and its wait {ninja:.1f} s; the first's ninja"
          f" {first:.1f} s): {decision(output)}", flush=True)


def bench_second_project(results: dict[str, dict[str, object]], cache: Path) -> None:
    """bench4h (another project of four TUs) built cold once the PCH the first wheel build left
    behind is made (the bench waited for it), on the same machine cache: against that first
    build's ninja time, and torch's cold bench4."""
    print("  second: pep517_torch, bench4h cold once bench4's PCH is made, same machine cache ...", flush=True)
    project = fresh_copy(HEADER_FIXTURE, WORK / "ours-second-project", ours=True)
    seconds, output = pip_wheel(project, cache)
    ninja = ninja_seconds(output) or seconds
    first = results["cold_ninja"]["ours"]
    results["second_ninja"] = {"ours": ninja, "first": first}
    if "cold" in results:
        results["second"] = {"torch": results["cold"]["torch"], "ours": seconds}
    results.setdefault("phases", {})["second"] = {"ours": {"total": seconds, "steps": phases(project)}}
    print(f"  second: {seconds:.1f} s (ninja {ninja:.1f} s; the first's ninja {first:.1f} s)", flush=True)


def bench_second_alone(results: dict[str, dict[str, object]]) -> None:
    """The two second-project rows without the rest of the wheels' rows (`--only second`): our
    cold bench4 first, on an empty machine cache of its own; no torch side."""
    cache = empty(WORK / "pch-cache-second")
    print("  second: pep517_torch, bench4 cold, empty PCH cache ...", flush=True)
    seconds, output = pip_wheel(fresh_copy(FIXTURE, WORK / "ours-first", ours=True), cache)
    results["cold_ninja"] = {"ours": ninja_seconds(output) or seconds}
    bench_second_right_after(results, cache, output)
    made = wait_background(cache)
    if made is not None:
        results.setdefault("background_pch", {})["ours"] = made
        print(f"  second: the PCH bench4 left behind made in {made[0]:.1f} s ({made[1]:.1f} CPU-s)",
              flush=True)
    bench_second_project(results, cache)


def bench_oplib(results: dict[str, dict[str, object]]) -> None:
    """fixtures/oplib12 (a dozen extensions of 1-3 files, as operator libraries are made) cold:
    our wheel against its own setup.py's with torch's BuildExtension, each on its own copy;
    ours on an empty machine cache (the PCH of <torch/library.h> its ten schema files share is
    made in the build: more of them than job slots)."""
    theirs, ours = WORK / "oplib-theirs", WORK / "oplib-ours"
    for target in (theirs, ours):
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(OPLIB_FIXTURE, target)
    (theirs / "pyproject.toml").write_text(
        THEIRS_PYPROJECT.replace('"benchops"', '"oplib"').replace('"0.1.0"', '"0.3.0"'))
    (ours / "setup.py").unlink()
    cache = empty(WORK / "pch-cache-oplib")
    print("  oplib: torch's setup.py ...", flush=True)
    torch_seconds, _ = pip_wheel(theirs)
    print("  oplib: pep517_torch ...", flush=True)
    ours_seconds, _ = pip_wheel(ours, cache)
    results["oplib"] = {"torch": torch_seconds, "ours": ours_seconds}
    # torch's side runs one ninja per extension, one after the other, into one log whose times
    # each run counts from its own start: ours alone has one timeline to show.
    results.setdefault("phases", {})["oplib"] = {"ours": {"total": ours_seconds, "steps": phases(ours)}}
    wait_background(cache)  # nothing of it runs into the next measurement
    print(f"  oplib: torch {torch_seconds:.1f} s, pep517_torch {ours_seconds:.1f} s", flush=True)

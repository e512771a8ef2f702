"""pep517_torch against torch's own path, side by side in one run; ratios printed as a table.

    python benchmarks/run.py [--only warm,cold,...] [--no-write]

Measures (each on this machine, in this run):
  warm     JIT load() of an already-built extension in a fresh process, after `import torch`
  cold     `pip wheel --no-build-isolation` of fixtures/bench4 (4 TUs with torch/extension.h)
           vs torch's setup.py + BuildExtension built the same way
           (ours: two unity TUs of two files, no PCH; after the wheel is written a detached
           process makes the PCH the TUs did without, core/pch_background.py: the bench waits
           for it before the next measurement and reports how long it took)
  noop     the same command again; beside it pip's own floor, the same command with an in-tree
           backend that only copies a wheel (what no backend can go under), in the same rounds
  edit     one .cpp changed (csrc/norm.cpp), the same command again (ours: the edited file
           leaves its unity TU and compiles alone with that PCH, its former partner beside it
           on the other core, the other TU keeps its object: core/unity_regroup.py)
  edit_header  a declaration added to csrc/ops.h, which all four files include (ours: every
           file compiles, so the cold unity groups come back, with the PCH)
  second   fixtures/bench4h (another project of four TUs) built cold right after, on the same
           machine cache: its ninja time against the first wheel's, its total against torch's
           cold bench4
  setup_*  cold, noop, edit and edit_header for the same setup.py with pep517_torch.setuptools'
           BuildExtension (the one-line import switch) vs torch's BuildExtension
  jit      a second, different extension built just in time (ours reuses the shared PCH)
  pch      cold wheels with the machine-wide PCH cache warm (a second project, or `python -m
           build`'s wheel from an unpacked sdist): bench4 again from a fresh tree, and
           fixtures/bench4h (TUs reach torch/extension.h through their own "ops.h") with an
           empty and with a warm cache, each against torch's cold build of the same fixture
  overhead pep517_torch's own time in the wheel builds: total minus time inside ninja
  floor    against the floor, no torch side: the warm JIT load() call alone (API imported)
           vs importing the cached .so with importlib, best of 5 fresh processes each; and a
           no-op prepare_metadata + build_wheel through the hooks in one fresh process (their
           own time, processes started: goal 0)
  cuda     under a CUDA torch (--cuda-python, default .venv-cuda/bin/python: torch 2.14.1+cu130,
           made by `make test-cuda-torch`): the cold bench4 wheel, and fixtures/cuda_torch's
           _C (a .cpp with ATen/cuda headers + a .cu on tensors) for three archs, each vs torch's
           setup.py + BuildExtension/CUDAExtension built the same way (ours: the .cu, the
           longest compile, with --threads 2 beside the .cpp; its host compiler tuned); then
           each side's .cu compiled again alone with nvcc --time and one thread, and its .cpp:
           where the .cu's time goes, and the floor of any plan for ours
Every measured build's steps are printed from its timeline (ours: build-trace.json; torch's:
what its .ninja_log gained), with what is left outside ninja.
Results go to docs/performance.md (between the BENCH markers) unless --no-write.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench"
FIXTURE = ROOT / "fixtures" / "bench4"
HEADER_FIXTURE = ROOT / "fixtures" / "bench4h"
CUDA_FIXTURE = ROOT / "fixtures" / "cuda_torch"
CUDA_ARCHS = "8.0;9.0;10.0"
# Ours builds with a machine-wide PCH cache of the benchmark's own (emptied where a row says
# "empty") and no compiler cache: torch's path has neither.
OURS_ENV = {"PEP517_TORCH_COMPILER_LAUNCHER": "none"}
# torch >= 2.13 puts ccache or sccache in front of its compiler when one is installed (as
# `make tools` does): off for every command, so both sides compile without a compiler cache.
NO_CACHES = {"TORCH_NO_COMPILER_WRAPPER": "1"}
PYTHON = sys.executable
sys.path.insert(0, str(Path(__file__).resolve().parent))
from children import (  # noqa: E402
    CUDA_PYPROJECT,
    CUDA_SETUP_PY,
    C_API_SOURCE,
    FLOOR_CHILD,
    FLOOR_PYPROJECT,
    HOOKS_CHILD,
    IMPORT_SWITCH,
    JIT_CHILD,
    JIT_SOURCE,
    OPS_SOURCE,
    OURS_SETUP_PYPROJECT,
    PIP_FLOOR_BACKEND,
    PIP_FLOOR_PYPROJECT,
    THEIRS_PYPROJECT,
    WARM_CHILD,
)


def run(args: list[str | Path], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        stdout_only: bool = False) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                            env={**os.environ, **NO_CACHES, **(env or {})})
    elapsed = time.perf_counter() - start
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise SystemExit(f"command failed: {args}\n{output[-4000:]}")
    return elapsed, result.stdout if stdout_only else output


def pip_wheel(project: Path, pch_cache: Path | None = None, *, python: str | Path = PYTHON,
              env: dict[str, str] | None = None, settings: tuple[str, ...] = ()) -> tuple[float, str]:
    env = {**(env or {}), **({**OURS_ENV, "PEP517_TORCH_CACHE_DIR": str(pch_cache)} if pch_cache else {})}
    return run([python, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
                *(f"--config-settings={setting}" for setting in settings),
                "-w", project / "wheelhouse", project], cwd=project, env=env)


def warm_cache(fixture: Path, cache: Path) -> None:
    """What an editable install or the JIT leaves in the machine cache: a file-by-file build of
    a scratch copy, one heavy job (so that the PCH is worth making), makes the fixture's PCH."""
    pip_wheel(fresh_copy(fixture, WORK / f"warm-{fixture.name}", ours=True), cache,
              env={"MAX_JOBS": "1"}, settings=("unity=false",))


def fresh_copy(fixture: Path, target: Path, *, ours: bool) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(fixture, target, ignore=shutil.ignore_patterns("build", "dist", "wheelhouse"))
    if ours:
        (target / "setup.py").unlink()
    else:
        (target / "pyproject.toml").write_text(THEIRS_PYPROJECT)
    return target


def empty(directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


def backend_seconds(output: str) -> float | None:
    found = re.findall(r"\(ninja [\d.]+ s, pep517_torch ([\d.]+) s\)", output)
    return float(found[-1]) if found else None


def edit(project: Path, k: int) -> None:
    norm = project / "csrc" / "norm.cpp"
    text = re.sub(r"variance \+ eps(?: \* \d+)?", f"variance + eps * {k}", norm.read_text())
    norm.write_text(text)


def edit_header(project: Path, k: int) -> None:
    """A declaration added to csrc/ops.h, which every file of bench4 includes."""
    header = project / "csrc" / "ops.h"
    header.write_text(header.read_text() + f"torch::Tensor unused_{k}(const torch::Tensor& x);\n")


def ninja_seconds(output: str) -> float | None:
    found = re.findall(r"\(ninja ([\d.]+) s, pep517_torch [\d.]+ s\)", output)
    return float(found[-1]) if found else None


def wait_background(cache: Path) -> float | None:
    """Wait for the PCH a wheel build left to be made in the background (core/pch_background.py)
    in the machine cache ``cache``; how long it took to make (None: no background step ran)."""
    from pep517_torch.core import pch_background
    from pep517_torch.shipped_runtime.lock import FileLock

    root = cache / "pch"
    log = root / pch_background.LOG
    if not log.exists():
        return None
    time.sleep(0.5)  # the detached maker takes its lock within its interpreter's start
    lock = FileLock(root / pch_background.LOCK)
    lock.acquire()
    lock.release()
    made = re.findall(r"^made .* in ([\d.]+) s$", log.read_text(errors="replace"), re.MULTILINE)
    return float(made[-1]) if made else None


def bench_wheels(results: dict[str, dict[str, float]], *, pyproject: bool, setuptools: bool) -> None:
    """torch's setup.py against our pyproject face and/or its one-import switch to our face,
    each on its own copy, step by step: cold, no-op, one edit."""
    projects = {"theirs": WORK / "theirs"}
    if pyproject:
        projects["ours"] = WORK / "ours"
    if setuptools:
        projects["ours_setup"] = WORK / "ours-setup"
    for target in projects.values():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(FIXTURE, target)
    if pyproject:
        (projects["ours"] / "setup.py").unlink()
    (projects["theirs"] / "pyproject.toml").write_text(THEIRS_PYPROJECT)
    if setuptools:
        setup_py = projects["ours_setup"] / "setup.py"
        setup_py.write_text(setup_py.read_text().replace(*IMPORT_SWITCH))
        (projects["ours_setup"] / "pyproject.toml").write_text(OURS_SETUP_PYPROJECT)
    labels = {"theirs": "torch's setup.py", "ours": "pep517_torch", "ours_setup": "setup.py + ours",
              "pip_floor": "pip's own floor (a backend that copies a wheel)"}
    # Each of ours starts with an empty PCH cache of its own: the first project on a machine.
    caches = {who: empty(WORK / f"pch-cache-{who}") for who in projects if who != "theirs"}
    overheads = []
    for step in ("cold", "noop", "edit", "edit_header"):
        sides = dict(projects)
        if step == "noop" and pyproject:
            sides["pip_floor"] = pip_floor_project(next((projects["ours"] / "wheelhouse").glob("*.whl")))
        if step == "edit":
            for project in projects.values():
                edit(project, 2)
        if step == "edit_header":
            for project in projects.values():
                edit_header(project, 2)
        # A no-op is best of three rounds, each running every side once (pip's floor among
        # them): the first run after a cold build pays for pip's files read back from disk
        # (0.9 s here, then 0.55 s), and the host's speed drifts between minutes.
        runs: dict[str, list[tuple[float, str]]] = {who: [] for who in sides}
        marks: dict[str, dict[Path, object]] = {}
        for _ in range(3 if step == "noop" else 1):
            for who, project in sides.items():
                print(f"  {step}: {labels[who]} ...", flush=True)
                marks[who] = ninja_marks(project)
                runs[who].append(pip_wheel(project, caches.get(who)))
                if step == "cold" and who in caches:  # nothing else runs while it is made
                    made = wait_background(caches[who])
                    if made is not None:
                        results.setdefault("background_pch", {})[who] = made
                        print(f"  {step}: {labels[who]}: the PCH it left behind made in the"
                              f" background in {made:.1f} s", flush=True)
        seconds = {}
        for who, project in sides.items():
            seconds[who], output = min(runs[who], key=lambda run: run[0])
            overhead = backend_seconds(output) if who == "ours" else None
            if overhead is not None:
                overheads.append(overhead)
            if who == "ours" and step == "cold":
                results["cold_ninja"] = {"ours": ninja_seconds(output) or seconds[who]}
            if step != "noop" and who in ("theirs", "ours"):
                results.setdefault("phases", {}).setdefault(step, {})[who] = {
                    "total": seconds[who], "steps": phases(project, marks[who])}
        if pyproject:
            results[step] = {"torch": seconds["theirs"], "ours": seconds["ours"]}
        if "pip_floor" in seconds:
            results["noop_pip_floor"] = {"torch": seconds["theirs"], "ours": seconds["pip_floor"]}
        if setuptools:
            results[f"setup_{step}"] = {"torch": seconds["theirs"], "ours": seconds["ours_setup"]}
        print("  " + step + ": " + ", ".join(f"{labels[w]} {t:.2f} s" for w, t in seconds.items()),
              flush=True)
        if step == "cold" and pyproject:  # the next project on this machine, right after
            bench_second_project(results, caches["ours"])
    if overheads:
        results["overhead"] = {"ours": max(overheads)}


def bench_second_project(results: dict[str, dict[str, float]], cache: Path) -> None:
    """bench4h (another project of four TUs) built cold right after the first wheel build of
    bench4 (and the PCH that build left behind, which the bench waited for), on the same
    machine cache: against that first build's ninja time, and torch's cold bench4."""
    print("  second: pep517_torch, bench4h cold after bench4's wheel, same machine cache ...", flush=True)
    project = fresh_copy(HEADER_FIXTURE, WORK / "ours-second-project", ours=True)
    seconds, output = pip_wheel(project, cache)
    ninja = ninja_seconds(output) or seconds
    results["second"] = {"torch": results["cold"]["torch"], "ours": seconds}
    results["second_ninja"] = {"ours": ninja, "first": results["cold_ninja"]["ours"]}
    results.setdefault("phases", {})["second"] = {"ours": {"total": seconds, "steps": phases(project)}}
    print(f"  second: {seconds:.1f} s (ninja {ninja:.1f} s; the first's ninja"
          f" {results['cold_ninja']['ours']:.1f} s)", flush=True)


def pip_floor_project(wheel: Path) -> Path:
    """What a no-op `pip wheel` costs whatever the backend does: pip, its two hook processes,
    and an in-tree backend that only copies ``wheel`` (our cold build's)."""
    project = empty(WORK / "pip-floor")
    (project / "pyproject.toml").write_text(PIP_FLOOR_PYPROJECT)
    (project / "copy_backend.py").write_text(PIP_FLOOR_BACKEND)
    (project / "kept").mkdir()
    shutil.copy(wheel, project / "kept")
    return project


def ninja_marks(project: Path) -> dict[Path, object]:
    """Each ninja log of ``project`` as it is before a build (shipped_runtime/trace.py's mark)."""
    from pep517_torch.shipped_runtime.trace import mark

    return {log.parent: mark(log.parent) for log in (project / "build").glob("*/.ninja_log")}


def phases(project: Path, before: dict[Path, object] | None = None) -> list[list[object]]:
    """The steps of the last build in ``project`` as [name, start s, seconds], in start order:
    from its build-trace.json (ours), or from what its ninja log gained since ``before``
    (torch's BuildExtension drives ninja too: build/temp.*/.ninja_log)."""
    from pep517_torch.core.trace_view import steps
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
    "second": "a second project (bench4h) right after the first wheel build, same machine cache",
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
    from pep517_torch.core.jobs import cpu_count

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
                             f" for the next builds | | ({made:.1f}) |")
    return "\n".join(lines) if len(lines) > 2 else ""


def bench_pch(results: dict[str, dict[str, float]]) -> None:
    """Cold wheels of a new tree with the PCH the machine cache already holds, and bench4h (TUs
    reaching torch through their own ops.h) with an empty and a warm cache; torch's cold build
    of the same fixture beside each."""
    if "cold" not in results:  # run alone: torch's cold bench4 first
        bench_wheels(results, pyproject=True, setuptools=False)
    cache = empty(WORK / "pch-cache-warm")
    print("  pch: warming a PCH cache (a file-by-file build of a scratch copy) ...", flush=True)
    warm_cache(FIXTURE, cache)
    print("  pch: pep517_torch, bench4 from a new tree, warm PCH cache ...", flush=True)
    warm, _ = pip_wheel(fresh_copy(FIXTURE, WORK / "ours-second", ours=True), cache)
    results["cold_warm"] = {"torch": results["cold"]["torch"], "ours": warm}
    print("  pch: torch's setup.py, bench4h ...", flush=True)
    theirs, _ = pip_wheel(fresh_copy(HEADER_FIXTURE, WORK / "theirs-header", ours=False))
    header_cache = empty(WORK / "pch-cache-header")
    print("  pch: pep517_torch, bench4h, empty PCH cache ...", flush=True)
    cold, _ = pip_wheel(fresh_copy(HEADER_FIXTURE, WORK / "ours-header", ours=True), header_cache)
    wait_background(header_cache)  # nothing else runs while the PCH it left behind is made
    print("  pch: warming the bench4h cache ...", flush=True)
    warm_cache(HEADER_FIXTURE, header_cache)
    print("  pch: pep517_torch, bench4h from a new tree, warm PCH cache ...", flush=True)
    again, _ = pip_wheel(fresh_copy(HEADER_FIXTURE, WORK / "ours-header-2", ours=True), header_cache)
    results["header_cold"] = {"torch": theirs, "ours": cold}
    results["header_warm"] = {"torch": theirs, "ours": again}
    print(f"  pch: bench4 warm {warm:.1f} s (torch {results['cold']['torch']:.1f} s); bench4h torch"
          f" {theirs:.1f} s, empty cache {cold:.1f} s, warm {again:.1f} s", flush=True)


def bench_jit(results: dict[str, dict[str, float]]) -> None:
    base = WORK / "jit"
    shutil.rmtree(base, ignore_errors=True)
    sources = {}
    for name, k in (("first_ext", 2), ("second_ext", 3)):
        path = base / "src" / f"{name}.cpp"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(JIT_SOURCE.format(name=name, k=k))
        sources[name] = path
    env = {**OURS_ENV, "TORCH_EXTENSIONS_DIR": str(base / "ours-root"),
           "PEP517_TORCH_CACHE_DIR": str(empty(base / "machine-cache"))}
    print("  jit: pep517_torch first extension (builds the shared PCH) ...", flush=True)
    run([PYTHON, "-c", JIT_CHILD, "ours", "first_ext", sources["first_ext"], base / "ours-first"], env=env)
    print("  jit: pep517_torch second extension ...", flush=True)
    _, out = run([PYTHON, "-c", JIT_CHILD, "ours", "second_ext", sources["second_ext"], base / "ours-second"],
                 env=env, stdout_only=True)
    ours = float(out.strip().splitlines()[-1])
    print("  jit: torch second extension ...", flush=True)
    (base / "theirs").mkdir(parents=True)
    _, out = run([PYTHON, "-c", JIT_CHILD, "theirs", "second_ext", sources["second_ext"], base / "theirs"],
                 stdout_only=True)
    theirs = float(out.strip().splitlines()[-1])
    results["jit"] = {"torch": theirs, "ours": ours}
    print(f"  jit: torch {theirs:.1f} s, pep517_torch {ours:.1f} s", flush=True)


def cuda_kernel_project(target: Path, *, ours: bool) -> Path:
    """fixtures/cuda_torch's _C alone (ops.cpp + kernels.cu), as a pyproject or a setup.py."""
    shutil.rmtree(target, ignore_errors=True)
    (target / "cudatorchops").mkdir(parents=True)
    shutil.copytree(CUDA_FIXTURE / "csrc", target / "csrc")
    (target / "cudatorchops" / "__init__.py").write_text("")
    if ours:
        (target / "pyproject.toml").write_text(CUDA_PYPROJECT)
    else:
        (target / "pyproject.toml").write_text(THEIRS_PYPROJECT.replace("benchops", "cudatorchops"))
        (target / "setup.py").write_text(CUDA_SETUP_PY)
    return target


def is_cuda_torch(python: Path) -> bool:
    if not python.exists():
        return False
    probe = subprocess.run([str(python), "-c", "import torch.version as v; print(v.cuda)"],
                           capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout.strip() not in ("", "None")


def cuda_home() -> dict[str, str]:
    """CUDA_HOME for both sides: torch takes the folder above the first nvcc on PATH, which is
    wrong where that nvcc is a wrapper script (its headers are then not found); ours sees
    through it. Given as found, so that both compile against one toolkit."""
    if os.environ.get("CUDA_HOME"):
        return {}
    from pep517_torch.core.cuda import find_cuda

    toolkit = find_cuda(os.environ)
    return {"CUDA_HOME": str(toolkit.root)} if toolkit else {}


def nvidia_wheel_headers(python: Path) -> dict[str, str]:
    """CPATH for torch's side: the headers of the nvidia-* wheels a CUDA torch installs
    (cusparse.h, cublas_v2.h, which ATen/cuda includes), searched after every -I as ours
    searches them (core/cuda.py), where the system toolkit lacks them (a trimmed one)."""
    found = subprocess.run(  # every nvidia/*/include on its path (a layered venv's too)
        [str(python), "-c", "import glob, os, nvidia; print(os.pathsep.join(sorted(p for d in"
         " nvidia.__path__ for p in glob.glob(os.path.join(d, '*', 'include')))))"],
        capture_output=True, text=True,
    ).stdout.strip()
    if not found:
        return {}
    return {"CPATH": os.pathsep.join(filter(None, [os.environ.get("CPATH"), found]))}


def bench_cuda(results: dict[str, dict[str, float]], python: Path) -> None:
    """Under a CUDA torch, interleaved: torch's setup.py, then ours, per row."""
    if not is_cuda_torch(python):
        print(f"  cuda: skipped: {python} has no CUDA build of torch (make test-cuda-torch makes one)")
        return
    archs = {"TORCH_CUDA_ARCH_LIST": CUDA_ARCHS, **cuda_home()}
    cases = {
        "cuda_cold": (lambda ours: fresh_copy(FIXTURE, WORK / f"cuda-bench4-{ours}", ours=ours), {}),
        "cuda_cu3": (lambda ours: cuda_kernel_project(WORK / f"cuda-cu3-{ours}", ours=ours), archs),
    }
    theirs = nvidia_wheel_headers(python)
    for key, (make, env) in cases.items():
        seconds = {}
        for who in ("torch", "ours"):
            ours = who == "ours"
            print(f"  {key}: {'pep517_torch' if ours else 'torch'} ...", flush=True)
            cache = empty(WORK / f"pch-cache-{key}") if ours else None
            try:
                project = make(ours)
                seconds[who], _ = pip_wheel(project, cache, python=python,
                                            env=env if ours else {**env, **theirs})
                results.setdefault("phases", {}).setdefault(key, {})["ours" if ours else "theirs"] = {
                    "total": seconds[who], "steps": phases(project)}
                if cache is not None:
                    wait_background(cache)  # the next row's builds run alone
            except SystemExit as failed:  # one side cannot build here: say so, keep the run
                errors = re.findall(r"^.*error:.*$", str(failed), re.MULTILINE)
                print(f"  {key}: {who}'s build failed, row left out: {(errors or ['see above'])[0].strip()}",
                      flush=True)
                break
        else:
            results[key] = seconds
            print(f"  {key}: torch {seconds['torch']:.1f} s, pep517_torch {seconds['ours']:.1f} s", flush=True)
    if "cuda_cu3" in results:  # where the .cu's time goes: each side's compiles again, alone
        print("  cuda_cu3: each side's .cu (nvcc --time, one thread) and .cpp again, alone ...", flush=True)
        ours_dir = next(d for d in (WORK / "cuda-cu3-True" / "build").iterdir() if (d / "build.ninja").exists())
        theirs_dir = next((WORK / "cuda-cu3-False" / "build").glob("temp.*"))
        results["cu3_anatomy"] = {"ours": nvcc_phases(ours_dir, archs),
                                  "torch": nvcc_phases(theirs_dir, {**archs, **theirs})}


def compile_command(build_dir: Path, suffix: str) -> tuple[str, str]:
    """The command ninja runs for the object whose name ends with ``suffix`` (relative to
    ``build_dir``, where it runs), and that object."""
    from pep517_torch.core.toolchain import find_ninja

    ninja = str(find_ninja({}))
    targets = subprocess.run([ninja, "-C", str(build_dir), "-t", "targets", "all"],
                             capture_output=True, text=True, check=True).stdout
    target = next(line.split(":")[0] for line in targets.splitlines() if line.split(":")[0].endswith(suffix))
    command = subprocess.run([ninja, "-C", str(build_dir), "-t", "commands", "-s", target],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    return command, target


def cpu_seconds(command: str, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one shell command, alone."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(command, shell=True, cwd=cwd, env={**os.environ, **env}, check=True,
                   capture_output=True)
    wall = time.perf_counter() - start
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


NVCC_HOST = {"gcc (preprocessing 4)": "host: preprocessing", "cudafe++": "host: cudafe++ (torch's headers, EDG)",
             "gcc (compiling)": "host: gcc on cudafe++'s output"}


def nvcc_phases(build_dir: Path, env: dict[str, str]) -> dict[str, float]:
    """The .cu of ``build_dir`` compiled again alone, one thread (nvcc --time): seconds per
    phase, each arch's device pass (preprocessing, cicc, ptxas) summed, and the .cpp beside it."""
    command, target = compile_command(build_dir, "kernels.cu.o") if any(
        build_dir.glob("obj/**/kernels.cu.o")) else compile_command(build_dir, "kernels.o")
    scratch = build_dir / "anatomy"
    scratch.mkdir(exist_ok=True)
    csv = scratch / "nvcc-time.csv"
    csv.unlink(missing_ok=True)
    command = re.sub(r" --threads \d+", "", command).replace(f" -o {target}", f" -o {scratch}/k.o")
    cu_wall, cu_cpu = cpu_seconds(f"{command} --threads 1 --time {csv}", build_dir, env)
    phases: dict[str, float] = {}
    for line in csv.read_text().splitlines()[1:]:
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 8 or fields[7] != "ms":
            continue
        name, arch, ms = fields[1], fields[4], float(fields[6])
        if name in NVCC_HOST:
            key = NVCC_HOST[name]
        elif name in ("gcc (preprocessing 1)", "cicc", "ptxas"):
            key = f"device pass, sm_{re.sub(r'[^0-9]', '', arch)}"
        else:
            key = name
        phases[key] = phases.get(key, 0.0) + ms / 1000
    phases["the .cu alone, one thread: wall"] = cu_wall
    phases["the .cu alone, one thread: CPU"] = cu_cpu
    cpp, cpp_target = compile_command(build_dir, "ops.cpp.o") if any(
        build_dir.glob("obj/**/ops.cpp.o")) else compile_command(build_dir, "ops.o")
    # as the cold build compiled it: without the PCH the background step has made since
    cpp = re.sub(r" -include \S*pch\.h( -fpch-preprocess)?", "", cpp.replace(f" -o {cpp_target}", f" -o {scratch}/ops.o"))
    phases["the .cpp alone: wall"], phases["the .cpp alone: CPU"] = cpu_seconds(cpp, build_dir, env)
    return phases


def bench_warm(results: dict[str, dict[str, float]], repeats: int = 9) -> None:
    base = WORK / "warm"
    shutil.rmtree(base, ignore_errors=True)
    source = base / "ops.cpp"
    source.parent.mkdir(parents=True)
    source.write_text(OPS_SOURCE)
    samples: dict[str, list[dict[str, float]]] = {"ours": [], "torch": []}
    for who in ("ours", "torch"):
        build = base / who
        build.mkdir()
        args = [PYTHON, "-c", WARM_CHILD, who, f"warm_{who}", source, build]
        env = {**OURS_ENV, "PEP517_TORCH_CACHE_DIR": str(base / "machine-cache")}
        run(args, env=env)  # the cold build
        for _ in range(repeats):
            output = run(args, env=env, stdout_only=True)[1]
            samples[who].append(json.loads(output.strip().splitlines()[-1]))
    for who in samples:
        ms = statistics.median(s["ms"] for s in samples[who])
        procs = max(s["subprocesses"] for s in samples[who])
        results.setdefault("warm", {})[who if who == "ours" else "torch"] = ms
        results.setdefault("warm_subprocesses", {})[who if who == "ours" else "torch"] = procs
    print(f"  warm: torch {results['warm']['torch']:.1f} ms, pep517_torch {results['warm']['ours']:.1f} ms",
          flush=True)


def bench_floor(results: dict[str, dict[str, float]], repeats: int = 5) -> None:
    base = WORK / "floor"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    source = base / "module.cpp"
    source.write_text(C_API_SOURCE)
    env = {**OURS_ENV, "PEP517_TORCH_CACHE_DIR": str(base / "machine-cache")}
    build = base / "jit"
    build.mkdir()
    child = [PYTHON, "-c", FLOOR_CHILD]
    run([*child, "ours", "floorops", source, build], env=env)  # the cold build
    samples: dict[str, list[dict[str, float]]] = {"ours": [], "floor": []}
    for _ in range(repeats):  # interleaved: the host's speed drifts
        for who in samples:
            output = run([*child, who, "floorops", source, build], env=env, stdout_only=True)[1]
            samples[who].append(json.loads(output.strip().splitlines()[-1]))
    results["warm_floor"] = {
        "floor": min(s["ms"] for s in samples["floor"]),
        "ours": min(s["ms"] for s in samples["ours"]),
        "subprocesses": max(s["subprocesses"] for s in samples["ours"]),
    }
    project = base / "project"
    project.mkdir()
    shutil.copy(source, project / "module.cpp")
    (project / "pyproject.toml").write_text(FLOOR_PYPROJECT)
    hooks = [PYTHON, "-c", HOOKS_CHILD, str(base / "meta"), str(base / "wheels")]
    run(hooks, cwd=project, env=env)  # the real build
    noops = [json.loads(run(hooks, cwd=project, env=env, stdout_only=True)[1].strip().splitlines()[-1])
             for _ in range(repeats)]
    results["noop_hooks"] = {
        "ours": min(n["s"] for n in noops),
        "cpu": min(n["cpu"] for n in noops),
        "subprocesses": max(n["subprocesses"] for n in noops),
    }
    floor, hooks_row = results["warm_floor"], results["noop_hooks"]
    print(f"  floor: load() {floor['ours']:.2f} ms vs importlib {floor['floor']:.2f} ms;"
          f" no-op hooks {hooks_row['ours']:.2f} s ({hooks_row['cpu']:.2f} CPU-s),"
          f" {hooks_row['subprocesses']:.0f} processes started", flush=True)


GOALS = {  # measure: (unit, goal on the ratio ours/torch, or on ours alone for absolutes)
    "cold": ("s", 0.35), "noop": ("s", 0.1), "noop_pip_floor": ("s", None), "edit": ("s", 0.3),
    "edit_header": ("s", 0.5), "second": ("s", 0.15), "second_ninja": ("s", 0.6),
    "background_pch": ("s", None), "jit": ("s", 0.4),
    "cold_warm": ("s", 0.30), "header_cold": ("s", 0.35), "header_warm": ("s", 0.30),
    "setup_cold": ("s", None), "setup_noop": ("s", None), "setup_edit": ("s", None),
    "setup_edit_header": ("s", None), "warm": ("ms", None), "overhead": ("s", None), "warm_floor": ("ms", 2.0),
    "noop_hooks": ("s", 0.2),
    "cuda_cold": ("s", 0.35), "cuda_cu3": ("s", 0.6),
}
LABELS = {
    "cold": "cold wheel (4 TUs with torch/extension.h), empty PCH cache",
    "cold_warm": "cold wheel, warm PCH cache (made by an editable install or the JIT)",
    "header_cold": "cold wheel, TUs include torch via ops.h (bench4h), empty PCH cache",
    "header_warm": "cold wheel, bench4h, warm PCH cache",
    "noop": "no-op rebuild (same command again)",
    "noop_pip_floor": "pip's own floor for that no-op: a backend that only copies a wheel",
    "edit": "one .cpp edited",
    "edit_header": "a header all four files include edited",
    "background_pch": "the PCH a cold wheel leaves behind, made after it in the background",
    "second": "a second project (bench4h) built cold right after the first wheel build",
    "second_ninja": "that second project's ninja time against the first wheel's",
    "setup_cold": "setup.py, our BuildExtension: cold wheel",
    "setup_noop": "setup.py, our BuildExtension: no-op rebuild",
    "setup_edit": "setup.py, our BuildExtension: one .cpp edited",
    "setup_edit_header": "setup.py, our BuildExtension: a header all four files include edited",
    "jit": "JIT: a second, different extension",
    "warm": "JIT warm load() in a fresh process",
    "overhead": "backend overhead (total minus ninja)",
    "warm_floor": "JIT warm load() call alone vs importlib on the cached .so (the floor), best of 5",
    "noop_hooks": "no-op prepare_metadata + build_wheel, one fresh process (import included)",
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
            lines.append(f"| {label} | — | {ours:.1f} s (off the build's clock, nice +10) | — | — | — |")
            continue
        if key == "second_ninja":
            ratio = ours / row["first"]
            lines.append(f"| {label} | first {row['first']:.1f} s | {ours:.1f} s | {ratio_text(ratio, goal)} |"
                         f" ≤ {goal} × the first | {'yes' if ratio <= goal else 'NO'} |")
            continue
        if key == "overhead":
            lines.append(f"| {label} | — | {ours:.2f} s | — | ≤ 0.5 s | {'yes' if ours <= 0.5 else 'NO'} |")
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
    from pep517_torch.core.jobs import cpu_count, memory_available
    from pep517_torch.core.toolchain import find_compiler, find_torch

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="warm,floor,wheels,setuptools,pch,jit,cuda",
                        help="comma list of: warm, floor, wheels, setuptools, pch, jit, cuda")
    parser.add_argument("--cuda-python", type=Path, default=ROOT / ".venv-cuda" / "bin" / "python",
                        help="interpreter with a CUDA build of torch for the cuda rows")
    parser.add_argument("--no-write", action="store_true", help="don't update docs/performance.md")
    args = parser.parse_args()
    WORK.mkdir(exist_ok=True)
    # Bytecode as an install has it (pip compiles at install): a host that sets
    # PYTHONDONTWRITEBYTECODE would otherwise time every child compiling pep517_torch's source.
    run([PYTHON, "-m", "compileall", "-q", ROOT / "pep517_torch"])
    results: dict[str, dict[str, float]] = {}
    chosen = args.only.split(",")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"benchmarking on {machine()}", flush=True)
    if "warm" in chosen:
        bench_warm(results)
    if "floor" in chosen:
        bench_floor(results)
    if "wheels" in chosen or "setuptools" in chosen:
        bench_wheels(results, pyproject="wheels" in chosen, setuptools="setuptools" in chosen)
    if "pch" in chosen:
        bench_pch(results)
    if "jit" in chosen:
        bench_jit(results)
    if "cuda" in chosen:
        bench_cuda(results, args.cuda_python)
    text = f"Measured {when} on: {machine()}.\n\n{table(results)}"
    if phases_table(results):
        text += ("\n\nWhere each build's time goes (the run above), each side's steps from its own"
                 " timeline (ours: build-trace.json; torch's: what its `.ninja_log` gained):\n\n"
                 + phases_table(results))
    if results.get("cu3_anatomy"):
        text += ("\n\nWhere the CUDA row's .cu goes (each side's compiles of it run again alone, nvcc"
                 " --time with one thread; CPU seconds from the OS):\n\n" + anatomy_table(results))
    print("\n" + text)
    (WORK / "results.json").write_text(json.dumps(results, indent=1))
    if not args.no_write and {"warm", "wheels", "setuptools", "pch", "jit"} <= set(chosen):
        write_docs(text)


if __name__ == "__main__":
    main()

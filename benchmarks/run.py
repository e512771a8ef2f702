"""pep517_torch against torch's own path, side by side in one run; ratios printed as a table.

    python benchmarks/run.py [--only warm,cold,...] [--no-write]

Measures (each on this machine, in this run):
  warm     JIT load() of an already-built extension in a fresh process, after `import torch`
  cold     `pip wheel --no-build-isolation` of fixtures/bench4 (4 TUs with torch/extension.h)
           vs torch's setup.py + BuildExtension built the same way
           (ours: two unity TUs of two files, no PCH; after the wheel is written a detached
           process makes the PCH the TUs did without, core/pch/background.py: the bench waits
           for it before the next measurement and reports how long it took)
  noop     the same command again; beside it pip's own floor, the same command with an in-tree
           backend that only copies a wheel (what no backend can go under), in the same rounds
           (the no-op and both edits: each side's best of three rounds, interleaved)
  edit     one .cpp changed (csrc/norm.cpp), the same command again (ours: the edited file's
           unity TU compiles again with that PCH and the other TU keeps its object; bench4's
           files are a few lines each, so one TU of two costs what one file costs and the edited
           file stays in its group: core/unity/regroup.py splits files with code of their own)
  edit_header  a declaration added to csrc/ops.h, which all four files include (ours: every
           file compiles, so the cold unity groups come back, with the PCH)
  second   fixtures/bench4h (another project of four TUs) built cold on the same machine cache
           right after the first wheel returned (the PCH it left behind still being made in the
           background: the row a user meets), and again once that PCH is made (the bench waits
           for it): each one's ninja time (with any wait for the PCH) against the first wheel's,
           the second's total against torch's cold bench4 (`--only second`: these rows alone,
           ours only, after a cold bench4 of their own)
  oplib    fixtures/oplib12 cold (a dozen extensions of 1-3 files each, shaped like the big
           operator libraries: ten of one operator each, its schema with <torch/library.h> and
           its CPU kernel with per-operator ATen headers, two pybind11 modules with
           torch/extension.h), our wheel against its own setup.py with torch's BuildExtension
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
  ops      the operator listing a build runs after its link: a 1-op library's wheel built after
           an edit (its child started during the compile) and with nothing to compile (its child
           started after the link), `import torch` alone (that child's floor), the JIT's listing
           in its own process, and a 200-op library: the cost per op (benchmarks/ops_row.py)
Every measured build's steps are printed from its timeline (ours: build-trace.json; torch's:
what its .ninja_log gained), with what is left outside ninja.
Results go to docs/performance.md (between the BENCH markers) unless --no-write.
Both sides compile with the environment's CXX (torch's BuildExtension reads it too): `CXX=clang++`
measures them with clang.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

from children import (
    C_API_SOURCE,
    FLOOR_CHILD,
    FLOOR_PYPROJECT,
    HOOKS_CHILD,
    IMPORT_SWITCH,
    JIT_CHILD,
    JIT_SOURCE,
    OPS_SOURCE,
    OURS_SETUP_PYPROJECT,
    THEIRS_PYPROJECT,
    WARM_CHILD,
)
from cuda_row import bench_cuda
from ops_row import bench_ops
from projects import bench_oplib, bench_second_alone, bench_second_project, bench_second_right_after
from report import machine, table, write_docs
from steps import (
    FIXTURE,
    HEADER_FIXTURE,
    OURS_ENV,
    PYTHON,
    ROOT,
    WORK,
    backend_seconds,
    edit,
    edit_header,
    empty,
    fresh_copy,
    ninja_seconds,
    pip_floor_project,
    pip_wheel,
    run,
    wait_background,
    warm_cache,
)
from timelines import anatomy_table, ninja_marks, phases, phases_table

ROUNDS = 3  # of the no-op and the edits: each side's best


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
        # The no-op and the edits are best of three rounds, each running every side once (pip's
        # floor among them; a new edit each round): the host's speed drifts ~2x between
        # minutes, and a 12 s build sampled once is the drift's to decide. Before a no-op's
        # first run pip's files are read back from disk (0.9 s here, then 0.55 s); before an
        # edit the PCH may be (this host pages out what sat idle for a minute).
        runs: dict[str, list[tuple[float, str, list[list[object]]]]] = {who: [] for who in sides}
        for round_number in range(1 if step == "cold" else ROUNDS):
            for who, project in sides.items():
                if step == "edit":
                    edit(project, 2 + round_number)
                elif step == "edit_header":
                    edit_header(project, 2 + round_number)
                print(f"  {step}: {labels[who]} ...", flush=True)
                marks = ninja_marks(project)
                elapsed, output = pip_wheel(project, caches.get(who))
                timed = step != "noop" and who in ("theirs", "ours")
                runs[who].append((elapsed, output, phases(project, marks) if timed else []))
                if step == "cold" and who == "ours":  # the next project at once, as users do
                    bench_second_right_after(results, caches[who], output)
                if step == "cold" and who in caches:  # then nothing else runs while it is made
                    made = wait_background(caches[who])
                    if made is not None:
                        results.setdefault("background_pch", {})[who] = made
                        print(f"  {step}: {labels[who]}: the PCH it left behind made in the"
                              f" background in {made[0]:.1f} s ({made[1]:.1f} CPU-s)", flush=True)
        seconds = {}
        for who in sides:
            if len(runs[who]) > 1:
                print(f"  {step}: {labels[who]} rounds: "
                      + ", ".join(f"{run[0]:.2f} s" for run in runs[who]), flush=True)
            seconds[who], output, steps = min(runs[who], key=lambda run: run[0])
            overhead = backend_seconds(output) if who == "ours" else None
            if overhead is not None:
                overheads.append(overhead)
            if who == "ours" and step == "cold":
                results["cold_ninja"] = {"ours": ninja_seconds(output) or seconds[who]}
            if step != "noop" and who in ("theirs", "ours"):
                results.setdefault("phases", {}).setdefault(step, {})[who] = {
                    "total": seconds[who], "steps": steps}
        if pyproject:
            results[step] = {"torch": seconds["theirs"], "ours": seconds["ours"]}
        if "pip_floor" in seconds:
            results["noop_pip_floor"] = {"torch": seconds["theirs"], "ours": seconds["pip_floor"]}
        if setuptools:
            results[f"setup_{step}"] = {"torch": seconds["theirs"], "ours": seconds["ours_setup"]}
        print("  " + step + ": " + ", ".join(f"{labels[w]} {t:.2f} s" for w, t in seconds.items()),
              flush=True)
        if step == "cold" and pyproject:  # the next project on this machine, right after
            if "second_now" in results:
                results["second_now"]["torch"] = results["cold"]["torch"]
            bench_second_project(results, caches["ours"])
    if overheads:
        results["overhead"] = {"ours": max(overheads)}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="warm,floor,wheels,setuptools,pch,oplib,jit,ops,cuda",
                        help="comma list of: warm, floor, wheels, setuptools, second, pch, oplib, jit, ops, cuda")
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
    if "second" in chosen and "wheels" not in chosen:
        bench_second_alone(results)
    if "pch" in chosen:
        bench_pch(results)
    if "oplib" in chosen:
        bench_oplib(results)
    if "jit" in chosen:
        bench_jit(results)
    if "ops" in chosen:
        bench_ops(results)
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
    if not args.no_write and {"warm", "wheels", "setuptools", "pch", "oplib", "jit"} <= set(chosen):
        write_docs(text)


if __name__ == "__main__":
    main()

"""The cost of listing a build's operators (issue 46): what a build pays after its link, what
the JIT pays, and the cost per op.

fixtures/opsnofake (one op, <torch/library.h>) is built as users build it (`python -m
pep517_torch wheel`); in ROUNDS interleaved rounds:

- ``import torch`` alone in a fresh interpreter: the floor under a child started after the link;
- an edit (a new constant beside its kernel) and a build: ninja compiles, the listing child
  started when ninja got to work imports torch meanwhile and answers after the link;
- the same build again with nothing to compile (no replay): its child starts after the link,
  as every build's did before the child was started early;
- the JIT's listing: in a fresh interpreter holding torch, the library loaded between two
  looks at torch's dispatcher (ops/in_process.py), against the same load alone; and the child
  the JIT started after its link before (``ops.listing.list_ops`` on the same library).

Each build's wall time after its link is its own last line's ("of which listing the operators
X s": from the compile's end to the table read and judged). Then, per op: a generated library
of MANY ops (each with a CPU and a Meta kernel) listed by a child beside the 1-op one, on the
child's own clock less its import of torch (steadier on a busy host).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from steps import OURS_ENV, PYTHON, ROOT, WORK, run

MANY = 200
ROUNDS = 3
LISTED = re.compile(r"of which listing the operators ([\d.]+) s\)")
JIT_LISTING = """
import sys, time, torch
from pep517_torch.ops.in_process import Loading
path, listed = sys.argv[1], sys.argv[2] == "listed"
started = time.perf_counter()
if listed:
    loading = Loading(lambda: torch.ops.load_library(path), "x")
    assert [op.name for op in loading.table.ops] == ["nofakeops::scale"], loading.table
else:
    torch.ops.load_library(path)
print(time.perf_counter() - started)
"""


def _many_ops_project(root: Path) -> Path:
    shutil.rmtree(root, ignore_errors=True)
    (root / "csrc").mkdir(parents=True)
    (root / "manyops").mkdir()
    (root / "manyops" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["pep517_torch", "torch"]\nbuild-backend = "pep517_torch"\n'
        '[project]\nname = "manyops"\nversion = "1.0"\ndynamic = ["dependencies"]\n[tool.torch-ext]\npackages = ["manyops"]\n'
        '[[tool.torch-ext.extension]]\nname = "manyops._C"\nkind = "library"\n'
        'sources = ["csrc/ops.cpp"]\n')
    defs = "".join(f'  m.def("op{i}(Tensor x) -> Tensor");\n' for i in range(MANY))
    cpu = "".join(f'  m.impl("op{i}", &same);\n' for i in range(MANY))
    meta = "".join(f'  m.impl("op{i}", &shaped);\n' for i in range(MANY))
    (root / "csrc" / "ops.cpp").write_text(
        "#include <ATen/core/Tensor.h>\n#include <torch/library.h>\n"
        "static at::Tensor same(const at::Tensor& x) { return x.clone(); }\n"
        "static at::Tensor shaped(const at::Tensor& x) { return x.new_empty(x.sizes()); }\n"
        f"TORCH_LIBRARY(manyops, m) {{\n{defs}}}\n"
        f"TORCH_LIBRARY_IMPL(manyops, CPU, m) {{\n{cpu}}}\n"
        f"TORCH_LIBRARY_IMPL(manyops, Meta, m) {{\n{meta}}}\n")
    return root


def _wheel(root: Path, *settings: str) -> str:
    return run([PYTHON, "-m", "pep517_torch", "wheel", root, "-o", root / "dist", *settings],
               env={**OURS_ENV, "PEP517_TORCH_NO_REPLAY": "1"})[1]


def _after_link(output: str, compiled: bool) -> float:
    """The listing's wall time after the link, from the wheel's last line; the build compiled
    (or did not) as the round needs."""
    found = LISTED.findall(output)
    assert found, output[-2000:]
    assert (" 1 compiled" in output) == compiled, output[-2000:]
    return float(found[-1])


def _edit(root: Path, k: int) -> None:
    source = root / "csrc" / "ops.cpp"
    text = re.sub(r"\nstatic const int bench_round = \d+;\n", "\n", source.read_text())
    source.write_text(text + f"\nstatic const int bench_round = {k};\n")


def _contents(root: Path):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT))
    from pep517_torch.backend.op_listing import contents
    from pep517_torch.backend.stages import load
    from pep517_torch.core.naming import artifact_name

    project = load(root, {}).project
    out = project.options.build_dir / "out"
    return contents(project, {s.name: out / artifact_name(s) for s in project.extensions})


def _seconds(code: str, *args: str) -> float:
    done = subprocess.run([PYTHON, "-c", code, *args], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def bench_ops(results: dict[str, dict[str, float]]) -> None:
    from pep517_torch.ops.listing import list_ops

    base = WORK / "ops"
    shutil.rmtree(base, ignore_errors=True)
    one = base / "opsnofake"
    shutil.copytree(ROOT / "fixtures" / "opsnofake", one, ignore=shutil.ignore_patterns("build", "dist"))
    print(f"  ops: building a 1-op and a {MANY}-op library ...", flush=True)
    _wheel(one)
    _wheel(_many_ops_project(base / "manyops"), "-Cops-check=off")
    libraries = {"one": _contents(one), "many": _contents(base / "manyops")}
    (library,) = (path for name, path in libraries["one"].files if name.endswith(".so"))
    runs: dict[str, list[float]] = {key: [] for key in (
        "floor", "early", "late", "jit_listed", "jit_load", "one", "many")}
    beyond: dict[str, list[float]] = {"one": [], "many": []}  # the child's clock, less torch's import
    for k in range(ROUNDS):
        started = time.perf_counter()
        # os._exit: without torch's teardown at exit, which a listing child skips as well
        subprocess.run([PYTHON, "-c", "import os, torch; os._exit(0)"], check=True)
        runs["floor"].append(time.perf_counter() - started)
        _edit(one, k)
        runs["early"].append(_after_link(_wheel(one), compiled=True))
        runs["late"].append(_after_link(_wheel(one), compiled=False))
        runs["jit_listed"].append(_seconds(JIT_LISTING, str(library), "listed"))
        runs["jit_load"].append(_seconds(JIT_LISTING, str(library), "load"))
        for who, contents in libraries.items():
            started = time.perf_counter()
            answer = list_ops(contents, str(PYTHON), scratch=base)
            runs[who].append(time.perf_counter() - started)
            beyond[who].append(answer.seconds - answer.seconds_torch)
            assert len(answer.table.ops) == (1 if who == "one" else MANY), answer.table
    best = {who: min(times) for who, times in runs.items()}
    for who, times in runs.items():
        print(f"  ops: {who} rounds: " + ", ".join(f"{t:.3f} s" for t in times), flush=True)
    own = {who: min(times) for who, times in beyond.items()}
    per_op = (own["many"] - own["one"]) / (MANY - 1)
    jit = max(best["jit_listed"] - best["jit_load"], 0.0)
    results["ops_build"] = {"ours": best["early"], "late": best["late"], "torch": best["floor"]}
    results["ops_jit"] = {"ours": jit * 1000, "child": best["one"]}
    results["ops_beyond_torch"] = {"ours": own["one"] * 1000, "many": own["many"] * 1000}
    results["ops_per_op"] = {"ours": per_op * 1000, "many": best["many"]}
    print(f"  ops: after the link, child started during the compile {best['early']:.2f} s, after"
          f" the link {best['late']:.2f} s (import torch alone {best['floor']:.2f} s); JIT in its"
          f" own process {jit * 1000:.0f} ms beyond its load (a child: {best['one']:.2f} s);"
          f" {own['one'] * 1000:.0f} ms beyond torch's import for 1 op, {own['many'] * 1000:.0f} ms"
          f" for {MANY}: {per_op * 1000:.2f} ms per op", flush=True)

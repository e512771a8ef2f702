"""The cost of listing a build's operators (issue 46), per build and per op.

Two op libraries are built once (``-Cops-check=off``: the builds list nothing themselves):
fixtures/opsnofake (one op) and a generated library of MANY ops (each with a CPU and a Meta
kernel, <torch/library.h>). Then, in ROUNDS interleaved rounds, each measured as the build
measures it (``ops.listing.list_ops``: the staged files, the child with the build's torch, its
answer read and checked): `import torch` alone in a fresh interpreter (the floor no listing
goes under), the one-op library, the MANY-op library. Each side's best round; beside the wall
time, the child's own clock less its import of torch (what the listing itself costs, steadier
on a busy host); per op is that difference between the two libraries over the ops added.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from steps import PYTHON, ROOT, WORK

MANY = 200
ROUNDS = 5


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


def _built(root: Path) -> Path:
    done = subprocess.run([PYTHON, "-m", "pep517_torch", "wheel", str(root), "-o",
                           str(root / "dist"), "-Cops-check=off"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"building {root} failed:\n{done.stdout}{done.stderr}")
    return root


def _contents(root: Path):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT))
    from pep517_torch.backend.op_listing import contents
    from pep517_torch.backend.stages import load
    from pep517_torch.core.naming import artifact_name

    project = load(root, {}).project
    out = project.options.build_dir / "out"
    return contents(project, {s.name: out / artifact_name(s) for s in project.extensions})


def bench_ops(results: dict[str, dict[str, float]]) -> None:
    from pep517_torch.ops.listing import list_ops

    base = WORK / "ops"
    shutil.rmtree(base, ignore_errors=True)
    one = base / "opsnofake"
    shutil.copytree(ROOT / "fixtures" / "opsnofake", one, ignore=shutil.ignore_patterns("build", "dist"))
    print(f"  ops: building a 1-op and a {MANY}-op library ...", flush=True)
    libraries = {"one": _contents(_built(one)),
                 "many": _contents(_built(_many_ops_project(base / "manyops")))}
    runs: dict[str, list[float]] = {"floor": [], "one": [], "many": []}
    beyond: dict[str, list[float]] = {"one": [], "many": []}  # the child's clock, less torch's import
    for _ in range(ROUNDS):
        started = time.perf_counter()
        subprocess.run([PYTHON, "-c", "import torch"], check=True)
        runs["floor"].append(time.perf_counter() - started)
        for who, contents in libraries.items():
            started = time.perf_counter()
            answer = list_ops(contents, str(PYTHON), scratch=base)
            runs[who].append(time.perf_counter() - started)
            beyond[who].append(answer.seconds - answer.seconds_torch)
            assert len(answer.table.ops) == (1 if who == "one" else MANY), answer.table
    best = {who: min(times) for who, times in runs.items()}
    for who, times in runs.items():
        print(f"  ops: {who} rounds: " + ", ".join(f"{t:.2f} s" for t in times), flush=True)
    own = {who: min(times) for who, times in beyond.items()}
    per_op = (own["many"] - own["one"]) / (MANY - 1)
    results["ops_build"] = {"torch": best["floor"], "ours": best["one"]}
    results["ops_beyond_torch"] = {"ours": own["one"] * 1000, "many": own["many"] * 1000}
    results["ops_per_op"] = {"ours": per_op * 1000, "many": best["many"]}
    print(f"  ops: import torch {best['floor']:.2f} s; listing 1 op {best['one']:.2f} s"
          f" ({own['one'] * 1000:.0f} ms beyond torch's import), {MANY} ops {best['many']:.2f} s"
          f" ({own['many'] * 1000:.0f} ms): {per_op * 1000:.2f} ms per op", flush=True)

"""A torch umbrella reached through a project header is precompiled once per machine.

The TUs include torch only through their own ``ops.h`` (whose include guard comes first). One
project builds <torch/library.h>'s PCH into the machine-wide cache; objects are byte-identical
to a build without it; a second project, elsewhere, with torch installed at another path (as an
isolated build environment has it), compiles with that PCH and precompiles nothing.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest

from pep517_torch.core import toolchain
from pep517_torch.core.build import BuildResult, build
from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind
from tests.commands import run_python
from tests.torch_doubles import relocated_torch

pytestmark = pytest.mark.compile

OPS_H = textwrap.dedent(
    """\
    // ops.h: the project's own header, as real projects have it
    #ifndef UMBRELLA_OPS_H
    #define UMBRELLA_OPS_H
    #include <torch/library.h>
    #include <ATen/core/Tensor.h>
    at::Tensor triple(const at::Tensor& x);
    #endif
    """
)
SOURCES = {
    "triple.cpp": '#include "ops.h"\nat::Tensor triple(const at::Tensor& x) { return x.mul(3); }\n',
    "register.cpp": '#include "ops.h"\n'
    'TORCH_LIBRARY(umbrella_ops, m) { m.def("triple(Tensor x) -> Tensor", triple); }\n',
}


def write_project(root: Path) -> ExtensionSpec:
    (root / "csrc" / "include").mkdir(parents=True)
    (root / "csrc" / "include" / "ops.h").write_text(OPS_H)
    for name, text in SOURCES.items():
        (root / "csrc" / name).write_text(text)
    return ExtensionSpec("umbrella_ops", tuple(root / "csrc" / n for n in SOURCES),
                         include_dirs=(root / "csrc" / "include",), kind=Kind.LIBRARY,
                         python_abi_suffix=False)


def objects(result: BuildResult) -> dict[str, bytes]:
    found = sorted((result.plan.build_dir / "obj").rglob("*.o"))
    return {path.name: path.read_bytes() for path in found}


def run_build(root: Path, spec: ExtensionSpec, name: str, **options: object) -> BuildResult:
    settings = BuildOptions(build_dir=root / "build" / name, source_root=root,
                            compiler_launcher="none", **options)  # type: ignore[arg-type]
    return build([spec], settings, log=lambda _: None)


def test_umbrella_through_a_project_header_is_shared_by_projects_and_torch_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if toolchain.find_compiler({}).family != "gcc":
        pytest.skip("the relocation part is gcc's")
    first_root = tmp_path / "first"
    spec = write_project(first_root)
    machine = tmp_path / "machine-cache"  # empty: this test's first build makes the PCH
    first = run_build(first_root, spec, "pch", pch_eager=True, pch_cache_dir=machine)
    [entry] = first.plan.pch_cache
    assert entry.header == "<torch/library.h>" and entry.directory.parent == machine
    assert (first.run.compiled, first.run.precompiled) == (2, 1)
    assert entry.output.stat().st_size > 10_000_000
    # The stub pch.h this build wrote into the machine cache is no input of the project: the
    # same build again compiles nothing.
    again = run_build(first_root, spec, "pch", pch_eager=True, pch_cache_dir=machine)
    assert (again.run.compiled, again.run.linked, again.run.precompiled) == (0, 0, 0)
    plain = run_build(first_root, dataclasses.replace(spec, pch=False), "plain")
    assert plain.run.compiled == 2 and plain.plan.pch_cache == ()
    assert objects(first) == objects(plain)  # byte-identical with and without the PCH

    code = ("import sys, torch; torch.ops.load_library(sys.argv[1]);"
            "print(torch.ops.umbrella_ops.triple(torch.arange(3.0)).tolist())")
    out = run_python(code.replace("sys.argv[1]", repr(str(first.artifacts["umbrella_ops"]))))
    assert out.stdout.strip() == "[0.0, 3.0, 6.0]"

    # Another project, in another tree, against the same torch build at another path.
    moved_torch = relocated_torch(tmp_path, toolchain.find_torch())
    monkeypatch.setattr(toolchain, "_find_torch_root", lambda: moved_torch.root)
    second_root = tmp_path / "elsewhere" / "second"
    second = run_build(second_root, write_project(second_root), "b", pch_cache_dir=machine)
    assert second.plan.torch.root == moved_torch.root
    assert [e.key for e in second.plan.pch_cache] == [entry.key]
    assert (second.run.compiled, second.run.precompiled) == (2, 0)
    assert objects(second) == objects(plain)
    # gcc did use it (-H marks a PCH it used with "!"; an invalid one with "x"):
    [command] = [e for e in json.loads((second.plan.build_dir / "compile_commands.json").read_text())
                 if e["file"].endswith("triple.cpp")]
    args = [*shlex.split(command["command"]), "-H", "-fsyntax-only"]
    args = [a for i, a in enumerate(args) if a != "-o" and (i == 0 or args[i - 1] != "-o")]
    used = subprocess.run(args, cwd=command["directory"], capture_output=True, text=True,
                          timeout=600, check=True).stderr
    assert f"! {entry.output}" in used.splitlines()

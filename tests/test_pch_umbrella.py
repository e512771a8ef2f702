"""A torch umbrella reached through a project header is precompiled once per machine.

The TUs include torch only through their own ``ops.h`` (whose include guard comes first). One
project builds <torch/library.h>'s PCH into the machine-wide cache; objects are byte-identical
to a build without it; a second project, elsewhere, with torch installed at another path (as an
isolated build environment has it), compiles with that PCH and precompiles nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain
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


def used_headers(result: BuildResult, source: str) -> list[str]:
    """What the compiler reads for ``source``'s TU as the build compiles it (``-H``: gcc marks
    a PCH it used with "!"; clang lists only the headers it did not take from one)."""
    [command] = [e for e in json.loads((result.plan.build_dir / "compile_commands.json").read_text())
                 if e["file"].endswith(source)]
    args = [*shlex.split(command["command"]), "-H", "-fsyntax-only"]
    args = [a for i, a in enumerate(args) if a != "-o" and (i == 0 or args[i - 1] != "-o")]
    return subprocess.run(args, cwd=command["directory"], capture_output=True, text=True,
                          timeout=600, check=True).stderr.splitlines()


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
    assert f"! {entry.output}" in used_headers(second, "triple.cpp")  # gcc did use it ("x": invalid)


def clang() -> str | None:
    """A clang++ of 11 or newer on PATH (``make tools`` installs Debian's), or None."""
    for name in ("clang++", *(f"clang++-{major}" for major in range(20, 10, -1))):
        found = shutil.which(name)
        if found and toolchain.find_compiler({"CXX": found}).version >= (11,):
            return found
    return None


def test_clang_builds_the_umbrella_pch_with_its_templates_instantiated(tmp_path: Path) -> None:
    """clang's umbrella PCH is built with -fpch-instantiate-templates (its TUs then compile in
    half the time); the TUs use it, and their objects are byte-identical to a build without."""
    compiler = clang()
    if compiler is None:
        pytest.skip("no clang++ 11+ on PATH (make tools installs clang)")
    env = {**os.environ, "CXX": compiler}
    root = tmp_path / "p"
    spec = write_project(root)
    first = run_build(root, spec, "pch", pch_eager=True, pch_cache_dir=tmp_path / "machine", env=env)
    [entry] = first.plan.pch_cache
    assert (first.run.compiled, first.run.precompiled) == (2, 1)
    assert "-fpch-instantiate-templates" in entry.flags and entry.output.stat().st_size > 10_000_000
    ninja = first.plan.ninja_file.read_text()
    pch_edge = next(line for line in ninja.splitlines() if line.startswith(f"build {entry.output}"))
    assert "-fpch-instantiate-templates" in ninja.split(pch_edge, 1)[1].split("\nbuild ", 1)[0]
    plain = run_build(root, dataclasses.replace(spec, pch=False), "plain", env=env)
    assert objects(first) == objects(plain)  # byte-identical with and without the PCH
    # with the PCH, clang reads none of torch's headers for the TU; without it, hundreds
    assert not any("torch/library.h" in line for line in used_headers(first, "triple.cpp"))
    assert sum("/torch/include/" in line for line in used_headers(plain, "triple.cpp")) > 100
    code = ("import sys, torch; torch.ops.load_library(sys.argv[1]);"
            "print(torch.ops.umbrella_ops.triple(torch.arange(3.0)).tolist())")
    out = run_python(code.replace("sys.argv[1]", repr(str(first.artifacts["umbrella_ops"]))))
    assert out.stdout.strip() == "[0.0, 3.0, 6.0]"

"""The machine-wide PCH cache without compiling: keys, the umbrella scan, bound, LRU, locks, CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pep517_torch.core import flags, scan
from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.pch import plan as pch, cache as pch_cache
from pep517_torch.core.plan import prepare
from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.shipped_runtime.environment import cache_root
from tests.torch_doubles import relocated_torch

GIB = 1024**3


def make_entry(root: Path, key: str, size: int, last_used: float, header: str = "torch/all.h") -> Path:
    directory = root / key
    directory.mkdir(parents=True)
    with (directory / "pch.h.gch").open("wb") as gch:
        gch.write(os.urandom(size))  # real blocks: the cache counts disk usage
    (directory / "pch.h").write_text(f"#include <{header}>\n")
    pch_cache.write_info(directory, {"header": header, "torch": "2.13.0", "compiler": "gcc 12"})
    (directory / pch_cache.LOCK).touch()
    os.utime(directory / pch_cache.LOCK, (last_used, last_used))
    return directory


def test_eviction_removes_least_recently_used_first_and_never_a_held_entry(tmp_path: Path) -> None:
    now = time.time()
    old = make_entry(tmp_path, "old", 300_000, now - 300)
    held = make_entry(tmp_path, "held", 300_000, now - 200)
    middle = make_entry(tmp_path, "middle", 300_000, now - 100)
    new = make_entry(tmp_path, "new", 300_000, now)
    assert [e.key for e in pch_cache.entries(tmp_path)] == ["old", "held", "middle", "new"]
    with pch_cache.Hold([held]):  # a build is using it (and that use makes it the newest)
        removed = pch_cache.evict(tmp_path, 700_000)
        assert [e.key for e in removed] == ["old", "middle"]
        assert held.is_dir() and new.is_dir() and not old.exists() and not middle.exists()
        removed, busy = pch_cache.clear(tmp_path)
        assert [e.key for e in removed] == ["new"] and [e.key for e in busy] == ["held"]
    assert not new.exists() and held.is_dir()
    assert [e.key for e in pch_cache.clear(tmp_path)[0]] == ["held"]
    assert list(tmp_path.iterdir()) == []  # nothing half-removed is left behind


def test_a_holder_of_an_evicted_entry_gets_a_fresh_one(tmp_path: Path) -> None:
    entry = make_entry(tmp_path, "k", 1000, time.time())
    pch_cache.clear(tmp_path)
    with pch_cache.Hold([entry]):
        assert entry.is_dir()
        lock = entry / pch_cache.LOCK
        assert lock.stat().st_mtime >= time.time() - 60  # the use is recorded
        assert not pch_cache.remove(pch_cache.entries(tmp_path)[0])


def test_cache_root_follows_the_environment(tmp_path: Path) -> None:
    assert cache_root({"PEP517_TORCH_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/pep517_torch")
    assert cache_root({"HOME": "/h"}) == Path("/h/.cache/pep517_torch")
    assert pch_cache.pch_root({"HOME": "/h"}) == Path("/h/.cache/pep517_torch/pch")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_scan_finds_the_torch_umbrella_through_project_headers(tmp_path: Path) -> None:
    include = tmp_path / "include"
    write(include / "proj" / "ops.h", "#ifndef PROJ_OPS_H\n#define PROJ_OPS_H\n"
          '#include "detail.h"\nint f();\n#endif\n')
    write(include / "proj" / "detail.h", "// torch first\n#pragma once\n#include <ATen/ATen.h>\n")
    write(tmp_path / "local.h", "/* x */\n#include <torch/script.h>\n")
    cases = {
        "#include <proj/ops.h>\n": "ATen/ATen.h",  # two project headers deep, a guard on the way
        '#include "local.h"\n#include <vector>\n': "torch/script.h",
        "#include <torch/library.h>\n": "torch/library.h",
        "#include <torch/all.h>\n": "torch/all.h",
        '#include "torch/torch.h"\n': "torch/torch.h",
        "#include <vector>\n#include <torch/extension.h>\n": None,  # another header first
        "#define TORCH_ASSERT_ONLY_METHOD_OPERATORS\n#include <torch/extension.h>\n": None,
        "#ifndef A\n#define A 1\n#include <torch/extension.h>\n": None,  # a value: not a guard
        "int x;\n#include <torch/extension.h>\n": None,
        '#include "missing.h"\n': None,
    }
    for text, expected in cases.items():
        source = write(tmp_path / "a.cpp", text)
        assert scan.leading_header(source, [include]) == expected, text
    loop = write(tmp_path / "loop.h", '#include "loop.h"\n')
    assert scan.leading_header(loop, []) is None


def umbrella_key(tmp_path: Path, torch: toolchain.TorchInstall, compiler: toolchain.Compiler,
                 project: Path, **spec_args: object) -> pch.PchPlan:
    source = write(project / "csrc" / "a.cpp", '#include "ops.h"\n')
    write(project / "csrc" / "ops.h", "#pragma once\n#include <torch/extension.h>\n")
    spec = ExtensionSpec("m", (source,), **spec_args)  # type: ignore[arg-type]
    tools = flags.ResolvedTools(compiler, torch, toolchain.python_include_dir())
    computed = flags.compute(spec, tools, source_root=project)
    plans: dict[str, pch.PchPlan] = {}
    [entry] = pch.plan(spec, [source], computed, compiler, torch, plans, cache_dir=tmp_path / "c",
                       shared=True, build_dir=project / "build").values()
    return entry


def test_the_key_ignores_project_and_torch_paths_but_not_the_build(tmp_path: Path) -> None:
    real = toolchain.find_torch()
    compiler = toolchain.find_compiler(os.environ)
    if compiler.family != "gcc":
        pytest.skip("relocatable PCHs are gcc's")
    first = umbrella_key(tmp_path, real, compiler, tmp_path / "one")
    moved = umbrella_key(tmp_path, relocated_torch(tmp_path, real), compiler,
                         tmp_path / "two" / "p")
    assert moved.key == first.key and moved.header == "<torch/extension.h>"
    assert not any(str(tmp_path) in f for f in first.flags)  # no project path in a shared PCH
    other_build = dataclasses.replace(real, build="another-git-version")
    assert umbrella_key(tmp_path, other_build, compiler, tmp_path / "three").key != first.key
    debug = umbrella_key(tmp_path, real, compiler, tmp_path / "four", extra_cflags=("-g",))
    debug_moved = umbrella_key(tmp_path, relocated_torch(tmp_path / "f", real), compiler,
                               tmp_path / "five", extra_cflags=("-g",))
    assert debug.key != debug_moved.key  # debug info records torch's path: not relocatable
    clang = dataclasses.replace(compiler, family="clang")
    assert umbrella_key(tmp_path, real, clang, tmp_path / "six").key != umbrella_key(
        tmp_path, relocated_torch(tmp_path / "g", real), clang, tmp_path / "seven").key


def test_clang_alone_builds_an_umbrella_pch_with_its_templates_instantiated(tmp_path: Path) -> None:
    real = toolchain.find_torch()
    gcc = dataclasses.replace(toolchain.find_compiler(os.environ), family="gcc", version=(12, 2))
    built_with = {}
    for name, compiler in (("gcc", gcc), ("clang 16", dataclasses.replace(gcc, family="clang", version=(16, 0, 6))),
                           ("clang 10", dataclasses.replace(gcc, family="clang", version=(10, 0)))):
        built_with[name] = "-fpch-instantiate-templates" in umbrella_key(
            tmp_path, real, compiler, tmp_path / name.replace(" ", "")).flags
    assert built_with == {"gcc": False, "clang 16": True, "clang 10": False}  # clang 11 has it


def test_every_umbrella_a_project_uses_gets_its_pch_in_the_machine_cache(tmp_path: Path) -> None:
    sources = [
        write(tmp_path / "p" / "csrc" / "a.cpp", '#include "ops.h"\nint a();\n'),
        write(tmp_path / "p" / "csrc" / "b.cpp", "#include <torch/library.h>\nint b();\n"),
        write(tmp_path / "p" / "csrc" / "c.cpp", "#include <vector>\nint c();\n"),
    ]
    write(tmp_path / "p" / "csrc" / "ops.h", "#pragma once\n#include <torch/extension.h>\n")
    cache = tmp_path / "machine"
    options = BuildOptions(build_dir=tmp_path / "p" / "build", source_root=tmp_path / "p",
                           pch_cache_dir=cache, env={**os.environ, "CXX": "g++"},
                           compiler_launcher="none", jobs=1)
    plan = prepare([ExtensionSpec("m", tuple(sources))], options)
    headers = sorted(entry.header for entry in plan.pch_cache)
    assert headers == ["<torch/extension.h>", "<torch/library.h>"]
    assert all(entry.directory.parent == cache for entry in plan.pch_cache)
    compdb = json.loads((plan.build_dir / "compile_commands.json").read_text())
    included = {Path(e["file"]).name: e["command"].split("-include ")[1].split()[0]
                if "-include " in e["command"] else None for e in compdb}
    by_header = {e.header: str(e.stub) for e in plan.pch_cache}
    assert included == {"a.cpp": by_header["<torch/extension.h>"],
                        "b.cpp": by_header["<torch/library.h>"], "c.cpp": None}
    unbounded = prepare([ExtensionSpec("m", tuple(sources))],
                        dataclasses.replace(options, pch_cache_size=0))
    assert unbounded.pch_cache == () and "/build/pch/" in unbounded.ninja_file.read_text()


def test_cache_command_shows_and_clears(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    make_entry(root / "pch", "aaaa", 200_000, time.time() - 10, header="torch/extension.h")
    make_entry(root / "pch", "bbbb", 100_000, time.time(), header="torch/library.h")
    env = {**os.environ, "PEP517_TORCH_CACHE_DIR": str(root), "PEP517_TORCH_PCH_CACHE_SIZE": "2G"}
    show = subprocess.run([sys.executable, "-m", "pep517_torch", "cache"], env=env,
                          capture_output=True, text=True, check=True).stdout
    assert str(root / "pch") in show and "2 entries" in show and "of 2.0 GiB" in show
    assert show.index("torch/library.h") < show.index("torch/extension.h")  # most recent first
    cleared = subprocess.run([sys.executable, "-m", "pep517_torch", "cache", "--clear"], env=env,
                             capture_output=True, text=True, check=True).stdout
    assert "removed 2 entries" in cleared and pch_cache.entries(root / "pch") == []
    bad = subprocess.run([sys.executable, "-m", "pep517_torch", "cache"], capture_output=True,
                         text=True, env={**env, "PEP517_TORCH_PCH_CACHE_SIZE": "lots"})
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "PEP517_TORCH_PCH_CACHE_SIZE" in bad.stderr and "'lots' is not a size" in bad.stderr


def test_doctor_shows_the_pch_cache(tmp_path: Path) -> None:
    make_entry(tmp_path / "pch", "aaaa", 300_000, time.time())
    env = {**os.environ, "PEP517_TORCH_CACHE_DIR": str(tmp_path), "PEP517_TORCH_PCH_CACHE_SIZE": "1M"}
    out = subprocess.run([sys.executable, "-m", "pep517_torch", "doctor"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300).stdout
    [line] = [line for line in out.splitlines() if "precompiled-header cache" in line]
    assert line.startswith("info ") and f"{tmp_path / 'pch'}: 1 entry" in line
    assert line.endswith("of 1.0 MiB")


def test_an_unwritable_cache_falls_back_to_the_build_directory(tmp_path: Path) -> None:
    source = write(tmp_path / "a.cpp", "#include <torch/extension.h>\n")
    blocked = write(tmp_path / "not-a-directory", "")
    options = BuildOptions(build_dir=tmp_path / "b", env={**os.environ, "CXX": "g++"},
                           pch_cache_dir=blocked / "pch", compiler_launcher="none")
    plan = prepare([ExtensionSpec("m", (source,))], options)
    assert plan.pch_cache == () and plan.pch_cache_dir is None
    [note] = [n for n in plan.notes if "precompiled headers kept in the build directory" in n]
    assert str(blocked / "pch") in note and "\n" not in note
    assert f"-include {tmp_path / 'b' / 'pch'}" in plan.ninja_file.read_text()

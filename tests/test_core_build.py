"""The compile core end to end on small sources: PCH, launchers, incremental rebuilds."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from pep517_torch.core.build import build
from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind
from tests.commands import run_python
from tests.conftest import count

pytestmark = pytest.mark.compile

COMMON_H = textwrap.dedent(
    """
    #pragma once
    #include <torch/library.h>
    #include <ATen/core/Tensor.h>
    """
)


def op_source(name: str, factor: int) -> str:
    return textwrap.dedent(
        f"""
        #include "common.h"
        at::Tensor {name}(const at::Tensor& x) {{ return x.mul({factor}).add(1); }}
        TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME, m) {{ m.def("{name}(Tensor x) -> Tensor", {name}); }}
        """
    )


# What rebuilds when, and the launcher, are the same for any C++: these sources include only
# the standard library (a second each), where the torch ones above take ten.
PLAIN_H = "#pragma once\n#include <map>\n#include <string>\n#include <vector>\n"


def plain_source(name: str, factor: int) -> str:
    return f'#include "common.h"\nint {name}(int x) {{ return x * {factor} + 1; }}\n'


def pch_project(root: Path, *, torch: bool = True) -> list[Path]:
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "common.h").write_text(COMMON_H if torch else PLAIN_H)
    sources = []
    for name, factor in (("triple", 3), ("quintuple", 5), ("septuple", 7)):
        path = root / "csrc" / f"{name}.cpp"
        path.write_text(op_source(name, factor) if torch else plain_source(name, factor))
        sources.append(path)
    return sources


def compilers() -> list[str]:
    return ["g++"] + (["clang++"] if shutil.which("clang++") else [])


@pytest.mark.parametrize("compiler", compilers())
def test_project_pch_header_gives_identical_objects(tmp_path: Path, compiler: str) -> None:
    sources = pch_project(tmp_path)
    header = tmp_path / "csrc" / "common.h"
    env = {**os.environ, "CXX": compiler}
    results = {}
    for use_pch in (True, False):
        spec = ExtensionSpec("pchops", tuple(sources), kind=Kind.LIBRARY, python_abi_suffix=False,
                             pch_header=header, pch=use_pch)
        out = tmp_path / f"build-{use_pch}"
        result = build([spec], BuildOptions(build_dir=out, source_root=tmp_path, env=env), log=lambda _: None)
        assert result.run.precompiled == (1 if use_pch else 0)
        assert result.run.compiled == 3
        objects = sorted((out / "obj" / "pchops").rglob("*.o"))
        results[use_pch] = (result.artifacts["pchops"], [o.read_bytes() for o in objects])
    assert results[True][1] == results[False][1]  # byte-identical objects
    code = ("import sys, torch; torch.ops.load_library(sys.argv[1]); x = torch.arange(3.0);"
            "print(torch.ops.pchops.triple(x).tolist(), torch.ops.pchops.septuple(x).tolist())")
    for use_pch in (True, False):
        out = run_python(code.replace("sys.argv[1]", repr(str(results[use_pch][0]))))
        assert out.stdout.strip() == "[1.0, 4.0, 7.0] [1.0, 8.0, 15.0]"
    count(f"PCH on/off builds compared byte for byte ({compiler})", 2)


def test_pch_header_edit_rebuilds_pch_and_its_users(tmp_path: Path) -> None:
    sources = pch_project(tmp_path, torch=False)
    spec = ExtensionSpec("pchedit", tuple(sources), kind=Kind.LIBRARY, python_abi_suffix=False,
                         pch_header=tmp_path / "csrc" / "common.h")
    options = BuildOptions(build_dir=tmp_path / "b", source_root=tmp_path)
    build([spec], options, log=lambda _: None)
    again = build([spec], options, log=lambda _: None)
    assert again.run.steps == []
    (tmp_path / "csrc" / "common.h").write_text(PLAIN_H + "#define EXTRA 1\n")
    edited = build([spec], options, log=lambda _: None)
    assert (edited.run.precompiled, edited.run.compiled, edited.run.linked) == (1, 3, 1)


def test_incremental_rebuilds_touch_only_what_changed(tmp_path: Path) -> None:
    sources = pch_project(tmp_path, torch=False)
    spec = ExtensionSpec("incr", tuple(sources), kind=Kind.LIBRARY, python_abi_suffix=False, pch=False)
    options = BuildOptions(build_dir=tmp_path / "b", source_root=tmp_path)
    first = build([spec], options, log=lambda _: None)
    assert first.run.compiled == 3
    assert build([spec], options, log=lambda _: None).run.steps == []
    sources[1].write_text(plain_source("quintuple", 6))
    edited = build([spec], options, log=lambda _: None)
    assert edited.run.steps == ["compiling csrc/quintuple.cpp", "linking incr"]
    flagged = ExtensionSpec("incr", tuple(sources), kind=Kind.LIBRARY, python_abi_suffix=False,
                            pch=False, extra_cflags=("-DNEW_FLAG=1",))
    assert build([flagged], options, log=lambda _: None).run.compiled == 3


def test_a_rebuild_removes_what_a_killed_build_left_half_written(tmp_path: Path) -> None:
    sources = pch_project(tmp_path, torch=False)
    spec = ExtensionSpec("leftover", tuple(sources), kind=Kind.LIBRARY, python_abi_suffix=False,
                         pch=False)
    options = BuildOptions(build_dir=tmp_path / "b", source_root=tmp_path)
    artifact = build([spec], options, log=lambda _: None).artifacts["leftover"]
    # A link SIGTERMed between its write and its rename (graph.py's `$out.$$.tmp`), an atomic
    # write killed likewise, and two files of the user's that only look alike.
    dead = [artifact.with_name(artifact.name + ".4242.tmp"),
            tmp_path / "b" / "obj" / ".record.json.77-0a1b2c3d.tmp"]
    kept = [tmp_path / "b" / "notes.tmp", tmp_path / "b" / "v1.2.tmp.bak"]
    for path in dead + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    sources[0].write_text(plain_source("triple", 4))
    assert build([spec], options, log=lambda _: None).run.linked == 1
    assert [p.exists() for p in dead + kept] == [False, False, True, True]


def test_compiler_launcher_wraps_every_compile_and_counts_hits(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "launcher.log"
    fake = bin_dir / "ccache"
    fake.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "--get-config" ]; then exit 0; fi  # no remote_storage
        if [ "$1" = "--print-stats" ]; then
          n=$(wc -l < {log} 2>/dev/null || echo 0)
          printf 'direct_cache_hit\\t%s\\npreprocessed_cache_hit\\t0\\n' "$n"; exit 0
        fi
        echo "$@" >> {log}
        prev=; src=
        for a in "$@"; do [ "$prev" = "-c" ] && src=$a; prev=$a; done
        if [ -n "$src" ] && [ -n "$CCACHE_STATSLOG" ]; then  # as ccache's stats log says a hit
          printf '# %s\ndirect_cache_hit\n' "$src" >> "$CCACHE_STATSLOG"
        fi
        exec "$@"
        """))
    fake.chmod(0o755)
    sources = pch_project(tmp_path, torch=False)
    spec = ExtensionSpec("launched", tuple(sources[:2]), kind=Kind.LIBRARY, python_abi_suffix=False)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = build([spec], BuildOptions(build_dir=tmp_path / "b", env=env, compiler_launcher="auto"),
                   log=lambda _: None)
    calls = log.read_text().splitlines()
    compiles = [c for c in calls if " -c " in c]
    assert len(compiles) == 2
    assert result.run.cache_hits == len(compiles)  # what this run's stats log says it served
    none = build([spec], BuildOptions(build_dir=tmp_path / "c", env=env, compiler_launcher="none"),
                 log=lambda _: None)
    assert none.run.cache_hits is None and len(log.read_text().splitlines()) == len(calls)

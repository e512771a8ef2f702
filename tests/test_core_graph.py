"""The compile core without compiling: escaping, flags, the ninja file, job counts."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from pep517_torch.core import flags, graph, jobs, ninja_syntax, scan
from pep517_torch.core.build import prepare
from pep517_torch.core.spec import BuildOptions, BuildType, ExtensionSpec, Kind
from pep517_torch.core.toolchain import find_ninja, find_torch, parse_compiler_version
from pep517_torch.errors import ConfigError, ToolchainError

NASTY = ["a b", "dollar$x", "colon:y", "quote'q", 'dq"x', "hash#h", "semi;s", "amp&a", "ünï", "$(touch PWNED)"]


@pytest.mark.parametrize("text", NASTY)
def test_shell_args_keep_every_argument_whole(text: str) -> None:
    line = ninja_syntax.shell_args([text, "-DX=" + text])
    unescaped = line.replace("$$", "$")  # what ninja hands to the shell
    assert shlex.split(unescaped) == [text, "-DX=" + text]


def test_newlines_are_refused() -> None:
    with pytest.raises(ValueError, match="newline"):
        ninja_syntax.escape_path("a\nb")


def make_sources(directory: Path, names: list[str]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("int f_" + str(abs(hash(name))) + "() { return 0; }\n")
        paths.append(path)
    return paths


def test_object_names_never_collide(tmp_path: Path) -> None:
    sources = make_sources(tmp_path, ["x.cpp", "x.cu", "a/x.cpp", "b/x.cpp", "a b.cpp", "a_b.cpp"])
    spec = ExtensionSpec("pkg._C", tuple(sources))
    names = [graph.object_name(spec, s, tmp_path) for s in sources]
    assert len(set(names)) == len(names)
    assert all(n.startswith("obj/pkg._C/") and " " not in n for n in names)


def test_ninja_accepts_a_graph_of_hostile_paths(tmp_path: Path) -> None:
    root = tmp_path / "dir with spaces ünï $x 'q' #h"
    sources = make_sources(root, [f"{n}.cpp" for n in NASTY])
    specs = [
        ExtensionSpec("pkg._C", tuple(sources[:5]), include_dirs=(root,)),
        ExtensionSpec("pkg.sub._ops", tuple(sources[5:]), kind=Kind.LIBRARY,
                      python_abi_suffix=False, define_macros=(("MSG", '"a b"'),)),
    ]
    build = tmp_path / "build dir $y"
    plan = prepare(specs, BuildOptions(build_dir=build, source_root=root, pch=False))
    text = plan.ninja_file.read_text()
    assert text.count("rule cxx") == 1 and "build out/pkg/sub/_ops.so: link" in text
    dry = subprocess.run([str(find_ninja({})), "-C", str(build), "-n"], capture_output=True, text=True)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.count("compiling ") == len(NASTY)
    # Rewritten only when the content changes: same specs, same mtime.
    before = plan.ninja_file.stat().st_mtime_ns
    prepare(specs, BuildOptions(build_dir=build, source_root=root, pch=False))
    assert plan.ninja_file.stat().st_mtime_ns == before


def toolchain_for(tmp_path: Path) -> flags.Toolchain:
    from pep517_torch.core.toolchain import Compiler

    compiler = Compiler(("/usr/bin/c++",), Path("/usr/bin/g++"), "gcc", (12, 2, 0), None)
    return flags.Toolchain(compiler, find_torch(), tmp_path / "python-include")


def test_flags_user_std_replaces_ours_and_user_flags_come_last(tmp_path: Path) -> None:
    source = make_sources(tmp_path, ["a.cpp"])
    spec = ExtensionSpec("m", tuple(source), extra_cflags=("-std=c++17", "-O1"),
                         build_type=BuildType.RELEASE)
    computed = flags.compute(spec, toolchain_for(tmp_path), source_root=tmp_path)
    assert "-std=c++20" not in computed.cxx and computed.cxx[-2:] == ("-std=c++17", "-O1")
    assert computed.cxx.index("-O3") < computed.cxx.index("-O1")
    assert "-DTORCH_EXTENSION_NAME=m" in computed.cxx
    assert "-DTORCH_EXTENSION_NAME=m" not in computed.pch


def test_flags_limited_api_defines_once_and_drops_torch_python(tmp_path: Path) -> None:
    source = make_sources(tmp_path, ["a.cpp"])
    spec = ExtensionSpec("m", tuple(source), py_limited_api="cp310")
    computed = flags.compute(spec, toolchain_for(tmp_path), source_root=tmp_path)
    assert [f for f in computed.cxx if "Py_LIMITED_API" in f] == ["-DPy_LIMITED_API=0x030A0000"]
    assert "-ltorch_python" not in computed.ld
    user = ExtensionSpec("m", tuple(source), py_limited_api="cp310",
                         define_macros=(("Py_LIMITED_API", "0x030A0000"),))
    computed = flags.compute(user, toolchain_for(tmp_path), source_root=tmp_path)
    assert len([f for f in computed.cxx if "Py_LIMITED_API" in f]) == 1


def test_executables_link_torch_with_rpath_and_no_python(tmp_path: Path) -> None:
    source = make_sources(tmp_path, ["main.cpp"])
    spec = ExtensionSpec("tool", tuple(source), kind=Kind.EXECUTABLE)
    computed = flags.compute(spec, toolchain_for(tmp_path), source_root=tmp_path)
    assert "-shared" not in computed.ld and "-ltorch_python" not in computed.ld
    assert any(f.startswith("-Wl,-rpath,") for f in computed.ld)
    assert not any("TORCH_EXTENSION_NAME" in f for f in computed.cxx)


def test_spec_validation(tmp_path: Path) -> None:
    source = make_sources(tmp_path, ["a.cpp"])
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ConfigError, match="valid module name"):
        ExtensionSpec("not-valid", tuple(source))
    with pytest.raises(ConfigError, match="no sources"):
        ExtensionSpec("m", ())
    with pytest.raises(ConfigError, match=r"is not a C\+\+ or CUDA source"):
        ExtensionSpec("m", (tmp_path / "notes.txt",))
    with pytest.raises(ConfigError, match="^with_cuda: .*CUDA is off"):
        ExtensionSpec("m", (tmp_path / "k.cu",), with_cuda=False)


def test_scan_finds_first_include_and_torch_cuda_headers(tmp_path: Path) -> None:
    (tmp_path / "h.h").write_text('#pragma once\n#include <ATen/cuda/CUDAContext.h>\n')
    source = tmp_path / "a.cpp"
    source.write_text('// comment\n/* block\n comment */\n#pragma once\n#include <torch/extension.h>\n#include "h.h"\n')
    assert scan.first_directive_include(source) == "torch/extension.h"
    found = scan.walk_includes([source], [])
    assert scan.uses_torch_headers(found)
    [cuda] = scan.torch_cuda_includes(found)
    assert (cuda.file.name, cuda.line) == ("h.h", 2)


def test_cpu_torch_refuses_torch_cuda_headers_before_compiling(tmp_path: Path) -> None:
    source = tmp_path / "a.cpp"
    source.write_text("#include <c10/cuda/CUDAGuard.h>\n")
    with pytest.raises(ToolchainError, match=r"a\.cpp:1 includes <c10/cuda/CUDAGuard\.h>.*CPU build"):
        prepare([ExtensionSpec("m", (source,))], BuildOptions(build_dir=tmp_path / "b"))
    assert not (tmp_path / "b" / "obj").exists()


def test_compiler_version_parsing() -> None:
    assert parse_compiler_version("g++ (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright") == ("gcc", (12, 2, 0))
    assert parse_compiler_version("Debian clang version 14.0.6\nTarget: x86_64") == ("clang", (14, 0, 6))
    assert parse_compiler_version("Apple clang version 15.0.0 (clang-1500.1.0.2.5)") == ("clang", (15, 0, 0))


def test_job_plan_bounded_by_memory_and_overridden_by_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs, "cpu_count", lambda: 64)
    monkeypatch.setattr(jobs, "memory_available", lambda: 8 * 1024**3)
    plan = jobs.plan_jobs(None)
    assert (plan.jobs, plan.heavy) == (64, 3)  # 8 GiB / 2.25 GiB per torch TU
    assert "8.0 GiB" in plan.reason
    assert (jobs.plan_jobs(3).jobs, jobs.plan_jobs(3).heavy) == (3, 3)
    monkeypatch.setattr(jobs, "memory_available", lambda: 512 * 1024**2)
    assert jobs.plan_jobs(None).heavy == 1

"""Compile and link arguments (core/flags.py) for specs, without compiling."""

from __future__ import annotations

from pathlib import Path

from pep517_torch.core import flags
from pep517_torch.core.spec import BuildType, ExtensionSpec, Kind
from pep517_torch.core.toolchain import Compiler, find_torch
from tests.conftest import write


def tools_for(tmp_path: Path) -> flags.ResolvedTools:
    compiler = Compiler(("/usr/bin/c++",), Path("/usr/bin/g++"), "gcc", (12, 2, 0), None)
    return flags.ResolvedTools(compiler, find_torch(), tmp_path / "python-include")


def test_flags_user_std_replaces_ours_and_user_flags_come_last(tmp_path: Path) -> None:
    source = [write(tmp_path / "a.cpp", "int f() { return 0; }\n")]
    spec = ExtensionSpec("m", tuple(source), extra_cflags=("-std=c++17", "-O1"),
                         build_type=BuildType.RELEASE)
    computed = flags.compute(spec, tools_for(tmp_path), source_root=tmp_path)
    assert "-std=c++20" not in computed.cxx and computed.cxx[-2:] == ("-std=c++17", "-O1")
    assert computed.cxx.index("-O3") < computed.cxx.index("-O1")
    assert "-DTORCH_EXTENSION_NAME=m" in computed.cxx
    assert "-DTORCH_EXTENSION_NAME=m" not in computed.pch


def test_flags_limited_api_defines_once_and_drops_torch_python(tmp_path: Path) -> None:
    source = [write(tmp_path / "a.cpp", "int f() { return 0; }\n")]
    spec = ExtensionSpec("m", tuple(source), py_limited_api="cp310")
    computed = flags.compute(spec, tools_for(tmp_path), source_root=tmp_path)
    assert [f for f in computed.cxx if "Py_LIMITED_API" in f] == ["-DPy_LIMITED_API=0x030A0000"]
    assert "-ltorch_python" not in computed.ld
    user = ExtensionSpec("m", tuple(source), py_limited_api="cp310",
                         define_macros=(("Py_LIMITED_API", "0x030A0000"),))
    computed = flags.compute(user, tools_for(tmp_path), source_root=tmp_path)
    assert len([f for f in computed.cxx if "Py_LIMITED_API" in f]) == 1


def test_executables_link_torch_with_rpath_and_no_python(tmp_path: Path) -> None:
    source = [write(tmp_path / "main.cpp", "int main() { return 0; }\n")]
    spec = ExtensionSpec("tool", tuple(source), kind=Kind.EXECUTABLE)
    computed = flags.compute(spec, tools_for(tmp_path), source_root=tmp_path)
    assert "-shared" not in computed.ld and "-ltorch_python" not in computed.ld
    assert any(f.startswith("-Wl,-rpath,") for f in computed.ld)
    assert not any("TORCH_EXTENSION_NAME" in f for f in computed.cxx)

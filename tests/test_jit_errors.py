"""The JIT face's errors and query functions, before anything compiles: bad arguments, a bad
MAX_JOBS, a missing compiler or ninja, torch's answers to the ABI and path queries."""

from __future__ import annotations

from pathlib import Path

import pytest

import pep517_torch
from pep517_torch.errors import ConfigError, ToolchainError
from tests.conftest import write


def load_library(name: str, source: Path, build_dir: Path) -> object:
    return pep517_torch.load(
        name, [str(source)], build_directory=str(build_dir), is_python_module=False
    )


def test_bad_inputs_are_clear_errors(tmp_path: Path) -> None:
    source = write(tmp_path / "src" / "ops.cpp", "int f() { return 0; }\n")
    with pytest.raises(ConfigError, match="does not exist"):
        pep517_torch.load("nope", [str(tmp_path / "missing.cpp")])
    with pytest.raises(ConfigError, match="sources is empty"):
        pep517_torch.load("nope", [])
    (tmp_path / "notes.txt").write_text("x")
    not_a_source = r"^sources: .*notes.txt is not a C\+\+ or CUDA source"
    with pytest.raises(ConfigError, match=not_a_source):
        pep517_torch.load("nope", [str(tmp_path / "notes.txt")])
    with pytest.raises(ConfigError, match="valid Python identifier"):
        pep517_torch.load("not-valid", [str(source)])
    with pytest.raises(ConfigError, match="mutually exclusive"):
        pep517_torch.load("both", [str(source)], is_python_module=True, is_standalone=True)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ToolchainError, match=r"a_file/build is not a writable directory \(Not a directory\)$"):
        load_library("unwritable", source, blocker / "build")


def test_bad_max_jobs_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write(tmp_path / "src" / "ops.cpp", "int f() { return 0; }\n")
    monkeypatch.setenv("MAX_JOBS", "many")
    with pytest.raises(ConfigError, match="MAX_JOBS"):
        load_library("badjobs", source, tmp_path / "b")


def test_missing_compiler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write(tmp_path / "src" / "ops.cpp", "int f() { return 0; }\n")
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    with pytest.raises(ToolchainError, match="C\\+\\+ compiler not found.*CXX="):
        load_library("nocompiler", source, tmp_path / "b")


def test_query_functions() -> None:
    from torch.utils import cpp_extension

    assert pep517_torch.include_paths() == cpp_extension.include_paths()
    assert pep517_torch.library_paths() == cpp_extension.library_paths()
    ok, version = pep517_torch.get_compiler_abi_compatibility_and_version("c++")
    assert ok and version == cpp_extension.get_compiler_abi_compatibility_and_version("c++")[1]
    assert type(version) is type(cpp_extension.get_compiler_abi_compatibility_and_version("c++")[1])
    assert pep517_torch.is_ninja_available()
    pep517_torch.verify_ninja_availability()


@pytest.mark.parametrize("compiler", ["/nonexistent/clang++", "no-such-clang++-99"])
def test_missing_compiler_abi_check_answers_like_torch(
    compiler: str, caplog: pytest.LogCaptureFixture
) -> None:
    """torch returns (False, TorchVersion('0.0.0')) and logs a warning; it does not raise."""
    from torch.torch_version import TorchVersion
    from torch.utils import cpp_extension

    with caplog.at_level("WARNING"):
        ok, version = pep517_torch.get_compiler_abi_compatibility_and_version(compiler)
    assert (ok, version) == cpp_extension.get_compiler_abi_compatibility_and_version(compiler)
    assert ok is False and type(version) is TorchVersion and version == "0.0.0"
    ours = [r for r in caplog.records if r.name.startswith("pep517_torch")]
    assert len(ours) == 1 and ours[0].levelname == "WARNING" and compiler in ours[0].getMessage()


def test_abi_check_can_be_turned_off_like_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.utils import cpp_extension

    monkeypatch.setenv("TORCH_DONT_CHECK_COMPILER_ABI", "1")
    ours = pep517_torch.get_compiler_abi_compatibility_and_version("/nonexistent/c++")
    assert ours == cpp_extension.get_compiler_abi_compatibility_and_version("/nonexistent/c++")
    assert ours == (True, "0.0.0")


def test_ninja_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ninja" else real_find_spec(name, *a))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert not pep517_torch.is_ninja_available()
    with pytest.raises(ToolchainError, match="pip install ninja"):
        pep517_torch.verify_ninja_availability()

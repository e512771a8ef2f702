"""What an ExtensionSpec refuses (core/spec.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.errors import ConfigError
from tests.conftest import write


def test_spec_validation(tmp_path: Path) -> None:
    source = [write(tmp_path / "a.cpp", "int f() { return 0; }\n")]
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ConfigError, match="valid module name"):
        ExtensionSpec("not-valid", tuple(source))
    with pytest.raises(ConfigError, match="no sources"):
        ExtensionSpec("m", ())
    with pytest.raises(ConfigError, match=r"is not a C\+\+ or CUDA source"):
        ExtensionSpec("m", (tmp_path / "notes.txt",))
    with pytest.raises(ConfigError, match="^with_cuda: .*CUDA is off"):
        ExtensionSpec("m", (tmp_path / "k.cu",), with_cuda=False)


def test_a_missing_or_empty_include_or_library_directory_is_noted_with_its_key(tmp_path: Path) -> None:
    # gcc skips a missing -I or -L without a word: the build then fails on a header the
    # directory would have held (a submodule not checked out), or finds another copy
    from pep517_torch.core import plan

    source = tmp_path / "a.cpp"
    source.write_text("int a() { return 1; }\n")
    (tmp_path / ".gitmodules").write_text("")
    (tmp_path / "third_party" / "cutlass").mkdir(parents=True)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "a.h").write_text("")
    spec = ExtensionSpec(
        "m", (source,),
        include_dirs=(tmp_path / "include", tmp_path / "third_party" / "cutlass", tmp_path / "gone"),
        library_dirs=(tmp_path / "a.cpp",),
        keys=(("include_dirs", "tool.torch-ext.extension[0].include-dirs"),),
    )
    options = BuildOptions(build_dir=tmp_path / "b", compiler_launcher="none", source_root=tmp_path, pch=False)
    notes = [n for n in plan.check([spec], options) if "directory" in n]
    assert notes == [
        "tool.torch-ext.extension[0].include-dirs: include directory third_party/cutlass is empty"
        " (a git submodule not checked out? git submodule update --init --recursive)",
        "tool.torch-ext.extension[0].include-dirs: include directory gone does not exist"
        " (a git submodule not checked out? git submodule update --init --recursive)",
        "library_dirs[0]: library directory a.cpp is not a directory",
    ]

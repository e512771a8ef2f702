"""What an ExtensionSpec refuses (core/spec.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.core.build import build
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


def build_options(root: Path) -> BuildOptions:
    return BuildOptions(build_dir=root / "b", compiler_launcher="none", source_root=root, pch=False)


def failed_build(spec: ExtensionSpec, root: Path) -> list[str]:
    """The lines of the error that building ``spec`` in ``root`` fails with."""
    from pep517_torch.errors import BuildError

    with pytest.raises(BuildError) as caught:
        build([spec], build_options(root), log=lambda _: None)
    return str(caught.value).splitlines()


@pytest.mark.compile
def test_a_header_not_found_names_the_empty_include_directory_on_the_errors_first_line(
    tmp_path: Path,
) -> None:
    """The note is printed before the build's progress; when the build then fails on a header
    that directory would hold, the error's first line says it again, and the compiler's own
    error stays last."""
    source = write(tmp_path / "a.cpp", "#include <glm/glm.hpp>\nint a() { return 1; }\n")
    (tmp_path / ".gitmodules").write_text('[submodule "third_party/glm"]\n')
    (tmp_path / "third_party" / "glm").mkdir(parents=True)
    spec = ExtensionSpec("m", (source,), include_dirs=(tmp_path / "third_party" / "glm",),
                         keys=(("include_dirs", "tool.torch-ext.extension[0].include-dirs"),))
    first, *rest = failed_build(spec, tmp_path)
    assert first.endswith(
        "; tool.torch-ext.extension[0].include-dirs: include directory third_party/glm is empty"
        " (a git submodule not checked out? git submodule update --init --recursive):"), first
    assert first.startswith("build: compiling a.cpp failed (full log: "), first
    assert "fatal error: glm/glm.hpp: No such file or directory" in rest[0], rest
    # the submodule checked out: it builds
    write(tmp_path / "third_party" / "glm" / "glm" / "glm.hpp", "#pragma once\n")
    build([spec], build_options(tmp_path), log=lambda _: None)
    # an error that is no missing header, beside an empty directory, is left as the compiler said it
    (tmp_path / "third_party" / "glm" / "glm" / "glm.hpp").unlink()
    (tmp_path / "third_party" / "glm" / "glm").rmdir()
    source.write_text("int a() { return missing; }\n")
    first, *_ = failed_build(spec, tmp_path)
    assert first.endswith("build.log):"), first


@pytest.mark.compile
def test_a_library_not_found_names_the_empty_library_directory_on_the_errors_first_line(
    tmp_path: Path,
) -> None:
    source = write(tmp_path / "a.cpp", "int a() { return 1; }\n")
    (tmp_path / "vendor" / "lib").mkdir(parents=True)
    spec = ExtensionSpec("m", (source,), libraries=("fancy",), library_dirs=(tmp_path / "vendor" / "lib",),
                         keys=(("library_dirs", "tool.torch-ext.extension[0].library-dirs"),))
    first, *rest = failed_build(spec, tmp_path)
    assert first.endswith("; tool.torch-ext.extension[0].library-dirs: library directory vendor/lib"
                          " is empty:"), first
    assert "cannot find -lfancy" in "\n".join(rest), rest

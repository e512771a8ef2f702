"""A real compile error is the user's, never a PCH's (issue 35 item 6).

A ``-std`` older than the building torch's headers accept is refused before anything compiles,
naming the key and both standards (the standard torch needs is read from its ATen/ATen.h, as
each torch ships it); a build retries without precompiled headers only when the compiler's
words are about a PCH (one it cannot read, write or use; a crash) or only a damaged .gch
explains them, never for an error of the user's code or of a header that does not compile with
the user's flags. The builds here compile tiny sources with a tiny project PCH (seconds).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from pep517_torch.core import flags, plan
from pep517_torch.core.pch import health as pch_health
from pep517_torch.core.build import build
from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind
from pep517_torch.core.toolchain.tools import find_torch
from pep517_torch.errors import BuildError, ConfigError
from tests.conftest import ROOT, count, write
from tests.tiny_project import write_project

TORCH = find_torch()  # the suite's torch 2.13.0: C++17
# The check at the top of ATen/ATen.h, as torch 2.13.0 and 2.14.1 ship it.
ATEN_H = """#pragma once

#if !defined(_MSC_VER) && __cplusplus < {value}L
#error C++{year} or later compatible compiler is required to use ATen.
#endif
"""


def torch_needing(tmp_path: Path, year: int) -> object:
    """This torch, its ATen/ATen.h saying what torch 2.14 (C++20) or 2.13 (C++17) says."""
    root = tmp_path / f"torch{year}"
    write(root / "include" / "ATen" / "ATen.h", ATEN_H.format(value={17: 201703, 20: 202002}[year], year=year))
    return dataclasses.replace(TORCH, root=root, version="2.14.1" if year == 20 else "2.13.0")


def test_torch_says_which_standard_it_needs(tmp_path: Path) -> None:
    assert TORCH.cxx_standard == (201703, "ATen/ATen.h")  # the real 2.13.0 headers
    assert torch_needing(tmp_path, 20).cxx_standard == (202002, "ATen/ATen.h")  # type: ignore[attr-defined]
    assert dataclasses.replace(TORCH, root=tmp_path / "none").cxx_standard is None
    cuda_torch = _cuda_venv_torch()
    if cuda_torch is not None:  # torch 2.14.1 where make test-cuda-torch made it (tests/cuda_torch/ always)
        assert dataclasses.replace(TORCH, root=cuda_torch).cxx_standard == (202002, "ATen/ATen.h")


def _cuda_venv_torch() -> Path | None:
    """The torch folder of this checkout's .venv-cuda (found, not imported), or None."""
    python = ROOT / ".venv-cuda" / "bin" / "python"
    if not python.exists():
        return None
    found = subprocess.run([python, "-c", "import importlib.util as u; s = u.find_spec('torch');"
                            " print(s.submodule_search_locations[0] if s else '')"],
                           capture_output=True, text=True, timeout=120).stdout.strip()
    return Path(found) if found else None


OLDER = [["-std=c++17"], ["-std=gnu++17"], ["-std", "c++17"], ["-std=c++1z"], ["--std=c++17"],
         ["-std=c++14"], ["-std=gnu++11"], ["-std=c++98"], ["-O2", "-std=c++20", "-std=c++17"]]
NEWER = [["-std=c++20"], ["-std=gnu++20"], ["-std=c++2a"], ["-std=c++23"], ["-std=gnu++2b"],
         ["-std=c++17", "-std=c++20"], ["-O2"]]


@pytest.mark.parametrize("cxx", OLDER)
def test_an_older_std_is_refused_before_compiling_naming_both(tmp_path: Path, cxx: list[str]) -> None:
    source = write(tmp_path / "a.cpp", "#include <torch/library.h>\nint f() { return 1; }\n")
    spec = ExtensionSpec("m", (source,), extra_cflags=tuple(cxx), keys=(("extra_cflags", "extra-cflags"),))
    options = BuildOptions(build_dir=tmp_path / "b", compiler_launcher="none")
    with pytest.raises(ConfigError) as caught:
        plan.prepare([spec], options, torch=torch_needing(tmp_path, 20))  # type: ignore[arg-type]
    count("item 6: -std older than torch needs, refused")
    message = str(caught.value)
    assert caught.value.key == "extra-cflags" and "C++20" in message and "torch 2.14.1" in message, message
    assert "older than C++20" in message and "\n" not in message
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("cxx", NEWER)
def test_the_standard_torch_needs_or_newer_is_accepted(tmp_path: Path, cxx: list[str]) -> None:
    source = write(tmp_path / "a.cpp", "#include <torch/library.h>\nint f() { return 1; }\n")
    spec = ExtensionSpec("m", (source,), extra_cflags=tuple(cxx))
    plan.check([spec], BuildOptions(build_dir=tmp_path / "b", compiler_launcher="none"))
    assert flags.standard_problem(spec, torch_needing(tmp_path, 20), nvcc=False) is None  # type: ignore[arg-type]
    count("item 6: -std the torch accepts, accepted")


@pytest.mark.parametrize(("nvcc", "shown", "index"), [
    (["-std=c++17"], "-std=c++17", 0), (["-std", "c++17"], "-std c++17", 0),
    (["--std=c++17"], "--std=c++17", 0), (["--std", "c++14"], "--std c++14", 0),
    (["-Xcompiler", "-std=c++17"], "-std=c++17", 0),  # the host compiler's, when nvcc's is ours
    (["-O3", "-Xcompiler=-fPIC,-std=c++17"], "-std=c++17", 1),
])
def test_nvcc_spellings_are_read_too(tmp_path: Path, nvcc: list[str], shown: str, index: int) -> None:
    source = write(tmp_path / "k.cu", "#include <torch/types.h>\n__global__ void k() {}\n")
    spec = ExtensionSpec("m", (source,), extra_cuda_cflags=tuple(nvcc))
    problem = flags.standard_problem(spec, torch_needing(tmp_path, 20), nvcc=True)  # type: ignore[arg-type]
    assert problem is not None and problem[0].startswith(f"{shown} asks for C++1"), problem
    assert problem[1] == f"extra_cuda_cflags[{index}]"
    count("item 6: nvcc -std spellings, refused")


def test_a_source_without_torchs_headers_or_a_stable_one_may_ask_for_any(tmp_path: Path) -> None:
    plain = write(tmp_path / "plain.cpp", "int f() { return 1; }\n")
    spec = ExtensionSpec("m", (plain,), extra_cflags=("-std=c++11",))
    plan.prepare([spec], BuildOptions(build_dir=tmp_path / "b", compiler_launcher="none"),
                 check_only=True, torch=torch_needing(tmp_path, 20))  # type: ignore[arg-type]
    count("item 6: -std for sources torch's headers do not reach, accepted")


def test_the_cli_and_the_jit_refuse_it_naming_their_key(tmp_path: Path, jit_env: Path) -> None:
    """Against the suite's real torch 2.13 (C++17): -std=c++14, through pyproject.toml and load()."""
    project = write_project(tmp_path / "p", "stdproj")
    (project / "pyproject.toml").write_text((project / "pyproject.toml").read_text()
                                            + 'extra-cflags = ["-O2", "-std=c++14"]\n')
    write(project / "csrc" / "ops.cpp", "#include <torch/library.h>\nint f() { return 1; }\n")
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(project)],
                            capture_output=True, text=True, timeout=600)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "extra-cflags[1]: -std=c++14 asks for C++14, older than C++17, which torch 2.13.0" in lines[0]
    assert not list(project.rglob("*.o")) and not list(project.rglob("build.ninja"))
    from pep517_torch import load

    source = write(tmp_path / "j.cpp", "#include <torch/library.h>\nint f() { return 1; }\n")
    with pytest.raises(ConfigError, match="older than C[+][+]17") as caught:
        load("std_too_old", [str(source)], extra_cflags=["-std=gnu++14"], is_python_module=False)
    assert caught.value.key == "extra_cflags"
    count("item 6: -std refused through the CLI and the JIT", 2)


# ------------------------------------------------------------- retried only for PCH trouble

def tiny_pch_build(tmp_path: Path, header: str, source: str) -> tuple[BuildError, list[str]]:
    """A build of one TU with a project PCH (a tiny header, not torch's): it must fail."""
    write(tmp_path / "p.h", "#pragma once\n#include <vector>\n" + header)
    write(tmp_path / "a.cpp", '#include "p.h"\n' + source)
    spec = ExtensionSpec("m", (tmp_path / "a.cpp",), pch_header=tmp_path / "p.h", kind=Kind.LIBRARY)
    options = BuildOptions(build_dir=tmp_path / "build", compiler_launcher="none", pch_eager=True)
    said: list[str] = []
    with pytest.raises(BuildError) as caught:
        build([spec], options, log=said.append)
    return caught.value, said


TEMPLATE = "template <class T> int first(const std::vector<T>& v) { return v.front().size(); }\n"


@pytest.mark.compile
@pytest.mark.parametrize(("header", "source", "where"), [
    (TEMPLATE, "int use() { std::vector<int> v{1}; return first(v); }\n", "p.h:3:"),  # through the stub
    ("int broken(\n", "int ok() { return 1; }\n", "p.h:3:"),  # the PCH itself cannot compile
    ("", "int ok() { return undeclared; }\n", "a.cpp:2:"),
], ids=["template-through-the-stub", "header-that-does-not-compile", "plain-error"])
def test_a_users_error_fails_once_without_a_retry(tmp_path: Path, header: str, source: str, where: str) -> None:
    error, said = tiny_pch_build(tmp_path, header, source)
    assert not any("building again without precompiled headers" in line for line in said), said
    assert where in (error.first_error or ""), error.first_error
    assert sum("failed after" in line for line in said) == 1, said  # one compile failed, once
    count("item 6: user errors with a PCH in play, not retried")


def gcc_on(gch: bytes, tmp_path: Path) -> str:
    """What g++ says compiling a TU that uses this .gch, as ninja reports the failed step."""
    write(tmp_path / "p.h", "#pragma once\ninline int h() { return 1; }\n")
    source = write(tmp_path / "a.cpp", "int use() { return h(); }\n")
    (tmp_path / "p.h.gch").write_bytes(gch)
    command = ["g++", "-include", str(tmp_path / "p.h"), "-c", str(source), "-o", str(tmp_path / "a.o")]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode != 0, "g++ accepted the damaged .gch"
    return f"FAILED: [code=1] obj/m/a.cpp.o\n{' '.join(command)}\n{result.stderr}"


@pytest.mark.compile
def test_gccs_own_words_about_a_pch_are_retried(tmp_path: Path) -> None:
    write(tmp_path / "good" / "p.h", "#pragma once\n#include <string>\ninline int h() { return 1; }\n")
    subprocess.run(["g++", "-x", "c++-header", "p.h", "-o", "p.h.gch"], cwd=tmp_path / "good", check=True)
    good = (tmp_path / "good" / "p.h.gch").read_bytes()
    output = gcc_on(good[: len(good) // 2], tmp_path / "truncated")
    assert "cannot read PCH file" in output  # gcc's own words (libcpp/pch.cc)
    error = BuildError("compile failed", output, output.strip().splitlines()[-2])
    assert pch_health.pch_failure([], True, error) is not None
    assert pch_health.pch_failure([], False, error) is None
    count("item 6: a PCH gcc cannot read, retried")


@pytest.mark.parametrize(("words", "blamed"), [
    ("<command-line>: fatal error: cannot read PCH file: No such file or directory", True),
    ("cc1plus: error: one or more PCH files were found, but they were invalid", True),
    ("a.cpp:1: internal compiler error: Segmentation fault", True),
    ("cc1plus: fatal error: cannot write PCH file: No space left on device", True),
    ("a.cpp:1:10: error: 'x.gch' was not declared in this scope", False),  # a user's words
    ("a.cpp:1:10: error: precompiled header is the name of my variable", False),
])
def test_which_words_are_about_a_pch(words: str, blamed: bool) -> None:
    output = f"FAILED: [code=1] obj/m/a.cpp.o\n/usr/bin/c++ -include /c/pch.h -c /p/a.cpp -o obj/m/a.cpp.o\n{words}\n"
    assert (pch_health.pch_failure([], True, BuildError("failed", output, words)) is not None) is blamed
    count("item 6: compiler words judged")

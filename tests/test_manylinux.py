"""platform-tag: the manylinux tag of a wheel's binaries, from their ELF and auditwheel's policies.

Tiny C libraries (a fraction of a second each) stand for the binaries; tests/test_stable_abi.py
repairs a built stable-ABI wheel with auditwheel and finds the tag it wrote unchanged.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pep517_torch.abi import elf
from pep517_torch.distribution.manylinux import Binary, decide, torch_supplied
from pep517_torch.errors import ConfigError
from tests.conftest import write

pytestmark = [
    pytest.mark.compile,
    pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None,
                       reason="manylinux tags: Linux with gcc only"),
]
LINUX = "linux_x86_64"


def library(directory: Path, name: str, source: str, *flags: str) -> tuple[Path, Path]:
    """Compile ``source`` into ``lib<name>.so``; returns (the library, its object)."""
    c_file = write(directory / f"{name}.c", source)
    obj = directory / f"{name}.o"
    out = directory / f"lib{name}.so"
    subprocess.run(["gcc", "-fPIC", "-c", str(c_file), "-o", str(obj)], check=True)
    subprocess.run(["gcc", "-shared", str(obj), "-o", str(out), *flags], check=True)
    return out, obj


def test_a_plain_library_earns_the_strictest_policy(tmp_path: Path) -> None:
    so, obj = library(tmp_path, "plain", "int answer(void) { return 42; }\n")
    decision = decide("auto", [Binary(so, "plain.c", ((obj, "csrc/plain.c"),))], set(), LINUX)
    assert decision.tag == "manylinux_2_5_x86_64"


def test_a_newer_glibc_symbol_sets_the_tag_and_the_note_names_source_and_symbol(tmp_path: Path) -> None:
    so, obj = library(tmp_path, "single", "extern char __libc_single_threaded;\n"
                      "int single(void) { return __libc_single_threaded; }\n")
    (needed,) = [n for n in elf.read_dynamic(so).undefined if n.name == "__libc_single_threaded"]
    assert (needed.version, needed.library) == ("GLIBC_2.32", "libc.so.6")
    decision = decide("auto", [Binary(so, "ext", ((obj, "csrc/single.c"),))], set(), LINUX)
    assert decision.tag == "manylinux_2_34_x86_64"  # auditwheel has no 2_32 or 2_33 policy
    assert decision.note == "manylinux_2_34: csrc/single.c needs GLIBC_2.32 (__libc_single_threaded)"
    # an explicit tag it does not satisfy: an error naming the symbol and the source
    with pytest.raises(ConfigError, match=r"manylinux_2_28_x86_64: csrc/single.c needs GLIBC_2.32 \(__libc_single_threaded\)"):
        decide("manylinux_2_28_x86_64", [Binary(so, "ext", ((obj, "csrc/single.c"),))], set(), LINUX)
    assert decide("manylinux_2_35_x86_64", [Binary(so, "ext")], set(), LINUX).tag == "manylinux_2_35_x86_64"
    assert decide("linux", [Binary(so, "ext")], set(), LINUX).tag == LINUX
    with pytest.raises(ConfigError, match="platform-tag: 'macosx_11_0_arm64' is no platform tag"):
        decide("macosx_11_0_arm64", [Binary(so, "ext")], set(), LINUX)


def test_a_foreign_needed_library_means_linux_and_a_way_out(tmp_path: Path) -> None:
    foo, _ = library(tmp_path, "foo", "int foo(void) { return 1; }\n")
    user, obj = library(tmp_path, "user", "int foo(void);\nint bar(void) { return foo(); }\n",
                        f"-L{tmp_path}", "-lfoo")
    decision = decide("auto", [Binary(user, "mypkg._C", ((obj, "csrc/user.c"),))], set(), LINUX)
    assert decision.tag == LINUX
    assert "mypkg._C needs libfoo.so" in decision.note and "auditwheel repair" in decision.note
    # shipped in the wheel itself, it is no longer foreign
    shipped = decide("auto", [Binary(user, "mypkg._C"), Binary(foo, "mypkg/libfoo.so")], {"libfoo.so"}, LINUX)
    assert shipped.tag == "manylinux_2_5_x86_64"


@pytest.mark.parametrize(("name", "supplied"), [
    ("libtorch_cpu.so", True), ("libc10_cuda.so", True), ("libtorch_python.so", True),
    ("libshm.so", True), ("libcudart.so.13", True), ("libcublasLt.so.13", True),
    ("libgomp.so.1", True), ("libfoo.so", False), ("libcrypto.so.3", False),
])
def test_torch_and_its_cuda_libraries_count_as_supplied(name: str, supplied: bool) -> None:
    assert torch_supplied(name) is supplied


def test_an_unknown_explicit_tag_is_refused_before_compiling(tmp_path: Path) -> None:
    from pep517_torch.backend import pipeline
    from tests.conftest import write_tree

    root = write_tree(tmp_path, {
        "pyproject.toml": '[project]\nname = "p"\nversion = "1"\ndynamic = ["dependencies"]\n'
                          '[tool.torch-ext]\npackages = ["p"]\nplatform-tag = "manylinux_2_99_x86_64"\n'
                          '[[tool.torch-ext.extension]]\nname = "p._C"\nsources = ["a.cpp"]\n',
        "p/__init__.py": "", "a.cpp": "",
    })
    with pytest.raises(ConfigError, match=r"tool\.torch-ext\.platform-tag: 'manylinux_2_99_x86_64' is no platform tag"):
        pipeline.load(root, None)
    assert not (root / "build").exists()


def test_linux_arch_is_a_tag_every_binary_earns(tmp_path: Path) -> None:
    """`-Cplatform-tag=linux_x86_64` means what `linux` means (issue 35 item 10): it allows every
    library and symbol version: libstdc++, a foreign library, a new glibc symbol."""
    from tests.conftest import count

    cxx = write(tmp_path / "cxx.cpp", "#include <string>\nstd::string s() { return std::string(40, 'x'); }\n")
    so = tmp_path / "libcxx.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(cxx), "-o", str(so)], check=True)
    assert "libstdc++.so.6" in elf.read_dynamic(so).needed_libraries
    foo, _ = library(tmp_path, "foo", "int foo(void) { return 1; }\n")
    user, _ = library(tmp_path, "user", "int foo(void);\nint bar(void) { return foo(); }\n", f"-L{tmp_path}", "-lfoo")
    single, _ = library(tmp_path, "single", "extern char __libc_single_threaded;\n"
                        "int single(void) { return __libc_single_threaded; }\n")
    for binary in (so, user, single):
        for mode in (LINUX, "linux"):
            decision = decide(mode, [Binary(binary, "ext")], set(), LINUX)
            assert decision.tag == LINUX and mode in decision.note
            count("item 10: linux_<arch> and linux accepted for any binary")
    with pytest.raises(ConfigError, match="no platform tag of this machine"):
        decide("linux_aarch64", [Binary(so, "ext")], set(), LINUX)  # another machine's: refused


def test_a_wheel_built_with_linux_arch_is_tagged_so_and_computes(tmp_path: Path) -> None:
    from tests.commands import run_cli
    from tests.tiny_project import wheel_value, write_project

    root = write_project(tmp_path / "p", "linuxtag")
    result = run_cli("wheel", str(root), f"-Cplatform-tag={LINUX}")
    assert result.returncode == 0, result.stderr
    (wheel,) = (root / "dist").glob("*.whl")
    assert wheel.name.endswith(f"-{LINUX}.whl") and f'platform tag platform-tag = "{LINUX}"' in result.stdout + result.stderr
    assert wheel_value(wheel, tmp_path / "site", "linuxtag") == 0

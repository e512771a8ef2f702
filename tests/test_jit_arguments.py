"""Every list argument of load() and load_inline() is checked, one error naming it (issue 35
item 7): a string where torch's signature takes a list (torch iterates it: ``extra_cflags="-O2"``
reaches its compiler as ``-``, ``O``, ``2``), an entry that is not a string (torch fails with an
AttributeError), a line break, carriage return or NUL in a flag before it is split (the TOML
and -C paths refuse the same with the same check). Nothing is built or written; nothing here
compiles.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pep517_torch import load, load_inline
from pep517_torch.errors import ConfigError
from tests.conftest import count, write

LIST_ARGUMENTS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
FLAG_ARGUMENTS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
# (value, words the error holds) for any list argument of load()
HOSTILE = [
    ("-O2", "not the string '-O2': torch's load() would read it as the entries '-', 'O', '2'"),
    (b"-O2", "not bytes"),
    (5, "not int"),
    ({"-O2": True}, "not dict"),
    ([1], "entry 0 is 1 (int)"),
    (["-O2", None], "entry 1 is None (NoneType)"),
    ([b"-O2"], "entry 0 is b'-O2' (bytes)"),
    ([["-O2"]], "entry 0 is ['-O2'] (list)"),
]
LINE_BREAKS = [("-DX=1\n-DY", "a newline"), ("-DX=1\r-DY", "a carriage return"),
               ("'-DX=a\rb'", "a carriage return"), ("-DX\0", "a NUL character"),
               ("-DX=1 \n", "a newline")]


def called(function: object, tmp_path: Path, **arguments: object) -> ConfigError:
    build = tmp_path / "build"
    with pytest.raises(ConfigError) as caught:
        function(**arguments, build_directory=str(build))  # type: ignore[operator]
    assert not build.exists(), "something was written before the error"
    assert "\n" not in str(caught.value)
    return caught.value


@pytest.mark.parametrize("argument", LIST_ARGUMENTS)
@pytest.mark.parametrize(("value", "words"), HOSTILE)
def test_load_names_the_argument(tmp_path: Path, jit_env: Path, argument: str, value: object, words: str) -> None:
    source = write(tmp_path / "a.cpp", "int f() { return 1; }\n")
    error = called(load, tmp_path, name="jit_args", sources=[str(source)], is_python_module=False,
                   **{argument: value})
    assert error.key == argument and words in str(error), str(error)
    count("item 7: load() list arguments, hostile values")


@pytest.mark.parametrize("argument", LIST_ARGUMENTS)
@pytest.mark.parametrize(("value", "words"), HOSTILE)
def test_load_inline_names_the_argument(tmp_path: Path, jit_env: Path, argument: str, value: object, words: str) -> None:
    error = called(load_inline, tmp_path, name="jit_args_inline", cpp_sources="int f() { return 1; }",
                   **{argument: value})
    assert error.key == argument and words in str(error), str(error)
    count("item 7: load_inline() list arguments, hostile values")


@pytest.mark.parametrize("argument", FLAG_ARGUMENTS)
@pytest.mark.parametrize(("flag", "words"), LINE_BREAKS)
def test_a_line_break_in_a_flag_is_refused_before_it_is_split(
    tmp_path: Path, jit_env: Path, argument: str, flag: str, words: str
) -> None:
    source = write(tmp_path / "a.cpp", "int f() { return 1; }\n")
    error = called(load, tmp_path, name="jit_args", sources=[str(source)], is_python_module=False,
                   **{argument: ["-O2", flag]})
    assert error.key == argument and f"{flag!r} contains {words}" in str(error), str(error)
    error = called(load_inline, tmp_path, name="jit_args", cpp_sources="int f();", **{argument: [flag]})
    assert error.key == argument
    count("item 7: line breaks in JIT flags", 2)


@pytest.mark.parametrize(("sources", "words"), [
    ([1], "entry 0 is 1 (int)"), (["a.cpp", None], "entry 1 is None"), (b"a.cpp", "not bytes"),
    (7, "not int"), ({"a.cpp": 1}, "not dict"), (["a\nb.cpp"], "a newline"),
])
def test_sources_are_checked_the_same_way(tmp_path: Path, jit_env: Path, sources: object, words: str) -> None:
    error = called(load, tmp_path, name="jit_args", sources=sources)
    assert error.key == "sources" and words in str(error), str(error)
    count("item 7: load() sources, hostile values")


@pytest.mark.parametrize(("arguments", "key", "words"), [
    ({"cpp_sources": [1]}, "cpp_sources", "entry 0 is 1 (int)"),
    ({"cpp_sources": None}, "cpp_sources", "not NoneType"),
    ({"cpp_sources": b"int f();"}, "cpp_sources", "not bytes"),
    ({"cuda_sources": ["__global__ void k() {}", 2]}, "cuda_sources", "entry 1 is 2 (int)"),
    ({"cuda_sources": {"k": 1}}, "cuda_sources", "not dict"),
    ({"functions": [1]}, "functions", "1 is not a C++ function name"),
    ({"functions": 3}, "functions", "must be a str, list or dict, not int"),
    ({"functions": {"f": 1}}, "functions", "docstring of 'f' must be a str"),
])
def test_load_inline_checks_its_own_lists(tmp_path: Path, jit_env: Path, arguments: dict, key: str, words: str) -> None:
    arguments = {"cpp_sources": "int f() { return 1; }", **arguments}
    error = called(load_inline, tmp_path, name="jit_args_inline", **arguments)
    assert error.key == key and words in str(error), str(error)
    count("item 7: load_inline() sources and functions, hostile values")


def test_what_torch_accepts_is_still_accepted(tmp_path: Path, jit_env: Path) -> None:
    """A str or path source, tuples and generators of flags, paths among the include dirs: all
    reach the compile core (which stops here on a missing source, after the arguments passed)."""
    missing = tmp_path / "missing.cpp"
    for arguments in (
        {"sources": str(missing)}, {"sources": missing}, {"sources": (str(missing),)},
        {"sources": [missing], "extra_cflags": ("-O2", "-DX='a b'"), "extra_include_paths": [tmp_path]},
        {"sources": [str(missing)], "extra_ldflags": (f for f in ["-lm"])},
    ):
        with pytest.raises(ConfigError, match=re.escape(f"source file {missing} does not exist")):
            load("jit_args_ok", is_python_module=False, build_directory=str(tmp_path / "b"), **arguments)
        count("item 7: accepted argument shapes")


@pytest.mark.parametrize("api", ["load", "load_inline"])
def test_a_build_directory_that_cannot_be_one_is_named_in_one_line(tmp_path: Path, jit_env: Path, api: str) -> None:
    from pep517_torch.errors import ToolchainError

    taken = write(tmp_path / "taken", "a file\n")
    source = write(tmp_path / "a.cpp", "int f() { return 1; }\n")
    for build_directory, why in ((taken, "File exists"), (taken / "below", "Not a directory")):
        with pytest.raises(ToolchainError) as caught:
            if api == "load":
                load("jit_dir", [str(source)], build_directory=str(build_directory))
            else:
                load_inline("jit_dir", cpp_sources="int f() { return 1; }", functions=["f"],
                            build_directory=str(build_directory))
        assert str(caught.value) == f"build directory {build_directory} is not a writable directory ({why})"
    assert taken.read_text() == "a file\n"

"""[[tool.torch-ext.overrides]]: replace, append, "*", every condition field, order, errors."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config import ResolvedProject
from tests.config_helpers import LINUX_CPU, resolve, resolve_error

# The machine the conditions are evaluated on.
MACHINE = replace(LINUX_CPU, python_version="3.12.1", torch_version="2.13.0+cu130")
A = {"name": "demo._a", "sources": ["a.cpp"]}
B = {"name": "demo._b", "sources": ["b.cpp"]}
ROOT_FILES = dict.fromkeys(
    ["demo/__init__.py", "demo/x.json", "demo/y.txt", "a.cpp", "b.cpp", "c.cpp", "k.cu"], ""
)


def every(**keys: Any) -> dict[str, Any]:
    """An override's `extension` entry for all extensions; keyword names are snake_case keys."""
    return {"extension": {"*": {k.replace("_", "-"): v for k, v in keys.items()}}}


def patched(patch: dict[str, Any], append: bool = False) -> dict[str, Any]:
    """A tool table with extension A and one unconditional override."""
    return {"extension": [A], "overrides": [{"if": {}, **({"append": patch} if append else patch)}]}


OV = "tool.torch-ext.overrides[0]"


def spec(resolved: ResolvedProject, name: str) -> Any:
    return next(s for s in resolved.extensions if s.name == name)


def test_replace_project_keys(root: Path) -> None:
    tool = {
        "build-type": "release",
        "sdist-include": ["x"],
        "overrides": [
            {"if": {"env": {"DEBUG": True}}, "build-type": "debug", "sdist-include": ["y"]}
        ],
    }
    resolved = resolve(root, tool, facts=MACHINE)
    assert resolved.sdist_include == ("x",)
    resolved = resolve(root, {**tool, "extension": [A]}, env={"DEBUG": "1"}, facts=MACHINE)
    assert resolved.sdist_include == ("y",)
    assert resolved.extensions[0].build_type.value == "debug"


def test_replace_extension_keys_by_name_and_star(root: Path) -> None:
    tool = {
        "extension": [A, B],
        "overrides": [
            {"if": {}, "extension": {"*": {"openmp": True, "extra-cflags": ["-O1"]}}},
            {"if": {}, "extension": {"demo._b": {"extra-cflags": ["-O2"], "sources": ["c.cpp"]}}},
        ],
    }
    resolved = resolve(root, tool, facts=MACHINE)
    assert spec(resolved, "demo._a").openmp and spec(resolved, "demo._b").openmp
    assert spec(resolved, "demo._a").extra_cflags == ("-O1",)
    assert spec(resolved, "demo._b").extra_cflags == ("-O2",)
    assert spec(resolved, "demo._b").sources == (root / "c.cpp",)


def test_append(root: Path) -> None:
    tool = {
        "cuda-arch-list": "8.0",
        "package-data": {"demo": ["*.json"]},
        "extension": [{**A, "define-macros": {"X": 1, "Y": 2}, "libraries": ["m"]}, B],
        "overrides": [
            {
                "if": {},
                "append": {
                    "cuda-arch-list": ["9.0"],
                    "sdist-include": ["extra"],
                    "package-data": {"demo": ["*.txt"]},
                    "extension": {
                        "*": {"libraries": ["z"]},
                        "demo._a": {"define-macros": {"Y": 3, "Z": True}, "sources": ["c.cpp"]},
                    },
                },
            }
        ],
    }
    resolved = resolve(root, tool, facts=MACHINE)
    a, b = spec(resolved, "demo._a"), spec(resolved, "demo._b")
    assert a.libraries == ("m", "z") and b.libraries == ("z",)
    assert a.define_macros == (("X", "1"), ("Y", "3"), ("Z", None))
    assert a.sources == (root / "a.cpp", root / "c.cpp")
    assert a.cuda_arch_list == ("8.0", "9.0")
    assert resolved.sdist_include == ("extra",)
    assert resolved.layout.package_data == {"demo": (root / "demo/y.txt",)}


def test_append_package_dir_string(root: Path) -> None:
    (root / "lib/other").mkdir(parents=True)
    tool = {
        "packages": ["demo", "other"],
        "package-dir": ".",
        "overrides": [{"if": {}, "append": {"package-dir": {"other": "lib/other"}}}],
    }
    assert resolve(root, tool, facts=MACHINE).layout.packages["other"] == root / "lib/other"


def test_replace_then_append_in_one_override_and_order(root: Path) -> None:
    tool = {
        "extension": [A],
        "overrides": [
            {"if": {}, **every(extra_cflags=["-a"]), "append": every(extra_cflags=["-b"])},
            {"if": {}, "append": every(extra_cflags=["-c"])},
            {"if": {"env": {"RESET": True}}, **every(extra_cflags=[])},
        ],
    }
    assert resolve(root, tool, facts=MACHINE).extensions[0].extra_cflags == ("-a", "-b", "-c")
    assert resolve(root, tool, env={"RESET": "y"}, facts=MACHINE).extensions[0].extra_cflags == ()


def test_later_overrides_win_and_see_earlier_cuda(root: Path) -> None:
    tool = {
        "extension": [{**A, "cuda": {"sources": ["k.cu"]}}],
        "overrides": [
            {"if": {"env": {"FORCE_CUDA": "1"}}, "cuda": True},
            {"if": {"cuda": True}, "build-type": "relwithdebinfo"},
            {"if": {"cuda": True}, "jobs": 1},
            {"if": {"cuda": True}, "jobs": 2},
        ],
    }
    resolved = resolve(root, tool, facts=MACHINE)
    assert not resolved.cuda_enabled and resolved.options.jobs is None
    resolved = resolve(root, tool, env={"FORCE_CUDA": "1"}, facts=MACHINE)
    assert resolved.cuda_enabled and resolved.options.jobs == 2
    assert resolved.extensions[0].build_type.value == "relwithdebinfo"
    assert resolved.extensions[0].sources[-1] == root / "k.cu"
    # -C cuda wins, and conditions see the value that wins
    resolved = resolve(root, tool, {"cuda": "false"}, env={"FORCE_CUDA": "1"}, facts=MACHINE)
    assert not resolved.cuda_enabled and resolved.options.jobs is None


@pytest.mark.parametrize(
    ("condition", "facts", "applies"),
    [
        ({"env": {"X": True}}, {"env": {"X": "1"}}, True),
        ({"env": {"X": True}}, {"env": {"X": ""}}, False),
        ({"env": {"X": False}}, {"env": {}}, True),
        ({"env": {"X": False}}, {"env": {"X": "0"}}, False),
        ({"env": {"X": "abc"}}, {"env": {"X": "abc"}}, True),
        ({"env": {"X": "abc"}}, {"env": {"X": "ABC"}}, False),
        ({"cuda": True}, {"torch_cuda": "13.0", "nvcc_available": True}, True),
        ({"cuda": True}, {}, False),
        ({"cuda": False}, {}, True),
        ({"platform": "linux"}, {}, True),
        ({"platform": "win32"}, {"platform": "win32"}, True),
        ({"platform": "darwin"}, {}, False),
        ({"platform-machine": "aarch64"}, {"machine": "aarch64"}, True),
        ({"platform-machine": "arm*"}, {}, False),
        ({"torch": ">=2.13,<2.14"}, {}, True),
        ({"torch": "==2.13.*"}, {}, True),
        ({"torch": ">=2.14"}, {}, False),
        ({"torch": ">=1"}, {"torch_version": None}, False),
        ({"python": ">=3.12"}, {}, True),
        ({"python": "<3.12"}, {}, False),
        ({"env": {"X": True}, "platform": "linux"}, {"env": {"X": "1"}}, True),
        ({"env": {"X": True}, "platform": "darwin"}, {"env": {"X": "1"}}, False),
    ],
)
def test_override_conditions(
    root: Path, condition: dict[str, Any], facts: dict[str, Any], applies: bool
) -> None:
    tool = {"verbose": False, "overrides": [{"if": condition, "verbose": True}]}
    assert resolve(root, tool, **facts, facts=MACHINE).options.verbose is applies


def test_override_then_config_settings(root: Path) -> None:
    tool = {"overrides": [{"if": {}, "build-type": "debug", "jobs": 3}]}
    resolved = resolve(root, {**tool, "extension": [A]}, {"build-type": "none"}, facts=MACHINE)
    assert resolved.extensions[0].build_type.value == "none"
    assert resolved.options.jobs == 3


@pytest.mark.parametrize(
    ("tool", "key", "fragment"),
    [
        (
            patched({"extension": {"demo._z": {"openmp": True}}}),
            f'{OV}.extension."demo._z"',
            "no extension is named 'demo._z'",
        ),
        (
            {"overrides": [{"if": {"gpu": True}}]},
            f"{OV}.if.gpu",
            f"valid keys in {OV}.if: env, cuda",
        ),
        (patched({"packages": ["demo"]}, append=True), f"{OV}.append.packages", "discovered"),
        (patched(every(sources=["zz/*.cpp"])), f'{OV}.extension."*".sources[0]', "no file"),
        (
            patched(every(sources=["../x.cpp"]), append=True),
            f'{OV}.append.extension."*".sources[0]',
            "outside",
        ),
        (
            patched(every(with_cuda=False, cuda={})),
            f'{OV}.extension."*".cuda',
            "with-cuda = false",
        ),
        (patched({"build-dir": "{nope}"}), f"{OV}.build-dir", "unknown placeholder {nope}"),
        (
            {
                "package-data": {"demo": ["*.json"]},
                "overrides": [{"if": {}, "append": {"package-data": {"demo": ["*.none"]}}}],
            },
            f"{OV}.append.package-data.demo[0]",
            "matches no file",
        ),
    ],
)
def test_override_errors_name_the_override(
    root: Path, tool: dict[str, Any], key: str, fragment: str
) -> None:
    error = resolve_error(root, tool, match=re.escape(fragment), facts=MACHINE)
    assert error.key == key, str(error)


def test_unmodified_errors_still_name_the_extension(root: Path) -> None:
    tool = {
        "extension": [{**A, "sources": ["a.cpp", "missing.cpp"]}],
        "overrides": [{"if": {}, "append": {"extension": {"*": {"sources": ["b.cpp"]}}}}],
    }
    error = resolve_error(root, tool, match=re.escape("source glob 'missing.cpp' matches no file"),
                          facts=MACHINE)
    assert error.key == "tool.torch-ext.extension[0].sources[1]"

"""`if.env` tests (`not`, `unset`), `if.torch-cuda`, `enabled = false`, and skip reasons that
say in full why an extension is not built (#14 items 6 and 9)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config import ResolvedProject
from tests.config_helpers import LINUX_CPU, resolve, resolve_error

# A CPU torch on a machine where nvcc 13.0 was found; CUDA_TORCH: the fields a CUDA torch changes.
MACHINE = replace(LINUX_CPU, python_version="3.12.1", nvcc_available=True, nvcc_version="13.0")
CUDA_TORCH: dict[str, Any] = {"torch_version": "2.13.0+cu130", "torch_cuda": "13.0"}
EXT = "tool.torch-ext.extension"
OV = "tool.torch-ext.overrides"
ROOT_FILES = dict.fromkeys(["demo/__init__.py", "a.cpp", "k.cu"], "")


def one(condition: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"extension": [{"name": "demo._a", "sources": ["a.cpp"], "if": condition, **extra}]}


def skipped(resolved: ResolvedProject) -> str:
    ((_, reason),) = resolved.skipped
    return reason


# ----------------------------------------------------------------------- why CUDA is off / on


@pytest.mark.parametrize(
    ("facts", "why"),
    [
        ({}, "torch 2.13.0+cpu is a CPU build, so CUDA is off although nvcc 13.0 was found"),
        ({"nvcc_available": False, "nvcc_version": None},
         "torch 2.13.0+cpu is a CPU build and no nvcc was found, so CUDA is off"),
        ({**CUDA_TORCH, "nvcc_available": False, "nvcc_version": None},
         "torch 2.13.0+cu130 is a CUDA 13.0 build but no nvcc was found, so CUDA is off"),
        ({"torch_version": None}, "torch is not installed, so CUDA is off although nvcc 13.0 was"
         " found"),
    ],
)
def test_cuda_off_reason_names_torch_and_nvcc(
    root: Path, facts: dict[str, Any], why: str
) -> None:
    reason = skipped(resolve(root, one({"cuda": True}), **facts, facts=MACHINE))
    assert reason == f"{EXT}[0].if.cuda = true does not hold ({why})"


def test_cuda_on_reason(root: Path) -> None:
    reason = skipped(resolve(root, one({"cuda": False}), **CUDA_TORCH, facts=MACHINE))
    assert reason == (
        f"{EXT}[0].if.cuda = false does not hold (torch 2.13.0+cu130 is a CUDA 13.0 build and"
        " nvcc 13.0 was found, so CUDA is on)"
    )


def test_cuda_reason_names_the_key_that_set_it(root: Path) -> None:
    tool = {**one({"cuda": True}), "cuda": False}
    assert skipped(resolve(root, tool, **CUDA_TORCH, facts=MACHINE)).endswith(
        "(tool.torch-ext.cuda = false, so CUDA is off)"
    )
    assert skipped(resolve(root, one({"cuda": True}), {"cuda": "0"}, **CUDA_TORCH,
                           facts=MACHINE)).endswith(
        "(-C cuda = false, so CUDA is off)"
    )
    tool = {**one({"cuda": False}), "overrides": [{"if": {"env": {"FORCE_CUDA": "1"}}, "cuda": True}]}
    reason = skipped(resolve(root, tool, env={"FORCE_CUDA": "1"}, facts=MACHINE))
    assert reason.endswith(f"({OV}[0].cuda = true, so CUDA is on)")


# ------------------------------------------------------------------------- if.env not / unset


@pytest.mark.parametrize(
    ("test", "env", "reason"),
    [
        ({"not": "0"}, {"USE_CUDA": "0"}, 'env.USE_CUDA = {not = "0"} does not hold (USE_CUDA is "0")'),
        ({"not": ["0", "OFF"]}, {"USE_CUDA": "OFF"},
         'env.USE_CUDA = {not = ["0", "OFF"]} does not hold (USE_CUDA is "OFF")'),
        ({"unset": True}, {"USE_CUDA": ""}, "env.USE_CUDA = {unset = true} does not hold (USE_CUDA is set)"),
        ({"unset": False}, {}, "env.USE_CUDA = {unset = false} does not hold (USE_CUDA is unset)"),
        ({"not": "0", "unset": False}, {}, "env.USE_CUDA = {unset = false} does not hold (USE_CUDA is unset)"),
    ],
)
def test_env_test_reasons(
    root: Path, test: dict[str, Any], env: dict[str, str], reason: str
) -> None:
    resolved = resolve(root, one({"env": {"USE_CUDA": test}}), env=env, facts=MACHINE)
    assert skipped(resolved) == f"{EXT}[0].if.{reason}"


def test_not_equal_holds_when_unset_like_os_environ_get(root: Path) -> None:
    assert resolve(root, one({"env": {"USE_CUDA": {"not": "0"}}}), facts=MACHINE).extensions
    assert resolve(root, one({"env": {"USE_CUDA": {"not": "0"}}}), env={"USE_CUDA": "1"},
                   facts=MACHINE).extensions


def test_odd_variable_names_and_values_stay_on_one_line(root: Path) -> None:
    condition = {"env": {"A\nB": {"not": "x\ny"}}}
    reason = skipped(resolve(root, one(condition), env={"A\nB": "x\ny"}, facts=MACHINE))
    assert "\n" not in reason
    assert reason == f'{EXT}[0].if.env."A\\nB" = {{not = "x\\ny"}} does not hold ("A\\nB" is "x\\ny")'


@pytest.mark.parametrize(
    ("test", "key", "fragment"),
    [
        ({}, "env.X", "an empty table says nothing; give one of not, unset"),
        ({"nott": "0"}, "env.X.nott", "did you mean 'not'?"),
        ({"not": []}, "env.X.not", "must have at least 1 entry"),
        ({"not": 0}, "env.X.not", "expected a string or an array of strings, got integer 0"),
        ({"unset": "yes"}, "env.X.unset", "expected a boolean"),
    ],
)
def test_bad_env_tests(root: Path, test: dict[str, Any], key: str, fragment: str) -> None:
    error = resolve_error(root, one({"env": {"X": test}}), match=re.escape(fragment), facts=MACHINE)
    assert error.key == f"{EXT}[0].if.{key}"
    tool = {"overrides": [{"if": {"env": {"X": test}}, "jobs": 2}]}
    error = resolve_error(root, tool, match=re.escape(fragment), facts=MACHINE)
    assert error.key == f"{OV}[0].if.{key}"


# --------------------------------------------------------------------------------- torch-cuda


@pytest.mark.parametrize(
    ("condition", "facts", "reason"),
    [
        (True, {}, "torch-cuda = true does not hold (torch 2.13.0+cpu is a CPU build)"),
        (True, {"torch_version": None}, "torch-cuda = true does not hold (torch is not installed)"),
        (False, CUDA_TORCH, "torch-cuda = false does not hold (torch 2.13.0+cu130 is a CUDA 13.0 build)"),
        (">=12.8", {}, 'torch-cuda = ">=12.8" does not hold (torch 2.13.0+cpu is a CPU build)'),
        ("<13", CUDA_TORCH, 'torch-cuda = "<13" does not hold (torch-cuda 13.0)'),
        (True, CUDA_TORCH, None),
        (False, {}, None),
        (">=12.8", CUDA_TORCH, None),
    ],
)
def test_torch_cuda_condition(
    root: Path, condition: bool | str, facts: dict[str, Any], reason: str | None
) -> None:
    resolved = resolve(root, one({"torch-cuda": condition}), **facts, facts=MACHINE)
    if reason is None:
        assert [s.name for s in resolved.extensions] == ["demo._a"]
    else:
        assert skipped(resolved) == f"{EXT}[0].if.{reason}"


def test_torch_cuda_is_not_cuda(root: Path) -> None:
    """FORCE_CUDA=1 turns CUDA on against a CPU torch: an extension that needs torch's CUDA
    API says so with torch-cuda and stays skipped, while the CUDA variant is added."""
    tool = {
        "extension": [
            {"name": "demo._a", "sources": ["a.cpp"], "cuda": {"sources": ["k.cu"]}},
            {"name": "demo._streams", "sources": ["k.cu"], "if": {"cuda": True, "torch-cuda": True}},
        ],
        "overrides": [{"if": {"env": {"FORCE_CUDA": "1"}}, "cuda": True}],
    }
    resolved = resolve(root, tool, env={"FORCE_CUDA": "1"}, facts=MACHINE)
    assert resolved.cuda_enabled
    ((spec,),) = [[s for s in resolved.extensions if s.name == "demo._a"]]
    assert [p.name for p in spec.sources] == ["a.cpp", "k.cu"]
    assert resolved.skipped == (
        ("demo._streams", f"{EXT}[1].if.torch-cuda = true does not hold (torch 2.13.0+cpu is a"
         " CPU build)"),
    )


def test_bad_torch_cuda(root: Path) -> None:
    error = resolve_error(root, one({"torch-cuda": "13"}),
                          match="'13' is not a PEP 440 version specifier set", facts=MACHINE)
    assert error.key == f"{EXT}[0].if.torch-cuda"


# ----------------------------------------------------------------------------------- enabled


def test_enabled_false_in_the_table(root: Path) -> None:
    tool = {"extension": [{"name": "demo._a", "sources": ["missing/*.cpp"], "enabled": False}]}
    resolved = resolve(root, tool,
                       facts=MACHINE)  # a disabled extension's sources are not looked at
    assert resolved.extensions == ()
    assert resolved.skipped == (("demo._a", f"{EXT}[0].enabled = false"),)


def test_override_turns_an_extension_off(root: Path) -> None:
    tool = {
        "extension": [
            {"name": "demo._a", "sources": ["a.cpp"]},
            {"name": "demo._b", "sources": ["a.cpp"]},
        ],
        "overrides": [{"if": {"env": {"CPU_ONLY": True}}, "extension": {"demo._b": {"enabled": False}}}],
    }
    assert [s.name for s in resolve(root, tool, facts=MACHINE).extensions] == ["demo._a", "demo._b"]
    resolved = resolve(root, tool, env={"CPU_ONLY": "1"}, facts=MACHINE)
    assert [s.name for s in resolved.extensions] == ["demo._a"]
    assert resolved.skipped == (("demo._b", f'{OV}[0].extension."demo._b".enabled = false'),)


def test_a_later_override_turns_it_back_on(root: Path) -> None:
    tool = {
        "extension": [{"name": "demo._a", "sources": ["a.cpp"], "enabled": False}],
        "overrides": [
            {"if": {"platform": "linux"}, "extension": {"*": {"enabled": True}}},
            {"if": {"platform": "win32"}, "extension": {"*": {"enabled": False}}},
        ],
    }
    assert [s.name for s in resolve(root, tool, facts=MACHINE).extensions] == ["demo._a"]
    assert resolve(root, tool, platform="win32", facts=MACHINE).skipped == (
        ("demo._a", f'{OV}[1].extension."*".enabled = false'),
    )


def test_enabled_cannot_be_appended(root: Path) -> None:
    tool = {
        "extension": [{"name": "demo._a", "sources": ["a.cpp"]}],
        "overrides": [{"if": {}, "append": {"extension": {"*": {"enabled": False}}}}],
    }
    error = resolve_error(root, tool, match="key 'enabled' cannot be appended to", facts=MACHINE)
    assert error.key == f'{OV}[0].append.extension."*".enabled'


def test_disabled_wins_over_a_failing_condition(root: Path) -> None:
    resolved = resolve(root, one({"cuda": True}, enabled=False), facts=MACHINE)
    assert resolved.skipped == (("demo._a", f"{EXT}[0].enabled = false"),)


def test_the_docs_example_means_what_it_says(root: Path) -> None:
    from pep517_torch.config.pyproject import tomllib

    text = (Path(__file__).parent.parent / "docs" / "configuration.md").read_text()
    [example] = [e for e in re.findall(r"```toml\n(.*?)```", text, re.S) if "torch-cuda" in e]
    tool = tomllib.loads(example)["tool"]["torch-ext"]
    tool["extension"][0]["sources"] = ["k.cu"]
    (root / "myops").mkdir()  # the package the example's extension lives in
    (root / "myops" / "__init__.py").write_text("")
    resolved = resolve(root, tool, env={"FORCE_CUDA": "1"}, facts=MACHINE)
    assert resolved.cuda_enabled and resolved.skipped == (
        ("myops._cuda_streams", f"{EXT}[0].if.torch-cuda = true does not hold (torch 2.13.0+cpu"
         " is a CPU build)"),
    )
    assert resolve(root, tool, **CUDA_TORCH, facts=MACHINE).extensions
    assert resolve(root, tool, **{**CUDA_TORCH, "env": {"USE_CUDA": "OFF"}},
                   facts=MACHINE).skipped[0][1] == (
        f'{EXT}[0].if.env.USE_CUDA = {{not = ["0", "OFF"]}} does not hold (USE_CUDA is "OFF")'
    )
    assert resolve(root, tool, **{**CUDA_TORCH, "env": {"MYOPS_CPU_ONLY": "1"}},
                   facts=MACHINE).skipped[0][1] == (
        f'{OV}[0].extension."myops._cuda_streams".enabled = false'
    )

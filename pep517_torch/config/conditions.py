"""Evaluating `if` tables (extension conditions and override conditions) against Facts."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from .extension_model import Condition, EnvTest
from .parse import key_path, quote_key
from .resolved import Facts


def cuda_enabled(setting: Literal["auto"] | bool, facts: Facts) -> bool:
    """`cuda = "auto"` means: torch is a CUDA build and nvcc is there to compile with."""
    if setting == "auto":
        return facts.torch_cuda is not None and facts.nvcc()[0]
    return bool(setting)


@dataclass(frozen=True)
class CudaState:
    """Whether CUDA is enabled, and the sentence that says why (made only when a condition
    that fails shows it: with a CPU torch, `cuda = "auto"` is off without asking for nvcc)."""

    on: bool
    _why: Callable[[], str] = field(repr=False, compare=False)

    @property
    def why(self) -> str:
        return self._why()


def _torch_text(facts: Facts) -> str:
    if facts.torch_version is None:
        return "torch is not installed"
    flavour = f"a CUDA {facts.torch_cuda} build" if facts.torch_cuda else "a CPU build"
    return f"torch {facts.torch_version} is {flavour}"


def _nvcc_text(facts: Facts) -> str:
    available, version = facts.nvcc()
    if not available:
        return "no nvcc was found"
    return f"nvcc {version} was found" if version else "nvcc was found"


def cuda_state(setting: Literal["auto"] | bool, facts: Facts, key: str) -> CudaState:
    """``setting`` is the `cuda` value that wins, ``key`` where it was given."""
    on = cuda_enabled(setting, facts)
    return CudaState(on, lambda: _cuda_why(on, setting, facts, key))


def _cuda_why(on: bool, setting: Literal["auto"] | bool, facts: Facts, key: str) -> str:
    if setting != "auto":
        return f"{key} = {json.dumps(setting)}, so CUDA is {'on' if on else 'off'}"
    torch, nvcc = _torch_text(facts), _nvcc_text(facts)
    if on:
        return f"{torch} and {nvcc}, so CUDA is on"
    if facts.torch_cuda is None and facts.nvcc()[0]:
        return f"{torch}, so CUDA is off although {nvcc}"
    joint = "but" if facts.torch_cuda else "and"
    return f"{torch} {joint} {nvcc}, so CUDA is off"


def _version_fails(spec: str, version: str | None, what: str, missing: str) -> str | None:
    if version is None:
        return f"{what} = {json.dumps(spec)} does not hold ({missing})"
    try:
        public = Version(version).public
    except InvalidVersion:
        return f"{what} = {json.dumps(spec)} does not hold ({what} version {version!r} unknown)"
    if SpecifierSet(spec).contains(public, prereleases=True):
        return None
    return f"{what} = {json.dumps(spec)} does not hold ({what} {public})"


def _shown(value: str | None) -> str:
    return "unset" if value is None else json.dumps(value)


def _env_test_fails(name: str, test: EnvTest, actual: str | None) -> str | None:
    label, shown = key_path("env", name), quote_key(name)
    if test.unset is not None and (actual is None) != test.unset:
        state = "set" if actual is not None else "unset"
        return f"{label} = {{unset = {json.dumps(test.unset)}}} does not hold ({shown} is {state})"
    excluded = [test.not_] if isinstance(test.not_, str) else test.not_ or []
    if actual is not None and actual in excluded:
        wanted = json.dumps(test.not_, ensure_ascii=False)
        return f"{label} = {{not = {wanted}}} does not hold ({shown} is {_shown(actual)})"
    return None


def _env_fails(name: str, wanted: bool | str | EnvTest, facts: Facts) -> str | None:
    actual = facts.env.get(name)
    if isinstance(wanted, EnvTest):
        return _env_test_fails(name, wanted, actual)
    label, shown = f"{key_path('env', name)} = {json.dumps(wanted)}", quote_key(name)
    if isinstance(wanted, bool):
        if bool(actual) == wanted:
            return None
        return f"{label} does not hold ({shown} is {'unset or empty' if not actual else 'set'})"
    if actual == wanted:
        return None
    return f"{label} does not hold ({shown} is {_shown(actual)})"


def _torch_cuda_fails(wanted: bool | str, facts: Facts) -> str | None:
    if isinstance(wanted, str):
        missing = _torch_text(facts)
        return _version_fails(wanted, facts.torch_cuda, "torch-cuda", missing)
    if (facts.torch_cuda is not None) == wanted:
        return None
    return f"torch-cuda = {json.dumps(wanted)} does not hold ({_torch_text(facts)})"


def condition_failure(condition: Condition, facts: Facts, cuda: CudaState) -> str | None:
    """None when every given field holds, else a one-line reason naming the first that fails."""
    for name, wanted in (condition.env or {}).items():
        problem = _env_fails(name, wanted, facts)
        if problem:
            return problem
    if condition.cuda is not None and condition.cuda != cuda.on:
        return f"cuda = {json.dumps(condition.cuda)} does not hold ({cuda.why})"
    if condition.torch_cuda is not None:
        problem = _torch_cuda_fails(condition.torch_cuda, facts)
        if problem:
            return problem
    if condition.platform is not None and not fnmatch.fnmatchcase(
        facts.platform, condition.platform
    ):
        return f"platform = {json.dumps(condition.platform)} does not match {facts.platform!r}"
    if condition.platform_machine is not None and not fnmatch.fnmatchcase(
        facts.machine, condition.platform_machine
    ):
        return (
            f"platform-machine = {json.dumps(condition.platform_machine)} does not match"
            f" {facts.machine!r}"
        )
    if condition.torch is not None:
        problem = _version_fails(condition.torch, facts.torch_version, "torch", "torch not found")
        if problem:
            return problem
    if condition.python is not None:
        return _version_fails(condition.python, facts.python_version, "python", "python not found")
    return None

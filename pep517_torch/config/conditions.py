"""Evaluating `if` tables (extension conditions and override conditions) against Facts."""

from __future__ import annotations

import fnmatch
import json
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from .model import Condition
from .resolved import Facts


def cuda_enabled(setting: Literal["auto"] | bool, facts: Facts) -> bool:
    """`cuda = "auto"` means: torch is a CUDA build and nvcc is there to compile with."""
    if setting == "auto":
        return facts.torch_cuda is not None and facts.nvcc_available
    return bool(setting)


def _version_fails(spec: str, version: str | None, what: str) -> str | None:
    if version is None:
        return f"{what} = {json.dumps(spec)} does not hold ({what} not found)"
    try:
        public = Version(version).public
    except InvalidVersion:
        return f"{what} = {json.dumps(spec)} does not hold ({what} version {version!r} unknown)"
    if SpecifierSet(spec).contains(public, prereleases=True):
        return None
    return f"{what} = {json.dumps(spec)} does not hold ({what} {public})"


def _env_fails(name: str, wanted: bool | str, facts: Facts) -> str | None:
    actual = facts.env.get(name)
    label = f"env.{name} = {json.dumps(wanted)}"
    if isinstance(wanted, bool):
        if bool(actual) == wanted:
            return None
        return f"{label} does not hold ({name} is {'unset or empty' if not actual else 'set'})"
    if actual == wanted:
        return None
    shown = "unset" if actual is None else f"{json.dumps(actual)}"
    return f"{label} does not hold ({name} is {shown})"


def condition_failure(condition: Condition, facts: Facts, cuda_on: bool) -> str | None:
    """None when every given field holds, else a one-line reason naming the first that fails."""
    for name, wanted in (condition.env or {}).items():
        problem = _env_fails(name, wanted, facts)
        if problem:
            return problem
    if condition.cuda is not None and condition.cuda != cuda_on:
        state = "enabled" if cuda_on else "disabled"
        return f"cuda = {json.dumps(condition.cuda)} does not hold (CUDA is {state})"
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
        problem = _version_fails(condition.torch, facts.torch_version, "torch")
        if problem:
            return problem
    if condition.python is not None:
        return _version_fails(condition.python, facts.python_version, "python")
    return None

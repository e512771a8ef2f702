"""Resolving a `[tool.torch-ext]` table in a test, with no pyproject.toml on disk.

``resolve`` is the config layer's whole input (project table, tool table, -C settings, machine
facts) in one call; ``resolve_error`` is the ConfigError it must raise. The facts default to this
machine with an empty environment; ``LINUX_CPU`` and ``LINUX_CUDA`` are fixed machines, for
tests whose outcome would otherwise depend on where they run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config import Facts, ResolvedProject, resolve_project
from pep517_torch.errors import ConfigError

# The build-dir placeholders a build fills in.
VARS = {"wheel_tag": "cp311-cp311-linux_x86_64", "python_tag": "cp311", "torch_version": "2.13.0"}
PROJECT = {"name": "demo", "version": "1"}
THIS_MACHINE = Facts(env={})
LINUX_CPU = Facts(
    env={}, platform="linux", machine="x86_64", python_version="3.11.4",
    torch_version="2.13.0+cpu", torch_cuda=None, nvcc_available=False,
)
LINUX_CUDA = dataclasses.replace(
    LINUX_CPU, torch_version="2.13.0+cu130", torch_cuda="13.0", nvcc_available=True
)


def resolve(
    root: Path,
    tool: Mapping[str, Any],
    config_settings: Mapping[str, Any] | None = None,
    *,
    project: Mapping[str, Any] = PROJECT,
    facts: Facts = THIS_MACHINE,
    **changed_facts: Any,
) -> ResolvedProject:
    """Resolve ``tool`` as `[tool.torch-ext]` of a project at ``root``; ``changed_facts``
    (``env=``, ``torch_cuda=``, ...) replace those fields of ``facts``."""
    pyproject = {"project": dict(project), "tool": {"torch-ext": tool}}
    facts = dataclasses.replace(facts, **changed_facts)
    return resolve_project(root, pyproject, config_settings, facts, VARS)


def resolve_error(
    root: Path,
    tool: Mapping[str, Any],
    config_settings: Mapping[str, Any] | None = None,
    *,
    match: str,
    **kwargs: Any,
) -> ConfigError:
    """The ConfigError that resolving ``tool`` raises, whose message ``match`` (a regex) finds."""
    with pytest.raises(ConfigError, match=match) as caught:
        resolve(root, tool, config_settings, **kwargs)
    return caught.value

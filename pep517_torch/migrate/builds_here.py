"""Would the generated tables build on the machine migrate ran on? Checked without compiling.

The tables are loaded as a wheel build here would load them (this environment, this torch,
this nvcc: the config, the metadata and its torch requirement), and the build's own checks
before its first compile run on them (``backend.stages.check_build``, as ``doctor`` runs
them): what the build would then refuse is reported instead of written silently.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ..errors import Pep517TorchError


@dataclass(frozen=True)
class BuildHere:
    """What a build of the tables here would do, before compiling."""

    problems: list[str]  # what it fails with, in its own words (empty: nothing)
    torch_requirements: list[str] | None  # the torch lines of the wheel's Requires-Dist


def build_here(document: Mapping[str, Any], root: Path) -> BuildHere:
    """Load ``document`` (a parsed pyproject.toml) as a build here would, and run the checks
    that build makes before compiling (every extension skipped, tools, nvcc, flags, arch lists,
    torch's CUDA headers): the first error, and the torch requirement the wheel would carry."""
    from ..backend import stages
    from ..backend.discovery import torch_or_none

    if torch_or_none() is None:
        return BuildHere([], None)  # installing torch is the build frontend's job
    try:
        loaded = stages.load(root, None, os.environ, document=document)
    except Pep517TorchError as exc:
        return BuildHere([str(exc)], None)
    carried = [str(r) for r in loaded.metadata.standard.dependencies
               if canonicalize_name(r.name) == "torch"]
    try:
        stages.check_build(loaded)
    except Pep517TorchError as exc:
        return BuildHere([str(exc)], carried)
    return BuildHere([], carried)


def validation_problems(text: str, root: Path) -> list[str]:
    """What the backend's own validation says of ``text``, the pyproject.toml as migrate
    writes it: the config resolved and the metadata made as for an sdist (PEP 621, PEP 639;
    no torch needed), so no mistake of the generated tables goes unsaid."""
    from ..backend.stages import source_metadata
    from ..config.pyproject import tomllib

    try:
        source_metadata(root, None, os.environ, tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        return [f"invalid TOML: {exc}"]
    except Pep517TorchError as exc:
        return [str(exc)]
    return []


def build_problems_here(document: Mapping[str, Any], root: Path) -> list[str]:
    """The one line a build of ``document`` here fails with, or nothing."""
    return build_here(document, root).problems

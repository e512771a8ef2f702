"""Would the generated tables build on the machine migrate ran on? Checked without compiling.

The tables are loaded as a wheel build here would load them (this environment, this torch,
this nvcc: the config, the metadata and its torch requirement), and the build's own checks
before its first compile run on them (``backend.stages.check_build``, as ``doctor`` runs
them): what the build would then refuse is reported instead of written silently.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import Pep517TorchError


def build_problems_here(document: Mapping[str, Any], root: Path) -> list[str]:
    """What a build of ``document`` (a parsed pyproject.toml) here fails with, in the build's
    own words (one line), or nothing: the first error of loading it or of the checks a build
    makes before compiling (every extension skipped, tools, nvcc, flags, arch lists, torch's
    CUDA headers)."""
    from ..backend import stages
    from ..backend.discovery import torch_or_none

    if torch_or_none() is None:
        return []  # installing torch is the build frontend's job, not the tables'
    try:
        stages.check_build(stages.load(root, None, os.environ, document=document))
    except Pep517TorchError as exc:
        return [str(exc)]
    return []

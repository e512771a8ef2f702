"""Would the generated tables build on the machine migrate ran on? Checked without compiling.

The tables are resolved as a wheel build here would resolve them (this environment, this
torch, this nvcc), and the compile core's own pre-compile checks run on them
(``core.plan.check``, as ``doctor`` does); what the build would then refuse is reported
instead of written silently.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import Pep517TorchError


def build_problems_here(document: Mapping[str, Any], root: Path) -> list[str]:
    """One line per reason a build of ``document`` (a parsed pyproject.toml) fails here: the
    config's error, else each extension's first failing pre-compile check of the compile core
    (the checks a build makes: tools, nvcc, flags, arch lists, torch's CUDA headers)."""
    from ..core import plan as core_plan
    from ..backend.discovery import resolve_document

    try:
        resolved, torch = resolve_document(root, document, os.environ)
    except Pep517TorchError as exc:
        return [str(exc)]
    if torch is None:
        return []  # installing torch is the build frontend's job, not the tables'
    problems: list[str] = []
    for spec in resolved.extensions:
        try:
            core_plan.check([spec], resolved.options)
        except Pep517TorchError as exc:
            problems.append(f"{spec.name}: {exc}")
    return problems

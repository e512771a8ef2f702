"""Would the generated tables build on the machine migrate ran on? Checked without compiling.

The tables are resolved as a wheel build here would resolve them (this environment, this
torch, this nvcc); what the build would then refuse is reported instead of written silently.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import Pep517TorchError


def _shown(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def build_problems_here(document: Mapping[str, Any], root: Path) -> list[str]:
    """One line per reason a build of ``document`` (a parsed pyproject.toml) fails here."""
    from ..core import cuda, scan
    from ..project import resolve_document

    try:
        resolved, torch = resolve_document(root, document, os.environ)
    except Pep517TorchError as exc:
        return [str(exc)]
    problems: list[str] = []
    nvcc_found = cuda.find_cuda(os.environ) is not None
    for spec in resolved.extensions:
        if spec.uses_cuda and not nvcc_found:
            problems.append(f"{spec.name} is compiled with CUDA, and no nvcc is found here")
        if torch is None or torch.has_cuda_runtime:
            continue
        offending = scan.torch_cuda_includes(scan.walk_includes(spec.sources, spec.include_dirs))
        if offending:
            first = offending[0]
            problems.append(
                f"{spec.name}: {_shown(first.file, root)}:{first.line} includes"
                f" <{first.header}>, which torch {torch.version} (a CPU build) lacks"
            )
    return problems

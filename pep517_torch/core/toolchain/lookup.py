"""Cheap names for tools: no subprocess, no stat beyond PATH's. Used by the JIT's warm path.
(A tool's identity, what changes when it does, is the record's: shipped_runtime/build_inputs.py.)"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping


def which(name: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH", os.defpath))


def torch_flavour(cuda: str | None, hip: str | None) -> str:
    """``cpu``, ``cu130``, ``rocm64``: torch's own name for a build, as in its JIT cache folder."""
    if hip:
        return f"rocm{hip.replace('.', '')}"
    return f"cu{cuda.replace('.', '')}" if cuda else "cpu"

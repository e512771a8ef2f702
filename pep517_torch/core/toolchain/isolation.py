"""Whether torch comes from a frontend's throwaway build environment, and what to tell the user.

An isolated build (pip's, build's or uv's default) installs ``requires`` into a temporary
environment: the extensions then compile against that torch, which may differ from the one
the user runs with and is deleted after the build.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ...shipped_runtime.environment import VIRTUAL_ENV
from .tools import TorchInstall, find_torch

ISOLATED_ENV_MARKERS = ("pip-build-env-", "build-env-", "builds-v0")  # pip, build, uv
BUILD_DIR_SUFFIX = "-isolated"  # appended to {torch_version}: never the normal build's folder


def is_isolated(torch: TorchInstall) -> bool:
    """Whether ``torch`` is installed in a frontend's throwaway build environment."""
    return any(part.startswith(ISOLATED_ENV_MARKERS) for part in torch.root.parts)


def isolation_note(torch: TorchInstall, env: Mapping[str, str]) -> str | None:
    """The note an isolated build prints, a warning when the caller's environment (``env``:
    the frontend's own, where ``VIRTUAL_ENV`` names the user's virtualenv) holds another torch."""
    if not is_isolated(torch):
        return None
    note = (
        f"building against torch {torch.version} from an isolated build environment; the wheel"
        " will require it. To build against the torch you run with, use --no-build-isolation"
        " (or `python -m pep517_torch wheel`)"
    )
    venv = env.get(VIRTUAL_ENV)
    if venv:
        for candidate in sorted(Path(venv).glob("lib/python*/site-packages/torch/version.py")):
            installed = find_torch(candidate.parent).version
            if installed.split("+")[0] != torch.version.split("+")[0]:
                return f"WARNING: your environment {venv} has torch {installed}, but " + note
    return note

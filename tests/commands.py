"""Running a command from a test: its output captured as text, the environment given as changes
to this process's, a failure (with ``check``) an AssertionError that shows what it said."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path


def run(
    *args: str | Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    unset: Collection[str] = (),
    check: bool = True,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` with ``env`` laid over this process's environment, less ``unset``."""
    command = [str(arg) for arg in args]
    base = {name: value for name, value in os.environ.items() if name not in unset}
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            env={**base, **(env or {})})
    if check and result.returncode != 0:
        said = f"{result.stdout}\n{result.stderr}"
        raise AssertionError(f"{command} failed ({result.returncode}):\n{said}")
    return result


def run_python(
    code: str,
    *,
    python: str | Path = sys.executable,
    options: Sequence[str] = (),
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (this environment's unless ``python`` names another),
    started with ``options`` (``-S``, say)."""
    return run(python, *options, "-c", code, cwd=cwd, env=env, check=check, timeout=timeout)


def run_cli(
    *args: str | Path, cwd: Path | None = None, env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``python -m pep517_torch ARGS``, unchecked: the tests read its exit status and words."""
    return run(sys.executable, "-m", "pep517_torch", *args, cwd=cwd, env=env, check=False,
               timeout=timeout)

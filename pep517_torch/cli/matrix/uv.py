"""uv, as the matrix runs it: found once (the `uv` package of this environment, else `uv` on
PATH), run with the user's own uv settings (``UV_CACHE_DIR``, ``UV_DEFAULT_INDEX``,
``UV_OFFLINE``, uv.toml...), its failures said in one line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import ConfigError

MINIMUM = (0, 5)  # `uv pip install --index`, `uv venv --python` finding or fetching a Python
INSTALL_HINT = 'pip install "pep517_torch[matrix]" (or uv itself: https://docs.astral.sh/uv/)'


@dataclass(frozen=True)
class Uv:
    executable: str
    version: str

    def run(self, arguments: Sequence[str | Path], env: Mapping[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        """uv with ``arguments``, its output captured (never raising for an exit status)."""
        return subprocess.run([self.executable, *map(str, arguments)], capture_output=True,
                              text=True, env=None if env is None else dict(env),
                              stdin=subprocess.DEVNULL)

    def index_options(self, index: str, find_links: Sequence[str]) -> list[str]:
        """Where a cell's packages come from: its torch index first (uv asks it before the
        default index, and takes torch from it alone), then the default index; find-links."""
        return ["--index", index, *[f"--find-links={link}" for link in find_links]]


def _bundled() -> str | None:
    """The uv binary of the `uv` package installed beside pep517_torch, if any."""
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return str(find_uv_bin())
    except (FileNotFoundError, OSError):
        return None


def find_uv(env: Mapping[str, str]) -> Uv:
    """The uv to make environments with; a ConfigError naming how to get one."""
    beside = Path(sys.executable).parent / "uv"  # this environment's, its bin/ not on PATH
    found = _bundled() or (str(beside) if beside.is_file() else None) or shutil.which(
        "uv", path=env.get("PATH"))
    if found is None:
        raise ConfigError(f"the matrix makes its environments with uv, which is not installed:"
                          f" {INSTALL_HINT}", "matrix")
    try:
        said = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        said = ""
    match = re.match(r"uv (\d+)\.(\d+)(\.\d+)?", said)
    if match is None:
        raise ConfigError(f"{found} does not run as uv: {INSTALL_HINT}", "matrix")
    if (int(match[1]), int(match[2])) < MINIMUM:
        raise ConfigError(f"{found} is uv {match[0][3:]}; the matrix needs uv"
                          f" {'.'.join(map(str, MINIMUM))} or newer: {INSTALL_HINT}", "matrix")
    return Uv(found, match[0][3:])


def uv_problem(done: subprocess.CompletedProcess[str]) -> str:
    """What uv said went wrong, in one line: its error and the first cause, hints left out
    (uv wraps a long message onto the lines after it: they are joined)."""
    lines = [line.strip() for line in (done.stderr or done.stdout or "").splitlines()]
    error, cause = _block(lines, "error:"), _block(lines, "cause:")
    if error is None:
        error = next((line for line in reversed(lines) if line), f"exit status {done.returncode}")
    return f"{error}: {cause}" if cause else error


def _block(lines: list[str], label: str) -> str | None:
    """The first ``label`` line and the lines that continue it, as one line."""
    start = next((at for at, line in enumerate(lines) if line.startswith(label)), None)
    if start is None:
        return None
    block = [lines[start][len(label):].strip()]
    for line in lines[start + 1:]:
        if not line or line.startswith(("hint:", "error:", "cause:", "[stderr]")):
            break
        block.append(line)
    return " ".join(block)


def without_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` less what would make uv or Python act on another environment than the one named."""
    return {key: value for key, value in env.items()
            if key not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "UV_PYTHON",
                           "UV_PROJECT_ENVIRONMENT")}


def on_path(folder: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The environment of a command run inside the virtual environment at ``folder``."""
    return {**without_environment(env), "VIRTUAL_ENV": str(folder),
            "PATH": os.pathsep.join([str(folder / "bin"), *filter(None, [env.get("PATH")])])}

"""The environments of a matrix cell, made by uv.

A cell's build environment (that Python, that torch from the flavour's index, the project's
other build requirements) is kept between runs in the user's cache,
``<cache>/matrix-envs/<cell id>`` (``PEP517_TORCH_CACHE_DIR``, else
``$XDG_CACHE_HOME/pep517_torch``), one per (Python, torch, flavour), and reused when it still
holds what it was made with: its Python answers, torch imports and is the cell's release and
flavour. A damaged one (half made, its Python gone, torch broken or another torch) is made
again, said in one line; one unused for ``UNUSED_DAYS`` is removed at the next run. uv
installs by hard links into its own cache where the two share a file system, so an
environment costs little beyond uv's cache (``uv cache dir``; ``uv cache prune`` trims it).

A cell's test environment is made fresh for each run (its torch the exact one the build
environment holds, and the matrix's ``test-requires``), before anything compiles, and removed
at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config.matrix import Matrix, MatrixCell
from ...errors import ConfigError
from ...shipped_runtime.environment import cache_root
from ...shipped_runtime.lock import FileLock
from ...shipped_runtime.user_line import say
from ...shipped_runtime.state_file import Map, read_json
from .uv import Uv, uv_problem, without_environment

ROOT_NAME = "matrix-envs"
STAMP = ".pep517_torch-matrix.json"  # written last: an environment without it was never finished
UNUSED_DAYS = 30
TESTS_PREFIX = ".tests-"
# torch.__version__ names the build ("2.14.1+cu130"); its distribution's version is what an
# index lists and a requirement pins ("2.14.1" on PyPI, "2.14.1+cu130" on PyTorch's index)
_INSPECT = (
    "import json, platform, sys\nfrom importlib import metadata\nimport torch\n"
    "print(json.dumps({'python': '%d.%d' % sys.version_info[:2], 'full': platform.python_version(),"
    " 'torch': torch.__version__, 'dist': metadata.version('torch'), 'cuda': torch.version.cuda}))"
)


@dataclass(frozen=True)
class CellEnv:
    """A cell's build environment, checked."""

    cell: MatrixCell
    folder: Path
    python: Path
    python_version: str  # "3.11.7"
    torch: str  # torch.__version__, "2.13.0+cpu"
    cuda: str | None  # torch.version.cuda
    distribution: str  # the version its index lists, "2.14.1" for PyPI's 2.14.1+cu130

    @property
    def pin(self) -> str:
        return f"torch=={self.distribution}"


def envs_root(env: Mapping[str, str]) -> Path:
    return cache_root(env) / ROOT_NAME


def _flavour(cuda: str | None) -> str:
    return "a CPU build" if cuda is None else f"a CUDA {cuda} build"


def _inspect(folder: Path, cell: MatrixCell, env: Mapping[str, str]) -> tuple[dict[str, Any] | None, str]:
    """What the environment at ``folder`` holds, or None and why it cannot serve ``cell``."""
    python = folder / "bin" / "python"
    if not python.exists():
        return None, f"its Python is gone ({python})"
    try:
        done = subprocess.run([str(python), "-c", _INSPECT], capture_output=True, text=True,
                              cwd=folder, env=without_environment(env), timeout=600,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"its Python does not run: {error}"
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        return None, f"torch cannot be imported there: {said[-1] if said else done.returncode}"
    try:
        answer = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return None, "its Python does not answer"
    if answer["python"] != cell.python:
        return None, f"it holds Python {answer['full']}, not {cell.python}"
    if not cell.holds(answer["torch"], answer["cuda"]):
        return None, (f"it holds torch {answer['torch']}, {_flavour(answer['cuda'])}, not"
                      f" {cell.requirement} for {cell.cuda}")
    return answer, ""


def _remove(folder: Path) -> None:
    try:
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)
    except OSError as error:
        raise ConfigError(f"cannot remove {folder}: {error.strerror or error}", "matrix") from None


def _make(uv: Uv, matrix: Matrix, cell: MatrixCell, folder: Path,
          env: Mapping[str, str]) -> dict[str, Any]:
    say(f"{cell.id}: making its environment {folder} (Python {cell.python}, {cell.requirement}"
        f" from {cell.index})", sys.stdout)
    plain = without_environment(env)
    done = uv.run(["venv", "--quiet", "--python", cell.python, folder], plain)
    if done.returncode != 0:
        _remove(folder)
        raise ConfigError(f"{cell.id}: uv cannot get Python {cell.python}: {uv_problem(done)}",
                          "matrix")
    done = uv.run(["pip", "install", "--quiet", "--python", folder / "bin" / "python",
                   *uv.index_options(cell.index, matrix.find_links), cell.requirement], plain)
    if done.returncode != 0:
        _remove(folder)
        raise ConfigError(f"{cell.id}: cannot install {cell.requirement} from {cell.index}:"
                          f" {uv_problem(done)}", "matrix")
    answer, problem = _inspect(folder, cell, env)
    if answer is None:
        _remove(folder)
        raise ConfigError(f"{cell.id}: {cell.requirement} from {cell.index}: {problem}", "matrix")
    stamp = {"cell": cell.id, "torch": answer["torch"], "cuda": answer["cuda"],
             "index": cell.index, "made": time.time()}
    (folder / STAMP).write_text(json.dumps(stamp) + "\n")
    return answer


def build_env(uv: Uv, matrix: Matrix, cell: MatrixCell, env: Mapping[str, str]) -> CellEnv:
    """The cell's build environment: the cached one when it still serves, else made (again).
    A ConfigError, one line naming the cell (and the index), when uv cannot make it."""
    root = envs_root(env)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"cannot make {root}: {error.strerror or error}", "matrix") from None
    folder = root / cell.id
    with FileLock(root / f".{cell.id}.lock"):
        answer = None
        if folder.exists() or folder.is_symlink():
            if not (folder / STAMP).is_file():
                problem = "it was never finished"
            else:
                answer, problem = _inspect(folder, cell, env)
            if answer is None:
                say(f"{cell.id}: the environment {folder} is damaged ({problem}): making it again")
                _remove(folder)
        if answer is None:
            answer = _make(uv, matrix, cell, folder, env)
        os.utime(folder / STAMP)  # last used: what UNUSED_DAYS counts from
    return CellEnv(cell, folder, folder / "bin" / "python", answer["full"], answer["torch"],
                   answer["cuda"], answer["dist"])


def add_requirements(uv: Uv, matrix: Matrix, built: CellEnv, requirements: Sequence[str],
                     env: Mapping[str, str]) -> None:
    """Install ``requirements`` (the project's other build requirements) into the build
    environment, its torch kept; a ConfigError naming the cell when uv cannot."""
    if not requirements:
        return
    done = uv.run(["pip", "install", "--quiet", "--python", built.python,
                   *uv.index_options(built.cell.index, matrix.find_links), built.pin,
                   *requirements], without_environment(env))
    if done.returncode != 0:
        raise ConfigError(f"{built.cell.id}: cannot install the build requirements"
                          f" {', '.join(requirements)} there: {uv_problem(done)}", "matrix")


def test_env(uv: Uv, matrix: Matrix, built: CellEnv, base: Path, env: Mapping[str, str]) -> Path:
    """A fresh environment under ``base`` for the cell's test: the torch its wheel was built
    against and the test requirements; a ConfigError naming the cell and the index."""
    cell, folder = built.cell, base / built.cell.id
    plain = without_environment(env)
    done = uv.run(["venv", "--quiet", "--python", built.python, folder], plain)
    if done.returncode == 0:
        done = uv.run(["pip", "install", "--quiet", "--python", folder / "bin" / "python",
                       *uv.index_options(cell.index, matrix.find_links), built.pin,
                       *matrix.test_requires], plain)
    if done.returncode != 0:
        wanted = ", ".join([built.pin, *matrix.test_requires])
        raise ConfigError(f"{cell.id}: cannot make its test environment ({wanted}) from"
                          f" {cell.index}: {uv_problem(done)}", "matrix")
    return folder


def install_wheel(uv: Uv, matrix: Matrix, built: CellEnv, folder: Path, wheel: Path,
                  env: Mapping[str, str]) -> str | None:
    """Install ``wheel`` (and what it requires) into the test environment ``folder``, its torch
    kept; None, or what uv said went wrong."""
    done = uv.run(["pip", "install", "--quiet", "--python", folder / "bin" / "python",
                   *uv.index_options(built.cell.index, matrix.find_links), str(wheel), built.pin],
                  without_environment(env))
    return None if done.returncode == 0 else uv_problem(done)


def test_base(env: Mapping[str, str]) -> Path:
    """A new folder for this run's test environments, beside the build environments (one file
    system: uv links its files there); the run removes it, the next ones a forgotten one."""
    root = envs_root(env)
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=TESTS_PREFIX, dir=root))


def forget_unused(env: Mapping[str, str], days: float = UNUSED_DAYS) -> None:
    """Remove the cells' environments no run has used for ``days`` (none in use now), and the
    test environments of runs that ended a day ago without removing them."""
    root = envs_root(env)
    if not root.is_dir():
        return
    for left in root.glob(f"{TESTS_PREFIX}*"):
        try:
            if time.time() - left.stat().st_mtime > 86400:
                shutil.rmtree(left, ignore_errors=True)
        except OSError:
            continue
    for stamp in root.glob(f"*/{STAMP}"):
        try:
            unused = time.time() - stamp.stat().st_mtime
        except OSError:
            continue
        if unused < days * 86400:
            continue
        lock = FileLock(root / f".{stamp.parent.name}.lock")
        if lock.acquire(wait=0):
            try:
                _remove(stamp.parent)
                say(f"removed {stamp.parent}: no matrix run used it for {unused / 86400:.0f} days",
                    sys.stdout)
            except ConfigError:
                pass
            finally:
                lock.release()


def cached_envs(env: Mapping[str, str]) -> list[tuple[Path, dict[str, Any]]]:
    """The cells' build environments in the cache, each with what it was made with."""
    found = []
    for stamp in sorted(envs_root(env).glob(f"*/{STAMP}")):
        try:  # read as untrusted input (state_file.py): shown sanitised, never a hang
            made = read_json(stamp, 64 << 10, Map(object)) or {}
            found.append((stamp.parent, {**made, "used": stamp.stat().st_mtime}))
        except (OSError, ValueError):
            found.append((stamp.parent, {}))
    return found


def clear_envs(env: Mapping[str, str]) -> tuple[int, int]:
    """Remove every cell's build environment no run holds now: (removed, in use)."""
    removed = busy = 0
    root = envs_root(env)
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if folder.name.startswith(TESTS_PREFIX):
            continue
        lock = FileLock(root / f".{folder.name}.lock")
        if not lock.acquire(wait=0):
            busy += 1
            continue
        try:
            _remove(folder)
            removed += 1
        finally:
            lock.release()
    return removed, busy

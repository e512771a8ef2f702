"""A cell's wheel tested where it will run: installed (with what it requires, its torch kept)
into the cell's fresh test environment, then `test-command` run by the shell there, from an
empty temporary folder, with that environment first on PATH and nothing of the caller's
PYTHONPATH. ``checkout_guard.py`` rides along: a module of the wheel's packages imported from
the project's folder instead fails the cell too."""

from __future__ import annotations

import collections
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...config.matrix import Matrix
from ...shipped_runtime.user_line import say
from . import checkout_guard
from .environments import CellEnv, install_wheel
from .uv import Uv, on_path

TAIL_LINES = 25
GUARD = "_pep517_torch_checkout_guard"
PYTEST_HINT = ("a tests/__init__.py makes pytest put the project's folder first on sys.path: run"
               " pytest with --import-mode=importlib, or keep tests/ without __init__.py")


@dataclass(frozen=True)
class Tested:
    outcome: str  # "passed", "FAILED", "installed" (no test-command)
    seconds: float
    problem: str | None = None  # what failed, in one line
    tail: tuple[str, ...] = ()  # the last lines of the test's output


def top_level_names(wheel: Path) -> list[str]:
    """The importable top-level names a wheel ships (packages, modules, extensions)."""
    names = set()
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            top = member.split("/")[0]
            if top.endswith((".dist-info", ".data")) or not top:
                continue
            names.add(top.split(".")[0])
    return sorted(names)


def _site_packages(folder: Path) -> Path:
    return next((folder / "lib").glob("python*/site-packages"))


def _install_guard(folder: Path) -> None:
    site = _site_packages(folder)
    (site / f"{GUARD}.py").write_text(Path(checkout_guard.__file__).read_text(encoding="utf-8"),
                                      encoding="utf-8")
    (site / f"{GUARD}.pth").write_text(f"import {GUARD}\n", encoding="utf-8")


def run_test(uv: Uv, matrix: Matrix, built: CellEnv, folder: Path, wheel: Path,
              env: Mapping[str, str]) -> Tested:
    """Install ``wheel`` into the test environment ``folder`` and run the test command there."""
    cell = built.cell
    started = time.perf_counter()
    problem = install_wheel(uv, matrix, built, folder, wheel, env)
    if problem is not None:
        return Tested("FAILED", time.perf_counter() - started,
                          f"{cell.id}: {wheel.name} does not install beside {built.pin}: {problem}")
    if matrix.test_command is None:
        say(f"{cell.id}: {wheel.name} installs beside {built.pin} (no test-command to run)",
            sys.stdout)
        return Tested("installed", time.perf_counter() - started)
    _install_guard(folder)
    report = folder / "checkout-imports.txt"
    report.unlink(missing_ok=True)
    line = matrix.test_line(wheel)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    with tempfile.TemporaryDirectory(prefix=f"pep517_torch-test-{cell.id}-") as cwd:
        variables = {**on_path(folder, env), checkout_guard.REPORT: str(report),
                     checkout_guard.PROJECT: str(matrix.root),
                     checkout_guard.PACKAGES: ",".join(top_level_names(wheel))}
        say(f"{cell.id}: testing {wheel.name} in {folder}, from {cwd}: {line}", sys.stdout)
        with subprocess.Popen(line, shell=True, cwd=cwd, env=variables, text=True, bufsize=1,
                              errors="replace", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL) as child:
            assert child.stdout is not None
            for output in child.stdout:
                print(output, end="", flush=True)
                tail.append(output.rstrip("\n"))
    seconds = time.perf_counter() - started
    imported = report.read_text(encoding="utf-8").splitlines() if report.is_file() else []
    if child.returncode != 0:
        return Tested("FAILED", seconds, f"{cell.id}: the test command failed (exit status"
                          f" {child.returncode}): {line}", tuple(tail))
    if imported:
        more = f" (and {len(imported) - 1} more)" if len(imported) > 1 else ""
        return Tested("FAILED", seconds, f"{cell.id}: the test imported {imported[0]}{more},"
                          f" the project's folder, not the wheel: {PYTEST_HINT}", tuple(tail))
    return Tested("passed", seconds)

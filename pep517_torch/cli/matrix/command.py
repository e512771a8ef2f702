"""``python -m pep517_torch matrix [PATH] [-o DIR] [--only ID]... [--list [--json]]``: the cells
`[tool.torch-ext.matrix]` declares, each built and tested, then one table and `index`.

Before anything compiles, every cell gets its build environment (``environments.py``: made by
uv, or the cached one), is probed and asked the name of its wheel (``interpreters.py``), and
gets a fresh test environment; any that cannot is one line naming it, and nothing compiles.
Then cell by cell: the wheel is built in its environment, tested in its test environment
(``cell_test.py``) and, having passed (or its test skipped), moved into DIR. A cell that fails
does not stop the others; the run then exits 1, naming each failure with its output's tail.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...config.matrix import Matrix, MatrixCell, read_matrix
from ...config.pyproject import read_pyproject
from ...errors import ConfigError
from ...shipped_runtime.user_line import error_line, print_line, say
from .cell_test import Tested, run_test
from .environments import CellEnv, add_requirements, build_env, forget_unused, test_base, test_env
from .interpreters import (Interpreter, build_with, columns, duplicates, name_all, place, probe)
from .staging import staged_paths
from .uv import Uv, find_uv

KEY = "matrix"
OWN_NAMES = frozenset({"torch", "pep517-torch"})  # the cell's torch, and this pep517_torch


@dataclass
class CellRun:
    """What became of one cell in this run."""

    cell: MatrixCell
    built: CellEnv
    interpreter: Interpreter
    test_folder: Path | None = None  # None: its test is skipped
    wheel: str | None = None
    build_seconds: float | None = None
    tested: Tested | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.wheel is None or (self.tested is not None and self.tested.outcome == "FAILED")

    def row(self) -> tuple[str, ...]:
        test = ("skipped" if self.test_folder is None and self.wheel else
                self.tested.outcome if self.tested else "not run")
        return (self.cell.id, self.built.torch, self.built.cuda or "-", self.wheel or "FAILED",
                "-" if self.build_seconds is None else f"{self.build_seconds:.1f}", test,
                f"{self.tested.seconds:.1f}" if self.tested else "-")


def selected(matrix: Matrix, only: Sequence[str]) -> list[MatrixCell]:
    if not only:
        return list(matrix.cells)
    return [matrix.cell(given) for given in dict.fromkeys(only)]


def listing(cells: Sequence[MatrixCell], as_json: bool) -> str:
    """The cells as `--list` prints them: ids, one a line; or GitHub Actions'
    ``strategy.matrix`` object, ``{"include": [{"cell": ..., "python": ..., ...}]}``."""
    if as_json:
        return json.dumps({"include": [cell.github() for cell in cells]})
    return "\n".join(cell.id for cell in cells)


def other_build_requirements(root: Path) -> list[str]:
    """[build-system] requires, less torch (the cell's own) and pep517_torch (this one)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from .. import REQUIRES_KEY, build_system

    wanted = []
    for index, text in enumerate(build_system(root).get("requires", [])):
        try:
            name = canonicalize_name(Requirement(text).name)
        except InvalidRequirement as exc:
            raise ConfigError(f"{text!r} is not a requirement: {str(exc).splitlines()[0]}",
                              f"{REQUIRES_KEY}[{index}]") from None
        if name not in OWN_NAMES:
            wanted.append(text)
    return wanted


def _prepare(uv: Uv, matrix: Matrix, cells: Sequence[MatrixCell], settings: Sequence[str],
             scratch: Path, tests: Path, env: Mapping[str, str]) -> tuple[list[CellRun], list[str]]:
    """Each cell's environments, probe and wheel name, or the lines that say why not."""
    requirements = other_build_requirements(matrix.root)
    problems: list[str] = []
    ready: list[tuple[CellEnv, Interpreter]] = []
    for cell in cells:
        try:
            built = build_env(uv, matrix, cell, env)
            add_requirements(uv, matrix, built,
                             [*requirements, *staged_paths(built.python_version)[1]], env)
            ready.append((built, probe(cell.id, scratch / "staged", str(built.python), KEY)))
        except ConfigError as error:
            problems.append(str(error))
    if problems:
        return [], problems
    named, problems = name_all([interpreter for _, interpreter in ready], matrix.root, settings,
                               KEY)
    problems += [f"{KEY}: {line}" for line in duplicates(named)]
    if problems:
        return [], problems
    runs = [CellRun(built.cell, built, interpreter)
            for (built, _), interpreter in zip(ready, named)]
    for run in runs:
        if not run.cell.test_skipped:
            try:
                run.test_folder = test_env(uv, matrix, run.built, tests, env)
            except ConfigError as error:
                problems.append(str(error))
    return runs, problems


def _build_and_test(run: CellRun, uv: Uv, matrix: Matrix, out: Path, scratch: Path,
                    settings: Sequence[str], written: dict[str, Interpreter],
                    env: Mapping[str, str]) -> None:
    cell = run.cell
    say(f"{cell.id}: building with {run.built.python} (Python {run.built.python_version},"
        f" torch {run.built.torch})", sys.stdout)
    wheel, run.build_seconds = build_with(run.interpreter, matrix.root, scratch, settings)
    if wheel is None:
        run.notes.append(f"{cell.id}: the build failed (its output is above)")
        return
    if run.test_folder is not None:
        run.tested = run_test(uv, matrix, run.built, run.test_folder, wheel, env)
        if run.tested.outcome == "FAILED":
            run.wheel = wheel.name
            run.notes.append(f"{run.tested.problem}")
            run.notes += [f"  | {line}" for line in run.tested.tail]
            run.notes.append(f"{cell.id}: {wheel.name} failed its test: not written to {out}")
            return
    elif matrix.test_command is not None:
        say(f"{cell.id}: test skipped (test-skip)", sys.stdout)
    if place(wheel, run.interpreter, out, written, KEY):
        run.wheel = wheel.name


def table(runs: Sequence[CellRun]) -> str:
    return columns([("cell", "torch", "CUDA", "wheel", "build s", "test", "test s"),
                    *(run.row() for run in runs)])


def run_matrix(root: Path, out: Path, only: Sequence[str], settings: Sequence[str],
               show: bool = False, as_json: bool = False) -> int:
    """The matrix of the project at ``root`` (or the cells ``only`` names): listed when
    ``show``; else built and tested, wheels into ``out``. 0 when every cell passed."""
    from .. import build_system
    from ..index import index_folder

    build_system(root)
    matrix = read_matrix(root, read_pyproject(root))
    cells = selected(matrix, only)
    if show:
        print(listing(cells, as_json), flush=True)
        return 0
    env = dict(os.environ)
    uv = find_uv(env)
    forget_unused(env)
    tests = test_base(env)
    try:
        with tempfile.TemporaryDirectory(prefix="pep517_torch-matrix-") as scratch_name:
            scratch = Path(scratch_name)
            runs, problems = _prepare(uv, matrix, cells, settings, scratch, tests, env)
            if problems:
                for problem in problems:
                    print_line(error_line(problem))
                return 2
            written: dict[str, Interpreter] = {}
            for run in runs:
                _build_and_test(run, uv, matrix, out, scratch, settings, written, env)
    finally:
        shutil.rmtree(tests, ignore_errors=True)
    print(table(runs), flush=True)
    for run in runs:
        for note in run.notes:
            print_line(note if note.startswith("  | ") else error_line(f"{KEY}: {note}"))
    if written:
        index_folder(out)
    return 1 if any(run.failed for run in runs) else 0


def add_matrix_parser(commands: argparse._SubParsersAction, epilog: str) -> None:  # type: ignore[type-arg]
    """The `matrix` command's arguments."""
    matrix = commands.add_parser(
        "matrix", help="build and test the wheels [tool.torch-ext.matrix] declares, each in"
        " environments uv makes; then one table and the index pages",
        description="Build every cell of [tool.torch-ext.matrix] (Python x torch x flavour) in"
        " its own environment, test each wheel in a fresh one, print one table and write the"
        " index pages.", epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    matrix.add_argument("path", nargs="?", default=".", help="project directory (default: .)")
    matrix.add_argument("-o", "--outdir", help="where the wheels and pages go (default:"
                        " PATH/wheelhouse)")
    matrix.add_argument("--only", action="append", default=[], metavar="ID",
                        help="this cell alone (repeat for several), e.g. cp311-torch2.13-cpu")
    matrix.add_argument("--list", action="store_true", help="print the cells' ids and stop")
    matrix.add_argument("--json", action="store_true", help="with --list: GitHub Actions'"
                        " strategy.matrix, {\"include\": [{\"cell\": ..., ...}]}")
    matrix.add_argument(
        "-C", "--config-setting", action="append", default=[], metavar="KEY=VALUE",
        help="a setting for every cell's build, as for wheel; keys below",
    )

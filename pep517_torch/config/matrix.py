"""`[tool.torch-ext.matrix]` → the cells to build and test, each checked against the others.

What the table's model (``matrix_model.py``) cannot check field by field is checked here, with
the same one-line errors naming the key: a value listed twice, two torch releases of which one
holds the other, an `exclude` or `test-skip` entry that matches no cell, a `torch-index` for a
flavour `cuda` does not list, a folder that is not there.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .matrix_model import MatrixSettings
from .parse import index_path, key_path, quote_key
from .pyproject import TOOL_TABLE, parse_settings

MATRIX_TABLE = f"{TOOL_TABLE}.matrix"
PYTORCH_INDEX = "https://download.pytorch.org/whl/{label}"


def flavour_label(flavour: str) -> str:
    """torch's name of a flavour: ``cpu``, ``cu130`` for "13.0"."""
    return flavour if flavour == "cpu" else "cu" + flavour.replace(".", "")


@dataclass(frozen=True)
class MatrixCell:
    """One wheel to build and test: a Python, a torch release and a flavour."""

    id: str  # cp311-torch2.13-cpu
    python: str  # "3.11"
    torch: str  # "2.13" (the newest 2.13.x) or "2.13.0"
    cuda: str  # "cpu" or a CUDA MAJOR.MINOR, "13.0"
    index: str  # where torch comes from: a URL or an absolute folder
    test_skipped: bool  # a test-skip glob matches it

    @property
    def label(self) -> str:
        return flavour_label(self.cuda)

    @property
    def requirement(self) -> str:
        """What uv installs: ``torch==2.13.*`` (or ``torch==2.13.0`` for a full release)."""
        return f"torch=={self.torch}" + (".*" if self.torch.count(".") == 1 else "")

    def holds(self, version: str, cuda: str | None) -> bool:
        """Whether torch ``version`` with ``torch.version.cuda`` ``cuda`` is this cell's."""
        release = version.split("+")[0].split(".")
        wanted = self.torch.split(".")
        flavour = "cpu" if cuda is None else ".".join(cuda.split(".")[:2])
        return release[:len(wanted)] == wanted and flavour == self.cuda

    def github(self) -> dict[str, str]:
        """The cell as an entry of GitHub Actions' ``strategy.matrix.include``."""
        return {"cell": self.id, "python": self.python, "torch": self.torch, "cuda": self.cuda}


@dataclass(frozen=True)
class Matrix:
    root: Path
    cells: tuple[MatrixCell, ...]
    test_requires: tuple[str, ...]
    test_command: str | None
    find_links: tuple[str, ...]  # URLs and absolute folders

    def cell(self, given: str) -> MatrixCell:
        found = next((cell for cell in self.cells if cell.id == given), None)
        if found is None:
            raise ConfigError(f"{given!r} is not a cell of the matrix; its cells:"
                              f" {', '.join(cell.id for cell in self.cells)}", "--only")
        return found

    def test_line(self, wheel: Path) -> str:
        """The test command with its placeholders filled (shell-quoted)."""
        assert self.test_command is not None
        return self.test_command.format(project=shlex.quote(str(self.root)),
                                         wheel=shlex.quote(str(wheel)))


def read_matrix(root: Path, pyproject: Mapping[str, Any]) -> Matrix:
    """The project's matrix; a ConfigError when it declares none or a bad one."""
    settings = parse_settings(pyproject).matrix
    if settings is None:
        raise ConfigError(
            "no matrix is declared: add a [tool.torch-ext.matrix] table (python, torch, cuda;"
            " see docs/publishing.md)", MATRIX_TABLE)
    return declared_matrix(settings, Path(root))


def _location(root: Path, value: str, key: str) -> str:
    """A URL as given; a folder made absolute against the project, which must exist."""
    if "://" in value:
        return value
    path = Path(value).expanduser()
    path = path if path.is_absolute() else root / path
    if not path.is_dir():
        raise ConfigError(f"{value!r}: no such folder ({path}); give a folder or a URL", key)
    return str(path.resolve())


def _no_repeats(values: Sequence[str], key: str) -> None:
    for index, value in enumerate(values):
        if value in values[:index]:
            raise ConfigError(f"{value!r} is listed twice", index_path(key, index))


def _no_overlap(releases: Sequence[str], key: str) -> None:
    for index, release in enumerate(releases):
        for other in releases[:index]:
            short, long = sorted((release, other), key=len)
            if long.split(".")[:short.count(".") + 1] == short.split("."):
                raise ConfigError(f"{release!r} and {other!r} can name the same torch: keep one",
                                  index_path(key, index))


def declared_matrix(settings: MatrixSettings, root: Path) -> Matrix:
    """The cells of ``settings``: Python × torch × flavour in the order given, minus those
    `exclude` matches; each checked (see the module's docstring)."""
    for name in ("python", "torch", "cuda"):
        _no_repeats(getattr(settings, name), key_path(MATRIX_TABLE, name))
    _no_overlap(settings.torch, key_path(MATRIX_TABLE, "torch"))
    indexes = {flavour: PYTORCH_INDEX.format(label=flavour_label(flavour))
               for flavour in settings.cuda}
    for flavour, given in settings.torch_index.items():
        key = key_path(key_path(MATRIX_TABLE, "torch-index"), flavour)
        if flavour not in settings.cuda:
            raise ConfigError(f"names no flavour of cuda ({', '.join(map(quote_key, settings.cuda))})",
                              key)
        indexes[flavour] = _location(root, given, key)
    links = tuple(_location(root, given, index_path(key_path(MATRIX_TABLE, "find-links"), i))
                  for i, given in enumerate(settings.find_links))
    every = [(python, torch, cuda) for python in settings.python for torch in settings.torch
             for cuda in settings.cuda]
    kept = list(every)
    for index, rule in enumerate(settings.exclude):
        wanted = {name: value for name in ("python", "torch", "cuda")
                  if (value := getattr(rule, name)) is not None}
        matched = [values for values in every if all(
            dict(zip(("python", "torch", "cuda"), values))[name] == value
            for name, value in wanted.items())]
        if not matched:
            shown = ", ".join(f"{name} = {json.dumps(value)}" for name, value in wanted.items())
            raise ConfigError(f"{{ {shown} }} matches no cell of the matrix",
                              index_path(key_path(MATRIX_TABLE, "exclude"), index))
        kept = [values for values in kept if values not in matched]
    if not kept:
        raise ConfigError("excludes every cell: nothing is left to build",
                          key_path(MATRIX_TABLE, "exclude"))
    ids = [f"cp{python.replace('.', '')}-torch{torch}-{flavour_label(cuda)}"
           for python, torch, cuda in kept]
    for index, pattern in enumerate(settings.test_skip):
        if not any(fnmatch.fnmatchcase(cell, pattern) for cell in ids):
            raise ConfigError(f"{pattern!r} matches no cell of the matrix ({', '.join(ids)})",
                              index_path(key_path(MATRIX_TABLE, "test-skip"), index))
    cells = tuple(
        MatrixCell(cell, python, torch, cuda, indexes[cuda],
                   test_skipped=any(fnmatch.fnmatchcase(cell, p) for p in settings.test_skip))
        for cell, (python, torch, cuda) in zip(ids, kept))
    return Matrix(Path(root), cells, tuple(settings.test_requires), settings.test_command, links)

"""The `[tool.torch-ext.matrix]` table of the settings model: the cells a publisher builds and
tests (`python -m pep517_torch matrix`). ``matrix.py`` turns it into cells."""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import ClassVar

from .checks import valid_requirement
from .fields import setting

PYTHON_PATTERN = r"^3\.[0-9]+$"
TORCH_PATTERN = r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"
FLAVOUR_PATTERN = r"^(cpu|[0-9]+\.[0-9]+)$"
PYTHON_HELP = 'is not a Python version: write MAJOR.MINOR ("3.11")'
TORCH_HELP = 'is not a torch release: write MAJOR.MINOR ("2.13") or MAJOR.MINOR.PATCH ("2.13.0")'
FLAVOUR_HELP = 'is not a flavour: write "cpu" or a CUDA MAJOR.MINOR ("13.0")'
TEST_PLACEHOLDERS = ("project", "wheel")


def test_command_problem(value: str) -> str | None:
    """What is wrong with a test command's placeholders, or None."""
    known = ", ".join("{" + name + "}" for name in TEST_PLACEHOLDERS)
    try:
        parts = list(string.Formatter().parse(value))
    except ValueError as exc:
        return f"{value!r} is malformed ({exc}); placeholders: {known} (write {{{{ for a brace)"
    for _, name, spec, conversion in parts:
        if name is not None and (name not in TEST_PLACEHOLDERS or spec or conversion):
            return (f"unknown placeholder {{{name}}} in {value!r}; placeholders: {known}"
                    " (write {{ and }} for braces)")
    return None


@dataclass(frozen=True, kw_only=True)
class MatrixExclude:
    """Cells left out of the matrix: every cell whose values match all the keys given."""

    REQUIRE_ONE_KEY: ClassVar[bool] = True

    python: str | None = setting(None, help="A Python of `python`.", pattern=PYTHON_PATTERN,
                                 pattern_help=PYTHON_HELP)
    torch: str | None = setting(None, help="A torch release of `torch`.", pattern=TORCH_PATTERN,
                                pattern_help=TORCH_HELP)
    cuda: str | None = setting(None, help="A flavour of `cuda`.", pattern=FLAVOUR_PATTERN,
                               pattern_help=FLAVOUR_HELP)


@dataclass(frozen=True, kw_only=True)
class MatrixSettings:
    """The wheels to publish: one cell per Python × torch × flavour (minus `exclude`), each
    built with `python -m pep517_torch matrix` in an environment uv makes (that Python, that
    torch from the flavour's index), then installed into a fresh environment with that torch
    and `test-requires`, where `test-command` runs. A cell's id reads `cp311-torch2.13-cpu`,
    `cp311-torch2.14-cu130`."""

    python: list[str] = setting(
        help='Python versions, `MAJOR.MINOR` (`["3.11", "3.12"]`); uv finds each (or installs'
        " it, as uv's `python-downloads` setting allows).",
        pattern=PYTHON_PATTERN, pattern_help=PYTHON_HELP, min_items=1,
    )
    torch: list[str] = setting(
        help='torch releases: `"2.13"` is the newest 2.13.x the flavour\'s index has'
        ' (`torch==2.13.*`), `"2.13.0"` that release alone.',
        pattern=TORCH_PATTERN, pattern_help=TORCH_HELP, min_items=1,
    )
    cuda: list[str] = setting(
        factory=lambda: ["cpu"],
        help='torch flavours: `"cpu"`, or a CUDA `MAJOR.MINOR` (`"13.0"`: torch\'s `cu130`'
        " build; building a CUDA cell needs that nvcc).",
        pattern=FLAVOUR_PATTERN, pattern_help=FLAVOUR_HELP, min_items=1,
    )
    exclude: list[MatrixExclude] = setting(
        factory=list,
        help='Cells to leave out, each a table of `python`, `torch` and `cuda` values (`{ torch'
        ' = "2.13", cuda = "13.0" }`: every cell with both); each must match a cell.',
    )
    test_requires: list[str] = setting(
        factory=list,
        help="Requirements (PEP 508) installed beside the wheel and the cell's torch in the"
        " fresh environment where `test-command` runs.",
        check=valid_requirement, format="pep508",
    )
    test_command: str | None = setting(
        None,
        help="The command that tests a cell's wheel (run by the shell, in that environment,"
        " from an empty temporary folder, so the wheel is imported, never the checkout);"
        " `{project}` is the project's folder, `{wheel}` the wheel (both shell-quoted). A"
        " package of the wheel imported from the project's folder instead fails the cell."
        " Unset: the wheel is installed there with its torch, and nothing runs.",
        check=test_command_problem,
    )
    test_skip: list[str] = setting(
        factory=list,
        help='Globs over cell ids whose `test-command` does not run here (`"*-cu*"`: GPU tests'
        " on a machine without one); each must match a cell.",
    )
    torch_index: dict[str, str] = setting(
        factory=dict,
        help="The index torch comes from, per flavour (`{ cpu = \"URL\", \"13.0\" = \"URL\" }`:"
        " a URL or a folder); default: PyTorch's own, `https://download.pytorch.org/whl/cpu`,"
        " `https://download.pytorch.org/whl/cu130`. Asked before the default index (PyPI, or"
        " uv's `UV_DEFAULT_INDEX`), which serves the rest.",
    )
    find_links: list[str] = setting(
        factory=list,
        help="Folders (relative to the project) or URLs of wheels that uv may install too, in"
        " every environment the matrix makes.",
    )

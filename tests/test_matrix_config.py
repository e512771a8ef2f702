"""[tool.torch-ext.matrix] → cells (issue 45): ids, order, exclusion, test-skip, indexes, and
the one-line error for each entry that cannot be right (config/matrix.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config.matrix import read_matrix
from pep517_torch.errors import ConfigError

ISSUE = {  # the issue's own example
    "python": ["3.11"], "torch": ["2.13", "2.14"], "cuda": ["cpu", "13.0"],
    "exclude": [{"torch": "2.13", "cuda": "13.0"}, {"torch": "2.14", "cuda": "cpu"}],
    "test-requires": ["pytest", "numpy"], "test-command": "pytest {project}/tests -x -q",
    "test-skip": [],
}


def matrix(table: dict[str, Any], root: Path = Path("/src/proj")) -> Any:
    return read_matrix(root, {"project": {"name": "p", "version": "1"},
                              "tool": {"torch-ext": {"matrix": table}}})


def test_the_issues_example() -> None:
    found = matrix(ISSUE)
    assert [cell.id for cell in found.cells] == ["cp311-torch2.13-cpu", "cp311-torch2.14-cu130"]
    cpu, cuda = found.cells
    assert (cpu.requirement, cpu.index, cpu.label) == (
        "torch==2.13.*", "https://download.pytorch.org/whl/cpu", "cpu")
    assert (cuda.requirement, cuda.index, cuda.label) == (
        "torch==2.14.*", "https://download.pytorch.org/whl/cu130", "cu130")
    assert cpu.holds("2.13.0+cpu", None) and not cpu.holds("2.13.0+cu130", "13.0")
    assert cuda.holds("2.14.1+cu130", "13.0") and not cuda.holds("2.14.1", None)
    assert not cpu.holds("2.12.0+cpu", None) and not cpu.holds("2.130.0", None)
    assert found.test_line(Path("/w/my ops-1.0-cp311-cp311-linux_x86_64.whl")) == (
        "pytest /src/proj/tests -x -q")
    assert matrix({**ISSUE, "test-command": "pip show {wheel}"}).test_line(
        Path("/w/a b.whl")) == "pip show '/w/a b.whl'"


def test_order_full_releases_skips_and_indexes(tmp_path: Path) -> None:
    (tmp_path / "torches").mkdir()
    found = matrix({"python": ["3.12", "3.11"], "torch": ["2.13.0"], "cuda": ["13.0", "cpu"],
                    "test-skip": ["*-cu*"], "torch-index": {"cpu": "torches"},
                    "find-links": ["https://example.org/w/"]}, tmp_path)
    assert [cell.id for cell in found.cells] == [
        "cp312-torch2.13.0-cu130", "cp312-torch2.13.0-cpu", "cp311-torch2.13.0-cu130",
        "cp311-torch2.13.0-cpu"]
    assert [cell.test_skipped for cell in found.cells] == [True, False, True, False]
    assert found.cells[1].index == str(tmp_path / "torches")
    assert found.cells[0].requirement == "torch==2.13.0"
    assert found.find_links == ("https://example.org/w/",)


M = "tool.torch-ext.matrix"


@pytest.mark.parametrize(("change", "said"), [
    ({"cuda": ["cpu", "13"]}, f'{M}.cuda[1]: "13" is not a flavour: write "cpu" or a CUDA MAJOR.MINOR ("13.0")'),
    ({"python": ["3.11", "3.11"]}, f"{M}.python[1]: '3.11' is listed twice"),
    ({"torch": ["2.13", "2.13.1"]}, f"{M}.torch[1]: '2.13.1' and '2.13' can name the same torch: keep one"),
    ({"torch": ["2"]}, f'{M}.torch[0]: "2" is not a torch release: write MAJOR.MINOR ("2.13") or MAJOR.MINOR.PATCH ("2.13.0")'),
    ({"exclude": [{"torch": "2.12"}]}, f'{M}.exclude[0]: {{ torch = "2.12" }} matches no cell of the matrix'),
    ({"exclude": [{}]}, f"{M}.exclude[0]: an empty table says nothing; give one of python, torch, cuda"),
    ({"exclude": [{"cuda": "cpu"}, {"cuda": "13.0"}]}, f"{M}.exclude: excludes every cell: nothing is left to build"),
    ({"test-skip": ["*-rocm*"]}, f"{M}.test-skip[0]: '*-rocm*' matches no cell of the matrix (cp311-torch2.13-cpu, cp311-torch2.13-cu130, cp311-torch2.14-cpu, cp311-torch2.14-cu130)"),
    ({"test-command": "pytest {tests}"}, f"{M}.test-command: unknown placeholder {{tests}} in 'pytest {{tests}}'; placeholders: {{project}}, {{wheel}} (write {{{{ and }}}} for braces)"),
    ({"torch-index": {"12.8": "https://x/"}}, f'{M}.torch-index."12.8": names no flavour of cuda (cpu, "13.0")'),
    ({"find-links": ["nowhere"]}, f"{M}.find-links[0]: 'nowhere': no such folder (/src/proj/nowhere); give a folder or a URL"),
    ({"pyhton": ["3.11"]}, f"{M}.pyhton: unknown key 'pyhton' (did you mean 'python'?)"),
])
def test_each_bad_entry_is_one_line_naming_its_key(change: dict[str, Any], said: str) -> None:
    table = {**ISSUE, "exclude": [], **change}
    with pytest.raises(ConfigError) as raised:
        matrix(table)
    assert str(raised.value) == said


def test_no_matrix_and_a_matrix_in_an_override_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"^tool.torch-ext.matrix: no matrix is declared"):
        read_matrix(Path("/p"), {"project": {"name": "p", "version": "1"}})
    with pytest.raises(ConfigError, match=r"overrides\[0\]\.matrix: key 'matrix' cannot be set here"):
        read_matrix(Path("/p"), {"project": {"name": "p", "version": "1"}, "tool": {"torch-ext": {
            "matrix": ISSUE, "overrides": [{"if": {"cuda": True}, "matrix": ISSUE}]}}})

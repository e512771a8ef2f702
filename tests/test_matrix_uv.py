"""`python -m pep517_torch matrix` as users run it (issue 45): pep517_torch's own wheel installed
in a fresh venv, uv making every environment from a local index, offline (never a download).

The index's torch flavour page (`torch-index = { cpu = ... }`) holds torch 2.13.0+cpu and a
stand-in release, 2.12.0+cpu: the same binaries under another version (a second CPU torch
this machine has not; `uv_index.relabelled_wheel`), so two cells build and test here with CPU
torch alone. The project's test fails under 2.12 on purpose. The CUDA cell (torch
2.14.1+cu130, 5.5 GB) is the CUDA-torch tier's: cuda_torch/test_matrix_uv.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain
from tests.installed.uv_index import Unavailable, relabelled_wheel, resolved_index, simple_index
from tests.installed.venvs import installed_env, own_wheel
from tests.tiny_project import write_project

TORCH = toolchain.find_torch()
STAND_IN = "2.12.0+cpu"
UV = Path(sys.executable).parent / "uv"

pytestmark = [
    pytest.mark.compile,
    pytest.mark.skipif(not UV.exists(), reason="needs uv (the test extras)"),
    pytest.mark.skipif(TORCH.version != "2.13.0+cpu" or sys.version_info[:2] != (3, 11),
                       reason="the local index serves torch 2.13.0+cpu for Python 3.11"),
]


@dataclass(frozen=True)
class Local:
    python: Path  # pep517_torch installed from its wheel (not editable), uv beside it
    cpu_index: Path  # torch 2.13.0+cpu and the stand-in
    env: dict[str, str]  # uv offline on the local index, its own cache; our cache
    base: Path


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Local:
    base = tmp_path_factory.mktemp("matrix-uv")
    torch_wheels = [w for w in Path("/opt/wheels").glob("torch-2.13.0+cpu-cp311-*.whl")]
    try:
        rest = resolved_index(base / "simple", ["torch==2.13.0", "pytest"], skip=("torch",))
        if not torch_wheels:
            wheels = resolved_index(base / "torch-only", ["torch==2.13.0"])
            torch_wheels = [w for w in wheels if w.name.startswith("torch-")]
    except Unavailable as why:
        pytest.skip(str(why))
    assert rest and torch_wheels
    (base / "files").mkdir()
    stand_in = relabelled_wheel(torch_wheels[0], base / "files", STAND_IN)
    simple_index(base / "simple-cpu", [torch_wheels[0], stand_in])
    python = installed_env(base / "venv", own_wheel(base / "own"))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("UV_", "PIP_", "PEP517_TORCH_")) and key not in (
               "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(UV_CACHE_DIR=str(base / "uv-cache"), UV_OFFLINE="1", UV_PYTHON_DOWNLOADS="never",
               UV_DEFAULT_INDEX=(base / "simple").as_uri(), XDG_CONFIG_HOME=str(base / "config"),
               XDG_CONFIG_DIRS=str(base / "config"), PEP517_TORCH_CACHE_DIR=str(base / "cache"))
    return Local(python, base / "simple-cpu", env, base)


def matrix_project(root: Path, local: Local, table: str, *, tests: dict[str, str]) -> Path:
    """The tiny project with `local-version = "torch"`, ``table`` as its matrix (the local
    torch index added), and ``tests`` (file name -> text) in its tests/ folder."""
    write_project(root, "tinyops")
    text = (root / "pyproject.toml").read_text().replace(
        "[tool.torch-ext]\n", '[tool.torch-ext]\nlocal-version = "torch"\n', 1)
    index = f'torch-index = {{ cpu = "{local.cpu_index.as_uri()}" }}\n'
    (root / "pyproject.toml").write_text(f"{text}\n[tool.torch-ext.matrix]\n{table}{index}")
    (root / "tests").mkdir()
    for name, body in tests.items():
        (root / "tests" / name).write_text(body)
    return root


def matrix(local: Local, *args: str | Path, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(local.python), "-m", "pep517_torch", "matrix", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env={**local.env, **extra},
                          timeout=1800)


def rows(stdout: str) -> dict[str, list[str]]:
    """The final table's rows by cell."""
    table = stdout[stdout.rindex("\ncell "):].strip().splitlines()
    assert table[0].split() == ["cell", "torch", "CUDA", "wheel", "build", "s", "test", "test", "s"]
    return {line.split()[0]: line.split() for line in table[2:] if re.match(r"cp\d", line)}


TWO_CELLS = """\
python = ["3.11"]
torch = ["2.12", "2.13"]
cuda = ["cpu"]
test-requires = ["pytest"]
test-command = "pytest {project}/tests -q -p no:cacheprovider"
"""
VALUE_TEST = """\
import os, torch, tinyops

def test_value_under_the_cells_torch():
    with open(os.environ["TINYOPS_WHERE"], "a") as where:
        where.write(f"{torch.__version__} {tinyops.__file__} {os.getcwd()}\\n")
    assert tinyops.value() == 0
    assert torch.__version__.startswith("2.13"), "deliberately failing under " + torch.__version__
"""


def test_two_cells_one_failing_test_named_and_the_other_wheel_indexed(local: Local, tmp_path: Path) -> None:
    """The done-when: two cells from one declaration, each built in an environment uv made
    and tested in a fresh one, from outside the project; the failing cell is named with its
    output's tail and exits 1, the other's wheel is in the index; its test imported the wheel.
    Then `--only` builds and tests one cell again, reusing its cached environment, and a
    damaged one is made again (one line)."""
    root = matrix_project(tmp_path / "proj", local, TWO_CELLS, tests={"test_value.py": VALUE_TEST})
    where = tmp_path / "where.txt"
    done = matrix(local, root, "-o", tmp_path / "wheelhouse", cwd=tmp_path, TINYOPS_WHERE=str(where))
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    table = rows(done.stdout)
    print(done.stdout[done.stdout.rindex("\ncell "):])  # the run's time per cell, for the record
    assert list(table) == ["cp311-torch2.12-cpu", "cp311-torch2.13-cpu"]
    failed, passed = table["cp311-torch2.12-cpu"], table["cp311-torch2.13-cpu"]
    assert failed[1:3] == [STAND_IN, "-"] and failed[5] == "FAILED"
    assert passed[1:3] == ["2.13.0+cpu", "-"] and passed[5] == "passed"
    assert passed[3].startswith("tinyops-1.0+pt213cpu-cp311-") and failed[3].startswith(
        "tinyops-1.0+pt212cpu-cp311-")
    command = f"pytest {root}/tests -q -p no:cacheprovider"
    assert (f"pep517_torch: error: matrix: cp311-torch2.12-cpu: the test command failed (exit"
            f" status 1): {command}") in done.stderr, done.stderr
    assert "  | E       AssertionError: deliberately failing under 2.12.0+cpu" in done.stderr
    assert (f"pep517_torch: error: matrix: cp311-torch2.12-cpu: {failed[3]} failed its test: not written"
            f" to {tmp_path / 'wheelhouse'}") in done.stderr
    assert "cp311-torch2.13-cpu" not in done.stderr
    wheels = sorted(p.name for p in (tmp_path / "wheelhouse").glob("*.whl"))
    assert wheels == [passed[3]]
    page = (tmp_path / "wheelhouse" / "torch-2.13.0+cpu.html").read_text()
    assert passed[3].replace("+", "%2B") in page
    assert not (tmp_path / "wheelhouse" / f"torch-{STAND_IN}.html").exists()
    # each test ran under its cell's torch, imported the wheel from its test environment, from
    # an empty folder: never the checkout
    seen = [line.split() for line in where.read_text().splitlines()]
    assert [torch for torch, _, _ in seen] == [STAND_IN, "2.13.0+cpu"]
    envs = local.base / "cache" / "matrix-envs"
    for _, module, cwd in seen:
        assert Path(module).is_relative_to(envs) and "/site-packages/tinyops/" in module, module
        assert not Path(cwd).is_relative_to(root) and "pep517_torch-test-" in cwd
    assert sorted(p.name for p in envs.iterdir() if not p.name.startswith(".")) == [
        "cp311-torch2.12-cpu", "cp311-torch2.13-cpu"]
    assert not list(envs.glob(".tests-*"))  # the fresh test environments are gone

    # --only, the 2.13 environment damaged: made again, said in one line; the 2.12 one untouched
    (envs / "cp311-torch2.13-cpu" / "lib" / "python3.11" / "site-packages" / "torch"
     / "version.py").unlink()
    again = matrix(local, root, "-o", tmp_path / "only", "--only", "cp311-torch2.13-cpu",
                   cwd=tmp_path, TINYOPS_WHERE=str(where))
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    damaged = [line for line in again.stderr.splitlines() if "damaged" in line]
    assert len(damaged) == 1 and damaged[0].startswith(
        f"pep517_torch: cp311-torch2.13-cpu: the environment {envs / 'cp311-torch2.13-cpu'} is"
        " damaged (torch cannot be imported there: "), again.stderr
    assert damaged[0].endswith("): making it again")
    assert list(rows(again.stdout)) == ["cp311-torch2.13-cpu"]
    assert [p.name for p in (tmp_path / "only").glob("*.whl")] == [passed[3]]
    assert (tmp_path / "only" / "torch-2.13.0+cpu.html").is_file()
    assert "making its environment" not in again.stdout.replace(
        "cp311-torch2.13-cpu: making its environment", "")  # the 2.12 one was not needed


def test_list_json_round_trips_through_only(local: Local, tmp_path: Path) -> None:
    """`--list --json` is GitHub Actions' strategy.matrix ({"include": [...]}); each entry's
    cell is an id `--only` takes; an id that is not one, and --json alone, are one line each."""
    root = matrix_project(tmp_path / "proj", local, TWO_CELLS.replace(
        'cuda = ["cpu"]', 'cuda = ["cpu", "13.0"]\nexclude = [{ torch = "2.12", cuda = "13.0" }]'),
        tests={})
    listed = matrix(local, root, "--list", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    ids = listed.stdout.split()
    assert ids == ["cp311-torch2.12-cpu", "cp311-torch2.13-cpu", "cp311-torch2.13-cu130"]
    shown = matrix(local, root, "--list", "--json", cwd=tmp_path)
    assert shown.returncode == 0 and len(shown.stdout.splitlines()) == 1  # one $GITHUB_OUTPUT line
    include = json.loads(shown.stdout)["include"]
    assert include[2] == {"cell": "cp311-torch2.13-cu130", "python": "3.11", "torch": "2.13",
                          "cuda": "13.0"}
    assert [entry["cell"] for entry in include] == ids
    for entry in include:
        one = matrix(local, root, "--list", "--json", "--only", entry["cell"], cwd=tmp_path)
        assert json.loads(one.stdout) == {"include": [entry]}
    refused = matrix(local, root, "--only", "cp311-torch2.14-cpu", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (f"pep517_torch: error: --only: 'cp311-torch2.14-cpu' is not a cell"
                              f" of the matrix; its cells: {', '.join(ids)}\n")
    alone = matrix(local, root, "--json", cwd=tmp_path)
    assert alone.returncode == 2 and alone.stderr == (
        "pep517_torch: error: --json: --json goes with --list (--list --json)\n")
    assert not (root / "build").exists()


def test_a_python_uv_cannot_get_and_a_torch_the_index_lacks_are_one_line_each(
    local: Local, tmp_path: Path
) -> None:
    table = 'python = ["3.11", "3.99"]\ntorch = ["2.11"]\n'
    root = matrix_project(tmp_path / "proj", local, table, tests={})
    done = matrix(local, root, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    index = local.cpu_index.as_uri()
    assert done.stderr.splitlines() == [
        f"pep517_torch: error: matrix: cp311-torch2.11-cpu: cannot install torch==2.11.* from"
        f" {index}: No solution found when resolving dependencies: Because only torch>={STAND_IN}"
        " is available and you require torch==2.11.*, we can conclude that your requirements are"
        " unsatisfiable.",
        "pep517_torch: error: matrix: cp399-torch2.11-cpu: uv cannot get Python 3.99: No"
        " interpreter found for Python 3.99 in managed installations or search path",
    ], done.stderr
    assert not (root / "build").exists() and not (root / "wheelhouse").exists()
    envs = local.base / "cache" / "matrix-envs"
    assert not (envs / "cp311-torch2.11-cpu").exists() and not (envs / "cp399-torch2.11-cpu").exists()


CHECKOUT_TEST = """\
import tinyops

def test_imports():
    assert tinyops.__name__ == "tinyops"
"""


def test_a_test_that_imports_the_checkout_fails_its_cell(local: Local, tmp_path: Path) -> None:
    """tests/__init__.py: pytest puts the project's folder first on sys.path and imports the
    checkout's tinyops (whose __init__ imports nothing compiled: the test itself passes). The
    cell fails all the same, naming the module and where it came from."""
    table = 'python = ["3.11"]\ntorch = ["2.13"]\ntest-command = "pytest {project}/tests -q -p no:cacheprovider"\ntest-requires = ["pytest"]\n'
    root = matrix_project(tmp_path / "proj", local, table,
                          tests={"__init__.py": "", "test_imports.py": CHECKOUT_TEST})
    (root / "tinyops" / "__init__.py").write_text(
        "def value():\n    from ._C import value\n    return value()\n")
    done = matrix(local, root, "-o", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout
    assert (f"pep517_torch: error: matrix: cp311-torch2.13-cpu: the test imported tinyops from"
            f" {root / 'tinyops' / '__init__.py'}, the project's folder, not the wheel: a"
            " tests/__init__.py makes pytest put the project's folder first on sys.path") in done.stderr
    assert rows(done.stdout)["cp311-torch2.13-cpu"][5] == "FAILED"
    assert not list((tmp_path / "out").glob("*.whl"))
    # the cached environments, as `cache` lists them, and `cache --clear` removes them
    cache = subprocess.run([str(local.python), "-m", "pep517_torch", "cache"], capture_output=True,
                           text=True, cwd=tmp_path, env=local.env, timeout=300)
    envs = local.base / "cache" / "matrix-envs"
    assert f"matrix environments: {envs} (" in cache.stdout, cache.stdout
    assert re.search(r"^  cp311-torch2\.13-cpu  torch 2\.13\.0\+cpu from file://\S+  used \d+ s ago$",
                     cache.stdout, re.M), cache.stdout
    cleared = subprocess.run([str(local.python), "-m", "pep517_torch", "cache", "--clear"],
                             capture_output=True, text=True, cwd=tmp_path, env=local.env,
                             timeout=300)
    assert re.search(rf"removed \d matrix environments? from {re.escape(str(envs))}$", cleared.stdout,
                     re.M), cleared.stdout + cleared.stderr
    assert not [p for p in envs.iterdir() if p.is_dir()]

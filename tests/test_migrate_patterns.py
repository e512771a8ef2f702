"""Patterns of published setup.py files (issue #14): migrate, then build the result and use it.

Each fixture in fixtures/migrate/<pattern> shows one pattern. The slow half migrates it
(``--write``), deletes setup.py, builds a wheel with pep517_torch on this machine (CPU torch,
nvcc present, no GPU), installs it and computes with it. The fast half checks what migrate
wrote and, with the config layer, that the tables resolve like setup.py in every environment
and CUDA mode tried (including the CUDA mode this machine cannot build).
"""

from __future__ import annotations

import itertools
import shutil
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config import Facts
from pep517_torch.config.pyproject import tomllib
from pep517_torch.migrate.command import migrate
from tests.migrate_helpers import migrate_main as main
from pep517_torch.migrate.convert.tables import convert
from pep517_torch.migrate.intercept.run import run_setup
from pep517_torch.migrate.convert.plan import Observed
from pep517_torch.migrate.matches_runs import disagreements
from tests.commands import run
from tests.migrate_helpers import (
    FIXTURES,
    VARIABLES,
    clean_env,
    metadata_version,
    unset_fixture_variables,  # noqa: F401  (autouse)
    written,
)

# (pattern, environment of the build, code that must print ok)
PATTERNS: dict[str, tuple[dict[str, str], str]] = {
    "nvcc_probe": ({}, "import torch, nvccprobe\n"
                   "assert nvccprobe.halve(torch.ones(2)).tolist() == [0.5, 0.5]"),
    "both_branches": ({}, "import torch, bothbr\n"
                      "assert bothbr.square(torch.full((2,), 3.0)).tolist() == [9.0, 9.0]"),
    "version_suffix": ({"SUFFIXED_VERSION_SUFFIX": "+cu130"},
                       "import suffixed; assert suffixed.cube(2.0) == 8.0"),
    "small_things": ({}, "import smallthings, smallthings._limited as lim\n"
                     "assert smallthings.twice(2.5) == 5.0\n"
                     "assert hex(lim.limited_api()) == '0x30a0000'\n"
                     "assert smallthings.parallel_sum(1000) == 500500"),
}


def document(pattern: str) -> dict[str, Any]:
    migration = migrate(FIXTURES / pattern)
    assert migration.problems == [] and migration.fails_here == [], migration.text
    return tomllib.loads(migration.text)


# -- migrate -> build -> import --------------------------------------------------------------


@dataclass
class Built:
    project: Path
    wheel: Path
    output: str  # what the installed package printed


def _build(pattern: str, project: Path, work: Path) -> Built:
    env, code = PATTERNS[pattern]
    run(sys.executable, "-m", "pep517_torch", "wheel", project, "-o", work / "out", env=env,
        unset=VARIABLES)
    (wheel,) = (work / "out").glob("*.whl")
    site = work / "site"
    run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", site,
        wheel, unset=VARIABLES)
    output = run(sys.executable, "-c", code + "\nprint('ok')", env={"PYTHONPATH": str(site)},
                 cwd=work, unset=VARIABLES).stdout
    return Built(project, wheel, output)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built | BaseException]:
    root = tmp_path_factory.mktemp("patterns")
    for pattern in PATTERNS:  # serially, in-process: migrate patches process-wide state
        project = root / pattern / "project"
        shutil.copytree(FIXTURES / pattern, project)
        assert main([str(project), "--write", "--force"]) == 0  # 0: valid, and builds here
        for leftover in ("setup.py", "setup.cfg"):
            (project / leftover).unlink(missing_ok=True)
    results: dict[str, Built | BaseException] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {p: pool.submit(_build, p, root / p / "project", root / p) for p in PATTERNS}
        for pattern, future in futures.items():
            try:
                results[pattern] = future.result()
            except Exception as exc:  # reported by the pattern's own test
                results[pattern] = exc
    return results


def proof(built: dict[str, Built | BaseException], pattern: str) -> Built:
    result = built[pattern]
    if isinstance(result, BaseException):
        raise result
    assert result.output.strip() == "ok"
    return result


def wheel_names(wheel: Path) -> list[str]:
    return sorted(zipfile.ZipFile(wheel).namelist())


def has_symbol_table(wheel: Path, member: str, tmp_path: Path) -> bool:
    library = tmp_path / Path(member).name
    library.write_bytes(zipfile.ZipFile(wheel).read(member))
    sections = run("readelf", "-S", "-W", library).stdout
    return " .symtab " in sections


@pytest.mark.compile
def test_nvcc_probe_builds_and_computes(built: dict[str, Built | BaseException]) -> None:
    names = wheel_names(proof(built, "nvcc_probe").wheel)
    assert any(n.startswith("nvccprobe/_C.") for n in names)
    assert not any("_streams" in n for n in names)  # needs a CUDA torch: skipped here


@pytest.mark.compile
def test_both_branches_builds_stripped(built: dict[str, Built | BaseException],
                                       tmp_path: Path) -> None:
    result = proof(built, "both_branches")
    (native,) = [n for n in wheel_names(result.wheel) if n.endswith(".so")]
    assert native.startswith("bothbr/_C.")  # the CUDA library needs a CUDA torch
    assert not has_symbol_table(result.wheel, native, tmp_path)  # strip = true, from -s


@pytest.mark.compile
def test_version_suffix_builds_with_the_suffix(built: dict[str, Built | BaseException]) -> None:
    assert proof(built, "version_suffix").wheel.name.startswith("suffixed-1.4.2+cu130-")


@pytest.mark.compile
def test_small_things_build_and_compute(built: dict[str, Built | BaseException],
                                        tmp_path: Path) -> None:
    result = proof(built, "small_things")
    archive = zipfile.ZipFile(result.wheel)
    metadata = archive.read("smallthings-0.7.0.dist-info/METADATA").decode()
    for line in ("Summary: Small things a setup.py says", "License-Expression: BSD-3-Clause",
                 "Classifier: Operating System :: POSIX :: Linux", "Requires-Python: >=3.10",
                 "Project-URL: Tracker, https://example.org/smallthings/issues",
                 "A limited-API module and an OpenMP module"):
        assert line in metadata  # from setup.cfg's [metadata] and [options]
    assert not has_symbol_table(result.wheel, "smallthings/_limited.abi3.so", tmp_path)
    omp = next(n for n in archive.namelist() if n.startswith("smallthings/_omp."))
    assert has_symbol_table(result.wheel, omp, tmp_path)
    ninja = next(result.project.glob("build/*/build.ninja")).read_text()
    for line in ninja.splitlines():
        assert line.count("Py_LIMITED_API") <= 1 and line.count("AT_PARALLEL_OPENMP") <= 1


# -- 1. CUDA decided by running nvcc -------------------------------------------------------------


def test_nvcc_probe_tables() -> None:
    tool = document("nvcc_probe")["tool"]["torch-ext"]
    ops, streams = tool["extension"]
    assert ops == {"name": "nvccprobe._C", "sources": ["csrc/ops.cpp"],
                   "cuda": {"sources": ["csrc/ops_cuda.cu"],
                            "define-macros": {"WITH_CUDA": True}}}
    # always built by setup.py, but it uses c10/cuda: only where a CUDA build is possible
    assert streams == {"name": "nvccprobe._streams", "sources": ["csrc/streams.cu"],
                       "if": {"cuda": True, "torch-cuda": True}}


# -- 2. variables read in both branches ---------------------------------------------------------


def test_both_branches_overrides() -> None:
    tool = document("both_branches")["tool"]["torch-ext"]
    cpu, gpu = tool["extension"]
    assert cpu == {"name": "bothbr._C", "sources": ["csrc/ops.cpp"], "strip": True}
    assert gpu["if"] == {"cuda": True, "torch-cuda": True}  # it uses torch's CUDA API
    assert gpu["strip"] is True and gpu["libraries"] == ["cublas"]
    assert tool["overrides"] == [
        {"if": {"env": {"USE_CUDA": "0"}}, "cuda": False},
        {"if": {"env": {"BOTHBR_CPU_ONLY": True}}, "cuda": False},
        {"if": {"env": {"BOTHBR_KEEP_SYMBOLS": True}},
         "extension": {"bothbr._C": {"strip": False}}},
        {"if": {"env": {"BOTHBR_KEEP_SYMBOLS": True}, "cuda": True},
         "extension": {"bothbr._cuda": {"strip": False}}},
    ]


def here(torch_version: str = "2.13.0") -> Facts:
    return Facts(env=clean_env(), torch_version=torch_version)


def observe(setup_py: Path, env: dict[str, str | None], cuda: bool) -> Observed:
    return Observed(env, cuda, convert(run_setup(setup_py, env=env, cuda=cuda)))


def test_both_branches_resolve_like_setup_py_in_every_combination() -> None:
    # Overrides are found one variable at a time; checked here on every combination, in both
    # CUDA modes, by resolving the tables as a build would and comparing with setup.py's runs.
    setup_py = FIXTURES / "both_branches" / "setup.py"
    text = migrate(setup_py).text
    values: dict[str, list[str | None]] = {"USE_CUDA": [None, "0", "1"],
                                           "BOTHBR_CPU_ONLY": [None, "1"],
                                           "BOTHBR_KEEP_SYMBOLS": [None, "1"]}
    observed = [observe(setup_py, dict(zip(values, combination, strict=True)), cuda)
                for combination in itertools.product(*values.values())
                for cuda in (False, True)]
    assert disagreements(text, setup_py.parent, observed, here()) == []
    # ... and the check sees a table that does not say what setup.py does
    without_keep = text.replace("if.env.BOTHBR_KEEP_SYMBOLS = true\nif.cuda = true\n",
                                "if.cuda = false\n")
    found = disagreements(without_keep, setup_py.parent, observed, here())
    assert found and all("BOTHBR_KEEP_SYMBOLS='1'" in line for line in found), found
    assert "bothbr._cuda: the tables give another strip" in found[0]


# -- 3. version suffixes from the environment ------------------------------------------------------


def test_static_version_with_a_suffix(tmp_path: Path) -> None:
    document_ = document("version_suffix")
    assert document_["project"]["dynamic"] == ["version", "dependencies"]
    assert "version" not in document_["project"]
    assert document_["tool"]["torch-ext"]["version"] == {"base": "1.4.2",
                                                         "suffix-env": "SUFFIXED_VERSION_SUFFIX"}
    text = migrate(FIXTURES / "version_suffix").text
    assert "see the overrides" not in text and "overrides" not in document_["tool"]["torch-ext"]
    project = written(tmp_path, FIXTURES / "version_suffix")
    assert metadata_version(project, {}) == "1.4.2"
    assert metadata_version(project, {"SUFFIXED_VERSION_SUFFIX": "+cu130"}) == "1.4.2+cu130"


# -- 4. smaller things ---------------------------------------------------------------------------


def test_small_things_tables() -> None:
    migration = migrate(FIXTURES / "small_things")
    document_ = tomllib.loads(migration.text)
    assert document_["build-system"]["requires"] == ["pep517_torch", "torch>=2.1"]  # kept
    project = document_["project"]
    assert project["description"] == "Small things a setup.py says"  # setup.cfg [metadata]
    assert project["readme"] == "README.md" and project["license"] == "BSD-3-Clause"
    assert project["urls"]["Tracker"] == "https://example.org/smallthings/issues"
    assert project["requires-python"] == ">=3.10" and "dependencies" in project["dynamic"]
    tool = document_["tool"]["torch-ext"]
    assert tool["dependencies"] == ["torch>=2.0"]  # PEP 621: the pin is the backend's to add
    limited, omp = tool["extension"]
    assert limited == {"name": "smallthings._limited", "sources": ["csrc/limited.cpp"],
                       "extra-cflags": ["-O2"], "py-limited-api": "cp310", "strip": True}
    assert omp == {"name": "smallthings._omp", "sources": ["csrc/omp.cpp"], "openmp": True}
    flat = migration.text.replace("\n# ", " ")
    assert "a top-level package named 'tests' ships" in flat
    assert "setup.cfg" not in flat  # everything in it was read (zip_safe changes nothing)

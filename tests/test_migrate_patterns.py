"""Patterns of published setup.py files (issue #14): migrate, then build the result and use it.

Each fixture in fixtures/migrate/<pattern> shows one pattern. The slow half migrates it
(``--write``), deletes setup.py, builds a wheel with pep517_torch on this machine (CPU torch,
nvcc present, no GPU), installs it and computes with it. The fast half checks what migrate
wrote and, with the config layer, that the tables resolve like setup.py in every environment
and CUDA mode tried (including the CUDA mode this machine cannot build).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config import Facts
from pep517_torch.config.pyproject import tomllib
from pep517_torch.migrate import main, migrate
from pep517_torch.migrate.convert import convert
from pep517_torch.migrate.intercept import run_setup
from pep517_torch.migrate.plan import Observed
from pep517_torch.migrate.verify import disagreements

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "migrate"
VARIABLES = ("USE_CUDA", "BOTHBR_CPU_ONLY", "BOTHBR_KEEP_SYMBOLS", "SUFFIXED_VERSION_SUFFIX",
             "CUDA_HOME", "CUDA_PATH")  # fmt: skip
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
}  # fmt: skip


@pytest.fixture(autouse=True)
def _unset_fixture_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def clean_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in VARIABLES}, **extra}


def run(args: list[Any], env: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900,
                            env=clean_env(**(env or {})), cwd=cwd)  # fmt: skip
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


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
    run([sys.executable, "-m", "pep517_torch", "wheel", project, "-o", work / "out"], env=env)
    (wheel,) = (work / "out").glob("*.whl")
    site = work / "site"
    run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
         site, wheel])  # fmt: skip
    output = run([sys.executable, "-c", code + "\nprint('ok')"], env={"PYTHONPATH": str(site)},
                 cwd=work)  # fmt: skip
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
    sections = run(["readelf", "-S", "-W", library])
    return " .symtab " in sections


@pytest.mark.compile
def test_nvcc_probe_builds_and_computes(built: dict[str, Built | BaseException]) -> None:
    names = wheel_names(proof(built, "nvcc_probe").wheel)
    assert any(n.startswith("nvccprobe/_C.") for n in names)
    assert not any("_streams" in n for n in names)  # needs a CUDA torch: skipped here


@pytest.mark.compile
def test_both_branches_builds_stripped(built: dict[str, Built | BaseException],
                                       tmp_path: Path) -> None:  # fmt: skip
    result = proof(built, "both_branches")
    (native,) = [n for n in wheel_names(result.wheel) if n.endswith(".so")]
    assert native.startswith("bothbr/_C.")  # the CUDA library needs a CUDA torch
    assert not has_symbol_table(result.wheel, native, tmp_path)  # strip = true, from -s


@pytest.mark.compile
def test_version_suffix_builds_with_the_suffix(built: dict[str, Built | BaseException]) -> None:
    assert proof(built, "version_suffix").wheel.name.startswith("suffixed-1.4.2+cu130-")


@pytest.mark.compile
def test_small_things_build_and_compute(built: dict[str, Built | BaseException],
                                        tmp_path: Path) -> None:  # fmt: skip
    result = proof(built, "small_things")
    archive = zipfile.ZipFile(result.wheel)
    metadata = archive.read("smallthings-0.7.0.dist-info/METADATA").decode()
    for line in ("Summary: Small things a setup.py says", "License-Expression: BSD-3-Clause",
                 "Classifier: Operating System :: POSIX :: Linux", "Requires-Python: >=3.10",
                 "Project-URL: Tracker, https://example.org/smallthings/issues",
                 "A limited-API module and an OpenMP module"):  # fmt: skip
        assert line in metadata  # from setup.cfg's [metadata] and [options]
    assert not has_symbol_table(result.wheel, "smallthings/_limited.abi3.so", tmp_path)
    omp = next(n for n in archive.namelist() if n.startswith("smallthings/_omp."))
    assert has_symbol_table(result.wheel, omp, tmp_path)
    ninja = next(result.project.glob("build/*/build.ninja")).read_text()
    for line in ninja.splitlines():
        assert line.count("Py_LIMITED_API") <= 1 and line.count("AT_PARALLEL_OPENMP") <= 1


# -- 1. CUDA decided by running nvcc -------------------------------------------------------------


def project_with(tmp_path: Path, setup_py: str, files: Mapping[str, str] | None = None) -> Path:
    (tmp_path / "setup.py").write_text(setup_py)
    for name, text in {"p/__init__.py": "", "a.cpp": "", **(files or {})}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


PROBED_SETUP = """
import os, pathlib, shutil, subprocess
from setuptools import setup
from torch.utils.cpp_extension import CppExtension, CUDAExtension
def probe():
    try:
        return bool({probe})
    except (OSError, subprocess.CalledProcessError):
        return False
exts = [CppExtension("p._C", ["a.cpp"])]
if probe():
    exts.append(CUDAExtension("p._gpu", ["k.cu"]))
setup(name="p", version="1.0", packages=["p"], ext_modules=exts)
"""
NVCC_PROBES = [
    'subprocess.call(["nvcc", "--version"]) == 0',
    'subprocess.check_call(["nvcc", "--version"]) == 0',
    'subprocess.check_output(["nvcc", "--version"], text=True).count("release")',
    'subprocess.run(["nvcc", "--version"], capture_output=True).returncode == 0',
    'subprocess.run("nvcc --version", shell=True, check=True, capture_output=True)',
    'subprocess.getstatusoutput("nvcc --version")[0] == 0',
    'os.system("nvcc --version > /dev/null 2>&1") == 0',
    'shutil.which("nvcc")',
    'os.path.exists(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"))',
    'pathlib.Path("/opt/cuda-12.4").is_dir() or os.path.isdir("/usr/local/cuda")',
    'os.environ.get("CUDA_HOME") or "CUDA_PATH" in os.environ',
]


@pytest.mark.parametrize("probe", NVCC_PROBES)
def test_cuda_probes_without_torch_are_seen(probe: str, tmp_path: Path) -> None:
    project = project_with(tmp_path, PROBED_SETUP.format(probe=probe), {"k.cu": ""})
    migration = migrate(project)
    assert migration.problems == [] and migration.fails_here == []
    extensions = tomllib.loads(migration.text)["tool"]["torch-ext"]["extension"]
    assert extensions == [
        {"name": "p._C", "sources": ["a.cpp"]},
        {"name": "p._gpu", "sources": ["k.cu"], "if": {"cuda": True}},
    ]
    assert "migrate ran it with CUDA off" in migration.text.replace("\n#   ", " ")


def test_nvcc_probe_tables() -> None:
    tool = document("nvcc_probe")["tool"]["torch-ext"]
    ops, streams = tool["extension"]
    assert ops == {"name": "nvccprobe._C", "sources": ["csrc/ops.cpp"],
                   "cuda": {"sources": ["csrc/ops_cuda.cu"],
                            "define-macros": {"WITH_CUDA": True}}}  # fmt: skip
    # always built by setup.py, but it uses c10/cuda: only where a CUDA build is possible
    assert streams == {"name": "nvccprobe._streams", "sources": ["csrc/streams.cu"],
                       "if": {"cuda": True}}  # fmt: skip


def test_torch_cuda_api_joins_an_existing_condition(tmp_path: Path) -> None:
    project = project_with(tmp_path, """
import os
from setuptools import setup
from torch.utils.cpp_extension import CppExtension, CUDAExtension
exts = [CppExtension("p._C", ["a.cpp"])]
if os.environ.get("P_STREAMS"):
    exts.append(CUDAExtension("p._streams", ["s.cu"], include_dirs=["inc"]))
setup(name="p", version="1.0", packages=["p"], ext_modules=exts)
""", {"s.cu": '#include "streams.h"\\n', "inc/streams.h": "#include <ATen/cuda/CUDAContext.h>\\n"})
    migration = migrate(project)
    _, streams = tomllib.loads(migration.text)["tool"]["torch-ext"]["extension"]
    assert streams["if"] == {"env": {"P_STREAMS": True}, "cuda": True}
    assert "inc/streams.h:1 includes <ATen/cuda/CUDAContext.h>" in migration.text


def test_a_result_that_fails_here_is_said(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    project = project_with(tmp_path, """
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
setup(name="p", version="1.0", packages=["p"], install_requires=["torch<2.0"],
      ext_modules=[CppExtension("p._C", ["a.cpp", "b.cpp"])])
""", {"b.cpp": "#include <c10/cuda/CUDAStream.h>\\n"})
    assert main([str(project)]) == 1
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2, captured.err
    assert "p._C: b.cpp:1 includes <c10/cuda/CUDAStream.h>, which torch" in warnings[1]
    assert "torch<2.0, which torch" in warnings[0] and "cannot be installed" in warnings[0]
    assert "# WARNING: built on this machine (where migrate ran), these tables fail:" in \
        captured.out


# -- 2. variables read in both branches ---------------------------------------------------------


def test_both_branches_overrides() -> None:
    tool = document("both_branches")["tool"]["torch-ext"]
    cpu, gpu = tool["extension"]
    assert cpu == {"name": "bothbr._C", "sources": ["csrc/ops.cpp"], "strip": True}
    assert gpu["if"] == {"cuda": True} and gpu["strip"] is True and gpu["libraries"] == ["cublas"]
    assert tool["overrides"] == [
        {"if": {"env": {"USE_CUDA": "0"}}, "cuda": False},
        {"if": {"env": {"BOTHBR_CPU_ONLY": True}}, "cuda": False},
        {"if": {"env": {"BOTHBR_KEEP_SYMBOLS": True}},
         "extension": {"bothbr._C": {"strip": False}}},
        {"if": {"env": {"BOTHBR_KEEP_SYMBOLS": True}, "cuda": True},
         "extension": {"bothbr._cuda": {"strip": False}}},
    ]  # fmt: skip


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
                                           "BOTHBR_KEEP_SYMBOLS": [None, "1"]}  # fmt: skip
    observed = [observe(setup_py, dict(zip(values, combination, strict=True)), cuda)
                for combination in itertools.product(*values.values())
                for cuda in (False, True)]  # fmt: skip
    assert disagreements(text, setup_py.parent, observed, here()) == []
    # ... and the check sees a table that does not say what setup.py does
    without_keep = text.replace("if.env.BOTHBR_KEEP_SYMBOLS = true\nif.cuda = true\n",
                                "if.cuda = false\n")
    found = disagreements(without_keep, setup_py.parent, observed, here())
    assert found and all("BOTHBR_KEEP_SYMBOLS='1'" in line for line in found), found
    assert "bothbr._cuda: the tables give another strip" in found[0]


# -- 3. version suffixes from the environment ------------------------------------------------------


def metadata_version(project: Path, env: dict[str, str]) -> str:
    from pep517_torch import project as glue

    return glue.load(project, None, env=clean_env(**env)).metadata.version


def written(tmp_path: Path, pattern_or_setup: str, files: Mapping[str, str] | None = None) -> Path:
    if pattern_or_setup in PATTERNS:
        project = tmp_path / pattern_or_setup
        shutil.copytree(FIXTURES / pattern_or_setup, project)
    else:
        project = project_with(tmp_path, pattern_or_setup, files)
    assert main([str(project), "--write", "--force"]) == 0
    return project


def test_static_version_with_a_suffix(tmp_path: Path) -> None:
    document_ = document("version_suffix")
    assert document_["project"]["dynamic"] == ["version"] and "version" not in document_["project"]
    assert document_["tool"]["torch-ext"]["version"] == {"base": "1.4.2",
                                                         "suffix-env": "SUFFIXED_VERSION_SUFFIX"}
    text = migrate(FIXTURES / "version_suffix").text
    assert "see the overrides" not in text and "overrides" not in document_["tool"]["torch-ext"]
    project = written(tmp_path, "version_suffix")
    assert metadata_version(project, {}) == "1.4.2"
    assert metadata_version(project, {"SUFFIXED_VERSION_SUFFIX": "+cu130"}) == "1.4.2+cu130"


@pytest.mark.parametrize("source", ["package", "VERSION"])
def test_version_from_a_file_with_a_suffix(source: str, tmp_path: Path) -> None:
    read = ('re.search(r"__version__ = \\"(.*)\\"", open("p/__init__.py").read()).group(1)'
            if source == "package" else 'open("VERSION").read().strip()')  # fmt: skip
    project = written(tmp_path, f"""
import os, re
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
setup(name="p", version={read} + os.environ.get("P_SUFFIX", ""), packages=["p"],
      ext_modules=[CppExtension("p._C", ["a.cpp"])])
""", {"p/__init__.py": '__version__ = "0.5.1"\n'} if source == "package" else {
        "VERSION": "0.5.1\n"})  # fmt: skip
    tool = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["torch-ext"]
    version = tool["version"]
    expected = {"file": "p/__init__.py"} if source == "package" else {
        "file": "VERSION", "pattern": r"(\S+)"}  # fmt: skip
    assert version == {**expected, "suffix-env": "P_SUFFIX"}
    assert metadata_version(project, {"P_SUFFIX": "+cpu"}) == "0.5.1+cpu"
    assert metadata_version(project, {}) == "0.5.1"


# -- 4. smaller things ---------------------------------------------------------------------------


def test_small_things_tables() -> None:
    migration = migrate(FIXTURES / "small_things")
    document_ = tomllib.loads(migration.text)
    assert document_["build-system"]["requires"] == ["pep517_torch", "torch>=2.1"]  # kept
    project = document_["project"]
    assert project["description"] == "Small things a setup.py says"  # setup.cfg [metadata]
    assert project["readme"] == "README.md" and project["license"] == "BSD-3-Clause"
    assert project["urls"]["Tracker"] == "https://example.org/smallthings/issues"
    assert project["requires-python"] == ">=3.10" and project["dependencies"] == ["torch>=2.0"]
    tool = document_["tool"]["torch-ext"]
    limited, omp = tool["extension"]
    assert limited == {"name": "smallthings._limited", "sources": ["csrc/limited.cpp"],
                       "extra-cflags": ["-O2"], "py-limited-api": "cp310", "strip": True}
    assert omp == {"name": "smallthings._omp", "sources": ["csrc/omp.cpp"], "openmp": True}
    flat = migration.text.replace("\n# ", " ")
    assert "a top-level package named 'tests' ships" in flat
    assert "setup.cfg" not in flat  # everything in it was read (zip_safe changes nothing)


@pytest.mark.parametrize(
    ("compile_args", "link_args", "expected"),
    [
        (["-D", "Py_LIMITED_API=0x03090000"], [], {"py-limited-api": "cp39"}),
        (["-DPy_LIMITED_API"], ["-Wl,-s"], {"py-limited-api": True, "strip": True}),
        (["-fopenmp", "-DAT_PARALLEL_OPENMP=1", "-DKEEP"], ["-Wl,--strip-all", "-fopenmp"],
         {"openmp": True, "strip": True, "extra-cflags": ["-DKEEP"]}),
        (["-DAT_PARALLEL_OPENMP=1"], [], {"extra-cflags": ["-DAT_PARALLEL_OPENMP=1"]}),
    ],
)  # fmt: skip
def test_flags_with_a_key_of_their_own(compile_args: list[str], link_args: list[str],
                                       expected: dict[str, Any], tmp_path: Path) -> None:
    limited = any("LIMITED" in a for a in compile_args)
    project = project_with(tmp_path, f"""
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
setup(name="p", version="1.0", packages=["p"], ext_modules=[CppExtension(
    "p._C", ["a.cpp"], py_limited_api={limited}, extra_compile_args={compile_args!r},
    extra_link_args={link_args!r})])
""")
    (extension,) = tomllib.loads(migrate(project).text)["tool"]["torch-ext"]["extension"]
    assert extension == {"name": "p._C", "sources": ["a.cpp"], **expected}


LICENSED = """
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
setup(name="p", version="1.0", packages=["p"], license="BSD-3-Clause",
      classifiers=["License :: OSI Approved :: BSD License"],
      ext_modules=[CppExtension("p._C", ["a.cpp"])])
"""


def test_license_notes_only_when_the_file_takes_setup_py_license(tmp_path: Path) -> None:
    project = project_with(tmp_path, LICENSED)
    assert "'License ::' classifiers dropped" in migrate(project).text.replace("\n# ", " ")
    (project / "pyproject.toml").write_text(
        '[project]\nname = "p"\nlicense = { text = "BSD" }\n'
        'classifiers = ["License :: OSI Approved :: BSD License"]\ndynamic = ["version"]\n')
    migration = migrate(project)
    assert tomllib.loads(migration.text)["project"]["license"] == {"text": "BSD"}  # kept
    assert "License ::" not in migration.text.split("[project]")[0]
    assert "classifiers dropped" not in migration.text.replace("\n# ", " ")


def test_setup_cfg_directives(tmp_path: Path) -> None:
    project = project_with(tmp_path, """
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
setup(ext_modules=[CppExtension("p._C", ["a.cpp"])])
""", {"p/__init__.py": '__version__ = "3.1.4"\n', "CHANGES.rst": "Changes\n",
      "setup.cfg": "[metadata]\nname = p\nversion = attr: p.__version__\n"
      "long_description = file: CHANGES.rst\nkeywords = a, b\n"
      "[options]\npackages = find:\n[options.extras_require]\ntest = pytest\n"
      "[options.entry_points]\nconsole_scripts =\n    p-run = p:main\n"})  # fmt: skip
    migration = migrate(project)
    document_ = tomllib.loads(migration.text)
    assert document_["project"]["name"] == "p" and document_["project"]["dynamic"] == ["version"]
    assert document_["tool"]["torch-ext"]["version"] == {"file": "p/__init__.py"}
    assert document_["project"]["readme"] == "CHANGES.rst"
    assert document_["project"]["optional-dependencies"] == {"test": ["pytest"]}
    assert document_["project"]["scripts"] == {"p-run": "p:main"}
    assert "setup.cfg [options] packages: not converted" in migration.text.replace("\n# ", " ")


# -- 5. the torch pin, said --------------------------------------------------------------------


def test_the_torch_pin_decision_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    from pep517_torch.core.toolchain import find_torch
    from pep517_torch.distribution.metadata import torch_pin

    assert main([str(FIXTURES / "small_things")]) == 0
    text = capsys.readouterr().out.replace("\n# ", " ")
    pin = torch_pin(find_torch().version, "minor")
    assert 'torch pin: torch-requirement = "minor" (the default): built here with torch' in text
    assert f"the wheel requires {pin};" in text and "undefined symbols" in text
    assert "setup.py's own torch>=2.0 is folded in" in text

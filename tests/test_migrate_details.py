"""migrate, case by case (issue #14): each pattern in a small project of its own, no compiling.

The fixtures with a build are in test_migrate_patterns.py; these check what migrate writes for
the many forms a pattern takes, and that the result resolves (version) or warns (fails here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config.pyproject import tomllib
from pep517_torch.migrate.command import migrate
from tests.migrate_helpers import migrate_main as main
from tests.migrate_helpers import (
    FIXTURES,
    metadata_version,
    project_with,
    unset_fixture_variables,  # noqa: F401  (autouse)
    written,
)

# -- 1. CUDA decided without torch -------------------------------------------------------------


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
    assert streams["if"] == {"env": {"P_STREAMS": True}, "cuda": True, "torch-cuda": True}
    assert "inc/streams.h:1 includes <ATen/cuda/CUDAContext.h>" in migration.text


def test_a_result_that_fails_here_is_said(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    project = project_with(tmp_path, """
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
setup(name="p", version="1.0", packages=["p"], install_requires=["torch<2.0"],
      ext_modules=[CppExtension("p._C", ["a.cpp", "b.cpp"])])
""", {"b.cpp": "#include <c10/cuda/CUDAStream.h>\\n"})
    assert main([str(project)]) == 1
    captured = capsys.readouterr()
    warnings = sorted((line for line in captured.err.splitlines() if line.startswith("warning:")),
                      key=lambda line: "cannot be installed" not in line)
    assert len(warnings) == 2, captured.err
    # the compile core's own check, in the words a build and doctor say it
    assert warnings[1].startswith("warning: built on this machine, the result fails:"
                                  f" {project / 'b.cpp'}:1 includes <c10/cuda/CUDAStream.h>, but"
                                  " torch"), warnings[1]
    assert "torch<2.0, which torch" in warnings[0] and "cannot be installed" in warnings[0]
    assert "# WARNING: built on this machine (where migrate ran), these tables fail:" in \
        captured.out


# -- 2. a variable that changes a `cuda` table's key, with CUDA on ----------------------------


def test_cuda_only_append_keeps_setup_py_order(tmp_path: Path) -> None:
    project = project_with(tmp_path, """
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import CppExtension, CUDAExtension
nvcc = ["-O3"]
if os.getenv("P_DEBUG"):
    nvcc.append("-G")
if torch.cuda.is_available():
    ext = CUDAExtension("p._C", ["a.cpp", "k.cu"], extra_compile_args={"cxx": [], "nvcc": nvcc})
else:
    ext = CppExtension("p._C", ["a.cpp"])
setup(name="p", version="1.0", packages=["p"], ext_modules=[ext])
""", {"k.cu": ""})
    migration = migrate(project)
    assert "Review" not in migration.text  # every run reproduced, -G after -O3 included
    (debug,) = tomllib.loads(migration.text)["tool"]["torch-ext"]["overrides"]
    assert debug == {"if": {"env": {"P_DEBUG": True}, "cuda": True}, "extension": {
        "p._C": {"cuda": {"sources": ["k.cu"], "extra-cuda-cflags": ["-O3", "-G"]}}}}


# -- 3. a version from a file, with a suffix ---------------------------------------------


@pytest.mark.parametrize("source", ["package", "VERSION"])
def test_version_from_a_file_with_a_suffix(source: str, tmp_path: Path) -> None:
    read = ('re.search(r"__version__ = \\"(.*)\\"", open("p/__init__.py").read()).group(1)'
            if source == "package" else 'open("VERSION").read().strip()')
    project = written(tmp_path, f"""
import os, re
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
setup(name="p", version={read} + os.environ.get("P_SUFFIX", ""), packages=["p"],
      ext_modules=[CppExtension("p._C", ["a.cpp"])])
""", {"p/__init__.py": '__version__ = "0.5.1"\n'} if source == "package" else {
        "VERSION": "0.5.1\n"})
    tool = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["torch-ext"]
    version = tool["version"]
    expected = {"file": "p/__init__.py"} if source == "package" else {
        "file": "VERSION", "pattern": r"(\S+)"}
    assert version == {**expected, "suffix-env": "P_SUFFIX"}
    assert metadata_version(project, {"P_SUFFIX": "+cpu"}) == "0.5.1+cpu"
    assert metadata_version(project, {}) == "0.5.1"


# -- 4. flags, license notes, setup.cfg -------------------------------------------------------


@pytest.mark.parametrize(
    ("compile_args", "link_args", "expected"),
    [
        (["-D", "Py_LIMITED_API=0x03090000"], [], {"py-limited-api": "cp39"}),
        (["-DPy_LIMITED_API"], ["-Wl,-s"], {"py-limited-api": True, "strip": True}),
        (["-fopenmp", "-DAT_PARALLEL_OPENMP=1", "-DKEEP"], ["-Wl,--strip-all", "-fopenmp"],
         {"openmp": True, "strip": True, "extra-cflags": ["-DKEEP"]}),
        (["-DAT_PARALLEL_OPENMP=1"], [], {"extra-cflags": ["-DAT_PARALLEL_OPENMP=1"]}),
    ],
)
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
      "[options.entry_points]\nconsole_scripts =\n    p-run = p:main\n"})
    migration = migrate(project)
    document_ = tomllib.loads(migration.text)
    assert document_["project"]["name"] == "p" and document_["project"]["dynamic"] == [
        "version", "dependencies"]
    assert document_["tool"]["torch-ext"]["version"] == {"file": "p/__init__.py"}
    assert document_["project"]["readme"] == "CHANGES.rst"
    assert document_["project"]["optional-dependencies"] == {"test": ["pytest"]}
    assert document_["project"]["scripts"] == {"p-run": "p:main"}
    assert "setup.cfg [options] packages: not converted" in migration.text.replace("\n# ", " ")


# -- 5. the torch pin, said --------------------------------------------------------------------


def test_the_torch_pin_decision_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    from pep517_torch.core.toolchain.tools import find_torch
    from pep517_torch.distribution.metadata import torch_pin

    assert main([str(FIXTURES / "small_things")]) == 0
    text = capsys.readouterr().out.replace("\n# ", " ")
    pin = torch_pin(find_torch().version, "minor")
    assert 'torch pin: torch-requirement = "minor" (the default): built here with torch' in text
    assert f"the wheel requires {pin};" in text and "undefined symbols" in text
    assert "The project's own torch>=2.0 is folded in" in text


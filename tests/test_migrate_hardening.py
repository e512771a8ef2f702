"""migrate on setup.py files it had not seen: scripts that treat sys.stderr as the real stream
it is, a free-form variable read only in the CUDA branch, a `tests.*` package set that
find_packages(exclude=["tests"]) ships; and the docs saying first that migrate runs setup.py.
Each test compares the produced TOML; nothing is built."""

from __future__ import annotations

from pathlib import Path

from pep517_torch.config.pyproject import tomllib
from pep517_torch.migrate.command import migrate
from pep517_torch.migrate.intercept.run import run_setup
from tests.conftest import count
from tests.migrate_helpers import ROOT, project_with, unset_fixture_variables  # noqa: F401

STREAMS = """
import os, sys
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
sys.stderr.reconfigure(line_buffering=True)
sys.stdout.reconfigure(errors="replace")
assert sys.stdout.encoding and sys.stderr.encoding
os.write(sys.stderr.fileno(), b"")
print("to stdout")
sys.stdout.buffer.write(b"bytes through .buffer\\n")
sys.stdout.flush()
print("to stderr", file=sys.stderr)
setup(name="p", version="1.0", packages=["p"],
      ext_modules=[CppExtension("p._C", ["a.cpp"])], cmdclass={"build_ext": BuildExtension})
"""


def test_setup_py_gets_real_text_streams(tmp_path: Path) -> None:
    """Before: `'_io.StringIO' object has no attribute 'reconfigure'`."""
    project = project_with(tmp_path, STREAMS)
    run = run_setup(project / "setup.py")
    assert run.output.splitlines() == ["to stdout", "bytes through .buffer", "to stderr"]
    tables = tomllib.loads(migrate(project).text)
    assert tables["tool"]["torch-ext"]["extension"][0]["name"] == "p._C"
    count("text-stream methods a setup.py used on migrate's stdout/stderr", 5)


FREE_FORM = """
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
if torch.cuda.is_available():
    nvcc_flags = os.getenv('NVCC_FLAGS', '').split(' ')
    nvcc_flags = [flag for flag in nvcc_flags if flag] + ["-O3"]
    ext = CUDAExtension("p._C", ["a.cpp", "k.cu"],
                        extra_compile_args={"cxx": ["-O2"], "nvcc": nvcc_flags})
else:
    ext = CppExtension("p._C", ["a.cpp"], extra_compile_args=["-O2"])
setup(name="p", version="1.0", packages=["p"], ext_modules=[ext],
      cmdclass={"build_ext": BuildExtension})
"""


def test_a_free_form_variable_of_the_cuda_branch_is_a_placeholder(tmp_path: Path) -> None:
    """Before: `if.env.NVCC_FLAGS = "1"` with `extra-cuda-cflags = ["1", ...]`, and the same
    for "0": literal overrides for values nobody builds with."""
    project = project_with(tmp_path, FREE_FORM, {"k.cu": ""})
    text = migrate(project).text
    tables = tomllib.loads(text)
    overrides = tables["tool"]["torch-ext"].get("overrides", [])
    assert not any("NVCC_FLAGS" in str(o.get("if")) for o in overrides), overrides
    assert '"1"' not in text.split("[build-system]")[1]
    commented = [line for line in text.splitlines() if line.startswith("# ")]
    assert "# if.env.NVCC_FLAGS = true" in commented
    assert "# if.cuda = true" in commented
    assert any("<value of NVCC_FLAGS>" in line and "extra-cuda-cflags" in line
               for line in commented), text
    assert "$NVCC_FLAGS: unset here; setup.py copies its value into the configuration" in text


TESTS_PACKAGES = """
from setuptools import setup, find_packages
from torch.utils.cpp_extension import BuildExtension, CppExtension
setup(name="p", version="1.0", packages=find_packages(exclude=["tests"]),
      ext_modules=[CppExtension("p._C", ["a.cpp"])], cmdclass={"build_ext": BuildExtension})
"""


def test_a_shipped_tests_subpackage_gets_the_note(tmp_path: Path) -> None:
    project = project_with(tmp_path, TESTS_PACKAGES, {
        "tests/__init__.py": "", "tests/unit/__init__.py": "", "tests/unit/deep/__init__.py": ""})
    text = migrate(project).text
    packages = tomllib.loads(text)["tool"]["torch-ext"]["packages"]
    assert packages == ["p", "tests.unit"]
    flat = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert "a top-level package named 'tests' ships (tests.unit, tests.unit.deep;" in flat
    assert "exclude ['tests', 'tests.*']" in flat


def test_the_docs_say_first_that_migrate_runs_setup_py() -> None:
    head = "\n".join((ROOT / "docs" / "migrate.md").read_text().splitlines()[:12])
    assert "migrate runs your setup.py" in head


SUFFIXED_FILE_VERSION = """
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
version = open("VERSION").read().strip() + os.getenv("P_VERSION_SUFFIX", "")
if torch.cuda.is_available():
    ext = CUDAExtension("p._C", ["a.cpp", "k.cu"])
else:
    ext = CppExtension("p._C", ["a.cpp"])
setup(name="p", version=version, packages=["p"], ext_modules=[ext],
      cmdclass={"build_ext": BuildExtension})
"""


def test_a_version_suffix_that_suffix_env_says_gets_no_other_note(tmp_path: Path) -> None:
    """Before: `[project] dynamic change too, which no override can express` and `version is
    dropped, which no override can say`, twice each, for what suffix-env already says."""
    project = project_with(tmp_path, SUFFIXED_FILE_VERSION, {"k.cu": "", "VERSION": "1.2.0\n"})
    text = migrate(project).text
    version = tomllib.loads(text)["tool"]["torch-ext"]["version"]
    assert (version["file"], version["suffix-env"]) == ("VERSION", "P_VERSION_SUFFIX")
    assert "no override can" not in text, text
    assert "$P_VERSION_SUFFIX: unset here; tried '1', '0' with CUDA off and on: only the version" \
        " changes" in text

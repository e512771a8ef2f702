"""A variable of a setup.py's own that chooses the GPU architectures (issue 43 item 16):
`CUDA_ARCHITECTURES` turned into `-gencode` flags was "no change" (or a placeholder override
copying its value into the flags). Now migrate recognises any variable whose value feeds
`-gencode`/`-arch`/`--generate-code`, leaves the flags to the arch-list policy, keeps
setup.py's list without the variable as the extension's `cuda-arch-list`, and says that
TORCH_CUDA_ARCH_LIST replaces it. Nothing is compiled."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.config.pyproject import tomllib
from pep517_torch.migrate import migrate
from tests.conftest import count
from tests.migrate_helpers import project_with, unset_fixture_variables  # noqa: F401

HEAD = """import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
"""
TAIL = """
setup(name="p", version="1.0", packages=["p"],
      ext_modules=[CUDAExtension("p._C", ["k.cu"],
                                 extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O3", *flags]})],
      cmdclass={"build_ext": BuildExtension})
"""
# The family seen in published setup.py files: (variable, how it becomes flags, its default)
PATTERNS = {
    "semicolons-gencode=": ("CUDA_ARCHITECTURES", """
archs = os.environ.get("CUDA_ARCHITECTURES", "75;80").split(";")
flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
""", "7.5;8.0"),
    "getenv-commas-two-arguments": ("ARCHS", """
archs = os.getenv("ARCHS")
archs = archs.split(",") if archs else ["80", "90"]
flags = []
for a in archs:
    flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
""", "8.0;9.0"),
    "dotted-spaces-generate-code": ("MY_GPU_ARCHS", """
flags = []
for a in os.environ.get("MY_GPU_ARCHS", "8.0 9.0").split():
    n = a.replace(".", "")
    flags.append(f"--generate-code=arch=compute_{n},code=[sm_{n},compute_{n}]")
""", "8.0+PTX;9.0+PTX"),
    "a-filter-over-known-archs": ("FLASH_CUDA_ARCHS", """
wanted = os.getenv("FLASH_CUDA_ARCHS", "80;90").split(";")
flags = []
for a in ("80", "90", "100"):
    if a in wanted:
        flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
""", "8.0;9.0"),
    "int-parsed-arch=": ("GPU_ARCHS", """
flags = [f"-arch=sm_{int(a)}" for a in os.environ.get("GPU_ARCHS", "86").split(",")]
""", "8.6"),
}


def _migrated(tmp_path: Path, body: str) -> tuple[str, dict]:
    project = project_with(tmp_path, HEAD + body + TAIL,
                           {"k.cu": "__global__ void k(float* x) { x[0] = 1; }\n"})
    migration = migrate(project)
    assert migration.problems == [] and migration.fails_here == [], migration.text
    return migration.text, tomllib.loads(migration.text)


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_a_variable_that_chooses_the_archs_is_replaced_by_torch_cuda_arch_list(
    tmp_path: Path, pattern: str
) -> None:
    variable, body, default = PATTERNS[pattern]
    text, document = _migrated(tmp_path, body)
    header = " ".join(line.lstrip("# ") for line in text.split("[build-system]")[0].splitlines())
    assert (f"${variable}: setup.py turns it into the arch flags of p._C" in header
            and "TORCH_CUDA_ARCH_LIST replaces it" in header), header
    [extension] = document["tool"]["torch-ext"]["extension"]
    assert extension["extra-cuda-cflags"] == ["-O3"]  # no arch flag left to win over the list
    assert extension["cuda-arch-list"] == default
    assert f"env.{variable}" not in text  # no override on it, not even a commented one
    count("setup.py patterns turning a variable of their own into arch flags", 1)


def test_the_list_kept_is_setup_pys_own_when_the_variable_is_set_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_ARCHITECTURES", "90")
    variable, body, default = PATTERNS["semicolons-gencode="]
    text, document = _migrated(tmp_path, body)
    [extension] = document["tool"]["torch-ext"]["extension"]
    assert extension["cuda-arch-list"] == default and "-gencode" not in text.split("[project]")[1]


def test_a_variable_that_changes_other_flags_is_not_taken_for_an_arch_list(tmp_path: Path) -> None:
    """`NVCC_EXTRA` copied into the flags beside fixed arch flags: the arch flags stay (they
    are setup.py's own choice), and the variable is said as before."""
    text, document = _migrated(tmp_path, """
flags = ["-gencode=arch=compute_80,code=sm_80", *os.environ.get("NVCC_EXTRA", "").split()]
""")
    [extension] = document["tool"]["torch-ext"]["extension"]
    assert "-gencode=arch=compute_80,code=sm_80" in extension["extra-cuda-cflags"]
    assert "cuda-arch-list" not in extension
    assert "$NVCC_EXTRA: unset here; setup.py copies its value" in text

"""migrate writes the conditions #14 item 6 added: `{not = ...}` for an extension a variable's
value drops, an override's `enabled = false` where the extension's own `if` cannot say it, and
`torch-cuda = true` for an extension using torch's CUDA API (so FORCE_CUDA=1 on a CPU torch
skips it instead of failing). No compiling."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pep517_torch.config import Facts, resolve_project
from pep517_torch.config.pyproject import tomllib
from pep517_torch.migrate.command import migrate
from pep517_torch.migrate.builds_here import build_problems_here
from tests.config_helpers import VARS
from tests.migrate_helpers import clean_env, project_with


def test_an_extension_a_value_drops_gets_not(tmp_path: Path) -> None:
    project = project_with(tmp_path, """
import os
from setuptools import setup
from torch.utils.cpp_extension import CppExtension
exts = [CppExtension("p._C", ["a.cpp"])]
if os.environ.get("P_NO_EXTRA") != "1":
    exts.append(CppExtension("p._extra", ["b.cpp"]))
setup(name="p", version="1.0", packages=["p"], ext_modules=exts)
""", {"b.cpp": ""})
    migration = migrate(project)
    assert "no condition here can say" not in migration.text and "Review" not in migration.text
    _, extra = tomllib.loads(migration.text)["tool"]["torch-ext"]["extension"]
    assert extra["if"] == {"env": {"P_NO_EXTRA": {"not": "1"}}}
    assert 'if.env.P_NO_EXTRA = { not = "1" }' in migration.text
    document = tomllib.loads(migration.text)
    for value, built in ((None, True), ("0", True), ("1", False), ("", True)):
        env = {} if value is None else {"P_NO_EXTRA": value}
        resolved = resolve_project(project, document, None, Facts(env=env), VARS)
        assert ("p._extra" in [s.name for s in resolved.extensions]) is built, value


def test_an_extension_dropped_with_cuda_on_gets_an_enabled_override(tmp_path: Path) -> None:
    project = project_with(tmp_path, """
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import CppExtension, CUDAExtension
exts = [CppExtension("p._C", ["a.cpp"])]
if torch.cuda.is_available():
    exts[0] = CUDAExtension("p._C", ["a.cpp", "k.cu"])
    if not os.environ.get("P_NO_GPU_EXTRA"):
        exts.append(CUDAExtension("p._gpu_extra", ["g.cu"]))
setup(name="p", version="1.0", packages=["p"], ext_modules=exts)
""", {"k.cu": "", "g.cu": ""})
    migration = migrate(project)
    assert "no condition here can say" not in migration.text and "Review" not in migration.text
    tool = tomllib.loads(migration.text)["tool"]["torch-ext"]
    assert tool["extension"][1]["if"] == {"cuda": True}
    assert {"if": {"env": {"P_NO_GPU_EXTRA": True}, "cuda": True},
            "extension": {"p._gpu_extra": {"enabled": False}}} in tool["overrides"]
    cuda_torch = Facts(env={"P_NO_GPU_EXTRA": "1"}, torch_version="2.13.0+cu130",
                       torch_cuda="13.0", nvcc_available=True)
    resolved = resolve_project(project, tomllib.loads(migration.text), None, cuda_torch, VARS)
    assert [s.name for s in resolved.extensions] == ["p._C"]
    assert resolved.skipped[0][1].endswith('extension."p._gpu_extra".enabled = false')


FORCED_SETUP = """
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import CppExtension, CUDAExtension
use_cuda = torch.cuda.is_available() or os.getenv("FORCE_CUDA") == "1"
exts = [CUDAExtension("p._C", ["a.cpp", "k.cu"]) if use_cuda else CppExtension("p._C", ["a.cpp"])]
if use_cuda:
    exts.append(CUDAExtension("p._streams", ["s.cu"]))
setup(name="p", version="1.0", packages=["p"], ext_modules=exts)
"""


def test_force_cuda_on_a_cpu_torch_skips_what_needs_a_cuda_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = project_with(tmp_path, FORCED_SETUP, {
        "k.cu": "__global__ void k() {}\n", "s.cu": "#include <c10/cuda/CUDAStream.h>\n"})
    migration = migrate(project)
    document = tomllib.loads(migration.text)
    tool = document["tool"]["torch-ext"]
    assert tool["extension"][1]["if"] == {"cuda": True, "torch-cuda": True}
    assert {"if": {"env": {"FORCE_CUDA": "1"}}, "cuda": True} in tool["overrides"]
    here = Facts(env={"FORCE_CUDA": "1"}, torch_version="2.13.0+cpu", nvcc_available=True)
    resolved = resolve_project(project, document, None, here, VARS)
    assert resolved.cuda_enabled and [s.name for s in resolved.extensions] == ["p._C"]
    assert resolved.skipped[0][1].endswith(
        "if.torch-cuda = true does not hold (torch 2.13.0+cpu is a CPU build)"
    )
    # what migrate checks on the machine it ran on: FORCE_CUDA=1 here no longer fails
    monkeypatch.setattr(os, "environ", {**clean_env(), "FORCE_CUDA": "1"})
    assert not [p for p in build_problems_here(document, project) if "p._streams" in p]


def test_a_guarded_torch_cuda_include_needs_no_condition(tmp_path: Path) -> None:
    guarded = "#ifdef WITH_CUDA\n#include <c10/cuda/CUDAStream.h>\n#endif\n"
    project = project_with(tmp_path, FORCED_SETUP.replace('"s.cu"]))', '"s.cu"]))\nexts.pop()'),
                           {"k.cu": guarded})
    migration = migrate(project)
    (ext,) = tomllib.loads(migration.text)["tool"]["torch-ext"]["extension"]
    assert "if" not in ext and "torch's CUDA API" not in migration.text


"""distcc: compiles go through a real distccd on 127.0.0.1, and DISTCC_HOSTS sets the job count."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.core.toolchain import jobs
from pep517_torch.core.plan import prepare
from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.errors import ToolchainError
from tests.commands import run_python
from tests.servers import Distccd, check_module, distccd, free_port, tool, write_c_project

pytestmark = pytest.mark.compile


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Distccd]:
    with distccd(tmp_path) as running:
        yield running


def distcc_env(tmp_path: Path, hosts: str) -> dict[str, str]:
    # No fallback: a compile distcc could not send fails instead of quietly running here.
    (tmp_path / "distcc-state").mkdir(exist_ok=True)
    return {"DISTCC_HOSTS": hosts, "DISTCC_DIR": str(tmp_path / "distcc-state"),
            "DISTCC_FALLBACK": "0"}


def test_wheel_through_distccd_equals_a_local_build(
    tmp_path: Path, server: Distccd, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = write_c_project(tmp_path / "alice" / "teamops")
    pipeline.build_wheel(local, tmp_path / "local-dist", {"compiler-launcher": "none"})
    assert server.compiled() == []
    for name, value in distcc_env(tmp_path, server.hosts()).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PEP517_TORCH_COMPILER_LAUNCHER", "distcc")  # the variable, as CI sets it
    remote = write_c_project(tmp_path / "bob" / "elsewhere" / "teamops")
    pipeline.build_wheel(remote, tmp_path / "distcc-dist", None)
    compiled = server.compiled()
    assert len(compiled) == 3, compiled  # every TU went through distccd
    assert {line.rsplit("/", 1)[1] for line in compiled} == {"add.cpp", "mul.cpp", "module.cpp"}
    [ours] = (tmp_path / "distcc-dist").glob("*.whl")
    [theirs] = (tmp_path / "local-dist").glob("*.whl")
    assert ours.name == theirs.name and ours.read_bytes() == theirs.read_bytes()
    assert check_module(ours, tmp_path) == "./csrc/module.cpp"


def test_jit_compiles_through_distcc_from_the_environment_variable(
    tmp_path: Path, server: Distccd, jit_env: Path
) -> None:
    source = tmp_path / "src" / "jit_distcc.cpp"
    source.parent.mkdir()
    source.write_text(
        "#include <Python.h>\n"
        "static PyModuleDef def_ = {PyModuleDef_HEAD_INIT, \"jit_distcc\", nullptr, -1, nullptr};\n"
        "PyMODINIT_FUNC PyInit_jit_distcc(void) { return PyModule_Create(&def_); }\n"
    )
    env = {**distcc_env(tmp_path, server.hosts()), "PEP517_TORCH_COMPILER_LAUNCHER": "distcc"}
    code = ("import pep517_torch, sys; m = pep517_torch.load('jit_distcc', [sys.argv[1]],"
            f" build_directory={str(tmp_path / 'jit')!r}); print(m.__name__)")
    out = run_python(code.replace("sys.argv[1]", repr(str(source))), env=env)
    assert out.stdout.strip() == "jit_distcc"
    assert [line.endswith("jit_distcc.cpp") for line in server.compiled()] == [True]


def test_distcc_hosts_decide_the_job_count(tmp_path: Path) -> None:
    distcc = tool("distcc")
    source = tmp_path / "a.cpp"
    source.write_text("int f() { return 1; }\n")
    spec = ExtensionSpec("m", (source,))
    base = {**os.environ, "DISTCC_DIR": str(tmp_path / "state")}

    def planned(hosts: str) -> jobs.JobPlan:
        options = BuildOptions(build_dir=tmp_path / "b", compiler_launcher=distcc,
                               env={**base, "DISTCC_HOSTS": hosts})
        return prepare([spec], options).jobs

    remote = planned("127.0.0.1:3999/24 127.0.0.2:3999/16")
    assert (remote.jobs, remote.heavy) == (40, 40)  # no memory bound on other machines' work
    assert remote.local_heavy_depth == jobs.plan_jobs(None).heavy  # nvcc and PCHs stay here
    mixed = planned("localhost/64 127.0.0.1:3999/8")
    assert mixed.jobs == 72 and mixed.heavy == 8 + jobs.plan_jobs(None).heavy
    assert "distcc hosts: 8 remote, 64 local" in mixed.reason
    with pytest.raises(ToolchainError, match="compiler-launcher distcc: .*DISTCC_HOSTS"):
        planned("")


def test_distcc_plans_no_pch(tmp_path: Path) -> None:
    """The hosts compile preprocessed text, which no .gch can be part of."""
    distcc = tool("distcc")
    source = tmp_path / "a.cpp"
    source.write_text("#include <torch/extension.h>\n")
    options = BuildOptions(build_dir=tmp_path / "b", compiler_launcher=distcc,
                           env={**os.environ, "DISTCC_HOSTS": "127.0.0.1:3999/4"})
    plan = prepare([ExtensionSpec("m", (source,))], options)
    assert "-include" not in plan.ninja_file.read_text()
    assert any("precompiled headers off: distcc" in note for note in plan.notes)


@pytest.mark.cuda
def test_nvcc_compiles_here_behind_distcc(tmp_path: Path) -> None:
    """nvcc is a driver distccd cannot run: it stays local (and in the memory-bounded pool)."""
    distcc = tool("distcc")
    tool("nvcc")
    kernel = tmp_path / "k.cu"
    kernel.write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    options = BuildOptions(build_dir=tmp_path / "b", compiler_launcher=distcc,
                           cuda_arch_list=("8.0",),
                           env={**os.environ, "DISTCC_HOSTS": "127.0.0.1:3999/4"})
    text = prepare([ExtensionSpec("m", (kernel,))], options).ninja_file.read_text()
    [cxx] = [line for line in text.splitlines() if line.startswith("cxx = ")]
    [nvcc] = [line for line in text.splitlines() if line.startswith("nvcc = ")]
    assert cxx.split()[2].endswith("distcc") and "distcc" not in nvcc


def test_doctor_names_distcc_its_hosts_and_the_job_count(tmp_path: Path, server: Distccd) -> None:
    env = {**os.environ, "PEP517_TORCH_COMPILER_LAUNCHER": "distcc",
           "DISTCC_HOSTS": f"{server.hosts(6)} 127.0.0.1:{free_port()}/2"}
    out = subprocess.run([sys.executable, "-m", "pep517_torch", "doctor"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300).stdout
    [line] = [line for line in out.splitlines() if "compiler launcher" in line]
    assert line.startswith("warn ") and "compiler launcher: distcc" in line
    assert f"distcc host 127.0.0.1:{server.port} reachable" in line and " unreachable" in line
    assert "parallel jobs: 8 (distcc hosts: 8 remote, 0 local slots)" in out

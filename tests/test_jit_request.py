"""The JIT's request (jit/request.py) without compiling: its stamp key and the warm path's imports."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import get_args

import pytest

from pep517_torch.core.spec import Kind
from pep517_torch.jit.request import ArtifactKind, JitRequest
from tests.commands import run_python
from tests.conftest import write
from tests.machine_changes import Machine, cases, change

# The modules `import pep517_torch.jit` may load: what a warm load() runs. No core.spec (its
# dataclasses), no config, no build planning.
WARM_PATH_MODULES = {
    f"pep517_torch{suffix}"
    for suffix in (
        "", "._version", ".errors", ".core", ".core.toolchain", ".core.toolchain.lookup", ".core.ninja", ".core.ninja.syntax",
        ".core.suffixes", ".jit", ".jit.api", ".jit.request", ".jit.stamp", ".jit.warm",
        ".shipped_runtime", ".shipped_runtime.environment", ".shipped_runtime.build_inputs",
        ".shipped_runtime.state_file", ".shipped_runtime.user_line",
    )
}


def test_the_key_names_every_field_and_is_the_same_in_every_process() -> None:
    """The request's part of the stamp's key: equal requests, equal text, in any process;
    any field changed, another text (a flag moved from one list to another included)."""
    request = JitRequest("m", ("/s/a.cpp",), ("/inc",), ("-O1",), (), ("-lx",), None, "library")
    code = ("from pep517_torch.jit.request import JitRequest; print(JitRequest('m', ('/s/a.cpp',),"
            " ('/inc',), ('-O1',), (), ('-lx',), None, 'library').canonical())")
    assert run_python(code).stdout.strip() == request.canonical()
    changed = [request._replace(cflags=()), request._replace(cuda_cflags=("-O1",)),
               request._replace(with_cuda=False), request._replace(stable_abi="2.10"),
               request._replace(kind="module"), request._replace(name="n")]
    assert len({request.canonical(), *(other.canonical() for other in changed)}) == 1 + len(changed)
    assert request.artifact(Path("/b"), "m_v1") == "/b/m_v1.so"
    tool = JitRequest("t", ("/s/main.cpp",), kind="executable")
    assert tool.artifact("/b", "t") == "/b/t"


def test_the_request_kinds_are_the_specs() -> None:
    assert set(get_args(ArtifactKind)) == {kind.value for kind in Kind}


def test_the_warm_path_imports_stay_light() -> None:
    code = (
        "import json, sys; import pep517_torch.jit; "
        "print(json.dumps([m for m in sys.modules if m.startswith('pep517_torch')]))"
    )
    loaded = set(json.loads(run_python(code).stdout))
    assert loaded <= WARM_PATH_MODULES, loaded - WARM_PATH_MODULES


def test_a_stamp_holds_the_environment_it_was_built_in(tmp_path: Path) -> None:
    """The variables that change what a build makes (config's list) are recorded by the cold
    path; the warm check compares them without importing config. MAX_JOBS only says how a
    build runs: changing it leaves the stamp fresh."""
    from pep517_torch.jit import stamp

    artifact = write(tmp_path / "m.so")
    source = write(tmp_path / "m.cpp", "int f() { return 0; }\n")
    built_in = {"TORCH_CUDA_ARCH_LIST": "8.0", "MAX_JOBS": "2"}
    stamp_file = stamp.stamp_path(tmp_path, "m")
    stamp.write(stamp_file, "key", [source], built_in, artifact)
    assert stamp.is_fresh(stamp_file, "key", artifact, built_in)
    assert stamp.is_fresh(stamp_file, "key", artifact, {**built_in, "MAX_JOBS": "7"})
    other_arch = {**built_in, "TORCH_CUDA_ARCH_LIST": "9.0"}
    assert not stamp.is_fresh(stamp_file, "key", artifact, other_arch)
    assert not stamp.is_fresh(stamp_file, "key", artifact, {"MAX_JOBS": "2"})
    assert not stamp.is_fresh(stamp_file, "other key", artifact, built_in)
    # A C++-only build reads no CUDA variable: its stamp records none of them.
    stamp.write(stamp_file, "key", [source], built_in, artifact, cuda=False)
    assert stamp.is_fresh(stamp_file, "key", artifact, other_arch)
    assert stamp.is_fresh(stamp_file, "key", artifact, {**built_in, "CUDA_HOME": "/opt/cuda"})
    assert not stamp.is_fresh(stamp_file, "key", artifact, {**built_in, "CXX": "clang++"})


def test_a_stamp_is_stale_once_its_compiler_is_another(tmp_path: Path) -> None:
    """The warm check stats the compiler the stamp recorded while CXX and PATH are unchanged,
    and looks it up again when they changed: another compiler at the same path (a switched
    alternative, an upgrade), or another one first on a new PATH, rebuilds."""
    import shutil

    from pep517_torch.jit import stamp

    def compiler(directory: Path, text: str) -> Path:
        path = write(directory / "c++", f"#!/bin/sh\n# {text}\n")
        path.chmod(0o755)
        return path

    first, second = tmp_path / "bin1", tmp_path / "bin2"
    compiler(first, "gcc 12")
    artifact = write(tmp_path / "m.so")
    env = {"PATH": str(first)}
    stamp_file = stamp.stamp_path(tmp_path, "m")
    stamp.write(stamp_file, "key", [], env, artifact)
    assert stamp.is_fresh(stamp_file, "key", artifact, env)
    assert stamp.is_fresh(stamp_file, "key", artifact, {"PATH": f"{tmp_path / 'none'}:{first}"})
    compiler(second, "gcc 13")
    assert not stamp.is_fresh(stamp_file, "key", artifact, {"PATH": f"{second}:{first}"})
    assert not stamp.is_fresh(stamp_file, "key", artifact, {**env, "CXX": str(second / "c++")})
    shutil.copy(second / "c++", tmp_path / "upgraded")
    (tmp_path / "upgraded").replace(first / "c++")  # same path, another file
    assert not stamp.is_fresh(stamp_file, "key", artifact, env)


@pytest.mark.parametrize("case", cases("compiler", "nvcc", "torch", "CXXFLAGS", "CPLUS_INCLUDE_PATH"))
def test_a_stale_stamp_says_what_changed(tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stamp is a record (shipped_runtime/build_inputs.py): each fact it holds and each
    variable, changed for real (tests/machine_changes.py), makes it stale, and why_stale names
    it (what load(verbose=True) prints)."""
    from pep517_torch.jit import stamp

    machine = Machine(tmp_path / "machine")
    artifact = write(tmp_path / "m.so")
    source = write(tmp_path / "m.cpp", "int f() { return 0; }\n")
    stamp_file = stamp.stamp_path(tmp_path, "m")
    stamp.write(stamp_file, "key", [source], machine.env, artifact, facts=machine.facts())
    data = stamp.load(stamp_file)
    assert stamp.why_stale(data, "key", artifact, machine.env) is None
    words = change(case, machine, monkeypatch)
    reason = stamp.why_stale(data, "key", artifact, machine.env)
    assert reason is not None and reason.startswith(words), reason
    assert not stamp.is_fresh(stamp_file, "key", artifact, machine.env)


def test_a_stale_stamp_names_the_part_of_its_key_that_differs(tmp_path: Path) -> None:
    from pep517_torch.jit import stamp
    from pep517_torch.jit.request import JitRequest

    request = JitRequest("m", ("/s/m.cpp",))
    key = stamp.fingerprint(request, "/site/torch/__init__.py", "2.13.0+cpu")
    artifact, source = write(tmp_path / "m.so"), write(tmp_path / "m.cpp")
    stamp_file = stamp.stamp_path(tmp_path, "m")
    stamp.write(stamp_file, key, [source], {}, artifact)
    data = stamp.load(stamp_file)
    assert stamp.why_stale(data, key, artifact, {}) is None
    newer_torch = stamp.fingerprint(request, "/site/torch/__init__.py", "2.14.1+cpu")
    assert stamp.why_stale(data, newer_torch, artifact, {}) == "torch changed: 2.13.0+cpu -> 2.14.1+cpu"
    other = stamp.fingerprint(request._replace(cflags=("-O1",)), "/site/torch/__init__.py", "2.13.0+cpu")
    assert stamp.why_stale(data, other, artifact, {}) == "load()'s arguments changed"
    python = key.replace(sys.version, "3.99.0 (main) [GCC]", 1)
    assert stamp.why_stale(data, python, artifact, {}) == (
        f"Python changed: {sys.version.split(' ', 1)[0]} -> 3.99.0")
    artifact.write_text("another library copied over it")
    assert stamp.why_stale(data, key, artifact, {}) == f"{artifact} is not the file this build made"

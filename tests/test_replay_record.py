"""The pieces a no-op replay rests on, without compiling: the environment a build read
(ReadEnv), the paths it consulted (input_audit.py), the platform tag kept in the build directory,
and the replay's own refusals. tests/test_noop_replay.py builds and replays for real."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from pep517_torch.backend import noop_cache
from pep517_torch.core import compile_record
from pep517_torch.shipped_runtime import build_inputs
from pep517_torch.shipped_runtime import input_audit
from pep517_torch.core.toolchain import probe_cache
from pep517_torch.core.cuda import toolkit as cuda
from pep517_torch.distribution import platform_decision
from pep517_torch.backend.noop_record import ReadEnv
from tests.cuda_tools import make_fake_toolkit
from tests.machine_changes import CHANGES, FORGED, Machine, change


def test_read_env_remembers_each_variable_looked_up_set_or_not() -> None:
    env = ReadEnv({"A": "1", "B": ""})
    assert env.get("A") == "1" and env["B"] == "" and "C" not in env
    with pytest.raises(KeyError, match="D"):
        env["D"]
    assert env.get("E", "x") == "x"
    assert env.read == {"A": "1", "B": "", "C": None, "D": None, "E": None}
    assert not env.everything and env  # truth says nothing of any one variable


@pytest.mark.parametrize("copy", [dict, lambda env: {**env}, list, len])
def test_read_env_copied_counts_as_every_variable_read(copy) -> None:  # type: ignore[no-untyped-def]
    env = ReadEnv({"A": "1"})
    copy(env)
    assert env.everything


def test_the_probe_cache_reads_its_variables_one_by_one(tmp_path: Path) -> None:
    env = ReadEnv({**os.environ, "PEP517_TORCH_CACHE_DIR": str(tmp_path)})
    assert probe_cache.remembered("test", ["x"], [tmp_path], lambda: 3, env=env) == 3
    assert not env.everything
    assert env.read["PEP517_TORCH_CACHE_DIR"] == str(tmp_path)


def test_the_cuda_search_notes_where_it_looked(tmp_path: Path) -> None:
    root = make_fake_toolkit(tmp_path / "cuda")
    env = ReadEnv({"PATH": "", "CUDA_HOME": str(root), "PEP517_TORCH_CACHE_DIR": str(tmp_path)})
    with input_audit.watching(tmp_path / "project") as seen:
        toolkit = cuda.find_cuda(env, search_paths=[tmp_path / "nowhere"], nvidia_dirs=[])
    assert toolkit is not None and not env.everything
    assert env.read["CUDA_HOME"] == str(root)
    assert {str(root / "bin" / "nvcc"), str(root), str(root / "include"), str(root / "lib64")} <= seen


def test_a_watch_sees_reads_and_listings_below_its_root_only(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (root / "pkg" / "a.py").write_text("")
    (outside / "b.py").write_text("")
    with input_audit.watching(root) as seen:
        (root / "pkg" / "a.py").read_text()
        (outside / "b.py").read_text()
        list((root / "pkg").iterdir())
        list(os.scandir(root))
        (root / "written.txt").write_text("")  # an output, not an input
        with open(root / "missing.txt", "a"):
            pass
        input_audit.note(outside / "noted")
    assert seen == {str(root / "pkg" / "a.py"), str(root / "pkg"), str(root), str(outside / "noted")}
    (root / "pkg" / "a.py").read_text()
    input_audit.note(root / "later")
    assert str(root / "later") not in seen  # the watch is over


NOTE = "manylinux_2_28: the strictest manylinux policy holds"  # as the decision words it


def test_the_platform_tag_is_kept_while_the_binaries_keep_their_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decided: list[str] = []

    def decide(mode, artifacts, shipped, linux_tag):  # type: ignore[no-untyped-def]
        decided.append(mode)
        return platform_decision.PlatformTag("manylinux_2_28_x86_64", NOTE)

    monkeypatch.setattr(platform_decision, "_decide", decide)
    artifact = tmp_path / "out" / "_C.so"
    artifact.parent.mkdir()
    artifact.write_bytes(b"\x7fELF one")
    shipped = [("pkg/__init__.py", tmp_path / "__init__.py")]
    shipped[0][1].write_text("")

    def run(mode: str = "auto") -> platform_decision.PlatformTag | None:
        artifacts = [platform_decision.Artifact(artifact, "pkg._C")]
        return platform_decision.decide(mode, artifacts, shipped, "linux_x86_64", tmp_path)

    first = run()
    assert first == run() == platform_decision.PlatformTag("manylinux_2_28_x86_64", NOTE)
    assert decided == ["auto"]
    artifact.write_bytes(b"\x7fELF two")  # relinked
    run()
    shipped[0][1].write_text("# edited\n")
    run()
    run("linux")
    assert decided == ["auto", "auto", "auto", "linux"]


def test_no_record_no_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEP517_TORCH_CACHE_DIR", str(tmp_path))
    assert noop_cache.replay_wheel(str(tmp_path), str(tmp_path / "out"), None) is None
    assert noop_cache.replay_metadata(str(tmp_path), str(tmp_path / "md"), None) is None
    location = noop_cache.record_file(os.environ, "wheel", str(tmp_path), None)
    assert location is not None
    Path(location).parent.mkdir(parents=True)
    Path(location).write_text("{not json")
    assert noop_cache.replay_wheel(str(tmp_path), str(tmp_path / "out"), None) is None
    assert not (tmp_path / "out").exists()
    monkeypatch.setenv("PEP517_TORCH_NO_REPLAY", "1")
    assert noop_cache.record_file(os.environ, "wheel", str(tmp_path), None) is None
    assert noop_cache.record_file({}, "wheel", str(tmp_path), {"bad": object()}) is None  # type: ignore[dict-item]


@pytest.mark.parametrize("case", list(CHANGES))
def test_a_replay_names_the_change_that_stops_it(
        tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A no-op record is a record of build_inputs: each fact of the registry it holds, a
    variable the build read, and (through the build folder's compile record) nvcc and the
    compile variables, changed for real: no replay, and why_not_replayed names the change (what
    explain says of the build that followed)."""
    monkeypatch.delitem(sys.modules, "ninja", raising=False)
    machine = Machine(tmp_path / "machine")
    root, build = tmp_path / "project", tmp_path / "build"
    root.mkdir()
    build.mkdir()
    (build / "build.ninja").write_text("")
    (build / ".ninja_log").write_text("# ninja log v5\n")
    compile_record.record(build, root, {}, [], started_ns=time.time_ns(), env=machine.env,
                          now=machine.facts())
    facts = build_inputs.observe(build_inputs.REPLAY_FACTS, machine.env, torch_root=machine.torch)
    record = {"key": noop_cache.record_key("wheel", str(root), None), "env": {"CXXFLAGS": "-DX=1"},
              "facts": facts, "files": {str(root): build_inputs.identity(root)}, "build_dir": str(build)}
    assert noop_cache.why_not_replayed(record, "wheel", str(root), None, machine.env) is None
    words = change(case, machine, monkeypatch)
    reason = noop_cache.why_not_replayed(record, "wheel", str(root), None, machine.env)
    assert reason is not None and reason.startswith(words), reason
    (root / "new.py").write_text("")
    assert noop_cache.why_not_replayed(record, "wheel", str(root), None, {**machine.env, "X": "1"})


@pytest.mark.parametrize("fact", list(FORGED))
def test_a_replay_names_a_fact_an_older_install_recorded(tmp_path: Path, fact: str) -> None:
    root = str(tmp_path)
    facts = noop_cache.machine_facts(os.environ)
    record = {"key": noop_cache.record_key("wheel", root, None), "env": {}, "facts": facts,
              "files": {}, "build_dir": None}
    assert noop_cache.why_not_replayed(record, "wheel", root, None, os.environ) is None
    forge, words = FORGED[fact]
    record["facts"] = {**facts, fact: forge(facts[fact])}
    assert noop_cache.why_not_replayed(record, "wheel", root, None, os.environ).startswith(words)

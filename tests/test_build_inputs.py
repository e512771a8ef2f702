"""The record of what a build depended on and why_stale (shipped_runtime/build_inputs.py), on
plain files: every fact of the registry, changed for real (or its record forged where a running
interpreter cannot change it), is seen and named; a variable, a file, a touch. Nothing compiles.
Each store's own test runs the same changes through the store (tests/machine_changes.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pep517_torch.shipped_runtime import build_inputs, machine_facts
from tests.machine_changes import CHANGES, FORGED, Machine, change


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def every_fact(machine: Machine) -> dict[str, object]:
    return build_inputs.observe(build_inputs.FACTS, machine.env, nvcc=machine.nvcc,
                                torch_root=machine.torch)


def test_the_changes_cover_every_fact_of_the_registry() -> None:
    """A fact added to the registry without a way to change it here fails this test."""
    covered = {name for name, _ in CHANGES.values()} | set(FORGED)
    assert set(build_inputs.FACTS) <= covered, set(build_inputs.FACTS) - covered
    assert set(build_inputs.COMPILE_FACTS) | set(build_inputs.REPLAY_FACTS) == set(build_inputs.FACTS)


@pytest.mark.parametrize("case", list(CHANGES))
def test_a_changed_fact_or_variable_is_seen_and_named(
        machine: Machine, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "ninja", raising=False)  # found again, not the imported one
    record = {"env": {"CXXFLAGS": "-DX=1", "CPLUS_INCLUDE_PATH": "/opt/a"}, "facts": every_fact(machine)}
    assert build_inputs.why_stale(record, machine.env) is None
    words = change(case, machine, monkeypatch)
    reason = build_inputs.why_stale(record, machine.env)
    assert reason is not None and reason.startswith(words), (reason, words)


@pytest.mark.parametrize("fact", list(FORGED))
def test_a_fact_recorded_by_another_install_is_named(machine: Machine, fact: str) -> None:
    forge, words = FORGED[fact]
    now = build_inputs.observe([fact], machine.env)
    assert build_inputs.why_stale({"facts": now}, machine.env) is None
    reason = build_inputs.why_stale({"facts": {fact: forge(now[fact])}}, machine.env)
    assert reason is not None and reason.startswith(words), reason


def test_a_fact_this_version_does_not_know_or_cannot_read_is_stale(machine: Machine) -> None:
    assert build_inputs.why_stale({"facts": {"linker": ["/usr/bin/ld"]}}, machine.env) == (
        "linker, a machine fact this pep517_torch does not know, was recorded")
    assert build_inputs.why_stale({"facts": {"nvcc": 42}}, machine.env) == (
        "nvcc: its record is not one pep517_torch writes")
    assert build_inputs.why_stale({"facts": {"path": "not a list"}}, machine.env) == (
        "PATH: its record is not one pep517_torch writes")


def test_nvcc_is_recorded_only_for_a_build_that_ran_it(machine: Machine) -> None:
    assert "nvcc" not in build_inputs.observe(build_inputs.COMPILE_FACTS, machine.env,
                                              torch_root=machine.torch)
    assert machine.facts()["nvcc"][0] == str(machine.nvcc)


def test_a_missing_fact_file_stays_unchanged_until_it_appears(machine: Machine) -> None:
    gone = machine.root / "nowhere" / "nvcc"
    record = {"facts": {"nvcc": build_inputs.fact(gone)}}
    assert record["facts"]["nvcc"] == [str(gone)]
    assert build_inputs.why_stale(record, machine.env) is None
    machine.nvcc.replace(gone.parent.mkdir() or gone)
    assert build_inputs.why_stale(record, machine.env) == f"nvcc {gone} changed"
    gone.unlink()
    record["facts"]["nvcc"] = build_inputs.fact(machine.torch / "version.py")
    (machine.torch / "version.py").unlink()
    assert build_inputs.why_stale(record, machine.env) == f"nvcc {machine.torch / 'version.py'} is gone"


def test_while_cxx_and_path_hold_the_compiler_found_is_stated_again(machine: Machine) -> None:
    """A record's ``lookup`` (the JIT's): the compiler found then is stat'ed again (one stat) while
    CXX and PATH are as they were; another PATH looks it up again (a PATH with a folder more and
    the same compiler is no change)."""
    record = {"facts": machine.facts(("compiler",)), "lookup": build_inputs.compiler_lookup(machine.env)}
    empty = machine.root / "empty"
    empty.mkdir()
    assert build_inputs.why_stale(record, {**machine.env, "PATH": f"{empty}:{machine.bin}"}) is None
    os.utime(machine.compiler, ns=(1, 1))
    assert build_inputs.why_stale(record, machine.env) == f"the C++ compiler {machine.compiler} changed"
    machine.compiler.unlink()
    assert build_inputs.why_stale(record, machine.env) == f"the C++ compiler {machine.compiler} is gone"
    assert build_inputs.why_stale(record, {**machine.env, "PATH": str(empty)}) == "the C++ compiler is gone"


def test_variables_come_first_then_facts_then_files(machine: Machine, tmp_path: Path) -> None:
    source = tmp_path / "a.cpp"
    source.write_text("int a;\n")
    record = {"env": {"CXXFLAGS": "-DX=1"}, "facts": machine.facts(),
              "files": {str(source): build_inputs.identity(source), str(tmp_path / "new.h"): None}}
    assert build_inputs.why_stale(record, machine.env) is None
    (tmp_path / "new.h").write_text("")
    assert build_inputs.why_stale(record, machine.env) == f"{tmp_path / 'new.h'} appeared"
    change("nvcc changed in place", machine, pytest.MonkeyPatch())
    assert build_inputs.why_stale(record, machine.env).startswith("nvcc ")
    machine.env["CXXFLAGS"] = "-DX=2"
    assert build_inputs.why_stale(record, machine.env) == "CXXFLAGS changed: '-DX=1' -> '-DX=2'"
    assert build_inputs.why_stale(record, {}) == "CXXFLAGS changed: '-DX=1' -> unset"


def test_a_touched_file_with_its_hash_is_unchanged_unless_asked_as_ninja_sees_it(tmp_path: Path) -> None:
    source = tmp_path / "a.cpp"
    source.write_text("int a;\n")
    record = {"files": {str(source): build_inputs.hashed(str(source))}}
    os.utime(source, ns=(1, 1))
    assert build_inputs.why_stale(record, {}) is None
    assert build_inputs.why_stale(record, {}, content=False) == f"{source} changed"
    assert build_inputs.why_stale(record, {}, files=False) is None
    source.write_text("int b;\n")
    os.utime(source, ns=(1, 1))
    assert build_inputs.why_stale(record, {}) == f"{source} changed (its content; its mtime is not newer)"
    source.unlink()
    assert build_inputs.why_stale(record, {}) == f"{source} is gone"


def test_the_registry_observes_this_interpreter(machine: Machine) -> None:
    facts = every_fact(machine)
    assert list(facts) == list(build_inputs.FACTS)
    assert facts["python"][0] == sys.executable and facts["backend"][0]
    assert facts["libraries"]["torch"][0].endswith(os.path.join("torch", "__init__.py"))
    assert [entry[0] for entry in facts["path"]] == [str(machine.bin)]
    found = build_inputs.observe(["torch"], machine.env)  # where the import system finds it
    assert found["torch"][0] == os.path.join(os.path.dirname(facts["libraries"]["torch"][0]), "version.py")
    assert machine_facts.backend({}) == facts["backend"]
    with pytest.raises(KeyError, match="linker is no machine fact"):
        build_inputs.observe(["linker"], machine.env)

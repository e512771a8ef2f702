"""The probe cache (core/toolchain/probe_cache.py): answers kept while the files a probe read keep their
stamps; a touched or replaced file is probed again, a failure never stored. Nothing runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import probe_cache
from pep517_torch.shipped_runtime import build_inputs
from pep517_torch.shipped_runtime.environment import NO_PROBE_CACHE
from tests.machine_changes import Machine, change


def test_answers_follow_the_stamps_of_the_files_read(tmp_path: Path) -> None:
    env = {"PEP517_TORCH_CACHE_DIR": str(tmp_path / "cache")}
    tool = tmp_path / "c++"
    tool.write_text("#!/bin/sh\n")
    config = tmp_path / "absent.conf"  # a file the tool would read, not there yet
    calls: list[int] = []

    def probe() -> str:
        calls.append(1)
        return f"version {len(calls)}"

    def ask() -> str:
        return probe_cache.remembered("compiler", ["c++"], [tool, config], probe, env=env)

    assert ask() == "version 1" and ask() == "version 1" and len(calls) == 1
    os.utime(tool, ns=(1, 1))  # touched, even back in time: asked again
    assert ask() == "version 2"
    config.write_text("x")  # the config file appears
    assert ask() == "version 3" and ask() == "version 3"
    assert probe_cache.remembered("compiler", ["c++", "-m32"], [tool, config], probe, env=env) == "version 4"

    def failing() -> str:
        raise RuntimeError("not a compiler")

    tool.write_text("#!/bin/sh\nexit 1\n")
    with pytest.raises(RuntimeError, match="not a compiler"):
        probe_cache.remembered("compiler", ["c++"], [tool, config], failing, env=env)
    assert ask() == "version 5"  # the failure was not stored
    off = {**env, NO_PROBE_CACHE: "1"}
    assert probe_cache.remembered("compiler", ["c++"], [tool, config], probe, env=off) == "version 6"


def test_a_damaged_or_unwritable_cache_only_costs_a_probe(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / probe_cache.FILE).write_text("{not json")
    env = {"PEP517_TORCH_CACHE_DIR": str(cache)}
    assert probe_cache.remembered("nvcc", [], [tmp_path], lambda: [1, 2], env=env) == [1, 2]
    assert probe_cache.remembered("nvcc", [], [tmp_path], lambda: [3], env=env) == [1, 2]
    blocked = {"PEP517_TORCH_CACHE_DIR": str(tmp_path / "file" / "under")}
    (tmp_path / "file").write_text("")
    assert probe_cache.remembered("nvcc", [], [tmp_path], lambda: "ok", env=blocked) == "ok"


def test_the_compile_record_reads_back_every_path_the_writer_escaped() -> None:
    from pep517_torch.core import compile_record
    from pep517_torch.core.ninja import syntax as ninja_syntax

    writer = ninja_syntax.NinjaWriter()
    hostile = ["a b.o", "c$d:e.o", "/abs/dir with spaces/ü.cpp", "x$$ y;z#h.h"]
    writer.build([hostile[0]], "cxx", [hostile[2]], implicit=[hostile[3]], order_only=["stub"])
    writer.build([hostile[1], "second.o"], "link", [hostile[0]], variables={"desc": "a: b"})
    outputs, inputs = compile_record.edge_files(writer.text())
    assert outputs == {hostile[0], hostile[1], "second.o"}
    assert inputs == {hostile[2], hostile[3], "stub", hostile[0]}


@pytest.mark.parametrize("case", ["compiler swapped", "nvcc changed in place"])
def test_a_tool_changed_in_place_is_probed_again(
        tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer is kept with a record of the files it rests on (shipped_runtime/build_inputs.py),
    checked by the one why_stale: nvcc or a compiler changed in place (same path, another
    version) is probed again, and the stale entry's record names the file."""
    machine = Machine(tmp_path / "machine")
    env = {"PEP517_TORCH_CACHE_DIR": str(tmp_path / "cache")}
    tool = machine.nvcc if case.startswith("nvcc") else machine.compiler
    answers = iter(["13.0.88", "13.0.99"])
    ask = lambda: probe_cache.remembered("version", [], [tool], lambda: next(answers), env=env)  # noqa: E731
    assert ask() == "13.0.88" and ask() == "13.0.88"
    entry = json.loads((tmp_path / "cache" / probe_cache.FILE).read_text())["entries"]
    (recorded,) = entry.values()
    assert build_inputs.why_stale(recorded, {}) is None
    change(case, machine, monkeypatch)
    assert build_inputs.why_stale(recorded, {}) == f"{tool} changed"
    assert ask() == "13.0.99" and ask() == "13.0.99"
    assert len(json.loads((tmp_path / "cache" / probe_cache.FILE).read_text())["entries"]) == 1

"""A team's shared compiler cache: ccache (remote_storage) and sccache, both on a real redis.

Two builds of one project from different trees and build directories stand for two machines:
each has its own local cache (CCACHE_DIR / SCCACHE_DIR) and its own PCH cache; only redis is
shared. The second is served from redis, and the wheels are byte-identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline, stages
from pep517_torch.core.build import build, header_dependencies
from pep517_torch.core.plan import prepare
from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.shipped_runtime import ledger
from tests.servers import Redis, check_module, free_port, redis_server, tool, write_c_project

pytestmark = pytest.mark.compile


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    with redis_server(tmp_path / "redis") as running:
        yield running


def build_on_machine(
    machine: Path, tree: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, int | None, str]:
    """Build a wheel of the project at ``tree`` as machine ``machine`` would: (wheel, cache
    hits the build reported, its output)."""
    for name, value in {**env, "PEP517_TORCH_CACHE_DIR": str(machine / "pep517-cache")}.items():
        monkeypatch.setenv(name, value)
    lines: list[str] = []
    monkeypatch.setattr(stages, "log", lines.append)
    out = machine / "dist"
    # Build directories differ too (at the same depth in the tree: see docs/scaling.md).
    pipeline.build_wheel(tree, out, {"build-dir": f"build/{machine.name}"})
    [wheel] = out.glob("*.whl")
    summary = next(line for line in lines if " compiled" in line)
    hits = int(summary.split("(")[1].split(" from cache")[0]) if "from cache" in summary else None
    return wheel, hits, "\n".join(lines)


def test_ccache_remote_storage_serves_a_second_machine(
    tmp_path: Path, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    ccache = tool("ccache")
    results = []
    for machine, tree in (("machine-a", "alice/src/teamops"), ("machine-b", "bob/work/teamops")):
        home = tmp_path / machine
        env = {"PEP517_TORCH_COMPILER_LAUNCHER": ccache, "CCACHE_DIR": str(home / "ccache"),
               "CCACHE_REMOTE_STORAGE": redis.url, "CCACHE_CONFIGPATH": str(home / "ccache.conf")}
        results.append(build_on_machine(home, write_c_project(tmp_path / tree), env, monkeypatch))
        stats = subprocess.run([ccache, "--print-stats"], capture_output=True, text=True,
                               env={**os.environ, **env}, check=True).stdout
        results[-1] += (dict(line.split("\t") for line in stats.splitlines()),)
    (wheel_a, hits_a, _, _), (wheel_b, hits_b, output_b, stats_b) = results
    assert hits_a == 0
    assert hits_b == 3, output_b  # every TU, and the summary says so
    assert int(stats_b["remote_storage_hit"]) == 3  # from redis: machine B's own cache was empty
    assert wheel_a.read_bytes() == wheel_b.read_bytes()
    assert check_module(wheel_b, tmp_path) == "./csrc/module.cpp"


def test_the_summary_counts_this_builds_own_cache_hits(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43 item 15: `3 compiled (22 from cache)` for a graph of 6 steps. ccache's own
    totals count every build sharing the cache; while another one is served from it, the
    summary still counts only this build's compiles (from its stats log), and they add up."""
    ccache = tool("ccache")
    env = {"PEP517_TORCH_COMPILER_LAUNCHER": ccache, "CCACHE_DIR": str(tmp_path / "ccache"),
           "CCACHE_CONFIGPATH": str(tmp_path / "ccache.conf")}
    tree = write_c_project(tmp_path / "src" / "teamops")
    _, hits, _ = build_on_machine(tmp_path / "first", tree, env, monkeypatch)
    assert hits == 0
    (tmp_path / "other.c").write_text("int other(void) { return 1; }\n")
    stop = tmp_path / "stop"
    loop = (f"while [ ! -e {stop} ]; do {ccache} cc -c {tmp_path / 'other.c'} -o"
            f" {tmp_path / 'other.o'}; touch {tmp_path / 'served'}; done")
    other = subprocess.Popen(["sh", "-c", loop], env={**os.environ, **env})
    try:
        while not (tmp_path / "served").exists():  # the other build is being served
            assert other.poll() is None
            time.sleep(0.01)
        _, hits, output = build_on_machine(tmp_path / "second", tree, env, monkeypatch)
    finally:
        stop.touch()
        other.wait(timeout=60)
    assert "3 compiled (3 from cache)" in output, output  # the graph's three TUs, all served
    assert hits == 3


def test_sccache_redis_serves_a_second_machine(
    tmp_path: Path, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    sccache = tool("sccache")
    results = []
    for machine, tree in (("machine-a", "alice/src/teamops"), ("machine-b", "bob/work/teamops")):
        home = tmp_path / machine
        env = {"PEP517_TORCH_COMPILER_LAUNCHER": sccache, "SCCACHE_DIR": str(home / "sccache"),
               "SCCACHE_REDIS_ENDPOINT": redis.url, "SCCACHE_SERVER_PORT": str(free_port()),
               "SCCACHE_IDLE_TIMEOUT": "300", "SCCACHE_CONF": str(home / "none.toml")}
        try:
            results.append(build_on_machine(home, write_c_project(tmp_path / tree), env, monkeypatch))
        finally:
            subprocess.run([sccache, "--stop-server"], env={**os.environ, **env},
                           capture_output=True, timeout=60, check=False)
    (wheel_a, hits_a, _), (wheel_b, hits_b, output_b) = results
    assert hits_a == 0
    assert hits_b == 3, output_b
    assert wheel_a.read_bytes() == wheel_b.read_bytes()
    assert check_module(wheel_b, tmp_path) == "./csrc/module.cpp"


def test_cache_command_lines_name_neither_tree_nor_build_dir(tmp_path: Path) -> None:
    """What makes the hits above possible, for any cache: relative paths inside the project."""
    ccache = tool("ccache")
    texts = []
    for tree in ("one/teamops", "two/deeper/teamops"):
        root = write_c_project(tmp_path / tree)
        spec = ExtensionSpec("teamops", tuple(sorted((root / "csrc").glob("*.cpp"))),
                             include_dirs=(root / "csrc" / "include",))
        options = BuildOptions(build_dir=root / "build" / "x", source_root=root,
                               compiler_launcher=ccache, env=dict(os.environ))
        plan = prepare([spec], options)
        compdb = json.loads((plan.build_dir / "compile_commands.json").read_text())
        texts.append(sorted(entry["command"] for entry in compdb))
    assert texts[0] == texts[1]
    assert all("-I../../csrc/include" in c and "-ffile-prefix-map=../..=." in c for c in texts[0])


def test_a_shared_ccache_turns_the_pch_off(tmp_path: Path) -> None:
    """Each machine's .gch differs byte for byte, and caches key on it: with remote storage,
    a PCH would make every machine miss."""
    ccache = tool("ccache")
    source = tmp_path / "a.cpp"
    source.write_text("#include <torch/library.h>\n")
    spec = ExtensionSpec("m", (source,))
    for remote, expect_pch in (("", True), ("redis://127.0.0.1:1", False)):
        env = {**os.environ, "CCACHE_REMOTE_STORAGE": remote, "CCACHE_DIR": str(tmp_path / "cc")}
        options = BuildOptions(build_dir=tmp_path / f"b{remote != ''}", compiler_launcher=ccache,
                               env=env)
        plan = prepare([spec], options)
        assert ("-include" in plan.ninja_file.read_text()) == expect_pch


def doctor_line(env: dict[str, str], cwd: Path, start: str) -> str:
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "doctor"], cwd=cwd, text=True,
                            capture_output=True, env={**os.environ, **env}, timeout=300)
    return next(line for line in result.stdout.splitlines() if start in line)


def test_doctor_reports_the_launcher_and_whether_its_storage_answers(tmp_path: Path) -> None:
    sccache, ccache = tool("sccache"), tool("ccache")
    with redis_server(tmp_path / "redis") as redis:
        env = {"PEP517_TORCH_COMPILER_LAUNCHER": "ccache", "CCACHE_REMOTE_STORAGE":
               f"redis://user:secret@127.0.0.1:{redis.port}", "CCACHE_DIR": str(tmp_path / "cc")}
        line = doctor_line(env, tmp_path, "compiler launcher")
        assert line.startswith("ok ") and f"compiler launcher: ccache at {ccache}" in line
        assert f"remote storage redis://127.0.0.1:{redis.port} reachable" in line
        assert "secret" not in line  # credentials are never printed
        port = free_port()
        sc_env = {"PEP517_TORCH_COMPILER_LAUNCHER": sccache, "SCCACHE_SERVER_PORT": str(port),
                  "SCCACHE_REDIS_ENDPOINT": redis.url}
        line = doctor_line(sc_env, tmp_path, "compiler launcher")
        assert line.startswith("ok ") and f"sccache server on port {port} unreachable" in line
        assert f"SCCACHE_REDIS_ENDPOINT {redis.url} reachable" in line
    line = doctor_line(env, tmp_path, "compiler launcher")  # redis stopped
    assert line.startswith("warn ") and f"redis://127.0.0.1:{redis.port} unreachable" in line


def test_relative_command_lines_keep_content_tracking_and_the_jit_stamp(tmp_path: Path) -> None:
    """Depfiles behind a cache name relative paths; the core hands them on absolute."""
    ccache = tool("ccache")
    root = write_c_project(tmp_path / "p")
    spec = ExtensionSpec("teamops", tuple(sorted((root / "csrc").glob("*.cpp"))),
                         include_dirs=(root / "csrc" / "include",))
    options = BuildOptions(build_dir=root / "build" / "x", source_root=root, compiler_launcher=ccache,
                           env={**os.environ, "CCACHE_DIR": str(tmp_path / "cc")})
    result = build([spec], options, log=lambda _: None)
    assert result.run.compiled == 3
    deps = header_dependencies(result.plan)
    assert root / "csrc" / "include" / "ops.h" in deps["obj/teamops/csrc/add.cpp.o"]
    tracked = ledger.section(result.plan.build_dir, "compile")
    assert len(tracked["files"][str(root / "csrc" / "include" / "ops.h")]) == 6  # content-hashed

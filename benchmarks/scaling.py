"""Figures for docs/scaling.md: distcc over loopback and team-cache hits, against local builds.

    python benchmarks/scaling.py [--fixture fixtures/bench4h] [--only local,distcc,ccache,sccache]

Each row is a cold `pip wheel --no-build-isolation` of the fixture from a fresh copy (a fresh
tree and build directory), with an empty machine-wide PCH cache of its own:
  local       no launcher: the PCH is built and used (the default)
  local-nopch no launcher, -Cpch=false: what a distcc host or a shared cache compiles
  distcc      PEP517_TORCH_COMPILER_LAUNCHER=distcc, one distccd on 127.0.0.1 (2 jobs, 2 slots)
  ccache      remote_storage on a redis-server on 127.0.0.1: machine A (cold), then machine B
              (another tree and CCACHE_DIR) served from redis
  sccache     the same with sccache's redis backend
The servers are the tests' (tests/servers.py): real, on loopback, stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.servers import distccd, free_port, redis_server, tool  # noqa: E402

WORK = ROOT / ".bench" / "scaling"


def wheel(name: str, fixture: Path, env: dict[str, str], settings: tuple[str, ...] = ()) -> float:
    tree = WORK / name / fixture.name
    shutil.rmtree(WORK / name, ignore_errors=True)
    shutil.copytree(fixture, tree, ignore=shutil.ignore_patterns("build", "dist", "setup.py"))
    cache = WORK / name / "pch-cache"
    full_env = {**os.environ, "PEP517_TORCH_COMPILER_LAUNCHER": "none",
                "PEP517_TORCH_CACHE_DIR": str(cache), **env}
    args = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
            "-w", str(WORK / name / "dist"), *(f"--config-settings={s}" for s in settings), str(tree)]
    print(f"  {name} ...", flush=True)
    start = time.perf_counter()
    result = subprocess.run(args, capture_output=True, text=True, env=full_env)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    output = result.stdout + result.stderr
    summary = [line for line in output.splitlines() if "extension" in line and " compiled" in line]
    load = os.getloadavg()[0]
    print(f"  {name}: {seconds:.1f} s (load average {load:.1f})"
          f"  {summary[-1].strip() if summary else ''}", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fixture", default=str(ROOT / "fixtures" / "bench4h"))
    parser.add_argument("--only", default="local,distcc,ccache,sccache")
    args = parser.parse_args()
    fixture = Path(args.fixture).resolve()
    chosen = args.only.split(",")
    WORK.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, float | str]] = []

    def attempt(label: str, measure) -> None:  # type: ignore[no-untyped-def]
        try:
            rows.append((label, measure()))
        except pytest.skip.Exception as skipped:
            rows.append((label, f"skipped: {skipped}"))

    if "local" in chosen:
        attempt("local, PCH built and used", lambda: wheel("local", fixture, {}))
        attempt("local, -Cpch=false", lambda: wheel("local-nopch", fixture, {}, ("pch=false",)))
    if "distcc" in chosen:
        def over_distcc() -> float:
            with distccd(WORK) as server:
                state = WORK / "distcc-state"
                state.mkdir(exist_ok=True)
                env = {"PEP517_TORCH_COMPILER_LAUNCHER": "distcc", "DISTCC_HOSTS": server.hosts(2),
                       "DISTCC_DIR": str(state), "DISTCC_FALLBACK": "0"}
                seconds = wheel("distcc", fixture, env)
                sources = len(list((fixture / "csrc").glob("*.cpp")))
                assert len(server.compiled()) == sources, server.compiled()  # all went remote
                return seconds
        attempt("distcc over loopback (1 distccd, 2 jobs)", over_distcc)
    for name in ("ccache", "sccache"):
        if name not in chosen:
            continue

        def team(name: str = name) -> None:
            binary = tool(name)
            with redis_server(WORK / f"redis-{name}") as redis:
                for machine in ("a", "b"):
                    home = WORK / f"{name}-{machine}-home"
                    shutil.rmtree(home, ignore_errors=True)
                    if name == "ccache":
                        env = {"CCACHE_DIR": str(home / "cc"), "CCACHE_REMOTE_STORAGE": redis.url}
                    else:
                        env = {"SCCACHE_DIR": str(home / "sc"), "SCCACHE_REDIS_ENDPOINT": redis.url,
                               "SCCACHE_SERVER_PORT": str(free_port()), "SCCACHE_IDLE_TIMEOUT": "300"}
                    env["PEP517_TORCH_COMPILER_LAUNCHER"] = binary
                    try:
                        label = "cold, fills redis" if machine == "a" else "another tree and machine: hits"
                        rows.append((f"{name} + redis, {label}", wheel(f"{name}-{machine}", fixture, env)))
                    finally:
                        if name == "sccache":
                            subprocess.run([binary, "--stop-server"], env={**os.environ, **env},
                                           capture_output=True, check=False)
        attempt(name, team)

    print(f"\n{fixture.name}: cold `pip wheel` from a fresh tree\n")
    print("| build | seconds |\n| --- | ---: |")
    for label, value in rows:
        if value is None:
            continue
        print(f"| {label} | {value:.1f} |" if isinstance(value, float) else f"| {label} | {value} |")


if __name__ == "__main__":
    main()

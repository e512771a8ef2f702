"""A no-op build through the PEP 517 hooks starts no process at all: no compiler or nvcc probe
(their answers come from the probe cache), no ninja (compile_record.py answers with stats), no
``ninja -t`` query, and it imports no torch. Counted with an audit hook in a fresh interpreter,
after one real build of the tiny project; an edit afterwards must still start ninja and change
what the wheel computes (the skip never hides work)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.tiny_project import set_value, wheel_value, write_project

# Runs prepare_metadata_for_build_wheel + build_wheel as pip does, in one fresh process,
# counting every process start; prints what it counted and the hooks' own time.
HOOKS = r"""
import json, sys, time
started = []
def audit(event, args):
    if event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.forkpty",
                 "os.system", "os.spawn", "pty.spawn"):
        started.append([event, str(args[0] if args else "")[:200]])
sys.addaudithook(audit)
import pep517_torch.buildapi as api
metadata, wheels = sys.argv[1], sys.argv[2]
began = time.perf_counter()
api.prepare_metadata_for_build_wheel(metadata)
name = api.build_wheel(wheels)
seconds = time.perf_counter() - began
print(json.dumps({"started": started, "seconds": seconds, "wheel": name,
                  "torch_imported": "torch" in sys.modules}))
"""


def _hooks(project: Path, out: Path, env: dict[str, str]) -> dict:
    (out / "meta").mkdir(parents=True, exist_ok=True)
    (out / "wheels").mkdir(exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-c", HOOKS, str(out / "meta"), str(out / "wheels")],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_noop_prepare_metadata_and_build_wheel_start_no_process(tmp_path: Path) -> None:
    project = write_project(tmp_path / "proj", "noopmod")
    env = {**os.environ, "PEP517_TORCH_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PEP517_TORCH_NO_PROBE_CACHE", None)

    first = _hooks(project, tmp_path / "first", env)
    assert first["started"], "the first build compiles: it must start processes"
    assert wheel_value(tmp_path / "first" / "wheels" / first["wheel"], tmp_path / "u1", "noopmod") == 0

    noop = _hooks(project, tmp_path / "noop", env)
    assert noop["started"] == [], f"a no-op started processes: {noop['started']}"
    assert not noop["torch_imported"]
    assert wheel_value(tmp_path / "noop" / "wheels" / noop["wheel"], tmp_path / "u2", "noopmod") == 0

    set_value(project, 7)  # an edit: ninja must run again, and the wheel must carry it
    edited = _hooks(project, tmp_path / "edited", env)
    assert any("ninja" in what for _, what in edited["started"]), edited["started"]
    assert wheel_value(tmp_path / "edited" / "wheels" / edited["wheel"], tmp_path / "u3", "noopmod") == 7

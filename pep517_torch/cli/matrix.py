"""``python -m pep517_torch wheel . --python PY [--python PY ...]``: one wheel per interpreter.

Each interpreter builds with its own torch, in its own process (``PY -m pep517_torch wheel``
with this checkout first on PYTHONPATH, so it needs no install of pep517_torch there), into its
own build folder (the default build-dir names the Python tag and the torch). Every interpreter
is probed first: a missing one, or one without torch, is one line naming it before anything
compiles. The run ends with one table: interpreter, torch, CUDA, wheel, seconds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..shipped_runtime.user_line import error_line, print_line, say, user_line

CHECKOUT = Path(__file__).resolve().parent.parent  # the folder holding this pep517_torch
_PROBE = (
    "import json, sys\n"
    "try:\n    import torch\nexcept ImportError as e:\n"
    "    print(json.dumps({'problem': 'torch', 'detail': str(e)})); raise SystemExit\n"
    "try:\n    import pep517_torch.backend.pipeline\nexcept ImportError as e:\n"
    "    print(json.dumps({'problem': 'pep517_torch', 'detail': str(e)})); raise SystemExit\n"
    "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda,"
    " 'python': '%d.%d' % sys.version_info[:2]}))\n"
)
_WROTE = re.compile("^" + re.escape(user_line("wrote ")) + r"(.+\.whl) \(ninja")


@dataclass(frozen=True)
class Interpreter:
    given: str  # as on the command line
    executable: str
    python: str  # "3.11"
    torch: str  # "2.13.0+cpu"
    cuda: str | None  # torch.version.cuda


@dataclass(frozen=True)
class Built:
    interpreter: Interpreter
    wheel: str | None  # None: the build failed
    seconds: float


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a build in another interpreter: this checkout first on PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    parts = [str(CHECKOUT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def probe(given: str) -> Interpreter:
    """What ``given`` is: its Python and torch; a ConfigError (one line) when it cannot build."""
    found = shutil.which(given) if os.sep not in given else (given if os.access(given, os.X_OK) else None)
    if found is None or not Path(found).is_file():
        raise ConfigError(f"{given}: no such interpreter", "--python")
    try:
        done = subprocess.run([found, "-c", _PROBE], capture_output=True, text=True,
                              env=child_env(), timeout=300, check=False)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        raise ConfigError(f"{given}: does not run as a Python interpreter", "--python") from None
    if answer.get("problem") == "torch":
        raise ConfigError(f"{given}: torch is not installed there ({found} -m pip install torch)",
                          "--python")
    if answer.get("problem"):
        raise ConfigError(f"{given}: cannot import pep517_torch from {CHECKOUT} there:"
                          f" {answer['detail']}", "--python")
    return Interpreter(given, found, answer["python"], answer["torch"], answer["cuda"])


def _build_one(interpreter: Interpreter, root: Path, out: Path, settings: Sequence[str]) -> Built:
    command = [interpreter.executable, "-m", "pep517_torch", "wheel", str(root), "-o", str(out)]
    command += [f"-C{pair}" for pair in settings]
    say(f"building with {interpreter.given} (Python {interpreter.python}, torch {interpreter.torch})",
        sys.stdout)
    started = time.perf_counter()
    wheel = None
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=child_env(), bufsize=1) as child:
        assert child.stdout is not None
        for line in child.stdout:
            print(line, end="", flush=True)
            match = _WROTE.match(line)
            if match:
                wheel = Path(match.group(1)).name
    seconds = time.perf_counter() - started
    return Built(interpreter, wheel if child.returncode == 0 else None, seconds)


def table(results: Sequence[Built]) -> str:
    rows = [("interpreter", "torch", "CUDA", "wheel", "seconds")]
    rows += [(r.interpreter.given, r.interpreter.torch, r.interpreter.cuda or "-",
              r.wheel or "FAILED", f"{r.seconds:.1f}") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def build_matrix(root: Path, out: Path, pythons: Sequence[str], settings: Sequence[str]) -> int:
    """Probe every interpreter, then build one wheel with each; 0 when all built."""
    interpreters, problems = [], []
    for given in pythons:
        try:
            interpreters.append(probe(given))
        except ConfigError as error:
            problems.append(str(error))
    if problems:
        for problem in problems:
            print_line(error_line(problem))
        return 2
    results = [_build_one(interpreter, root, out, settings) for interpreter in interpreters]
    print(table(results), flush=True)
    return 0 if all(result.wheel for result in results) else 1

"""``python -m pep517_torch wheel . --python PY [--python PY ...]``: one wheel per interpreter.

Each interpreter builds with its own torch, in its own process (``PY -m pep517_torch wheel``),
into its own build folder (the default build-dir names the Python tag and the torch). The child
gets pep517_torch and its dependencies alone (:func:`stage`): a private folder of links to
exactly those packages, first on its ``PYTHONPATH``, and nothing else of this environment,
never this environment's site-packages and its torch, whether pep517_torch is installed here,
editable or a checkout. So pep517_torch need not be installed there.

Every interpreter is probed first: a missing one, one without torch, one whose torch cannot be
imported, and two that would build the same wheel are one line each, before anything compiles.
Each wheel is built into a folder of its own and then moved beside the others: a wheel that
would replace one another interpreter wrote in this run is an error, never an overwrite. The
run ends with one table: interpreter, torch, CUDA, wheel, seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..errors import ConfigError
from ..shipped_runtime.user_line import error_line, print_line, say

PACKAGE = Path(__file__).resolve().parent.parent  # this pep517_torch
_PROBE = """\
import json, os, sys
answer = {"python": "%d.%d" % sys.version_info[:2], "executable": sys.executable}
try:
    import pep517_torch
    answer["pep517_torch"] = os.path.dirname(os.path.abspath(pep517_torch.__file__))
except Exception as error:
    answer["problem"] = "pep517_torch: %s" % (str(error).splitlines() or [""])[0]
try:
    import torch
    answer.update(torch=torch.__version__, cuda=torch.version.cuda, at=os.path.dirname(torch.__file__))
except ModuleNotFoundError as error:
    if error.name == "torch":
        answer.setdefault("problem", "no torch")
    else:
        answer.setdefault("problem", "torch: %s" % error)
except Exception as error:
    answer.setdefault("problem", "torch: %s: %s" % (type(error).__name__, (str(error).splitlines() or [""])[0]))
print(json.dumps(answer))
"""


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


# -- what the child gets: pep517_torch and its dependencies alone ------------------------------


def _requirements() -> list[str]:
    """pep517_torch's own requirements: from its installed metadata, else its checkout's
    pyproject.toml."""
    try:
        found = metadata.distribution("pep517_torch").requires
    except metadata.PackageNotFoundError:
        found = None
    if found is None:
        from ..config import read_pyproject

        found = list(read_pyproject(PACKAGE.parent).get("project", {}).get("dependencies", []))
    return found


def _top_level(dist: metadata.Distribution) -> Iterator[Path]:
    """The importable top-level packages and modules a distribution installed."""
    names = (dist.read_text("top_level.txt") or "").split()
    if not names:
        names = sorted({Path(str(f)).parts[0] for f in dist.files or ()
                        if not str(f).startswith("..") and ".dist-info" not in str(f)
                        and ".data" not in Path(str(f)).parts[0]})
    for name in names:
        for candidate in (dist.locate_file(name), dist.locate_file(f"{name}.py")):
            if Path(candidate).exists() and name != "__pycache__":
                yield Path(candidate)
                break


def staged_paths(python: str) -> dict[str, Path]:
    """Name -> path of every top-level package the child needs: pep517_torch (this one) and its
    requirements for a Python ``python`` ("3.10"), with theirs, as installed here. A requirement
    not installed here is one line (install it here, or build under that interpreter)."""
    from packaging.requirements import Requirement

    marker_env = {"python_version": python, "python_full_version": f"{python}.0", "extra": ""}
    paths = {"pep517_torch": PACKAGE}
    pending, seen = list(_requirements()), set()
    while pending:
        requirement = Requirement(pending.pop())
        if requirement.marker is not None and not requirement.marker.evaluate(marker_env):
            continue
        if requirement.name in seen:
            continue
        seen.add(requirement.name)
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            raise ConfigError(
                f"a Python {python} target needs {requirement}, which is not installed with"
                f" this pep517_torch ({sys.executable} -m pip install '{requirement}')", "--python",
            ) from None
        for path in _top_level(dist):
            paths.setdefault(path.name.removesuffix(".py") if path.suffix == ".py" else path.name, path)
        pending.extend(dist.requires or [])
    return paths


def stage(folder: Path, python: str) -> Path:
    """A folder of links to what a child for Python ``python`` needs (see :func:`staged_paths`)."""
    target = folder / f"py{python}"
    if not target.is_dir():
        target.mkdir(parents=True)
        for name, path in staged_paths(python).items():
            (target / path.name).symlink_to(path, target_is_directory=path.is_dir())
    return target


def child_env(staged: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a build in another interpreter: the staged packages alone on
    PYTHONPATH (the caller's own PYTHONPATH, which may name this environment's site-packages,
    is not passed on)."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONHOME", None)
    env["PYTHONPATH"] = str(staged)
    return env


# -- probing and building ------------------------------------------------------------------------


def _which(given: str) -> str | None:
    found = shutil.which(given) if os.sep not in given else (given if os.access(given, os.X_OK) else None)
    return found if found is not None and Path(found).is_file() else None


def probe(given: str, staging: Path) -> Interpreter:
    """What ``given`` is: its Python and torch, as its build will see them; a ConfigError (one
    line) when it cannot build."""
    found = _which(given)
    if found is None:
        raise ConfigError(f"{given}: no such interpreter", "--python")
    try:
        version = subprocess.run([found, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=60, check=True,
                                 stdin=subprocess.DEVNULL).stdout.strip()
        staged = stage(staging, version)
        done = subprocess.run([found, "-c", _PROBE], capture_output=True, text=True,
                              env=child_env(staged), timeout=300, check=False,
                              stdin=subprocess.DEVNULL)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        raise ConfigError(f"{given}: does not run as a Python interpreter", "--python") from None
    problem = answer.get("problem")
    if problem == "no torch":
        raise ConfigError(f"{given}: torch is not installed there ({found} -m pip install torch)",
                          "--python")
    if problem:
        raise ConfigError(f"{given}: cannot build there: {problem}", "--python")
    if Path(answer["pep517_torch"]).resolve() != PACKAGE:
        raise ConfigError(f"{given}: imports pep517_torch from {answer['pep517_torch']} (an editable"
                          f" install there?), not this one ({PACKAGE})", "--python")
    return Interpreter(given, found, answer["python"], answer["torch"], answer["cuda"])


def _duplicates(interpreters: Sequence[Interpreter]) -> list[str]:
    """One line per interpreter that would build what an earlier one builds."""
    problems, seen = [], {}
    for interpreter in interpreters:
        same = (os.path.realpath(interpreter.executable), interpreter.python, interpreter.torch,
                interpreter.cuda)
        key = same[1:]
        if key in seen:
            first = seen[key]
            problems.append(f"{interpreter.given}: Python {interpreter.python} with torch"
                            f" {interpreter.torch} again ({first.given} has them): it would build"
                            " the same wheel")
        else:
            seen[key] = interpreter
    return problems


def _build_one(interpreter: Interpreter, root: Path, out: Path, scratch: Path, staging: Path,
               settings: Sequence[str], written: dict[str, Interpreter]) -> Built:
    own = Path(tempfile.mkdtemp(prefix="wheel-", dir=scratch))
    command = [interpreter.executable, "-m", "pep517_torch", "wheel", str(root), "-o", str(own)]
    command += [f"-C{pair}" for pair in settings]
    say(f"building with {interpreter.given} (Python {interpreter.python}, torch {interpreter.torch})",
        sys.stdout)
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=child_env(stage(staging, interpreter.python)), bufsize=1,
                          stdin=subprocess.DEVNULL) as child:
        assert child.stdout is not None
        for line in child.stdout:
            print(line, end="", flush=True)
    seconds = time.perf_counter() - started
    wheels = sorted(own.glob("*.whl"))
    if child.returncode != 0 or len(wheels) != 1:
        return Built(interpreter, None, seconds)
    name = wheels[0].name
    if name in written:
        print_line(error_line(f"--python: {interpreter.given} built {name}, which"
                              f" {written[name].given} built in this run: not replaced (give the"
                              " wheels different names, e.g. local-version = \"torch\")"))
        return Built(interpreter, None, seconds)
    os.replace(wheels[0], out / name)
    written[name] = interpreter
    say(f"{name}: moved into {out}", sys.stdout)
    return Built(interpreter, name, seconds)


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
    with tempfile.TemporaryDirectory(prefix="pep517_torch-matrix-") as scratch_name:
        scratch = Path(scratch_name)
        interpreters, problems = [], []
        for given in pythons:
            try:
                interpreters.append(probe(given, scratch / "staged"))
            except ConfigError as error:
                problems.append(str(error))
        problems += [f"--python: {line}" for line in _duplicates(interpreters)]
        if problems:
            for problem in problems:
                print_line(error_line(problem))
            return 2
        out.mkdir(parents=True, exist_ok=True)
        written: dict[str, Interpreter] = {}
        results = [_build_one(interpreter, root, out, scratch, scratch / "staged", settings, written)
                   for interpreter in interpreters]
    print(table(results), flush=True)
    return 0 if all(result.wheel for result in results) else 1

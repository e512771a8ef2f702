"""``python -m pep517_torch wheel . --python PY [--python PY ...]``: one wheel per interpreter.

Each interpreter builds with its own torch, in its own process (``PY -m pep517_torch wheel``),
into its own build folder (the default build-dir names the Python tag and the torch). The child
gets pep517_torch and its dependencies alone (:func:`stage`): a private folder of links to
exactly those packages, first on its ``PYTHONPATH``, and this environment's ninja binary first
on its ``PATH``; nothing else of this environment, never its site-packages and its torch,
whether pep517_torch is installed here, editable or a checkout. So pep517_torch need not be
installed there. All of them are pure Python but ninja, whose binary serves any Python; a
requirement this environment does not hold (tomli for a Python 3.10 target run from 3.11) must
be installed in the target.

Every interpreter is probed first: a missing one, one too old for pep517_torch or a dependency,
one lacking a requirement, one without torch, one whose torch cannot be imported, and two that
would build the same wheel are one line each, before anything compiles.
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

from ..core import toolchain
from ..errors import ConfigError, ToolchainError
from ..shipped_runtime.user_line import error_line, print_line, say

PACKAGE = Path(__file__).resolve().parent.parent  # this pep517_torch
_VERSION = "import platform; print(platform.python_version())"
# Run by the target with the staged packages first on its path; argv: the requirements this
# environment does not hold, which the target's own site-packages must satisfy.
_PROBE = """\
import json, os, sys
answer = {"python": "%d.%d" % sys.version_info[:2], "executable": sys.executable}
try:
    import pep517_torch
    answer["pep517_torch"] = os.path.dirname(os.path.abspath(pep517_torch.__file__))
except Exception as error:
    answer["problem"] = "pep517_torch: %s" % (str(error).splitlines() or [""])[0]
try:
    from importlib import metadata
    from packaging.requirements import Requirement
    missing = []
    for text in sys.argv[1:]:
        wanted = Requirement(text)
        try:
            have = metadata.version(wanted.name)
        except metadata.PackageNotFoundError:
            have = None
        if have is None or not wanted.specifier.contains(have, prereleases=True):
            missing.append(str(wanted))
    answer["missing"] = missing
except Exception as error:
    answer.setdefault("problem", "requirements: %s" % (str(error).splitlines() or [""])[0])
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
    staged: Path  # what its builds are given (:func:`stage`)


@dataclass(frozen=True)
class Built:
    interpreter: Interpreter
    wheel: str | None  # None: the build failed
    seconds: float


# -- what the child gets: pep517_torch and its dependencies alone ------------------------------


def _own_metadata() -> tuple[list[str], str | None]:
    """This pep517_torch's requirements and Requires-Python: from its installed metadata, else
    its checkout's pyproject.toml."""
    try:
        dist = metadata.distribution("pep517_torch")
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None and Path(str(dist.locate_file("pep517_torch"))).resolve() == PACKAGE:
        return list(dist.requires or []), dist.metadata.get("Requires-Python")
    from ..config import read_pyproject

    project = read_pyproject(PACKAGE.parent).get("project", {})
    return list(project.get("dependencies", [])), project.get("requires-python")


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


@dataclass(frozen=True)
class Staged:
    """What a child for one Python version is given: the folder first on its ``PYTHONPATH``
    (with ``bin/ninja``), and the requirements this environment does not hold."""

    folder: Path
    missing: tuple[str, ...]


def staged_paths(python: str) -> tuple[dict[str, Path], list[str]]:
    """Name -> path of every top-level package the child needs: pep517_torch (this one) and its
    requirements for a Python ``python`` ("3.10.13"), with theirs, as installed here; and the
    requirements not installed here (the target must have them). A distribution that does not
    support that Python is a ConfigError naming it."""
    from packaging.requirements import Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    major_minor = ".".join(python.split(".")[:2])
    marker_env = {"python_version": major_minor, "python_full_version": python, "extra": ""}
    requirements, own_python = _own_metadata()
    supports = [("pep517_torch", own_python)]
    paths, missing = {"pep517_torch": PACKAGE}, []
    pending, seen = requirements, set()
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
            requirement.marker = None  # evaluated: it applies to this target
            missing.append(str(requirement))
            continue
        needs = dist.metadata.get("Requires-Python")
        supports.append((f"{requirement.name} {dist.version}", needs))
        for path in _top_level(dist):
            paths.setdefault(path.name.removesuffix(".py") if path.suffix == ".py" else path.name, path)
        pending.extend(dist.requires or [])
    for name, needs in supports:
        try:
            fits = needs is None or SpecifierSet(needs).contains(python, prereleases=True)
        except InvalidSpecifier:
            fits = True  # not ours to judge: the child's import says
        if not fits:
            raise ConfigError(f"Python {python}: {name} needs Python {needs}")
    return paths, missing


def stage(folder: Path, python: str) -> Staged:
    """A folder of links to what a child for Python ``python`` needs (see :func:`staged_paths`),
    and ``bin/ninja``, a link to the ninja binary this environment builds with."""
    target = folder / f"py{python}"
    paths, missing = staged_paths(python)
    if not target.is_dir():
        target.mkdir(parents=True)
        for path in paths.values():
            (target / path.name).symlink_to(path, target_is_directory=path.is_dir())
        try:
            ninja = toolchain.find_ninja(os.environ)
        except ToolchainError:
            ninja = None  # the child finds its own, or says it has none
        if ninja is not None:
            (target / "bin").mkdir()
            (target / "bin" / "ninja").symlink_to(ninja.resolve())
    return Staged(target, tuple(missing))


def child_env(staged: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a build in another interpreter: the staged packages alone on
    PYTHONPATH (the caller's own PYTHONPATH, which may name this environment's site-packages,
    is not passed on), and the staged ninja first on PATH."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONHOME", None)
    env["PYTHONPATH"] = str(staged)
    if (staged / "bin").is_dir():
        env["PATH"] = os.pathsep.join([str(staged / "bin"), *filter(None, [env.get("PATH")])])
    return env


# -- probing and building ------------------------------------------------------------------------


def _which(given: str) -> str | None:
    found = shutil.which(given) if os.sep not in given else (given if os.access(given, os.X_OK) else None)
    return found if found is not None and Path(found).is_file() else None


def probe(given: str, staging: Path) -> Interpreter:
    """What ``given`` is: its Python and torch, as its build will see them; a ConfigError (one
    line naming it) when it cannot build."""
    found = _which(given)
    if found is None:
        raise ConfigError(f"{given}: no such interpreter", "--python")
    version = _run(found, given, ["-c", _VERSION]).strip()
    try:
        staged = stage(staging, version)
    except ConfigError as error:
        raise ConfigError(f"{given}: {error}", "--python") from None
    output = _run(found, given, ["-c", _PROBE, *staged.missing], child_env(staged.folder))
    try:
        answer = json.loads(output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ConfigError(f"{given}: does not run as a Python interpreter", "--python") from None
    if answer.get("missing"):
        quoted = " ".join(f"'{text}'" for text in answer["missing"])
        raise ConfigError(f"{given}: pep517_torch needs {', '.join(answer['missing'])} for Python"
                          f" {answer['python']}, which neither it nor {sys.executable} has"
                          f" ({found} -m pip install {quoted})", "--python")
    problem = answer.get("problem")
    if problem == "no torch":
        raise ConfigError(f"{given}: torch is not installed there ({found} -m pip install torch)",
                          "--python")
    if problem:
        raise ConfigError(f"{given}: cannot build there: {problem}", "--python")
    if Path(answer["pep517_torch"]).resolve() != PACKAGE:
        raise ConfigError(f"{given}: imports pep517_torch from {answer['pep517_torch']} (an editable"
                          f" install there?), not this one ({PACKAGE})", "--python")
    return Interpreter(given, found, answer["python"], answer["torch"], answer["cuda"],
                       staged.folder)


def _run(found: str, given: str, arguments: list[str], env: dict[str, str] | None = None) -> str:
    """``found``'s stdout for ``arguments``; a ConfigError when it does not run as Python."""
    try:
        return subprocess.run([found, *arguments], capture_output=True, text=True, env=env,
                              timeout=300, check=True, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        raise ConfigError(f"{given}: does not run as a Python interpreter", "--python") from None


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


def _build_one(interpreter: Interpreter, root: Path, out: Path, scratch: Path,
               settings: Sequence[str], written: dict[str, Interpreter]) -> Built:
    own = Path(tempfile.mkdtemp(prefix="wheel-", dir=scratch))
    command = [interpreter.executable, "-m", "pep517_torch", "wheel", str(root), "-o", str(own)]
    command += [f"-C{pair}" for pair in settings]
    say(f"building with {interpreter.given} (Python {interpreter.python}, torch {interpreter.torch})",
        sys.stdout)
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=child_env(interpreter.staged), bufsize=1,
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
        results = [_build_one(interpreter, root, out, scratch, settings, written)
                   for interpreter in interpreters]
    print(table(results), flush=True)
    return 0 if all(result.wheel for result in results) else 1

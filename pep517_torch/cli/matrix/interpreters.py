"""``python -m pep517_torch wheel . --python PY [--python PY ...]``: one wheel per interpreter.

Each interpreter builds with its own torch, in its own process (``PY -m pep517_torch wheel``),
into its own build folder (the default build-dir names the Python tag and the torch), given
pep517_torch and its dependencies alone (``staging.py``): so pep517_torch need not be
installed there.

Every interpreter is probed first: a missing one, one too old for pep517_torch or a dependency,
one lacking a requirement, one without torch, one whose torch cannot be imported, one whose
build would fail before compiling (a bad setting: said once when every build would), and two
that would build the same wheel (the same torch, or two torches and one file name) are one line
each, before anything compiles.
Each wheel is built into a folder of its own and then moved beside the others: a wheel that
would replace one another interpreter wrote in this run is an error, never an overwrite. The
run ends with one table: interpreter, torch, CUDA, wheel, seconds.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...atomic import writing
from ...errors import ConfigError, Pep517TorchError
from ...shipped_runtime.user_line import error_line, print_line, say, shown
from .staging import PACKAGE, child_env, stage
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


# Run by each target once probed, as :func:`_probe` is: argv the project, then the -C pairs.
_NAME = "import sys; from pep517_torch.cli.matrix.interpreters import answer_name; answer_name(sys.argv[1:])"


@dataclass(frozen=True)
class Interpreter:
    given: str  # as on the command line
    executable: str
    python: str  # "3.11"
    torch: str  # "2.13.0+cpu"
    cuda: str | None  # torch.version.cuda
    staged: Path  # what its builds are given (:func:`stage`)
    wheel: str | None = None  # the name its build would give the wheel (:func:`answer_name`)


@dataclass(frozen=True)
class Built:
    interpreter: Interpreter
    wheel: str | None  # None: the build failed
    seconds: float


# -- probing and building ------------------------------------------------------------------------


def _which(given: str) -> str | None:
    found = shutil.which(given) if os.sep not in given else (given if os.access(given, os.X_OK) else None)
    return found if found is not None and Path(found).is_file() else None


def probe(given: str, staging: Path, executable: str | None = None,
          key: str = "--python") -> Interpreter:
    """What ``given`` is (an interpreter on the command line, or the name of ``executable``, a
    matrix cell's): its Python and torch, as its build will see them; a ConfigError (one line
    naming it, under ``key``) when it cannot build."""
    found = _which(executable or given)
    if found is None:
        raise ConfigError(f"{given}: no such interpreter", key)
    version = _run(found, given, ["-c", _VERSION], key=key).strip()
    if not re.fullmatch(r"\d+\.\d+\.\d+[a-z0-9+]*", version):  # never its output echoed as one
        raise ConfigError(f"{given}: does not run as a Python interpreter", key)
    try:
        staged = stage(staging, version)
    except ConfigError as error:
        raise ConfigError(f"{given}: {error}", key) from None
    answer = _ask(found, given, ["-c", _PROBE, *staged.missing], child_env(staged.folder), key)
    if not _answer_fits(answer):
        raise ConfigError(f"{given}: does not run as a Python interpreter", key)
    if answer.get("missing"):
        quoted = " ".join(shlex.quote(str(text)) for text in answer["missing"])
        raise ConfigError(f"{given}: pep517_torch needs {', '.join(map(str, answer['missing']))}"
                          f" for Python {answer['python']}, which neither it nor {sys.executable}"
                          f" has ({shlex.quote(found)} -m pip install {quoted})", key)
    problem = answer.get("problem")
    if problem == "no torch":
        raise ConfigError(f"{given}: torch is not installed there ({shlex.quote(found)} -m pip"
                          " install torch)", key)
    if problem:
        raise ConfigError(f"{given}: cannot build there: {problem}", key)
    if Path(answer["pep517_torch"]).resolve() != PACKAGE:
        raise ConfigError(f"{given}: imports pep517_torch from {answer['pep517_torch']} (an editable"
                          f" install there?), not this one ({PACKAGE})", key)
    return Interpreter(given, found, answer["python"], answer["torch"], answer["cuda"],
                       staged.folder)


def _answer_fits(answer: dict[str, Any]) -> bool:
    """Whether a probe's answer is what _PROBE prints: its values are shown and compared."""
    texts = all(isinstance(answer.get(k), str) for k in ("python", "executable"))
    optional = all(isinstance(answer.get(k), (str, type(None)))
                   for k in ("pep517_torch", "problem", "torch", "cuda", "at"))
    missing = isinstance(answer.get("missing", []), list) and all(
        isinstance(m, str) for m in answer.get("missing", []))
    return texts and optional and missing and re.fullmatch(r"\d+\.\d+", answer["python"]) is not None


def _run(found: str, given: str, arguments: list[str], env: dict[str, str] | None = None,
         key: str = "--python") -> str:
    """``found``'s stdout for ``arguments``; a ConfigError when it does not run as Python."""
    try:
        return subprocess.run([found, *arguments], capture_output=True, text=True, env=env,
                              timeout=300, check=True, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        raise ConfigError(f"{given}: does not run as a Python interpreter", key) from None


def _ask(found: str, given: str, arguments: list[str], env: dict[str, str],
         key: str = "--python") -> dict[str, Any]:
    """The JSON object a script run by ``found`` prints last; a ConfigError when it prints none."""
    output = _run(found, given, arguments, env, key)
    try:
        return dict(json.loads(output.strip().splitlines()[-1]))
    except (ValueError, TypeError, IndexError):
        raise ConfigError(f"{given}: does not run as a Python interpreter", key) from None


def answer_name(argv: Sequence[str]) -> None:
    """In the target: print, as JSON, the name its build would give the wheel, or the one line
    its build would fail with before compiling (a bad setting, a Python the project refuses)."""
    from ...backend.pipeline import predicted_wheel_name
    from .. import parse_config_settings

    try:
        answer = {"wheel": predicted_wheel_name(Path(argv[0]), parse_config_settings(argv[1:]))}
    except Pep517TorchError as error:
        answer = {"problem": str(error)}
    except Exception as error:  # noqa: BLE001 (not "does not run as Python": say what it is)
        answer = {"problem": f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"}
    print(json.dumps(answer))


def named(interpreter: Interpreter, root: Path, settings: Sequence[str],
          key: str = "--python") -> Interpreter:
    """``interpreter`` with the name of the wheel it would build; a ConfigError, the line its
    build would fail with, when it would fail before compiling."""
    answer = _ask(interpreter.executable, interpreter.given, ["-c", _NAME, str(root), *settings],
                  child_env(interpreter.staged), key)
    if "problem" in answer:
        raise ConfigError(answer["problem"])  # its own words: name_all says whose
    return dataclasses.replace(interpreter, wheel=answer["wheel"])


def name_all(interpreters: Sequence[Interpreter], root: Path, settings: Sequence[str],
             key: str = "--python") -> tuple[list[Interpreter], list[str]]:
    """Each interpreter with its wheel's name, and one line per build that would fail before
    compiling, naming the interpreter; once, as it is, when every one of several would fail
    alike (the project's own error)."""
    found: list[Interpreter] = []
    failing: dict[str, ConfigError] = {}
    for interpreter in interpreters:
        try:
            found.append(named(interpreter, root, settings, key))
        except ConfigError as error:
            failing[interpreter.given] = error
    lines = {str(error) for error in failing.values()}
    if len(failing) > 1 and not found and len(lines) == 1:
        return found, [*lines]
    return found, [str(error) if error.key == key else f"{key}: {given}: {error}"
                   for given, error in failing.items()]


def duplicates(interpreters: Sequence[Interpreter]) -> list[str]:
    """One line per interpreter that would build what an earlier one builds: the same Python
    and torch, or another torch whose wheel bears the same name (the platform tag aside)."""
    problems, seen, names = [], {}, {}
    for interpreter in interpreters:
        key = (interpreter.python, interpreter.torch, interpreter.cuda)
        first = seen.setdefault(key, interpreter)
        if first is not interpreter:
            problems.append(f"{interpreter.given}: Python {interpreter.python} with torch"
                            f" {interpreter.torch} again ({first.given} has them): it would build"
                            " the same wheel")
            continue
        if interpreter.wheel is None:  # a wheel variant: its label is known once built
            continue
        first = names.setdefault(interpreter.wheel, interpreter)
        if first is not interpreter:
            problems.append(f"{interpreter.given}: torch {interpreter.torch} would build"
                            f" {interpreter.wheel}, as {first.given} (torch {first.torch}) would:"
                            f" {_telling_apart(interpreter.wheel)}")
    return problems


def _telling_apart(wheel: str) -> str:
    """How to give two torches' wheels different names, for a wheel named ``wheel``."""
    from packaging.version import Version

    from ...distribution.torch_requirement import torch_label

    if torch_label(Version(wheel.split("-")[1])):
        return ("their torches share a release and CUDA, so one wheel serves both: build with"
                " one of them")
    return 'name the torch in the wheel\'s version with -C local-version=torch (or local-version = "torch")'


def build_with(interpreter: Interpreter, root: Path, scratch: Path,
               settings: Sequence[str]) -> tuple[Path | None, float]:
    """The wheel ``interpreter`` builds (into a folder of its own under ``scratch``; its output
    shown as it comes), or None when its build fails; and the seconds it took."""
    own = Path(tempfile.mkdtemp(prefix="wheel-", dir=scratch))
    command = [interpreter.executable, "-m", "pep517_torch", "wheel", str(root), "-o", str(own)]
    command += [f"-C{pair}" for pair in settings]
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=child_env(interpreter.staged), bufsize=1,
                          stdin=subprocess.DEVNULL) as child:
        assert child.stdout is not None
        for line in child.stdout:
            print(line, end="", flush=True)
    seconds = time.perf_counter() - started
    wheels = sorted(own.glob("*.whl"))
    return (wheels[0] if child.returncode == 0 and len(wheels) == 1 else None), seconds


def place(wheel: Path, interpreter: Interpreter, out: Path, written: dict[str, Interpreter],
          key: str = "--python") -> bool:
    """Move ``wheel`` into ``out``, unless another interpreter of this run wrote that name
    (then one error line, and the first stays)."""
    name = wheel.name
    if name in written:
        print_line(error_line(f"{key}: {interpreter.given} built {name}, which"
                              f" {written[name].given} built in this run: not replaced (give the"
                              " wheels different names, e.g. local-version = \"torch\")"))
        return False
    with writing(out):
        out.mkdir(parents=True, exist_ok=True)
        os.replace(wheel, out / name)
    written[name] = interpreter
    say(f"{name}: moved into {out}", sys.stdout)
    return True


def _build_one(interpreter: Interpreter, root: Path, out: Path, scratch: Path,
               settings: Sequence[str], written: dict[str, Interpreter]) -> Built:
    say(f"building with {interpreter.given} (Python {interpreter.python}, torch {interpreter.torch})",
        sys.stdout)
    wheel, seconds = build_with(interpreter, root, scratch, settings)
    if wheel is None or not place(wheel, interpreter, out, written):
        return Built(interpreter, None, seconds)
    return Built(interpreter, wheel.name, seconds)


def columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows as aligned columns, the first a header with a rule of dashes under it; every cell
    through the sanitiser (an interpreter's name, what a child answered)."""
    rows = [[shown(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def table(results: Sequence[Built]) -> str:
    rows = [("interpreter", "torch", "CUDA", "wheel", "seconds")]
    rows += [(r.interpreter.given, r.interpreter.torch, r.interpreter.cuda or "-",
              r.wheel or "FAILED", f"{r.seconds:.1f}") for r in results]
    return columns(rows)


def build_matrix(root: Path, out: Path, pythons: Sequence[str], settings: Sequence[str]) -> int:
    """Probe every interpreter, then build one wheel with each; 0 when all built."""
    if out.exists() and not out.is_dir():  # before anything is probed, and nothing made: the
        with writing(out):  # one line a build without --python says
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(out))
    with tempfile.TemporaryDirectory(prefix="pep517_torch-matrix-") as scratch_name:
        scratch = Path(scratch_name)
        interpreters, problems = [], []
        for given in pythons:
            try:
                interpreters.append(probe(given, scratch / "staged"))
            except ConfigError as error:
                problems.append(str(error))
        if not problems:
            interpreters, problems = name_all(interpreters, root, settings)
        problems += [f"--python: {line}" for line in duplicates(interpreters)]
        if problems:
            for problem in problems:
                print_line(error_line(problem))
            return 2
        written: dict[str, Interpreter] = {}
        results = [_build_one(interpreter, root, out, scratch, settings, written)
                   for interpreter in interpreters]
    print(table(results), flush=True)
    return 0 if all(result.wheel for result in results) else 1

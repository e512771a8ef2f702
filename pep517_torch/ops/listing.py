"""Asking a child process with the build's torch what a build registered (``child.py``).

The build's files are laid out as the wheel holds them, in a scratch folder of links
(``stage``); the child loads them there with the interpreter given (the one the build used),
bounded by a timeout, its output kept in a log; its answer is read with a bound and checked
(``table.read_answer``). pep517_torch's own process never imports torch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import OpsError
from .render import printable
from .table import MAX_ANSWER_BYTES, MAX_LINES, MAX_TEXT, Answer, OpsTable, TableError, read_answer

# A child already running ``child.py -`` (``early.py``'s), waiting for its request, with its log.
Waiting = tuple[subprocess.Popen[bytes], Path]

CHILD = Path(__file__).with_name("child.py")
TIMEOUT = 300.0  # seconds; importing torch takes 1-2 s, a big CUDA library a few more
LOG_TAIL = 64 * 1024
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
                 "test_aot_dispatch_dynamic")

# What an artifact that registers operators holds among its dynamic symbols' names: torch's
# Library (TORCH_LIBRARY, TORCH_LIBRARY_IMPL, _FRAGMENT), the older c10::RegisterOperators,
# the stable ABI's shim (STABLE_TORCH_LIBRARY*).
_REGISTERS = re.compile(rb"_ZN5torch7Library|_ZN3c1017RegisterOperators|aoti_torch_library_")
# A Python module that registers operators names torch.library (or its private twin).
_USES_LIBRARY = re.compile(
    rb"\btorch\.(?:_?library)\b|\bfrom[ \t]+torch[ \t]+import[ \t]+[^\n]*\b_?library\b")
_MODULE_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAMESPACE_TWICE = re.compile(r"Only a single TORCH_LIBRARY can be used to register the namespace (\w+)")


@dataclass(frozen=True)
class Contents:
    """What a build made, as its wheel holds it: ``files`` (archive name, file), of which
    ``modules`` (module name, archive name) are extension modules and ``libraries`` (archive
    names) are libraries torch.ops.load_library loads."""

    files: tuple[tuple[str, Path], ...]
    modules: tuple[tuple[str, str], ...] = ()
    libraries: tuple[str, ...] = ()

    def python_users(self) -> list[str]:
        """The shipped Python modules whose text names torch.library, by module name."""
        found = []
        for arcname, path in self.files:
            name = module_name(arcname)
            if name is None:
                continue
            try:
                if _USES_LIBRARY.search(path.read_bytes()):
                    found.append(name)
            except OSError:
                continue
        return found

    def registers_ops(self) -> bool:
        """Whether anything here can register an operator: an artifact naming torch's
        registration calls among its symbols, or a Python module using torch.library."""
        artifacts = {arcname for _, arcname in self.modules} | set(self.libraries)
        paths = [path for arcname, path in self.files if arcname in artifacts]
        return any(_artifact_registers(path) for path in paths) or bool(self.python_users())


def module_name(arcname: str) -> str | None:
    """``pkg/sub/mod.py`` -> ``pkg.sub.mod``, ``pkg/__init__.py`` -> ``pkg``; None: no module."""
    if not arcname.endswith(".py"):
        return None
    parts = arcname[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(_MODULE_PART.fullmatch(part) for part in parts):
        return None
    return ".".join(parts)


def _artifact_registers(path: Path) -> bool:
    """The dynamic string table of an ELF file (all of any other file) holds a registration
    call's name. Unreadable: assume it may."""
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile

        with path.open("rb") as stream:
            try:
                section = ELFFile(stream).get_section_by_name(".dynstr")
            except ELFError:
                section = None
            if section is not None:
                return _REGISTERS.search(section.data()) is not None
            stream.seek(0)
            return _REGISTERS.search(stream.read()) is not None
    except (OSError, ImportError):
        return True


def stage(contents: Contents, folder: Path) -> Path:
    """The files laid out under ``folder`` as the wheel holds them (links, copies where the
    system has none); the folder, for the child's path."""
    for arcname, source in contents.files:
        parts = arcname.split("/")
        if arcname.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise OpsError(f"{arcname!r}: not a path inside a wheel")
        target = folder.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.symlink_to(source)
        except OSError:
            shutil.copy2(source, target)
    return folder


def list_ops(
    contents: Contents,
    python: str,
    *,
    stubs: Sequence[str] = (),
    samples: Path | None = None,
    tests: Sequence[str] = OPCHECK_TESTS,
    timeout: float = TIMEOUT,
    env: Mapping[str, str] | None = None,
    scratch: Path | None = None,
    early: Waiting | None = None,
) -> Answer:
    """What ``contents`` registers under ``python``'s torch (and the stubs of the modules
    ``stubs`` names; opcheck's rows on ``samples``' samples). ``early``: a child started during
    the compile (``early.py``: the same ``python`` and ``env``), asked first (its torch imported
    meanwhile; ``Answer.early`` says it answered). An artifact whose loading
    kills the child (a second TORCH_LIBRARY of one namespace aborts the process: a package's
    _cpu and _cuda variants, loaded one at a time by the package) is left out of a new child,
    and the table says so. OpsError: the child could not answer (its interpreter, a crash
    elsewhere, the timeout, an answer that is not one)."""
    artifacts = {name: "module" for name, _ in contents.modules}
    artifacts.update({arcname: "library" for arcname in contents.libraries})
    left_out: list[str] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix=".pep517_torch-ops-", dir=scratch) as work:
        folder = stage(contents, Path(work) / "wheel")
        answer_file = Path(work) / "answer.json"
        imports = contents.python_users()
        waiting, answered_early = early, early is not None
        while True:
            request = {
                "root": str(folder),
                "answer": str(answer_file),
                "modules": [list(pair) for pair in contents.modules if pair[0] not in left_out],
                "libraries": [name for name in contents.libraries if name not in left_out],
                "imports": imports,
                "stubs": [name for name in stubs if name not in left_out],
                "samples": None if samples is None else str(samples),
                "tests": list(tests),
            }
            request_file = Path(work) / "request.json"
            request_file.write_text(json.dumps(request))
            if waiting is not None:
                (process, log), waiting = waiting, None
                code = _ask(process, request_file, log, timeout)
            else:
                log = Path(work) / "child.log"
                code = _run(python, request_file, log, Path(work), timeout, env)
                answered_early = False
            if code == 0:
                break
            doing, said = _last_words(log)
            culprit = doing.removeprefix("loading ") if doing.startswith("loading ") else None
            how = (f"was killed by {signal.Signals(-code).name}" if code < 0 and -code in
                   signal.valid_signals() else f"exited with {code}")
            if culprit not in artifacts or culprit in left_out:
                where = (f" while {doing}" if doing else "") + (f": {said}" if said else "")
                raise OpsError(f"the listing child ({python}) {how}{printable(where)}")
            left_out.append(culprit)
            problems.append(_left_out(culprit, how, said))
        try:
            with answer_file.open("rb") as handle:
                data = handle.read(MAX_ANSWER_BYTES + 1)
        except OSError:
            doing, said = _last_words(log)
            where = (f" while {doing}" if doing else "") + (f": {said}" if said else "")
            raise OpsError(f"the listing child ({python}) wrote no answer{printable(where)}") from None
        try:
            answer = read_answer(data)
        except TableError as error:
            raise OpsError(f"the listing child's answer is not an operator table: {error}") from None
    if answer.error:
        raise OpsError(f"{python}: {answer.error}")
    if problems:
        table = replace(answer.table, problems=(*problems, *answer.table.problems)[:MAX_LINES])
        answer = replace(answer, table=table)
    return replace(answer, early=answered_early)


def _left_out(name: str, how: str, said: str) -> str:
    """The table's line for an artifact whose loading killed the child."""
    twice = _NAMESPACE_TWICE.search(said)
    if twice:
        return (f"{name} is not loaded beside the artifacts before it: it defines the namespace"
                f" {twice.group(1)} with TORCH_LIBRARY too, and torch aborts on a second (variants"
                " of one library, such as _cpu and _cuda, load one at a time)")
    return printable(f"{name} is not loaded: loading it {how.replace('was killed', 'killed the listing')}"
                     + (f" ({said})" if said else ""))[:MAX_TEXT]


def _run(python: str, request: Path, log: Path, cwd: Path, timeout: float,
         env: Mapping[str, str] | None) -> int:
    with log.open("wb") as output:
        try:
            child = subprocess.Popen(
                [python, str(CHILD), str(request)], stdin=subprocess.DEVNULL, stdout=output,
                stderr=output, cwd=cwd, env=None if env is None else dict(env),
                start_new_session=True,
            )
        except OSError as error:
            raise OpsError(f"cannot run {python} to list the operators: {error.strerror or error}") from None
        return _wait(child, log, timeout)


def _wait(child: subprocess.Popen[bytes], log: Path, timeout: float) -> int:
    try:
        return child.wait(timeout)
    except subprocess.TimeoutExpired:
        end(child)
        doing, said = _last_words(log)
        where = (f" while {doing}" if doing else "") + (f": {said}" if said else "")
        raise OpsError(f"listing the operators took longer than {timeout:.0f} s"
                       f"{printable(where)}") from None
    except BaseException:
        end(child)
        raise


def _ask(child: subprocess.Popen[bytes], request: Path, log: Path, timeout: float) -> int:
    """The early child's answer to ``request``: its path on the child's stdin (one short
    line, never blocking), stdin closed, the child waited for as :func:`_run` waits."""
    assert child.stdin is not None
    try:
        child.stdin.write(os.fsencode(request) + b"\n")
        child.stdin.close()
    except OSError:  # it died meanwhile: its exit status and log say how
        pass
    return _wait(child, log, timeout)


def end(child: subprocess.Popen[bytes]) -> None:
    """A listing child ended: its stdin closed, its process group (a session of its own)
    killed, so nothing it started outlives it, and reaped."""
    try:
        if child.stdin is not None:
            child.stdin.close()
    except OSError:
        pass
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()


def _last_words(log: Path) -> tuple[str, str]:
    """Where the child was (its last progress line) and its last word of its own: a C++
    exception's ``what()`` line when it died of one, else its last line."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(log.stat().st_size - LOG_TAIL, 0))
            tail = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "", ""
    from .child import PROGRESS

    doing = [line[len(PROGRESS):] for line in tail if line.startswith(PROGRESS)]
    said = [line.strip() for line in tail if line.strip() and not line.startswith(PROGRESS)]
    what = [line.removeprefix("what():").strip() for line in said if line.startswith("what():")]
    return (doing[-1] if doing else ""), ((what or said or [""])[-1])[:2000]


def no_listing(torch: str) -> OpsTable:
    """The table of a build whose artifacts register no operator: nothing was loaded."""
    return OpsTable(torch=torch, listed=False)


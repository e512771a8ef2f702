"""Run a setup.py with ``setup()`` intercepted and record what it asked of its environment.

Nothing is built: ``setuptools.setup`` (and distutils') only records its keyword arguments,
torch's ``CppExtension``/``CUDAExtension`` return plain ``setuptools.Extension`` objects
carrying exactly the user's arguments (torch's own include dirs and libraries left out), and
``BuildExtension.with_options`` remembers its options. Environment reads made by project code
(``os.environ.get``, ``os.getenv``, ``os.environ[...]``, ``in os.environ``) and CUDA probes
(``torch.cuda.is_available()``, ``torch.utils.cpp_extension.CUDA_HOME``, ``torch.version.cuda``)
are recorded; the probes can be forced on or off so both branches of a setup.py can be seen.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path

from ...errors import MigrateError
from .gpu_probes import BY_CUDA, GpuChoice
from .hooks import Recorder, patched
from .record import SetupRun

# Modules a setup.py imports that are build tools, not build requirements of the project.
BUILD_TOOL_MODULES = frozenset(
    {"torch", "setuptools", "distutils", "pkg_resources", "_distutils_hack", "wheel", "pip",
     "pep517_torch", "packaging", "typing_extensions", "sysconfig", "ninja"}
)


@contextlib.contextmanager
def _process_state(path: Path, env: Mapping[str, str | None]) -> Iterator[None]:
    """cwd, argv, sys.path, the environment and the project's modules, restored afterwards."""
    saved_cwd, saved_argv, saved_path = os.getcwd(), sys.argv[:], sys.path[:]
    saved_env = dict(os.environ)
    saved_modules = set(sys.modules)
    saved_bytecode = sys.dont_write_bytecode
    try:
        for name, value in env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        os.chdir(path.parent)
        sys.argv = [path.name, "bdist_wheel"]
        sys.path.insert(0, str(path.parent))
        sys.dont_write_bytecode = True
        yield
    finally:
        os.chdir(saved_cwd)
        sys.argv, sys.path[:] = saved_argv, saved_path
        sys.dont_write_bytecode = saved_bytecode
        for name in set(os.environ) - set(saved_env):
            del os.environ[name]
        for name, value in saved_env.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
        root = os.path.normcase(str(path.parent)) + os.sep
        for name in set(sys.modules) - saved_modules:
            filename = getattr(sys.modules[name], "__file__", None) or ""
            if os.path.normcase(filename).startswith(root):
                del sys.modules[name]  # project modules re-run in the next execution


def _third_party_imports(before: set[str], root: Path) -> list[str]:
    tops = sorted({name.partition(".")[0] for name in set(sys.modules) - before})
    found = []
    for top in tops:
        module = sys.modules.get(top)
        filename = getattr(module, "__file__", None) or ""
        if (top in BUILD_TOOL_MODULES or top in sys.stdlib_module_names or top.startswith("_")
                or not filename or Path(filename).is_relative_to(root)):
            continue
        found.append(top)
    return found


def describe_exception(exc: BaseException, path: Path) -> str:
    """``RuntimeError: message (line 12: raise RuntimeError(...))`` on one line."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}{': ' if message else ''}{message}{_where(exc, path)}"


def _where(exc: BaseException, path: Path) -> str:
    """`` (line 12: raise RuntimeError(...))``: the setup.py line the exception came from."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    if not frames:
        return ""
    return f" (line {frames[-1].lineno}: {' '.join((frames[-1].line or '').split())})"


def describe_exit(exc: SystemExit, path: Path, setup_called: bool) -> str | None:
    """What a ``sys.exit()``/``exit()`` of setup.py means for migrate (None: nothing wrong,
    an exit with status 0 after setup() was called), as Python's own exit would report it: a
    message is printed and gives status 1."""
    code = exc.code
    if code in (None, 0) and setup_called:
        return None
    if code is None or isinstance(code, int):
        what = f"exited with status {code or 0}"
    else:
        what = f"exited with the message {' '.join(str(code).split())!r} (status 1)"
    when = "" if setup_called else " before calling setup()"
    return f"setup.py {what}{_where(exc, path)}{when}"


class _CapturedOutput:
    """What setup.py prints, into a real (temporary) file: ``sys.stdout`` and ``sys.stderr``
    are text streams as Python makes them, with ``reconfigure``, ``buffer``, ``fileno`` and
    ``encoding`` (setup.py files call ``sys.stderr.reconfigure(line_buffering=True)``); both
    write through in order, and closing one loses nothing."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()
        self._reader = os.dup(self._file.fileno())
        self.stdout = self._stream()
        self.stderr = self._stream()

    def _stream(self) -> io.TextIOWrapper:
        raw = io.FileIO(self._file.fileno(), "wb", closefd=False)
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors="replace",
                                line_buffering=True, write_through=True)

    def text(self) -> str:
        for stream in (self.stdout, self.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # closed by setup.py: it flushed when it closed
                pass
        os.lseek(self._reader, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(self._reader, 1 << 16):
            chunks.append(chunk)
        os.close(self._reader)
        self._file.close()
        return b"".join(chunks).decode("utf-8", "replace")


@contextlib.contextmanager
def _redirected(output: _CapturedOutput | None) -> Iterator[None]:
    if output is None:
        yield
        return
    with contextlib.redirect_stdout(output.stdout), contextlib.redirect_stderr(output.stderr):
        yield


def run_setup(
    path: Path, *, env: Mapping[str, str | None] | None = None, cuda: bool | None = None,
    run: SetupRun | None = None, capture: bool = True, gpu: GpuChoice = BY_CUDA,
) -> SetupRun:
    """Execute ``path`` as ``__main__`` in its directory with setup() intercepted.

    ``env`` sets (or, with None, unsets) variables for this run; ``cuda`` forces the CUDA
    probes on or off (None: the real values), ``gpu`` what the machine's GPU reads as
    (:mod:`.gpu_probes`). ``run``: the record to fill (read by the caller
    should setup.py end the process); ``capture``: what setup.py prints goes to a file of its
    own (:attr:`SetupRun.output`), else to ``sys.stdout``/``sys.stderr`` as they are (the
    sandbox's pipe, which bounds it).
    """
    path = Path(os.path.abspath(path))
    if not path.is_file():
        raise MigrateError(f"{path}: no such file")
    try:
        source = path.read_bytes()
        code = compile(source, str(path), "exec", dont_inherit=True)
    except OSError as exc:
        raise MigrateError(f"{path}: cannot be read ({exc.strerror})") from None
    except (SyntaxError, ValueError) as exc:
        line = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        message = f"{path}: not valid Python: {exc.__class__.__name__}{line}: {exc}"
        raise MigrateError(message) from None
    try:
        import setuptools  # noqa: F401
        import torch.utils.cpp_extension  # noqa: F401
    except ImportError as exc:
        message = f"{path}: migrate needs torch and setuptools installed ({exc})"
        raise MigrateError(message) from None

    run = run or SetupRun(path)
    recorder = Recorder(run, cuda, gpu)
    output = _CapturedOutput() if capture else None
    namespace = {"__name__": "__main__", "__file__": str(path), "__builtins__": builtins,
                 "__doc__": None, "__package__": None, "__spec__": None}
    before = set(sys.modules)
    with _process_state(path, env or {}):
        try:
            with patched(recorder), _redirected(output):
                exec(code, namespace)
        except SystemExit as exc:
            exited = describe_exit(exc, path, run.setup_calls > 0)
            if exited is not None:
                raise MigrateError(f"{path}: {exited}", run) from None
        except (Exception, KeyboardInterrupt) as exc:  # a KeyboardInterrupt it raised itself
            message = f"{path}: setup.py raised {describe_exception(exc, path)}"
            raise MigrateError(message, run) from None
        finally:
            if output is not None:
                run.output = output.text()
        run.imported = _third_party_imports(before, path.parent)
    if run.setup_calls == 0:
        raise MigrateError(f"{path}: setup() was never called (is it behind a condition?)")
    return run

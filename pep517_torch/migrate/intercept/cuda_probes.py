"""CUDA probes a setup.py makes without asking torch: running nvcc, looking for it or for CUDA_HOME.

``subprocess.call(["nvcc", ...])``, ``check_output``, ``run``, ``check_call``, ``getoutput``,
``getstatusoutput``, ``os.system`` with an ``nvcc`` command, ``shutil.which("nvcc")``, and
``os.path.exists`` / ``isdir`` / ``isfile`` (or ``pathlib.Path.exists`` / ``is_dir`` /
``is_file``) of a CUDA toolkit path are recorded like torch's own probes. Forced off they answer
as on a machine without nvcc (``FileNotFoundError``, exit status 127, ``None``, ``False``);
forced on as on one with it (nvcc's ``--version`` text, ``True``); nvcc itself never runs then.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from .record import FAKE_CUDA_HOME, FAKE_CUDA_VERSION

NVCC_NAMES = frozenset({"nvcc", "nvcc.exe"})
CUDA_DIRECTORY = re.compile(r"cuda(-[0-9][0-9.]*)?", re.IGNORECASE)
CUDA_HOME_VARIABLES = ("CUDA_HOME", "CUDA_PATH")
FAKE_NVCC = f"{FAKE_CUDA_HOME}/bin/nvcc"
FAKE_NVCC_OUTPUT = (
    "nvcc: NVIDIA (R) Cuda compiler driver\n"
    f"Cuda compilation tools, release {FAKE_CUDA_VERSION}, V{FAKE_CUDA_VERSION}.0\n"
)
COMMAND_FUNCTIONS = ("call", "check_call", "check_output", "run", "getoutput", "getstatusoutput")
PATH_FUNCTIONS = ("exists", "isdir", "isfile", "lexists")
PATHLIB_METHODS = ("exists", "is_dir", "is_file")
NOT_FOUND_STATUS = 127  # what a shell returns for a command it cannot find


class ProbeRecorder(Protocol):
    """What the patches need of :class:`.hooks.Recorder`."""

    def from_project(self) -> bool: ...

    def consult(self, label: str, real: Callable[[], Any], on: Callable[[], Any],
                off: Callable[[], Any], shown: Callable[[Any], Any] | None = None) -> Any: ...

    @property
    def root(self) -> str: ...


def words_of(command: Any) -> list[str]:
    if isinstance(command, (str, bytes, os.PathLike)):
        return os.fsdecode(command).split()
    if isinstance(command, Iterable):
        return [os.fsdecode(word) if isinstance(word, (str, bytes, os.PathLike)) else str(word)
                for word in command]
    return []


def _names_nvcc(words: list[str]) -> bool:
    return any(os.path.basename(word) in NVCC_NAMES for word in words)


def fake_command(function: str, command: Any, words: list[str], kwargs: dict[str, Any],
                 on: bool, answer: str = FAKE_NVCC_OUTPUT) -> Any:
    """What ``subprocess.<function>`` returns (or raises) with the tool there (on: it prints
    ``answer``, nvcc's version by default) or not (off)."""
    shell = bool(kwargs.get("shell")) or function in ("getoutput", "getstatusoutput", "system")
    if not on and not shell:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), words[0])
    status = 0 if on else NOT_FOUND_STATUS
    text = answer if on else ""
    text_mode = function in ("getoutput", "getstatusoutput") or any(
        kwargs.get(k) for k in ("text", "universal_newlines", "encoding", "errors"))
    output: str | bytes = text if text_mode else text.encode()
    if function == "system":
        return status << 8
    if function == "getoutput":
        return text
    if function == "getstatusoutput":
        return status, text
    if function == "check_output":
        if status:
            raise subprocess.CalledProcessError(status, command, output=output)
        return output
    if function == "run":
        captured = kwargs.get("capture_output") or kwargs.get("stdout") == subprocess.PIPE
        stdout = output if captured else None
        if status and kwargs.get("check"):
            raise subprocess.CalledProcessError(status, command, output=stdout)
        return subprocess.CompletedProcess(command, status, stdout)
    if status and function == "check_call":
        raise subprocess.CalledProcessError(status, command)
    return status


def _command(recorder: ProbeRecorder, owner: types.ModuleType, function: str,
             original: Callable[..., Any]) -> Callable[..., Any]:
    def probed(*args: Any, **kwargs: Any) -> Any:
        command = args[0] if args else kwargs.get("args", kwargs.get("cmd"))
        words = words_of(command)
        if not _names_nvcc(words) or not recorder.from_project():
            return original(*args, **kwargs)
        label = f"{owner.__name__}.{function}({' '.join(words[:2])!r})"
        return recorder.consult(
            label, lambda: original(*args, **kwargs),
            lambda: fake_command(function, command, words, kwargs, True),
            lambda: fake_command(function, command, words, kwargs, False),
            lambda result: "ran",
        )

    probed.__name__ = function
    return probed


def _which(recorder: ProbeRecorder, original: Callable[..., Any]) -> Callable[..., Any]:
    def which(cmd: Any, *args: Any, **kwargs: Any) -> Any:
        if os.path.basename(os.fsdecode(cmd)) not in NVCC_NAMES or not recorder.from_project():
            return original(cmd, *args, **kwargs)
        real = lambda: original(cmd, *args, **kwargs)  # noqa: E731
        return recorder.consult(f"shutil.which({os.fsdecode(cmd)!r})", real,
                                lambda: real() or FAKE_NVCC, lambda: None)

    return which


def is_cuda_path(value: Any, root: str, homes: Iterable[str]) -> bool:
    """A path of a CUDA toolkit outside the project: a CUDA home, ``.../cuda-12.8/...``, nvcc."""
    try:
        path = os.path.abspath(os.fsdecode(value))
    except TypeError:
        return False
    if path == root.rstrip(os.sep) or path.startswith(root):
        return False
    if any(path == home or path.startswith(home + os.sep) for home in homes if home):
        return True
    parts = Path(path).parts
    return any(CUDA_DIRECTORY.fullmatch(part) for part in parts) or parts[-1:] in (
        ("nvcc",), ("nvcc.exe",))


def _path_test(recorder: ProbeRecorder, name: str, original: Callable[..., Any],
               homes: list[str]) -> Callable[..., Any]:
    def tested(path: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_cuda_path(path, recorder.root, homes) or not recorder.from_project():
            return original(path, *args, **kwargs)
        return recorder.consult(f"{name}({os.fsdecode(path)!r})",
                                lambda: original(path, *args, **kwargs),
                                lambda: True, lambda: False)

    tested.__name__ = name.rpartition(".")[2]
    return tested


def patch_tool_probes(recorder: ProbeRecorder, replace: Callable[..., None],
                      torch_cuda_home: str | None) -> None:
    """Install the nvcc and CUDA-path probes (undone by ``replace``'s owner)."""
    for function in COMMAND_FUNCTIONS:
        replace(subprocess, function,
                _command(recorder, subprocess, function, getattr(subprocess, function)))
    replace(os, "system", _command(recorder, os, "system", os.system))
    replace(shutil, "which", _which(recorder, shutil.which))

    # Read before the environment is patched: these reads are migrate's, not the project's.
    found = [os.environ.get(variable) or "" for variable in CUDA_HOME_VARIABLES]
    homes = [os.path.abspath(h) for h in [*found, FAKE_CUDA_HOME, torch_cuda_home or ""] if h]
    for function in PATH_FUNCTIONS:
        original = getattr(os.path, function)
        replace(os.path, function, _path_test(recorder, f"os.path.{function}", original, homes))
    for method in PATHLIB_METHODS:
        original = getattr(Path, method)
        replace(Path, method, _path_test(recorder, f"Path.{method}", original, homes))

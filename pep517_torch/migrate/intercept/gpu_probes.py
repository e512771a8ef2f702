"""The GPU of the machine a setup.py runs on, as the setup.py asks for it.

``torch.cuda.get_device_capability()``, ``get_device_properties()``, ``get_device_name()``,
``current_device()``, and ``nvidia-smi`` (through ``subprocess``, ``shutil.which``, or found on
PATH by anything else: a stand-in is put first on PATH) answer as the machine does, as one GPU
migrate chooses, or as a machine without one. Runs with different answers show which flags a
setup.py derives from the machine it runs on (:mod:`.machine_flags`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from . import fake_nvidia_smi
from .cuda_probes import COMMAND_FUNCTIONS, fake_command, words_of

NVIDIA_SMI = frozenset({"nvidia-smi", "nvidia-smi.exe"})
NO_GPU = "No CUDA GPUs are available"  # what a CUDA torch raises without a GPU
NOT_COMPILED = "Torch not compiled with CUDA enabled"  # and a CPU torch
# CUDA probes that ask for a device, not a toolkit: off on a machine without a GPU
DEVICE_PROBES = frozenset({"torch.cuda.is_available()", "torch.cuda.device_count()"})
LOG = "calls"


@dataclass(frozen=True)
class Gpu:
    """One GPU of this compute capability."""

    major: int
    minor: int

    @property
    def capability(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def arch(self) -> str:  # as nvcc names it: sm_86, compute_86
        return f"{self.major}{self.minor}"


REFERENCE = Gpu(8, 6)  # the GPU of a run with CUDA forced on
OTHER = Gpu(12, 0)  # the second GPU that shows what follows the GPU
ABSENT = "no GPU"
BY_CUDA = "as CUDA is forced"  # REFERENCE with CUDA forced on, ABSENT forced off, else real
GpuChoice = Gpu | str | None  # a GPU, ABSENT, BY_CUDA, or None: the machine's own


def chosen(choice: GpuChoice, cuda: bool | None) -> Gpu | str | None:
    if choice != BY_CUDA:
        return choice
    return None if cuda is None else (REFERENCE if cuda else ABSENT)


def describe(choice: Gpu | str | None) -> str:
    if isinstance(choice, Gpu):
        return f"a GPU of compute capability {choice.capability}"
    return "no GPU" if choice == ABSENT else "this machine's GPU"


class GpuRecorder(Protocol):
    """What the patches need of :class:`.hooks.Recorder`."""

    gpu: Gpu | str | None
    cuda: bool | None
    run: Any

    def from_project(self) -> bool: ...


def _consult(recorder: GpuRecorder, label: str, real: Callable[[], Any],
             present: Callable[[Gpu], Any], absent: Callable[[], Any]) -> Any:
    """A GPU probe made by the project: the chosen answer, or the real one (recorded)."""
    gpu, probes = recorder.gpu, recorder.run.gpu_probes
    if isinstance(gpu, Gpu):
        probes.setdefault(label, gpu.capability)
        return present(gpu)
    if gpu == ABSENT:
        probes.setdefault(label, ABSENT)
        return absent()
    try:
        value = real()
    except Exception as exc:
        probes.setdefault(label, type(exc).__name__)
        raise
    probes.setdefault(label, value if isinstance(value, (str, int, tuple)) else "answered")
    return value


def _no_gpu(recorder: GpuRecorder, cuda_built: bool) -> Any:
    """What torch raises without a GPU: a CUDA torch (or CUDA forced on) that no device is
    visible, a CPU torch (or CUDA forced off) that it has no CUDA."""
    if recorder.cuda is True or (recorder.cuda is None and cuda_built):
        raise RuntimeError(NO_GPU)
    raise AssertionError(NOT_COMPILED)


def _properties(gpu: Gpu) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        name=fake_nvidia_smi.gpu_name(gpu.major, gpu.minor), major=gpu.major, minor=gpu.minor,
        total_memory=fake_nvidia_smi.MEMORY_MIB << 20, multi_processor_count=132,
        is_integrated=0, is_multi_gpu_board=0, L2_cache_size=50 << 20)


def _torch_function(recorder: GpuRecorder, name: str, original: Callable[..., Any],
                    present: Callable[[Gpu], Any], cuda_built: bool) -> Callable[..., Any]:
    def probed(*args: Any, **kwargs: Any) -> Any:
        if not recorder.from_project():
            return original(*args, **kwargs)
        return _consult(recorder, f"torch.cuda.{name}()", lambda: original(*args, **kwargs),
                        present, lambda: _no_gpu(recorder, cuda_built))

    probed.__name__ = name
    return probed


def _command(recorder: GpuRecorder, owner: types.ModuleType, function: str,
             original: Callable[..., Any]) -> Callable[..., Any]:
    shell_function = function in ("getoutput", "getstatusoutput", "system")

    def probed(*args: Any, **kwargs: Any) -> Any:
        command = args[0] if args else kwargs.get("args", kwargs.get("cmd"))
        shell = shell_function or bool(kwargs.get("shell"))
        words = words_of(command)
        if not words or os.path.basename(words[0]) not in NVIDIA_SMI or not recorder.from_project():
            return original(*args, **kwargs)
        if shell and isinstance(recorder.gpu, Gpu):
            return original(*args, **kwargs)  # a pipeline: the stand-in on PATH answers
        tool_args = words[1:]
        return _consult(
            recorder, " ".join(["nvidia-smi", *tool_args]),
            lambda: original(*args, **kwargs),
            lambda gpu: fake_command(function, command, words, kwargs, True,
                                     fake_nvidia_smi.output(tool_args, gpu.major, gpu.minor)),
            lambda: fake_command(function, command, words, kwargs, False))

    probed.__name__ = function
    return probed


def _which(recorder: GpuRecorder, original: Callable[..., Any], stand_in: str,
           path: str | None) -> Callable[..., Any]:
    """``shutil.which("nvidia-smi")``: the stand-in for a chosen GPU, None without one, else
    what PATH held before the stand-in's folder joined it."""
    def which(cmd: Any, mode: int = os.F_OK | os.X_OK, path_: Any = None, **kwargs: Any) -> Any:
        search = kwargs.pop("path", path_)
        if os.path.basename(os.fsdecode(cmd)) not in NVIDIA_SMI or not recorder.from_project():
            return original(cmd, mode, search)
        return _consult(recorder, f"shutil.which({os.fsdecode(cmd)!r})",
                        lambda: original(cmd, mode, path if search is None else search),
                        lambda gpu: stand_in, lambda: None)

    return which


def _popen(recorder: GpuRecorder, original: type, real: str | None) -> type:
    """``subprocess.Popen(["nvidia-smi", ...])`` raises FileNotFoundError where there is no
    nvidia-smi (the stand-in on PATH would otherwise start, and exit 127)."""

    class Popen(original):  # type: ignore[misc, valid-type]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            words = words_of(args)
            missing = recorder.gpu == ABSENT or (recorder.gpu is None and real is None)
            if (missing and words and not kwargs.get("shell") and not isinstance(args, str)
                    and os.path.basename(words[0]) in NVIDIA_SMI and recorder.from_project()):
                recorder.run.gpu_probes.setdefault(" ".join(["nvidia-smi", *words[1:]]), ABSENT)
                raise FileNotFoundError(2, "No such file or directory", words[0])
            super().__init__(args, *rest, **kwargs)

    Popen.__name__ = Popen.__qualname__ = "Popen"
    return Popen


def _stand_in(gpu: Gpu | str | None, real: str | None) -> tuple[Path, Path]:
    """A folder holding the ``nvidia-smi`` that whatever runs it from PATH finds (a shell,
    ``os.popen``): it notes each call in ``LOG`` there, then answers as ``gpu``, as a machine
    without nvidia-smi, or (the machine's own, ``real``) execs the real one."""
    folder = Path(tempfile.mkdtemp(prefix="pep517-migrate-gpu-"))
    script = folder / "nvidia-smi"
    answer = gpu.capability if isinstance(gpu, Gpu) else (real if gpu is None and real else "-")
    words = [sys.executable, "-I", str(Path(fake_nvidia_smi.__file__)), str(folder / LOG), answer]
    script.write_text(f"#!/bin/sh\nexec {shlex.join(words)} \"$@\"\n")
    script.chmod(0o755)
    return folder, script


def patch_gpu_probes(recorder: GpuRecorder, replace: Callable[..., None],
                     undo: list[Callable[[], None]], cuda: types.ModuleType,
                     cuda_built: bool) -> None:
    """Install the GPU probes (undone by ``undo``; the stand-in's calls are recorded then);
    ``cuda_built``: the torch here is a CUDA build."""
    for name, present in (
        ("get_device_capability", lambda gpu: (gpu.major, gpu.minor)),
        ("get_device_properties", _properties),
        ("get_device_name", lambda gpu: fake_nvidia_smi.gpu_name(gpu.major, gpu.minor)),
        ("current_device", lambda gpu: 0),
    ):
        if hasattr(cuda, name):
            replace(cuda, name, _torch_function(recorder, name, getattr(cuda, name), present,
                                                cuda_built))
    for function in COMMAND_FUNCTIONS:
        replace(subprocess, function,
                _command(recorder, subprocess, function, getattr(subprocess, function)))
    replace(os, "system", _command(recorder, os, "system", os.system))
    path = os.environ.get("PATH")
    real = shutil.which("nvidia-smi", path=path)
    folder, script = _stand_in(recorder.gpu, real)
    replace(shutil, "which", _which(recorder, shutil.which, str(script), path))
    replace(subprocess, "Popen", _popen(recorder, subprocess.Popen, real))
    os.environ["PATH"] = os.pathsep.join([str(folder), *([path] if path else [])])

    def remove() -> None:
        if path is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = path
        log = folder / LOG
        if log.exists():
            answer = recorder.gpu.capability if isinstance(recorder.gpu, Gpu) else recorder.gpu
            for line in log.read_text(encoding="utf-8").splitlines():
                recorder.run.gpu_probes.setdefault(line, answer or "ran")
        shutil.rmtree(folder, ignore_errors=True)

    undo.append(remove)

"""The patches that record a setup.py run: setup(), torch's factories, CUDA probes, os.environ.

Installed by :func:`patched` around one execution and undone afterwards; see
:mod:`.run` for what is recorded and why.
"""

from __future__ import annotations

import contextlib
import dis
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

from . import cuda_probes, gpu_probes
from .record import (
    EXTRAS_ATTRIBUTE,
    FACTORY_ATTRIBUTE,
    FAKE_CUDA_HOME,
    FAKE_CUDA_VERSION,
    OPTIONS_ATTRIBUTE,
    SetupRun,
    build_ext_options,
)


class Recorder:
    """Receives every patched call of one run; ``cuda`` forces the CUDA probes (None: real)."""

    def __init__(self, run: SetupRun, cuda: bool | None,
                 gpu: gpu_probes.GpuChoice = gpu_probes.BY_CUDA) -> None:
        self.run = run
        self.cuda = cuda
        self.gpu = gpu_probes.chosen(gpu, cuda)  # what the GPU probes answer as
        self.root = os.path.normcase(str(run.root)) + os.sep
        self.skip_modules = {"os", "_collections_abc", "collections.abc", __name__,
                             cuda_probes.__name__, gpu_probes.__name__}

    def from_project(self) -> bool:
        """Whether the code that called into a patched function is the project's own.

        Frames of this module, of ``os`` and of ``_collections_abc`` (``os.getenv`` ->
        ``Mapping.get`` -> ``__getitem__``) are skipped to find the caller.
        """
        frame: types.FrameType | None = sys._getframe(1)
        # By module name: os and _collections_abc are frozen ("<frozen os>") from 3.11 on.
        while frame is not None and frame.f_globals.get("__name__") in self.skip_modules:
            frame = frame.f_back
        if frame is None:
            return False
        filename = os.path.normcase(frame.f_code.co_filename)
        return filename.startswith(self.root) and not any(
            part in filename for part in ("site-packages", "dist-packages")
        )

    # -- setup() and the extension factories ---------------------------------------------
    def setup(self, *args: Any, **kwargs: Any) -> None:
        self.run.setup_calls += 1
        if self.run.kwargs is None:
            # Generators (ext_modules=(e for e in ...)) are read more than once later.
            self.run.kwargs = {k: list(v) if isinstance(v, Iterator) else v
                               for k, v in kwargs.items()}

    def extension_factory(self, factory: str) -> Callable[..., Any]:
        from setuptools.extension import Extension

        def make(name: str, sources: Any, *args: Any, **kwargs: Any) -> Any:
            extras = {k: kwargs.pop(k) for k in ("dlink", "dlink_libraries") if k in kwargs}
            extension = Extension(name, list(sources), *args, **kwargs)
            setattr(extension, FACTORY_ATTRIBUTE, factory)
            setattr(extension, EXTRAS_ATTRIBUTE, extras)
            return extension

        make.__name__ = make.__qualname__ = factory
        return make

    # -- CUDA probes --------------------------------------------------------------------
    def probe(self, label: str, real: Any, forced_on: Any, forced_off: Any) -> Any:
        if not self.from_project():
            return real
        value = real if self.cuda is None else (forced_on if self.cuda else forced_off)
        self.run.cuda_probes.setdefault(label, value)
        return value

    def consult(self, label: str, real: Callable[[], Any], on: Callable[[], Any],
                off: Callable[[], Any], shown: Callable[[Any], Any] | None = None) -> Any:
        """A probe made by project code: the forced answer, or the real one (recorded as
        ``shown(value)``, or the exception's type when it raised). Without a GPU
        (:mod:`.gpu_probes`), the probes of a device answer as off, those of a toolkit as the
        CUDA mode says: a build machine's CUDA."""
        if self.gpu == gpu_probes.ABSENT and label in gpu_probes.DEVICE_PROBES:
            self.run.cuda_probes.setdefault(label, False)
            return off()
        if self.cuda is not None:
            self.run.cuda_probes.setdefault(label, self.cuda)
            return on() if self.cuda else off()
        try:
            value = real()
        except Exception as exc:
            self.run.cuda_probes.setdefault(label, type(exc).__name__)
            raise
        self.run.cuda_probes.setdefault(label, shown(value) if shown else value)
        return value

    def probing_function(self, label: str, original: Callable[..., Any], on: Any, off: Any) -> Any:
        recorder = self

        def probed(*args: Any, **kwargs: Any) -> Any:
            if not recorder.from_project():
                return original(*args, **kwargs)
            return recorder.consult(label, lambda: original(*args, **kwargs), lambda: on,
                                    lambda: off)

        probed.__name__ = getattr(original, "__name__", label)
        return probed

    def probing_module_class(
        self, module: types.ModuleType, probes: dict[str, tuple[Any, Any]]
    ) -> type:
        """A ModuleType subclass recording reads of ``probes`` (name -> (stand-in, off))."""
        recorder = self
        prefix = module.__name__

        class ProbedModule(types.ModuleType):
            def __getattribute__(self, name: str) -> Any:
                real = super().__getattribute__(name)
                if name not in probes:
                    return real
                stand_in, off = probes[name]
                on = real if real is not None else stand_in
                return recorder.probe(f"{prefix}.{name}", real, on, off)

        return ProbedModule

    # -- the environment ----------------------------------------------------------------
    def lookup(self, name: object, value: str | None, caller: types.FrameType | None) -> str | None:
        """A read of one variable: recorded when the project made it; returns what it reads.

        ``$CUDA_HOME`` and ``$CUDA_PATH`` ask where CUDA is: they are CUDA probes, forced to a
        toolkit path or to unset like torch's ``CUDA_HOME``.
        """
        if not (isinstance(name, str) and _is_lookup(caller) and self.from_project()):
            return value
        if name not in cuda_probes.CUDA_HOME_VARIABLES:
            self.run.env_reads.setdefault(name, value)
            return value
        if self.cuda is None:
            self.run.cuda_probes.setdefault(f"${name}", value)
            return value
        self.run.cuda_probes.setdefault(f"${name}", self.cuda)
        return (value or FAKE_CUDA_HOME) if self.cuda else None


@contextlib.contextmanager
def patched(recorder: Recorder) -> Iterator[None]:
    """Install every patch; undo them all on the way out."""
    import setuptools
    import torch
    import torch.cuda
    import torch.utils.cpp_extension as cpp_extension
    import torch.version

    undo: list[Callable[[], None]] = []

    def replace(owner: Any, name: str, value: Any) -> None:
        missing = object()
        original = owner.__dict__.get(name, missing) if isinstance(owner, type) else getattr(
            owner, name, missing
        )
        setattr(owner, name, value)
        undo.append(
            lambda: delattr(owner, name) if original is missing else setattr(owner, name, original)
        )

    try:
        replace(setuptools, "setup", recorder.setup)
        for core in _distutils_cores():
            replace(core, "setup", recorder.setup)
        from ...setuptools import extension as our_extension  # a setup.py that switched imports

        for factory in ("CppExtension", "CUDAExtension"):
            replace(cpp_extension, factory, recorder.extension_factory(factory))
            replace(our_extension, factory, recorder.extension_factory(factory))
        _patch_build_extension(cpp_extension.BuildExtension, replace)
        _forbid_commands(replace)
        torch_cuda_home = cpp_extension.__dict__.get("CUDA_HOME")
        _patch_cuda_probes(recorder, torch, cpp_extension, replace, undo)
        cuda_probes.patch_tool_probes(recorder, replace, torch_cuda_home)
        gpu_probes.patch_gpu_probes(recorder, replace, undo, torch.cuda,
                                    torch.version.__dict__.get("cuda") is not None)
        _patch_environ(recorder, replace)
        yield
    finally:
        for step in reversed(undo):
            step()


def _distutils_cores() -> list[types.ModuleType]:
    """Every distutils.core module object a setup.py can reach (setuptools' copy usually)."""
    with contextlib.suppress(ImportError):
        import distutils.core  # noqa: F401  (setuptools' copy, once setuptools is imported)
    candidates = [
        sys.modules.get("distutils.core"),
        sys.modules.get("setuptools._distutils.core"),
        getattr(sys.modules.get("distutils"), "core", None),
        getattr(sys.modules.get("setuptools._distutils"), "core", None),
    ]
    cores: dict[int, types.ModuleType] = {}
    for module in candidates:
        if isinstance(module, types.ModuleType) and hasattr(module, "setup"):
            cores.setdefault(id(module), module)
    return list(cores.values())


def _forbid_commands(replace: Callable[..., None]) -> None:
    """A safety net: a setup() that escaped interception must still build nothing."""
    import setuptools.dist

    def refuse(self: Any) -> None:
        raise RuntimeError("a setup() that migrate could not intercept tried to run commands")

    classes: set[type] = {setuptools.dist.Distribution}
    classes.update(core.Distribution for core in _distutils_cores())
    for name in ("distutils.dist", "setuptools._distutils.dist"):
        dist_module = sys.modules.get(name)
        if dist_module is not None and hasattr(dist_module, "Distribution"):
            classes.add(dist_module.Distribution)
    for distribution in classes:
        replace(distribution, "run_commands", refuse)


def _patch_build_extension(build_extension: type, replace: Callable[..., None]) -> None:
    original = build_extension.__dict__["with_options"].__func__

    def with_options(cls: Any, /, **options: Any) -> Any:
        command = original(cls, **options)
        setattr(command, OPTIONS_ATTRIBUTE, {**(build_ext_options(cls) or {}), **options})
        return command

    replace(build_extension, "with_options", classmethod(with_options))


def _patch_cuda_probes(
    recorder: Recorder,
    torch: types.ModuleType,
    cpp_extension: types.ModuleType,
    replace: Callable[..., None],
    undo: list[Callable[[], None]],
) -> None:
    cuda = torch.cuda
    replace(cuda, "is_available", recorder.probing_function(
        "torch.cuda.is_available()", cuda.is_available, True, False))
    replace(cuda, "device_count", recorder.probing_function(
        "torch.cuda.device_count()", cuda.device_count, 1, 0))
    backends_cuda = getattr(getattr(torch, "backends", None), "cuda", None)
    if backends_cuda is not None and hasattr(backends_cuda, "is_built"):
        replace(backends_cuda, "is_built", recorder.probing_function(
            "torch.backends.cuda.is_built()", backends_cuda.is_built, True, False))
    # Forced on, these read as their real value where there is one, else as the stand-in.
    module_probes = [
        (cpp_extension, {"CUDA_HOME": (FAKE_CUDA_HOME, None)}),
        (torch.version, {"cuda": (FAKE_CUDA_VERSION, None)}),
    ]
    for module, probes in module_probes:
        original_class = module.__class__
        module.__class__ = recorder.probing_module_class(module, probes)
        undo.append(_class_restorer(module, original_class))


def _class_restorer(module: types.ModuleType, cls: type) -> Callable[[], None]:
    def restore() -> None:
        module.__class__ = cls

    return restore


def _is_lookup(frame: types.FrameType | None) -> bool:
    """Whether ``frame`` calls ``os.environ.__getitem__`` to read one variable.

    ``os.environ[name]``, ``.get``, ``os.getenv``, ``in`` and ``.setdefault`` do; copying or
    walking the whole environment (``dict(os.environ)``, ``.copy()``, ``.items()``) does not,
    and must not count as reading every variable.
    """
    if frame is None:
        return False
    if frame.f_globals.get("__name__") in ("collections.abc", "_collections_abc"):
        return frame.f_code.co_name in ("get", "__contains__", "setdefault", "pop")
    current = None
    for instruction in dis.get_instructions(frame.f_code):
        if instruction.offset > frame.f_lasti:
            break
        current = instruction
    return current is not None and current.opname in ("BINARY_SUBSCR", "BINARY_OP", "CONTAINS_OP")


def _patch_environ(recorder: Recorder, replace: Callable[..., None]) -> None:
    environ_class = type(os.environ)
    getitem, contains = environ_class.__getitem__, environ_class.__contains__
    setitem, delitem = environ_class.__setitem__, environ_class.__delitem__

    def real(self: Any, key: Any) -> str | None:
        try:
            return getitem(self, key)  # type: ignore[no-any-return]
        except KeyError:
            return None

    def __getitem__(self: Any, key: Any) -> Any:
        value = recorder.lookup(key, real(self, key), sys._getframe(1))
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self: Any, key: Any) -> bool:
        found = contains(self, key)
        return recorder.lookup(key, real(self, key) if found else None,
                               sys._getframe(1)) is not None

    def __setitem__(self: Any, key: Any, value: Any) -> None:
        if recorder.from_project():
            recorder.run.env_writes[key] = value
        setitem(self, key, value)

    def __delitem__(self: Any, key: Any) -> None:
        if recorder.from_project():
            recorder.run.env_writes[key] = None
        delitem(self, key)

    for name, function in [("__getitem__", __getitem__), ("__contains__", __contains__),
                           ("__setitem__", __setitem__), ("__delitem__", __delitem__)]:
        replace(environ_class, name, function)

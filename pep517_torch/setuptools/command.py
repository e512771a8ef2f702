"""``BuildExtension``: setuptools' ``build_ext`` on the compile core, all ext_modules at once.

Every extension becomes an :class:`ExtensionSpec` (``translate``); ONE ``build(specs,
options)`` call compiles them in one ninja graph inside a persistent directory under
``build_temp``; each artifact is then copied to the path setuptools expects
(``get_ext_fullpath``), so ``--inplace``, wheels, editable installs and ``get_outputs`` work
as with any ``build_ext``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError, ExecError, SetupError

from ..atomic import copy_atomic
from ..core.spec import Kind
from ..errors import BuildError, ConfigError, Pep517TorchError
from ..shipped_runtime.torch_release import major_minor
from ..shipped_runtime.user_line import log, user_line
from .pin import APPLIED, MARKER, PINNED

OPTIONS = {  # BuildExtension.with_options(...) keywords -> allowed values (None: any bool)
    "no_python_abi_suffix": None,
    "use_ninja": None,
    "torch_requirement": ("minor", "exact", "none"),
}


def _check_options(options: dict[str, Any]) -> None:
    for name, value in options.items():
        if name not in OPTIONS:
            known = ", ".join(OPTIONS)
            raise ConfigError(f"unknown option {name!r} (known: {known})", "BuildExtension")
        allowed = OPTIONS[name]
        if allowed is not None and value not in allowed:
            raise ConfigError(
                f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}",
                "BuildExtension",
            )


def _setuptools_error(exc: Pep517TorchError) -> Exception:
    """Our error as the distutils error setup() prints as one ``error: ...`` line."""
    if isinstance(exc, BuildError):
        return CompileError(str(exc))
    if isinstance(exc, ConfigError):
        return SetupError(str(exc))
    return ExecError(str(exc))


class BuildExtension(build_ext):
    """torch.utils.cpp_extension.BuildExtension's interface on pep517_torch's compile core.

    ``with_options(no_python_abi_suffix=True)`` names artifacts ``_C.so``;
    ``torch_requirement`` (``"minor"``, ``"exact"`` or ``"none"``) is the torch pin the
    wheel gets; ``use_ninja=False`` is not supported (it says so and builds with ninja).
    """

    torch_ext_options: ClassVar[dict[str, Any]] = {}

    @classmethod
    def with_options(cls, **options: Any) -> type[BuildExtension]:
        """A subclass whose instances use ``options`` (torch's classmethod of that name)."""
        _check_options(options)
        merged = {**cls.torch_ext_options, **options}
        return type(cls.__name__, (cls,), {"torch_ext_options": merged})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        own = {name: kwargs.pop(name) for name in OPTIONS if name in kwargs}
        _check_options(own)
        super().__init__(*args, **kwargs)
        self.torch_ext_options = {**type(self).torch_ext_options, **own}
        self.no_python_abi_suffix = bool(self.torch_ext_options.get("no_python_abi_suffix"))

    def run(self) -> None:
        self._in_place = bool(self.inplace)  # setuptools' run() clears it while building
        super().run()

    def get_ext_filename(self, fullname: str) -> str:
        filename: str = super().get_ext_filename(fullname)
        if self.no_python_abi_suffix:
            parts = filename.split(".")
            if len(parts) > 2:  # drop the ABI tag: _C.cpython-311-x86_64-linux-gnu.so -> _C.so
                filename = ".".join(parts[:-2] + parts[-1:])
        return filename

    def build_extensions(self) -> None:
        self.check_extensions_list(self.extensions)
        try:
            self._build_with_core()
        except Pep517TorchError as exc:
            raise _setuptools_error(exc) from None

    def _build_with_core(self) -> None:
        from ..core import build as core_build
        from ..core.pch import background as pch_background
        from ..core.lock import build_lock
        from ..core.toolchain.tools import find_torch
        from .options import build_options, command_options, persistent_build_dir
        from .translate import extension_spec

        if self.torch_ext_options.get("use_ninja", True) is False:
            log(user_line("BuildExtension(use_ninja=False) is not supported: building with ninja"))
        torch = find_torch()
        command = command_options(self)
        root = Path.cwd()
        guard = self._guard_torch(torch.version)
        specs = [
            dataclasses.replace(spec, import_check_torch=guard if spec.kind is not Kind.EXECUTABLE else None)
            for spec in (
                extension_spec(ext, self.get_ext_fullname(ext.name), root=root, command=command,
                               torch=torch)
                for ext in self.extensions
            )
        ]
        build_dir = persistent_build_dir(self, torch)
        what = f"setup.py build_ext of {self.distribution.get_name()}"
        # Held until the artifacts are copied out: no concurrent build relinks them meanwhile.
        options = build_options(self, build_dir, root)
        with build_lock(build_dir, what):
            result = core_build.build(specs, options, log=log, by="setup.py's build_ext")
            for line in result.summary().splitlines():
                log(user_line(line))
            for ext, spec in zip(self.extensions, specs, strict=True):
                target = Path(self.get_ext_fullpath(ext.name))
                _remove_old_shim(target, spec.name)
                _place(result.artifacts[spec.name], target)  # its import check inside, if any
        note = pch_background.start(result.plan, options)  # the PCH its TUs did without
        if note is not None:
            log(user_line(note))
        pinned = getattr(self.distribution, APPLIED, None)
        log(user_line(pinned) if pinned else _NO_PLUGIN)
        if guard is not None and self.extensions:
            release = ".".join(map(str, major_minor(guard) or ()))
            log(user_line(f"the wheel has no torch pin of ours: each module checks at import"
                          f" that torch is {release}"))

    def _guard_torch(self, torch_version: str) -> str | None:
        """The torch version the import check compares with, when the wheel needs one: our pin
        is not in it (a static or loose requirement of the project's own, or none), and this
        is no in-place or editable build (those are rebuilt against the torch at hand)."""
        if getattr(self.distribution, PINNED, False) or getattr(self, "_in_place", False):
            return None
        return torch_version


setattr(BuildExtension, MARKER, True)

_NO_PLUGIN = user_line(
    "no torch pin: the setuptools plugin did not run (pep517_torch is not installed as a"
    " distribution in this environment)"
)


def _remove_old_shim(target: Path, module: str) -> None:
    """Remove what an older pep517_torch's guarded build left beside ``target``: the ``.py``
    shim it generated (never a file of the project's own) and its ``_native`` library."""
    short = module.rpartition(".")[2]
    shim = target.with_name(f"{short}.py")
    try:
        ours = shim.read_bytes().startswith(b'"""Generated by pep517_torch')
    except OSError:
        return
    if ours:
        shim.unlink(missing_ok=True)
        target.with_name(f"{short}_native{target.name[len(short):]}").unlink(missing_ok=True)


def _place(built: Path, target: Path) -> None:
    """Copy an artifact where setuptools expects it, atomically (a reader never sees half)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    copy_atomic(built, target)

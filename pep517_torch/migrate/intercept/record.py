"""What one intercepted execution of a setup.py recorded, and the marks the patches leave.

Shared by :mod:`.hooks` (which records) and :mod:`.run` (which runs the setup.py), so
neither imports the other's internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FACTORY_ATTRIBUTE = "_pep517_migrate_factory"
EXTRAS_ATTRIBUTE = "_pep517_migrate_extras"
OPTIONS_ATTRIBUTE = "_pep517_migrate_options"
FAKE_CUDA_HOME = "/usr/local/cuda"
FAKE_CUDA_VERSION = "12.8"


@dataclass
class SetupRun:
    """What one execution of a setup.py did."""

    path: Path
    kwargs: dict[str, Any] | None = None  # the first setup() call's keyword arguments
    setup_calls: int = 0
    env_reads: dict[str, str | None] = field(default_factory=dict)  # name -> value seen
    env_writes: dict[str, str | None] = field(default_factory=dict)  # None: deleted
    cuda_probes: dict[str, Any] = field(default_factory=dict)  # probe -> value it returned
    gpu_probes: dict[str, Any] = field(default_factory=dict)  # the machine's GPU, as asked
    imported: list[str] = field(default_factory=list)  # third-party top-level modules imported
    output: str = ""  # what the setup.py printed
    conversion: Any = None  # convert(run) (or why it refused), made where the run happened

    @property
    def root(self) -> Path:
        return self.path.parent


def factory_of(extension: object) -> str:
    """``CppExtension``, ``CUDAExtension`` or ``Extension`` (a plain setuptools one)."""
    return getattr(extension, FACTORY_ATTRIBUTE, "Extension")


def factory_extras(extension: object) -> dict[str, Any]:
    """Arguments torch's factory accepts but setuptools' Extension does not (dlink, ...)."""
    return dict(getattr(extension, EXTRAS_ATTRIBUTE, {}))


def build_ext_options(command_class: object) -> dict[str, Any] | None:
    """The ``BuildExtension.with_options(...)`` options of a cmdclass entry, if it has any."""
    options = getattr(command_class, OPTIONS_ATTRIBUTE, None)
    if options is None:  # pep517_torch.setuptools' BuildExtension keeps them here
        ours = getattr(command_class, "torch_ext_options", None)
        options = ours if isinstance(ours, Mapping) else None
    return dict(options) if options is not None else None

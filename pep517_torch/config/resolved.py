"""What the config layer hands to the glue: a validated, fully resolved project.

Everything here is absolute, expanded and checked; nothing below this layer reads TOML.
"""

from __future__ import annotations

import platform as platform_module
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..core.spec import BuildOptions, ExtensionSpec

# What a frontend passes as ``config_settings`` (pip's ``-C``), and the CLI's ``-C`` too.
ConfigSettings = Mapping[str, "str | list[str]"] | None

TorchRequirement = Literal["minor", "exact", "none"]


@dataclass(frozen=True)
class Facts:
    """The machine facts that conditions (`if` tables, `cuda = "auto"`) are evaluated against."""

    env: Mapping[str, str] = field(default_factory=dict)
    platform: str = sys.platform
    machine: str = platform_module.machine()  # the field above shadows the module name
    python_version: str = ".".join(map(str, sys.version_info[:3]))
    torch_version: str | None = None  # e.g. "2.13.0+cpu"
    torch_cuda: str | None = None  # torch.version.cuda, e.g. "13.0"; None for a CPU build
    nvcc_available: bool = False
    nvcc_version: str | None = None  # e.g. "13.0", for the reasons CUDA is on or off
    # Given, it finds (nvcc_available, nvcc_version) when a condition or `cuda = "auto"` first
    # asks, in place of the two fields above: a project that never asks never starts nvcc.
    nvcc_lookup: Callable[[], tuple[bool, str | None]] | None = field(
        default=None, compare=False, repr=False
    )

    def nvcc(self) -> tuple[bool, str | None]:
        """(whether nvcc is there, its version)."""
        if self.nvcc_lookup is not None:
            return self.nvcc_lookup()
        return self.nvcc_available, self.nvcc_version


@dataclass(frozen=True)
class PackageLayout:
    """Which Python code ships, and from where."""

    packages: Mapping[str, Path]  # dotted package name -> its directory
    py_modules: Mapping[str, Path] = field(default_factory=dict)  # top-level module -> .py file
    package_data: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)  # package -> files


@dataclass(frozen=True)
class VersionSource:
    """Where a dynamic version comes from (``dynamic = ["version"]``)."""

    file: Path | None = None  # None: the first package's __init__.py
    pattern: str | None = None  # regex with one group; None: `__version__ = "..."` via AST
    suffix_env: str | None = None  # environment variable whose value is appended
    base: str | None = None  # the version itself, instead of reading a file
    provider: str | None = None  # "setuptools-scm": from git (or an sdist's PKG-INFO)


@dataclass(frozen=True)
class ResolvedProject:
    root: Path
    project_table: Mapping[str, object]  # pyproject.toml's [project] table, for the metadata
    extensions: tuple[ExtensionSpec, ...]
    skipped: tuple[tuple[str, str], ...]  # (extension name, why it is not built here)
    options: BuildOptions
    layout: PackageLayout
    # the `optional` key of each skipped extension that is not optional
    required_skipped: tuple[str, ...] = ()
    torch_requirement: TorchRequirement = "minor"
    torch_import_check: bool = False  # on for every module, whatever it links
    # "auto": the glue turns the check on where the build shows it is needed (a module that
    # links torch's CUDA libraries, a static torch requirement)
    torch_import_check_auto: bool = False
    dependencies: tuple[str, ...] | None = None  # [tool.torch-ext] dependencies
    local_version: Literal["torch", "none"] = "none"
    variant: Literal["torch", "none"] = "none"  # a PEP 825 wheel variant, labelled by the build
    max_wheel_size: int | None = None  # bytes; None: no bound
    platform_tag: str = "auto"  # "auto", "linux" or a tag (abi/platform_tags.py)
    ops_check: Literal["notes", "strict", "off"] = "notes"  # ops/ after each build
    ops_samples: Path | None = None  # the file whose samples() `ops --check` runs (checked then)
    stubs: bool = False  # a .pyi beside each pybind11 module (pybind11-stubgen)
    cuda_enabled: bool = False
    sdist_include: tuple[str, ...] = ()  # extra globs for the sdist, relative to root
    sdist_exclude: tuple[str, ...] = ()
    version: VersionSource = VersionSource()
    # each built extension's name -> where its artifact sits in the source tree (editable
    # installs link it there)
    in_tree: Mapping[str, Path] = field(default_factory=dict)
    # (archive name, source file) of every Python file and package data file the wheel ships
    files: tuple[tuple[str, Path], ...] = ()

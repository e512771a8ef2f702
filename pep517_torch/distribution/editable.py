"""The contents of an editable wheel (PEP 660): a .pth file and the hook package it imports.

The hook (``_editable_hook.py``, a template filled with a Python literal, as the package's
``__init__``) maps the project's top-level names to the source tree, checks the installed
torch, and reruns ninja on import with pep517_torch's runtime, shipped in the package as
``runtime/`` (the modules of pep517_torch/runtime/ as they are).
"""

from __future__ import annotations

import importlib.machinery
import os
import pprint
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from .. import shipped_runtime
from ..shipped_runtime import build_inputs, ledger, links
from ..errors import ConfigError

if TYPE_CHECKING:
    from .wheel import WheelWriter

_TEMPLATE = Path(__file__).with_name("_editable_hook.py")
_RUNTIME = Path(shipped_runtime.__file__).parent
_PLACEHOLDER = (
    "CONFIG = None  # editable_members() replaces this line with the project's parameters\n"
)


@dataclass(frozen=True)
class RebuildCommand:
    """How the hook brings the build up to date: ``ninja -C build_dir targets...``, run and
    followed by the runtime shipped with the hook (so that progress, logs and traces read
    alike in every face); ``replan``: how it plans again."""

    ninja: Path
    build_dir: Path
    targets: tuple[str, ...]
    replan: Replan | None = None


@dataclass(frozen=True)
class Replan:
    """How the hook re-plans once an input of the plan changed (pyproject.toml, a folder a
    ``sources`` glob walks, a source's content, a compile variable): ``python -m
    pep517_torch.backend.editable_rebuild build_dir``, with the recorded interpreter; the build
    folder's ledger holds what the hook reads and what the re-plan needs (:func:`write_state`)."""

    python: str
    build_dir: Path
    # root, config_settings and env as the install recorded them, kept in the hook (in
    # site-packages): the re-plan's input when the state file is gone with the build directory
    install: Mapping[str, object] | None = None


def _rebuild_json(rebuild: RebuildCommand) -> dict[str, object]:
    return {
        "ninja": str(rebuild.ninja),
        "build_dir": str(rebuild.build_dir),
        "targets": list(rebuild.targets),
    }


def hook_module_name(project_name: str) -> str:
    return "_pep517_torch_editable_" + canonicalize_name(project_name).replace("-", "_")


def editable_members(
    project_name: str,
    *,
    package_roots: Mapping[str, Path],
    artifacts: Sequence[tuple[Path, Path]],
    rebuild: RebuildCommand | None,
    torch_version: str | None,
    root: Path | None = None,
) -> list[tuple[str, bytes]]:
    """The (archive name, content) pairs of an editable wheel, besides ``.dist-info``.

    ``package_roots`` maps each top-level name to its package directory, or to its module
    file (any name ending in an importable suffix: ``.py``, ``.cpython-311-...so``...).
    ``artifacts`` are (file in the build directory, in-tree path that links to it).
    ``torch_version`` is the torch the build used (None: no check). ``root``: the project
    directory (an import after it moved says so).
    """
    module_suffixes = tuple(importlib.machinery.all_suffixes())
    packages: dict[str, str] = {}
    modules: dict[str, str] = {}
    for name, path in sorted(package_roots.items()):
        if "." in name or not name.isidentifier():
            raise ValueError(f"{name!r} is not a top-level module name")
        (modules if path.name.endswith(module_suffixes) else packages)[name] = str(path)
    config = {
        "project": project_name,
        "packages": packages,
        "modules": modules,
        "artifacts": [[str(built), str(in_tree)] for built, in_tree in artifacts],
        "rebuild": None if rebuild is None else {
            **_rebuild_json(rebuild),
            "replan": None if rebuild.replan is None else {
                "python": rebuild.replan.python,
                "build_dir": str(rebuild.replan.build_dir),
                **({"install": dict(rebuild.replan.install)} if rebuild.replan.install else {}),
            },
        },
        "torch_version": torch_version,
        "root": None if root is None else str(root),
    }
    # A literal of str, None, list and dict only: pformat writes what the hook evaluates back.
    literal = pprint.pformat(config, width=100)
    template = _TEMPLATE.read_text(encoding="utf-8")
    if template.count(_PLACEHOLDER) != 1:
        raise AssertionError(f"{_TEMPLATE} lost its placeholder line")
    source = template.replace(_PLACEHOLDER, f"CONFIG = {literal}\n")
    module = hook_module_name(project_name)
    members = [
        (f"{module}.pth", f"import {module}\n".encode()),
        (f"{module}/__init__.py", source.encode("utf-8")),
    ]
    # The runtime as files, imported only when a check or a rebuild runs: nothing at startup.
    members += [(f"{module}/runtime/{path.name}", path.read_bytes())
                for path in sorted(_RUNTIME.glob("*.py"))]
    return members


def add_editable(
    wheel: WheelWriter,
    project_name: str,
    *,
    packages: Mapping[str, Path],
    py_modules: Mapping[str, Path],
    extensions: Mapping[str, tuple[Path, Path]],
    rebuild: RebuildCommand | None,
    torch_version: str | None,
    root: Path | None = None,
) -> None:
    """Link each extension into the source tree and add the editable members to ``wheel``.

    ``packages`` and ``py_modules`` map dotted names to their directory or file;
    ``extensions`` maps each extension's dotted name to (its build output, its in-tree path).
    """
    roots = {name: directory for name, directory in packages.items() if "." not in name}
    roots.update(py_modules)
    for name, (built, link) in extensions.items():
        link_into_tree(link, built)
        if "." not in name:
            roots[name] = link
    members = editable_members(
        project_name,
        package_roots=roots,
        artifacts=list(extensions.values()),
        rebuild=rebuild,
        torch_version=torch_version,
        root=root,
    )
    for arcname, data in members:
        wheel.add_bytes(arcname, data)


def link_into_tree(link: Path, built: Path) -> None:
    """Make the in-tree path ``link`` point at the build output ``built`` (the runtime's one
    way, shipped with the hook that heals it on import); a file of the user's there is an error."""
    try:
        links.link_into_tree(link, built)
    except links.NotOurs:
        raise ConfigError(
            f"{link} exists and is not a link to the built extension; remove it (a stale"
            " in-place build?) before an editable install"
        ) from None


SECTION = "editable"  # the build folder's ledger: what the hook reads and re-plans from
_MAX_WATCHED = 5000  # folders; a tree bigger than this needs a reinstall for new sources deep down


@dataclass(frozen=True)
class EditableState:
    """What an editable install's plan was made from, and what it made: the hook reads
    ``artifacts``, ``rebuild`` and ``watched`` (path -> the record's identity, None: absent)
    and re-plans with ``root``, ``config_settings`` and ``env`` (the variables the
    configuration reads; None: unset) once a watched identity differs."""

    root: Path
    config_settings: Mapping[str, str | list[str]]
    env: Mapping[str, str | None]
    artifacts: Sequence[tuple[Path, Path]]
    rebuild: RebuildCommand
    watched: Sequence[Path]


def write_state(build_dir: Path, state: EditableState) -> None:
    document = {
        "root": str(state.root),
        "config_settings": dict(state.config_settings),
        "env": dict(state.env),
        "artifacts": [[str(built), str(in_tree)] for built, in_tree in state.artifacts],
        "rebuild": _rebuild_json(state.rebuild),
        "watched": build_inputs.stamp_files(state.watched),
    }
    ledger.update(build_dir, state.root, **{SECTION: document})


def read_state(build_dir: Path) -> dict[str, Any]:
    """The recorded state; ConfigError when there is none."""
    found = ledger.section(build_dir, SECTION)
    if not isinstance(found, dict):
        raise ConfigError(f"no editable install's state in {build_dir}; reinstall:"
                          " pip install -e . --no-build-isolation")
    return found


def watched_folders(root: Path, sources: Iterable[Path], skip: Callable[[Path], bool]) -> list[Path]:
    """The folders whose listing a re-plan depends on: those holding sources and every folder
    below them (a new file matching a ``**`` glob), skipping hidden folders and those ``skip``
    refuses (build directories), and their parents up to ``root`` (a new folder)."""
    holding = {source.parent for source in sources}
    found: set[Path] = set()
    for folder in holding:
        while folder.is_relative_to(root) and folder not in found:
            found.add(folder)
            folder = folder.parent
    for top in sorted(holding):
        for current, subfolders, _ in os.walk(top):
            kept = []
            for name in sorted(subfolders):
                path = Path(current, name)
                if name.startswith(".") or name == "__pycache__" or skip(path):
                    continue
                kept.append(name)
                found.add(path)
            subfolders[:] = kept if len(found) < _MAX_WATCHED else []
    return sorted(found)

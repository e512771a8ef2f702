"""The torch pin for setup.py projects: a ``setuptools.finalize_distribution_options`` hook.

setuptools calls :func:`finalize_distribution` for every ``setup()`` in an environment where
pep517_torch is installed, before any metadata is written (``egg_info``, ``dist_info``,
``prepare_metadata_for_build_wheel``, the wheel and the sdist all see the same requirements).
It does nothing unless the project's ``build_ext`` is our BuildExtension; then it adds
``torch>=X.Y,<X.Y+1`` (``BuildExtension.with_options(torch_requirement=...)``) to
``install_requires``, folded into a torch requirement the project already has.

A pyproject.toml whose ``[project]`` table declares the dependencies statically (not listed in
``dynamic``, or filled from ``[tool.setuptools.dynamic]``) gets no pin: setuptools would
overwrite it, and static metadata must not change; the hook says so instead. A wheel without
our pin (static dependencies, ``torch_requirement="none"``, no plugin) gets the import check
instead: BuildExtension builds each artifact with its own (``core/postlink/import_guard.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MARKER = "_pep517_torch_build_extension"  # class attribute of our BuildExtension
APPLIED = "_pep517_torch_torch_pin"  # set on the distribution once the pin is decided
PINNED = "_pep517_torch_pinned"  # True on the distribution when the wheel requires our pin


def finalize_distribution(dist: Any) -> None:
    build_ext = (getattr(dist, "cmdclass", None) or {}).get("build_ext")
    if not getattr(build_ext, MARKER, False):
        return  # not our project: import nothing, change nothing
    mode = build_ext.torch_ext_options.get("torch_requirement", "minor")
    setattr(dist, APPLIED, _add_pin(dist, mode))


def _add_pin(dist: Any, mode: str) -> str:
    """Pin ``install_requires``; return what was done, for BuildExtension's build log."""
    from packaging.requirements import InvalidRequirement, Requirement

    from ..core.toolchain.tools import find_torch
    from ..distribution.metadata import merge_requirements, torch_pin
    from ..errors import ToolchainError

    try:
        requirement = torch_pin(find_torch().version, mode)  # type: ignore[arg-type]
    except ToolchainError as exc:
        return f"no torch pin: {exc}"
    if requirement is None:
        return 'no torch pin (torch_requirement="none")'
    static = static_dependencies(Path.cwd() / "pyproject.toml")
    if static:
        return (
            f"no torch pin in the wheel: {static}; to pin {requirement}, list \"dependencies\""
            " in [project] dynamic and keep them in setup.py's install_requires"
        )
    current = getattr(dist, "install_requires", None) or []
    lines = current.splitlines() if isinstance(current, str) else list(current)
    try:
        parsed = [Requirement(line) for line in map(str.strip, lines) if line and line[0] != "#"]
    except InvalidRequirement:
        return "no torch pin: install_requires does not parse (setuptools will say why)"
    dist.install_requires = [str(r) for r in merge_requirements(parsed, [requirement])]
    setattr(dist, PINNED, True)
    return f"the wheel requires {requirement}"


def static_dependencies(pyproject: Path) -> str | None:
    """Why pyproject.toml makes the dependencies static, or None when setup.py owns them."""
    from ..config.pyproject import read_pyproject
    from ..errors import ConfigError

    if not pyproject.is_file():
        return None
    try:
        document = read_pyproject(pyproject.parent)
    except ConfigError:
        return None  # setuptools reports a broken pyproject.toml itself
    project = document.get("project")
    if not isinstance(project, dict):
        return None
    if "dependencies" not in (project.get("dynamic") or []):
        return "pyproject.toml's [project] dependencies are static"
    dynamic = document.get("tool", {}).get("setuptools", {}).get("dynamic", {})
    if isinstance(dynamic, dict) and "dependencies" in dynamic:
        return "[tool.setuptools.dynamic] dependencies replace install_requires"
    return None

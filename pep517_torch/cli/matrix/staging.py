"""What a matrix build in another interpreter is given: pep517_torch and its dependencies alone.

A private folder of links to exactly those packages, first on the child's ``PYTHONPATH``, and
this environment's ninja binary first on its ``PATH``; nothing else of this environment, never
its site-packages and its torch, whether pep517_torch is installed here, editable or a checkout.
All of them are pure Python but ninja, whose binary serves any Python; a requirement this
environment does not hold (tomli for a Python 3.10 target run from 3.11) must be installed in
the target.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ...core.toolchain import tools as toolchain
from ...errors import ConfigError, ToolchainError

PACKAGE = Path(__file__).resolve().parents[2]  # this pep517_torch


def _own_metadata() -> tuple[list[str], str | None]:
    """This pep517_torch's requirements and Requires-Python: from its installed metadata, else
    its checkout's pyproject.toml."""
    try:
        dist = metadata.distribution("pep517_torch")
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None and Path(str(dist.locate_file("pep517_torch"))).resolve() == PACKAGE:
        return list(dist.requires or []), dist.metadata.get("Requires-Python")
    from ...config import read_pyproject

    project = read_pyproject(PACKAGE.parent).get("project", {})
    return list(project.get("dependencies", [])), project.get("requires-python")


def _top_level(dist: metadata.Distribution) -> Iterator[Path]:
    """The importable top-level packages and modules a distribution installed."""
    names = (dist.read_text("top_level.txt") or "").split()
    if not names:
        names = sorted({Path(str(f)).parts[0] for f in dist.files or ()
                        if not str(f).startswith("..") and ".dist-info" not in str(f)
                        and ".data" not in Path(str(f)).parts[0]})
    for name in names:
        for candidate in (dist.locate_file(name), dist.locate_file(f"{name}.py")):
            if Path(candidate).exists() and name != "__pycache__":
                yield Path(candidate)
                break


@dataclass(frozen=True)
class Staged:
    """What a child for one Python version is given: the folder first on its ``PYTHONPATH``
    (with ``bin/ninja``), and the requirements this environment does not hold."""

    folder: Path
    missing: tuple[str, ...]


def staged_paths(python: str) -> tuple[dict[str, Path], list[str]]:
    """Name -> path of every top-level package the child needs: pep517_torch (this one) and its
    requirements for a Python ``python`` ("3.10.13"), with theirs, as installed here; and the
    requirements not installed here (the target must have them). A distribution that does not
    support that Python is a ConfigError naming it."""
    from packaging.requirements import Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    major_minor = ".".join(python.split(".")[:2])
    marker_env = {"python_version": major_minor, "python_full_version": python, "extra": ""}
    requirements, own_python = _own_metadata()
    supports = [("pep517_torch", own_python)]
    paths, missing = {"pep517_torch": PACKAGE}, []
    pending, seen = requirements, set()
    while pending:
        requirement = Requirement(pending.pop())
        if requirement.marker is not None and not requirement.marker.evaluate(marker_env):
            continue
        if requirement.name in seen:
            continue
        seen.add(requirement.name)
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            requirement.marker = None  # evaluated: it applies to this target
            missing.append(str(requirement))
            continue
        needs = dist.metadata.get("Requires-Python")
        supports.append((f"{requirement.name} {dist.version}", needs))
        for path in _top_level(dist):
            paths.setdefault(path.name.removesuffix(".py") if path.suffix == ".py" else path.name, path)
        pending.extend(dist.requires or [])
    for name, needs in supports:
        try:
            fits = needs is None or SpecifierSet(needs).contains(python, prereleases=True)
        except InvalidSpecifier:
            fits = True  # not ours to judge: the child's import says
        if not fits:
            raise ConfigError(f"Python {python}: {name} needs Python {needs}")
    return paths, missing


def stage(folder: Path, python: str) -> Staged:
    """A folder of links to what a child for Python ``python`` needs (see :func:`staged_paths`),
    and ``bin/ninja``, a link to the ninja binary this environment builds with."""
    target = folder / f"py{python}"
    paths, missing = staged_paths(python)
    if not target.is_dir():
        target.mkdir(parents=True)
        for path in paths.values():
            (target / path.name).symlink_to(path, target_is_directory=path.is_dir())
        try:
            ninja = toolchain.find_ninja(os.environ)
        except ToolchainError:
            ninja = None  # the child finds its own, or says it has none
        if ninja is not None:
            (target / "bin").mkdir()
            (target / "bin" / "ninja").symlink_to(ninja.resolve())
    return Staged(target, tuple(missing))


def child_env(staged: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a build in another interpreter: the staged packages alone on
    PYTHONPATH (the caller's own PYTHONPATH, which may name this environment's site-packages,
    is not passed on), and the staged ninja first on PATH."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONHOME", None)
    env["PYTHONPATH"] = str(staged)
    if (staged / "bin").is_dir():
        env["PATH"] = os.pathsep.join([str(staged / "bin"), *filter(None, [env.get("PATH")])])
    return env

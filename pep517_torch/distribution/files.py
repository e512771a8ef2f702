"""Which Python files and package data go into a wheel."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import ConfigError
from ..project_tree import require_inside

PYTHON_FILE_SUFFIXES = frozenset({".py", ".pyi"})
PACKAGE_MARKERS = ("__init__.py", "__init__.pyi")
PACKAGES_KEY = "tool.torch-ext.packages"
PY_MODULES_KEY = "tool.torch-ext.py-modules"
PACKAGE_DATA_KEY = "tool.torch-ext.package-data"


def package_files(
    root: Path,
    packages: Mapping[str, Path],
    py_modules: Mapping[str, Path],
    package_data: Mapping[str, tuple[Path, ...]],
    *,
    exclude: set[Path],
) -> list[tuple[str, Path]]:
    """(archive name, source path) of every Python file and data file a wheel ships, sorted.

    Each package directory contributes its ``.py``/``.pyi`` files and ``py.typed``, and its
    subdirectories that are packages themselves (``__init__.py``); ``py_modules`` are
    top-level modules; ``package_data`` files are shipped as given. Paths in ``exclude``
    (compiled artifacts, or links to them, that the build adds itself) are left out, as are
    compiled libraries found by walking: only package data can ship one. Symlinked
    directories are not walked here (the config layer lists symlinked subpackages itself).
    A file that resolves outside ``root`` is a ConfigError naming it and its key.
    """
    excluded = set(exclude) | {path.resolve() for path in exclude}
    chosen: dict[str, Path] = {}

    def add(arcname: str, path: Path, key: str) -> None:
        if path in excluded or path.resolve() in excluded:
            return
        require_inside(root, path, key, "file")
        if not path.is_file():
            message = f"{arcname} would be shipped from {path}, which is not a file (a broken link?)"
            raise ConfigError(message, key)
        previous = chosen.setdefault(arcname, path)
        if previous != path:
            raise ConfigError(f"{arcname} would be shipped from both {previous} and {path}")

    for package, directory in packages.items():
        prefix = package.replace(".", "/")
        for path in _python_files(directory):
            add(f"{prefix}/{path.relative_to(directory).as_posix()}", path, PACKAGES_KEY)
    for module, path in py_modules.items():
        add(f"{module.replace('.', '/')}{path.suffix}", path, PY_MODULES_KEY)
    for package, files in package_data.items():
        if package not in packages:
            raise ConfigError(f"{package!r} is not a package of this project", PACKAGE_DATA_KEY)
        directory = packages[package]
        for path in files:
            if "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            if not path.is_relative_to(directory):
                message = f"{path} is not inside package {package} ({directory})"
                raise ConfigError(message, PACKAGE_DATA_KEY)
            arcname = f"{package.replace('.', '/')}/{path.relative_to(directory).as_posix()}"
            add(arcname, path, PACKAGE_DATA_KEY)
    return sorted(chosen.items())


def _python_files(directory: Path) -> Iterable[Path]:
    for entry in sorted(directory.iterdir()):
        if entry.is_dir():
            if _is_package_dir(entry):
                yield from _python_files(entry)
        elif entry.suffix in PYTHON_FILE_SUFFIXES or entry.name == "py.typed":
            yield entry


def _is_package_dir(path: Path) -> bool:
    return (
        path.name.isidentifier()
        and not path.is_symlink()
        and path.is_dir()
        and any((path / marker).is_file() for marker in PACKAGE_MARKERS)
    )

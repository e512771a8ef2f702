"""What a wheel ships and where each extension sits: the Python files and package data, each
artifact's place in the source tree, and the checks that nothing there collides.

The config layer decides all of it (so ``doctor`` and ``prepare_metadata`` report its errors
before anything compiles); the distribution layer only writes the list it is given."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..core.naming import artifact_name
from ..core.spec import ExtensionSpec, Kind
from ..errors import ConfigError
from ..project_tree import require_inside
from .product import PackageLayout

PYTHON_FILE_SUFFIXES = frozenset({".py", ".pyi"})
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

    Each package directory contributes its own ``.py``/``.pyi`` files and ``py.typed``
    (``packages`` lists every subpackage: the layout's walk, :func:`.layout.is_package_dir`,
    is the only one); ``py_modules`` are top-level modules; ``package_data`` files are
    shipped as given. Paths in ``exclude`` (compiled artifacts, or links to them, that the
    build adds itself) are left out, as are compiled libraries found in packages: only package
    data can ship one. A file that resolves outside ``root`` is a ConfigError naming it and
    its key.
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
        for path in sorted(directory.iterdir()):
            if path.suffix in PYTHON_FILE_SUFFIXES or path.name == "py.typed":
                if not path.is_dir():
                    add(f"{prefix}/{path.name}", path, PACKAGES_KEY)
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


def in_tree_path(root: Path, layout: PackageLayout, spec: ExtensionSpec, key: str) -> Path:
    """Where an artifact sits in the source tree (editable installs link it there).

    A module must sit in a shipped package (it is imported as one of its modules); any other
    artifact (an operator library) is only a file, so any folder under a shipped package
    will do: ``mypkg.lib.ops`` is ``<mypkg's directory>/lib/ops.so``. ``key`` names where the
    shipped packages are chosen."""
    package, _, _ = spec.name.rpartition(".")
    filename = artifact_name(spec).rpartition("/")[2]
    if package:
        parts = package.split(".")
        inner = len(parts) if spec.kind is Kind.MODULE else 1
        for depth in range(len(parts), inner - 1, -1):
            directory = layout.packages.get(".".join(parts[:depth]))
            if directory is not None:
                return directory.joinpath(*parts[depth:], filename)
        shipped = ", ".join(sorted(layout.packages)) or "none"
        if spec.kind is Kind.MODULE:
            problem = f"lives in package {package!r}, which is not one of the packages shipped"
        else:
            problem = f"goes into folder {'/'.join(parts)}/, which is in none of the packages shipped"
        raise ConfigError(f"extension {spec.name!r} {problem} ({shipped})", key)
    top_dirs = {p.parent for name, p in layout.packages.items() if "." not in name}
    base = next(iter(sorted(top_dirs)), root)
    return base / filename


def check_module_collisions(specs: Sequence[ExtensionSpec], files: Iterable[tuple[str, Path]]) -> None:
    """An extension module and a shipped ``.py`` file or package of the same dotted name would
    shadow each other: refuse them, naming the extension's own key."""
    shipped: dict[str, Path] = {}
    for arcname, path in files:
        module = _module_of(arcname)
        if module is not None:
            shipped[module] = path
    for spec in specs:
        if spec.kind is Kind.MODULE and spec.name in shipped:
            raise ConfigError(
                f"extension {spec.name!r} and {shipped[spec.name]} are both the module"
                f" {spec.name}: only one of them could be imported; rename one",
                spec.key_of("name"),
            )


def _module_of(arcname: str) -> str | None:
    """The module a shipped file is imported as: ``pkg/sub/__init__.py`` -> ``pkg.sub``,
    ``pkg/mod.py`` and ``pkg/mod.cpython-311-x86_64-linux-gnu.so`` -> ``pkg.mod``; None for
    data files and stubs."""
    *directories, name = arcname.split("/")
    if name == "__init__.py":
        return ".".join(directories)
    if name.endswith((".py", ".so")):
        return ".".join([*directories, name.split(".", 1)[0]])
    return None

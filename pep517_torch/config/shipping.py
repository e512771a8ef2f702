"""What a wheel ships: the project's Python code (packages, listed or discovered by one rule,
:func:`is_package_dir`; py-modules; package data), the files that makes, each artifact's place
in the source tree, and the checks that nothing there collides.

The config layer decides all of it (so ``doctor`` and ``prepare_metadata`` report its errors
before anything compiles); the distribution layer only writes the list it is given."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.naming import artifact_name
from ..core.spec import ExtensionSpec, Kind
from ..errors import ConfigError
from ..project_tree import is_build_dir, require_inside
from ..shipped_runtime.input_audit import note
from .checks import shipped_name_problem
from .fields import MODULE_NAME_PATTERN
from .model import ProjectSettings
from .overrides import Origins
from .paths import contained, expand_glob
from .resolved import PackageLayout

# Top-level directory names a flat layout never ships (after setuptools' flat-layout finder).
FLAT_LAYOUT_EXCLUDE = frozenset(
    {
        "benchmark", "benchmarks", "bin", "build", "changelog", "ci", "debian", "dist", "doc",
        "docs", "documentation", "env", "example", "examples", "exercise", "exercises",
        "fixtures", "htmlcov", "manpages", "news", "newsfragments", "python", "requirements",
        "scripts", "site_scons", "tasks", "test", "tests", "testing", "third_party", "tools",
        "unit_test", "unit_tests", "util", "utils", "venv",
    }
)


@dataclass(frozen=True)
class PackageDirs:
    """The `package-dir` mapping made absolute: package name ('' for the root) -> directory."""

    root: Path
    mapping: dict[str, Path]

    def locate(self, name: str) -> Path:
        """setuptools' rule: the longest mapped prefix, the rest as subdirectories."""
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            prefix = ".".join(parts[:cut])
            if prefix in self.mapping:
                return self.mapping[prefix].joinpath(*parts[cut:])
        return self.mapping.get("", self.root).joinpath(*parts)


def package_dirs(root: Path, project: ProjectSettings, origins: Origins) -> PackageDirs:
    raw = project.package_dir
    entries = {"": raw} if isinstance(raw, str) else raw
    mapping: dict[str, Path] = {}
    for name, value in entries.items():
        key = origins.of("package_dir") if isinstance(raw, str) else origins.of("package_dir", name)
        if name and not re.fullmatch(MODULE_NAME_PATTERN.strip("^$"), name):
            raise ConfigError(f"{name!r} is not a package name (dotted Python identifiers)", key)
        path = contained(root, value or ".", key, "package directory")
        if not path.is_dir():
            raise ConfigError(f"package directory {value!r} does not exist", key)
        mapping[name] = path
    return PackageDirs(root, mapping)


PACKAGE_MARKERS = ("__init__.py", "__init__.pyi")  # a stub-only package (PEP 561) ships too


def is_package_dir(path: Path, build_dir: Path) -> bool:
    """The one rule for what is a package, for discovery and for the files a wheel ships: a
    directory named as an identifier with an ``__init__.py`` (or ``.pyi``), outside the build
    directory and any tagged build or cache directory (``CACHEDIR.TAG``: never packed, whichever
    settings made it); never ``__pycache__``. A symlinked one counts (walkers guard against
    loops)."""
    if not path.name.isidentifier() or path.name == "__pycache__":
        return False
    note(path)  # its listing decides (an __init__.py added): a no-op replay checks it
    return (
        path.is_dir()
        and any((path / marker).is_file() for marker in PACKAGE_MARKERS)
        and not path.is_relative_to(build_dir)
        and not is_build_dir(path)
    )


def _with_subpackages(
    root: Path,
    name: str,
    path: Path,
    build_dir: Path,
    key: str,
    seen: frozenset[Path] = frozenset(),
) -> dict[str, Path]:
    """``name`` and every package directory below it (:func:`is_package_dir`); a symlinked
    one leading back to a directory above it (a loop) is left out."""
    require_inside(root, path, key, f"package {name!r} at")
    seen = seen | {path.resolve()}
    found = {name: path}
    for child in sorted(path.iterdir()):
        if not is_package_dir(child, build_dir):
            continue
        if child.resolve() not in seen:
            found.update(_with_subpackages(
                root, f"{name}.{child.name}", child, build_dir, key, seen
            ))
    return found


def listed_packages(
    root: Path, names: list[str], dirs: PackageDirs, origins: Origins, build_dir: Path
) -> dict[str, Path]:
    packages: dict[str, Path] = {}
    for index, name in enumerate(names):
        key = origins.of("packages", index)
        path = dirs.locate(name)
        if not path.is_dir():
            raise ConfigError(f"package {name!r}: directory {path} does not exist", key)
        packages.update(_with_subpackages(root, name, path, build_dir, key))
    return packages


def discovered_packages(
    root: Path, dirs: PackageDirs, origins: Origins, build_dir: Path
) -> dict[str, Path]:
    """src/ layout when ``src/`` exists (or `package-dir` maps ''), else the flat layout."""
    key = origins.of("packages")
    if "" in dirs.mapping:
        base, flat = dirs.mapping[""], dirs.mapping[""] == root
    elif (root / "src").is_dir():
        base, flat = root / "src", False
    else:
        base, flat = root, True
    packages: dict[str, Path] = {}
    for child in sorted(base.iterdir()):
        if flat and child.name in FLAT_LAYOUT_EXCLUDE:
            continue
        if is_package_dir(child, build_dir):
            packages.update(_with_subpackages(root, child.name, child, build_dir, key))
    for name, path in sorted(dirs.mapping.items()):
        if name and path.is_dir():
            packages.update(_with_subpackages(root, name, path, build_dir, key))
    return packages


def resolve_layout(
    root: Path, project: ProjectSettings, origins: Origins, build_dir: Path
) -> PackageLayout:
    dirs = package_dirs(root, project, origins)
    if project.packages is None:
        packages = discovered_packages(root, dirs, origins, build_dir)
    else:
        packages = listed_packages(root, project.packages, dirs, origins, build_dir)

    for name, path in packages.items():  # discovered ones and subpackages too
        problem = shipped_name_problem(name)
        if problem:
            raise ConfigError(f"package {name!r} ({path}): {problem}", origins.of("packages"))
    py_modules: dict[str, Path] = {}
    for index, name in enumerate(project.py_modules):
        key = origins.of("py_modules", index)
        path = dirs.locate(name).with_name(name.rpartition(".")[2] + ".py")
        if not path.is_file():
            raise ConfigError(f"module {name!r}: file {path} does not exist", key)
        require_inside(root, path, key, f"module {name!r} at")
        py_modules[name] = path

    package_data: dict[str, tuple[Path, ...]] = {}
    for package, patterns in project.package_data.items():
        if package not in packages:
            shipped = ", ".join(sorted(packages)) or "none"
            raise ConfigError(
                f"package {package!r} is not shipped (packages: {shipped})",
                origins.of("package_data", package),
            )
        files: dict[Path, None] = {}
        for index, pattern in enumerate(patterns):
            key = f"{origins.of('package_data', package)}[{index}]"
            for path in expand_glob(
                root, pattern, key, "package data", base=packages[package], skip_dir=build_dir
            ):
                files[path] = None
        package_data[package] = tuple(files)
    return PackageLayout(packages=packages, py_modules=py_modules, package_data=package_data)


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
    (``packages`` lists every subpackage: the layout's walk, :func:`is_package_dir`,
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

"""docs/architecture.md against the code: every module listed, the import edges as they are,
no import circle inside a package, one tomllib shim, no upward import of ``__version__``."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pep517_torch"
DOC = (ROOT / "docs" / "architecture.md").read_text()
MODULES = sorted(PACKAGE.rglob("*.py"))


def _relative_imports(module: Path) -> Iterator[tuple[list[str], ast.ImportFrom]]:
    """Each ``from .x import y`` (also inside functions) as the absolute module path it names
    below ``pep517_torch`` (``["core", "spec"]``), with its node; ``from . import a, b`` yields
    one path per name."""
    package = list(module.relative_to(PACKAGE).parts[:-1])
    for node in ast.walk(ast.parse(module.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = package[: len(package) - (node.level - 1)]
        if node.module:
            yield base + node.module.split("."), node
        else:
            for alias in node.names:
                yield base + [alias.name], node


def _unit(parts: list[str]) -> str | None:
    """The doc's name of the part of pep517_torch a module path lies in: ``core/``, ``cli.py``."""
    if not parts:
        return "__init__.py"
    if (PACKAGE / parts[0]).is_dir():
        return f"{parts[0]}/"
    return f"{parts[0]}.py" if (PACKAGE / f"{parts[0]}.py").is_file() else None


def _code_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module in MODULES:
        source = _unit(list(module.relative_to(PACKAGE).with_suffix("").parts))
        assert source is not None
        for parts, _ in _relative_imports(module):
            target = _unit(parts)
            if target is not None and target != source:
                edges.setdefault(source, set()).add(target)
    return edges


def _doc_edges() -> dict[str, set[str]]:
    section = DOC.split("## Import edges", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    return {left.strip().strip("`"): set(re.findall(r"`([^`]+)`", right)) for left, right in rows}


def test_every_module_is_in_the_module_table() -> None:
    """A module is listed by its path (``core/spec.py``) or, inside a package's row, by its
    file name; a subpackage's ``__init__.py`` is the package itself."""
    table = DOC.split("## Modules", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    missing = []
    for module in MODULES:
        relative = module.relative_to(PACKAGE).as_posix()
        if module.parent != PACKAGE and module.name == "__init__.py":
            continue
        row = next((r for r in rows if r.startswith(f"| `{module.parent.relative_to(PACKAGE).as_posix()}/` |")), "")
        if f"`{relative}`" not in table and f"`{module.name}`" not in row:
            missing.append(relative)
    assert missing == [], "docs/architecture.md's module table does not list these"


def test_the_import_edges_table_is_the_code() -> None:
    assert _doc_edges() == _code_edges()


@pytest.mark.parametrize("package", sorted({m.parent for m in MODULES}), ids=lambda p: p.name)
def test_no_import_circle_inside_a_package(package: Path) -> None:
    names = {module.stem for module in package.glob("*.py")}
    prefix = list(package.relative_to(PACKAGE).parts)
    graph = {
        module.stem: {
            parts[len(prefix)]
            for parts, _ in _relative_imports(module)
            if parts[: len(prefix)] == prefix and len(parts) > len(prefix)
            and parts[len(prefix)] in names
        }
        for module in package.glob("*.py")
    }

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n}))
            for n in graph.get(start, ())
        )

    circles = sorted(name for name in graph if name != "__init__" and reaches(name, name))
    assert circles == []


FACES = ("buildapi.py", "cli/", "jit/", "setuptools/", "migrate/")
# The face-to-face imports there are, each with its reason; any other is a defect.
FACE_IMPORTS = {
    ("cli/", "migrate/"): "the command line is cli's: it offers migrate's arguments and run",
    ("migrate/intercept/hooks.py", "setuptools/"): "a setup.py may be written against our"
    " setuptools face: migrate patches its two factories while one runs",
}


def _launcher(module: Path) -> bool:
    """A ``__main__.py`` below the top is a launcher: it hands its argv to cli/."""
    return module.name == "__main__.py" and module.parent != PACKAGE


def test_a_face_imports_no_other_face() -> None:
    """The faces (PEP 517 hooks, command line, JIT, setup.py, migrate) meet only in the
    sequencing (backend/) and the layers below: one face never reaches into another."""
    found = set()
    for module in MODULES:
        source = _unit(list(module.relative_to(PACKAGE).with_suffix("").parts))
        if source not in FACES or _launcher(module):
            continue
        for parts, _ in _relative_imports(module):
            target = _unit(parts)
            if target in FACES and target != source:
                relative = module.relative_to(PACKAGE).as_posix()
                found.add((relative, target) if (relative, target) in FACE_IMPORTS else (source, target))
    assert found <= set(FACE_IMPORTS), sorted(found - set(FACE_IMPORTS))


def test_no_import_circle_between_packages() -> None:
    """The edges of the table above (launchers aside) have no circle."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        if _launcher(module):
            continue
        source = _unit(list(module.relative_to(PACKAGE).with_suffix("").parts))
        for parts, _ in _relative_imports(module):
            target = _unit(parts)
            if target is not None and target not in (source, "__init__.py"):
                graph.setdefault(source, set()).add(target)

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n}))
            for n in graph.get(start, ())
        )

    assert sorted(unit for unit in graph if reaches(unit, unit)) == []


def test_one_tomllib_shim() -> None:
    shim = PACKAGE / "config" / "pyproject.py"
    offenders = [
        module.relative_to(PACKAGE).as_posix()
        for module in MODULES
        if module != shim and re.search(r"^\s*import tomli|^\s*from tomli", module.read_text(), re.M)
    ]
    assert offenders == []


def test_nothing_imports_the_version_upward() -> None:
    """``__version__`` comes from the leaf ``_version.py``, never from a package above."""
    upward = {
        module.relative_to(PACKAGE).as_posix()
        for module in MODULES
        for _, node in _relative_imports(module)
        if any(alias.name == "__version__" for alias in node.names)
        and (node.module or "").split(".")[-1] != "_version"
    }
    assert upward == set()


def test_the_runtime_imports_only_the_standard_library_and_itself() -> None:
    """shipped_runtime/ ships as files inside editable wheels, where pep517_torch may not be
    installed: its modules import the standard library and each other (relatively), nothing
    else of pep517_torch and no third-party package."""
    offenders = []
    for module in sorted((PACKAGE / "shipped_runtime").glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 1:
                offenders.append(f"{module.name}: {'.' * node.level}{node.module or ''}")
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            offenders += [f"{module.name}: {name}" for name in names
                          if name.split(".")[0] not in sys.stdlib_module_names]
    assert offenders == []


def test_a_top_level_a_newcomer_can_read() -> None:
    """At most ten modules directly under pep517_torch/: the rest live in packages named for
    what they hold."""
    top = sorted(module.name for module in PACKAGE.glob("*.py"))
    assert len(top) <= 10, top


def test_every_module_has_its_tests_named_in_the_tests_map() -> None:
    """tests/README.md maps each module to the files that test it: a module is named by its
    path, or by a package row (``migrate/``; ``config/`` (parse, model, ...) names its files)."""
    text = (ROOT / "tests" / "README.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    keys = [line.split("|")[1] for line in rows]
    missing = []
    for module in MODULES:
        relative = module.relative_to(PACKAGE).as_posix()
        if f"`{relative}`" in text:
            continue
        if module.name == "__init__.py" and module.parent != PACKAGE:
            continue  # a package's __init__ is the package itself
        package = f"`{module.parent.relative_to(PACKAGE).as_posix()}/`"
        covered = False
        for key in keys:
            if package in key:
                named = re.search(r"\(([^)]*)\)", key)
                covered = named is None or module.stem in re.split(r"[,\s]+", named.group(1))
                break
        if not covered:
            missing.append(relative)
    assert missing == [], "tests/README.md does not say where these modules' tests are"


def test_the_config_layer_imports_nothing_of_the_distribution_layer() -> None:
    config = PACKAGE / "config"
    offenders = sorted({
        module.name for module in config.glob("*.py")
        for parts, _ in _relative_imports(module) if parts[:1] == ["distribution"]
    })
    assert offenders == []


def test_no_file_holds_a_merge_conflict_marker() -> None:
    """A merge left half-resolved reads as text (docs tables, comments) and can pass every
    other test."""
    tracked = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("tests/**/*.md"),
               *PACKAGE.rglob("*.py"), *ROOT.glob("tests/**/*.py")]
    marked = [path.relative_to(ROOT).as_posix() for path in tracked
              if re.search(r"^(<{7} |>{7} |={7}$)", path.read_text(errors="replace"), re.M)]
    assert marked == []

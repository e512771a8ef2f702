"""Which Python files a wheel ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.config.shipping import package_files
from pep517_torch.errors import ConfigError
from tests.config_helpers import resolve
from tests.conftest import write


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    for name in [
        "pkg/__init__.py", "pkg/core.py", "pkg/core.pyi", "pkg/py.typed", "pkg/notes.txt",
        "pkg/data/table.json", "pkg/sub/__init__.py", "pkg/sub/deep/__init__.pyi",
        "pkg/sub/deep/x.pyi", "pkg/nopkg/loose.py", "pkg/__pycache__/core.cpython-311.pyc",
        "pkg/stale.cpython-311-x86_64-linux-gnu.so", "pkg/__pycache__/a.py",
        "single.py", "tests/__init__.py",
    ]:
        write(src / name)
    (tmp_path / "build").mkdir()
    write(tmp_path / "build" / "_C.so")
    (src / "pkg" / "_C.so").symlink_to(tmp_path / "build" / "_C.so")
    return src


def test_package_files(tree: Path) -> None:
    pkg = tree / "pkg"
    pyc = pkg / "__pycache__" / "core.cpython-311.pyc"
    files = package_files(
        tree.parent,
        {"pkg": pkg, "pkg.sub": pkg / "sub", "pkg.sub.deep": pkg / "sub" / "deep"},
        {"single": tree / "single.py"},
        {"pkg": (pkg / "data" / "table.json", pkg / "py.typed", pkg / "_C.so", pyc)},
        exclude={tree.parent / "build" / "_C.so"},  # the artifact; the in-tree link resolves to it
    )
    assert files == [
        ("pkg/__init__.py", pkg / "__init__.py"),
        ("pkg/core.py", pkg / "core.py"),
        ("pkg/core.pyi", pkg / "core.pyi"),
        ("pkg/data/table.json", pkg / "data" / "table.json"),
        ("pkg/py.typed", pkg / "py.typed"),
        ("pkg/sub/__init__.py", pkg / "sub" / "__init__.py"),
        ("pkg/sub/deep/__init__.pyi", pkg / "sub" / "deep" / "__init__.pyi"),
        ("pkg/sub/deep/x.pyi", pkg / "sub" / "deep" / "x.pyi"),
        ("single.py", tree / "single.py"),
    ]


def test_compiled_files_ship_only_as_package_data(tree: Path) -> None:
    pkg = tree / "pkg"
    walked = dict(package_files(tree.parent, {"pkg": pkg}, {}, {}, exclude=set()))
    assert "pkg/stale.cpython-311-x86_64-linux-gnu.so" not in walked and "pkg/_C.so" not in walked
    listed = dict(package_files(tree.parent, {"pkg": pkg}, {}, {"pkg": (pkg / "_C.so",)}, exclude=set()))
    assert listed["pkg/_C.so"] == pkg / "_C.so"


def test_package_data_errors(tree: Path) -> None:
    pkg = tree / "pkg"
    with pytest.raises(ConfigError, match="not a package") as caught:
        package_files(tree.parent, {"pkg": pkg}, {}, {"other": (pkg / "notes.txt",)}, exclude=set())
    assert caught.value.key == "tool.torch-ext.package-data"
    with pytest.raises(ConfigError, match="not inside"):
        package_files(tree.parent, {"pkg": pkg}, {}, {"pkg": (tree / "single.py",)}, exclude=set())


def test_conflicting_sources_for_one_name(tree: Path) -> None:
    data = {"pkg": (tree / "pkg" / "sub" / "__init__.py",)}  # pkg.sub's directory is another
    with pytest.raises(ConfigError, match="pkg/sub/__init__.py would be shipped from both"):
        package_files(tree.parent, {"pkg": tree / "pkg", "pkg.sub": tree / "pkg"}, {}, data, exclude=set())


def test_one_rule_for_packages_and_the_files_they_ship(tmp_path: Path) -> None:
    """The layout's walk is the only one: every file shipped from a package directory is in a
    package the layout lists (stub-only and symlinked subpackages included), and nothing is
    shipped from a directory that is no package (__pycache__, a non-identifier, the build
    directory)."""
    from pep517_torch.project_tree import mark_build_dir

    root = tmp_path / "project"
    for name in ["pkg/__init__.py", "pkg/a.py", "pkg/stubs/__init__.pyi", "pkg/stubs/s.pyi",
                 "pkg/__pycache__/__init__.py", "pkg/not-a-pkg/__init__.py", "pkg/plain/x.py",
                 "real/__init__.py", "real/r.py", "pkg/build/__init__.py", "pkg/build/b.py"]:
        write(root / name)
    (root / "pkg" / "linked").symlink_to(root / "real")
    (root / "pkg" / "loop").symlink_to(root / "pkg")  # not a package again: a loop
    # A build directory inside a package is refused as build-dir's fault (see
    # test_clean_errors); one an earlier build or another tool left there carries its tag.
    mark_build_dir(root / "pkg" / "build")
    tool = {"packages": ["pkg"], "build-dir": "build"}
    resolved = resolve(root, tool, project={"name": "pkg", "version": "1"})
    assert sorted(resolved.layout.packages) == ["pkg", "pkg.linked", "pkg.stubs"]
    assert [name for name, _ in resolved.files] == [
        "pkg/__init__.py", "pkg/a.py", "pkg/linked/__init__.py", "pkg/linked/r.py",
        "pkg/stubs/__init__.pyi", "pkg/stubs/s.pyi",
    ]

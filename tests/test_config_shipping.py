"""Which Python files a wheel ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.config.shipping import package_files
from pep517_torch.errors import ConfigError
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
    ]:  # fmt: skip
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
        {"pkg": pkg, "pkg.sub": pkg / "sub"},
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
    with pytest.raises(ConfigError, match="pkg/__init__.py"):
        package_files(tree.parent, {"pkg": tree / "pkg", "pkg.sub": tree / "pkg"}, {}, {}, exclude=set())

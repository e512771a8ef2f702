"""Names that build but break what they are installed into are refused naming the key (issue 35
item 9): a module named ``__init__`` (``pkg.__init__`` would be the package itself: ``import
pkg`` loads it and fails), a top-level ``sitecustomize``/``usercustomize`` (Python runs it at
every interpreter start of the environment), a top-level ``__main__`` (never importable), a
compiled ``pkg.__main__`` (``python -m pkg`` needs code), a ``__pycache__`` part, and a script
named ``.`` or ``..`` or with a path separator (installers write ``bin/<name>``). Extensions,
py-modules, listed and discovered packages, through TOML and the setuptools face. Nothing here
compiles.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.core.toolchain.tools import find_torch
from pep517_torch.errors import ConfigError
from pep517_torch.setuptools.translate import CommandOptions, extension_spec
from tests.conftest import count, write
from tests.tiny_project import pyproject


def project(root: Path, tool: str = "", project: str = "", dirs: tuple[str, ...] = ("pkg",)) -> Path:
    write(root / "pyproject.toml", pyproject("pkg", project=project, packages=(), tool=tool))
    for directory in dirs:
        write(root / directory / "__init__.py")
    write(root / "csrc" / "a.cpp", "int f() { return 1; }\n")
    return root


def extension(name: str, kind: str = "module") -> str:
    return f'[[tool.torch-ext.extension]]\nname = "{name}"\nkind = "{kind}"\nsources = ["csrc/a.cpp"]\n'


EXTENSIONS = [
    ("pkg.__init__", "module", "would be the package pkg itself"),
    ("pkg.sub.__init__", "module", "would be the package pkg.sub itself"),
    ("pkg.__init__", "library", "would be the package pkg itself"),
    ("__init__", "module", "'__init__'"),
    ("sitecustomize", "module", "every interpreter start"),
    ("usercustomize", "library", "every interpreter start"),
    ("sitecustomize._C", "module", "every interpreter start"),
    ("__main__", "module", "always the running script"),
    ("pkg.__main__", "module", "`python -m` runs a package's __main__"),
    ("pkg.__pycache__._C", "module", "bytecode caches"),
]


@pytest.mark.parametrize(("name", "kind", "words"), EXTENSIONS)
def test_extension_names_that_break_the_install_are_refused(tmp_path: Path, name: str, kind: str, words: str) -> None:
    dirs = ("pkg", "pkg/sub", "sitecustomize") if "sub" in name or name.startswith("site") else ("pkg",)
    root = project(tmp_path, extension(name, kind), dirs=dirs)
    with pytest.raises(ConfigError, match=words) as caught:
        pipeline.load(root, None)
    assert caught.value.key == "tool.torch-ext.extension[0].name", caught.value
    assert not (root / "build").exists()
    count("item 9: extension names refused")


@pytest.mark.parametrize(("tool", "dirs", "key", "words"), [
    ('py-modules = ["sitecustomize"]', (), "tool.torch-ext.py-modules[0]", "every interpreter start"),
    ('py-modules = ["usercustomize"]', (), "tool.torch-ext.py-modules[0]", "every interpreter start"),
    ('py-modules = ["__main__"]', (), "tool.torch-ext.py-modules[0]", "always the running script"),
    ('packages = ["sitecustomize"]', ("sitecustomize",), "tool.torch-ext.packages[0]", "every interpreter start"),
    ("", ("pkg", "usercustomize"), "tool.torch-ext.packages", "package 'usercustomize'"),  # discovered
    ("", ("pkg", "sitecustomize", "sitecustomize/sub"), "tool.torch-ext.packages", "package 'sitecustomize'"),
    ('packages = ["pkg", "pkg.__pycache__"]', ("pkg", "pkg/__pycache__"), "tool.torch-ext.packages[1]", "bytecode caches"),
])
def test_python_modules_and_packages_too(tmp_path: Path, tool: str, dirs: tuple[str, ...], key: str, words: str) -> None:
    root = project(tmp_path, tool, dirs=dirs)
    for name in ("sitecustomize", "usercustomize", "__main__"):
        write(root / f"{name}.py", "print('ran')\n")
    with pytest.raises(ConfigError, match=words) as caught:
        pipeline.load(root, None)
    assert caught.value.key == key, caught.value
    count("item 9: module and package names refused")


@pytest.mark.parametrize(("table", "name", "words"), [
    ("scripts", "..", "names a folder"), ("scripts", ".", "names a folder"),
    ("gui-scripts", "..", "names a folder"), ("scripts", "...", "names a folder"),
    ("scripts", "a/b", "letters, digits"), ("scripts", "../evil", "letters, digits"),
    ("gui-scripts", "a\\\\b", "letters, digits"), ("scripts", "/abs", "letters, digits"),
])
def test_script_names_that_leave_the_scripts_folder(tmp_path: Path, table: str, name: str, words: str) -> None:
    root = project(tmp_path, 'packages = ["pkg"]', project=f'[project.{table}]\n"{name}" = "pkg:main"\n')
    with pytest.raises(ConfigError, match=words) as caught:
        pipeline.load(root, None)
    assert caught.value.key is not None and caught.value.key.startswith(f"project.{table}.")
    count("item 9: script names refused")


def test_the_setuptools_face_refuses_them_too(tmp_path: Path) -> None:
    write(tmp_path / "a.cpp", "int f() { return 1; }\n")
    for name in ("sitecustomize", "pkg.__init__", "pkg.__main__"):
        ext = SimpleNamespace(name=name, sources=["a.cpp"])
        with pytest.raises(ConfigError, match=f"Extension '{name}' name") :
            extension_spec(ext, name, root=tmp_path, command=CommandOptions(), torch=find_torch())
        count("item 9: setuptools face names refused")


def test_what_is_fine_stays_fine(tmp_path: Path) -> None:
    """A package's __main__.py, dunder-named plain modules, scripts with dots inside."""
    root = project(tmp_path, 'packages = ["pkg"]\npy-modules = ["pkg_site"]\n' + extension("pkg._C")
                   + extension("pkg.__version__"),
                   project='[project.scripts]\n"pkg.cli" = "pkg:main"\n"pkg-2.0" = "pkg:main"\n')
    write(root / "pkg" / "__main__.py", "print('main')\n")
    write(root / "pkg_site.py")
    loaded = pipeline.load(root, None)
    assert [s.name for s in loaded.project.extensions] == ["pkg._C", "pkg.__version__"]
    count("item 9: fine names accepted")

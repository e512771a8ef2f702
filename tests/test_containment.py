"""Every file a wheel or sdist reads from the tree stays inside the project root, and the wheel
built from a tree equals the wheel built from its sdist, symlinks inside the root included.

Pure-Python projects: nothing compiles here.
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.errors import ConfigError
from tests.conftest import count, write
from tests.tiny_project import pyproject

PYPROJECT = pyproject(
    "contained", packages=["pkg"], tool='package-data = { pkg = ["data/*"] }',
    project='readme = "README.md"\nlicense = "MIT"\nlicense-files = ["LICENSE*", "licenses/*"]',
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    write(root / "pyproject.toml", PYPROJECT)
    write(root / "README.md", "# contained\n")
    write(root / "LICENSE", "MIT\n")
    write(root / "licenses" / "NOTICE", "notice\n")
    write(root / "pkg" / "__init__.py", "")
    write(root / "pkg" / "data" / "table.json", "{}\n")
    write(tmp_path / "outside" / "secret.py", "SECRET = 'leaked'\n")
    write(tmp_path / "outside" / "sub" / "__init__.py", "SECRET = 'leaked'\n")
    return root


def outside(root: Path) -> Path:
    return root.parent / "outside"


def link(path: Path, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    path.unlink(missing_ok=True)
    path.symlink_to(target, target_is_directory=target.is_dir())


# Each escape: how to make it, the key the error names, the file it names.
ESCAPES: dict[str, tuple[Callable[[Path], None], str | None, str]] = {
    "package file": (
        lambda root: link(root / "pkg" / "leak.py", outside(root) / "secret.py"),
        "tool.torch-ext.packages", "pkg/leak.py",
    ),
    "package __init__": (
        lambda root: link(root / "pkg" / "__init__.py", outside(root) / "secret.py"),
        "tool.torch-ext.packages", "pkg/__init__.py",
    ),
    "symlinked subpackage": (
        lambda root: link(root / "pkg" / "sub", outside(root) / "sub"),
        "tool.torch-ext.packages[0]", "pkg/sub",
    ),
    "license-files entry": (
        lambda root: link(root / "LICENSE", outside(root) / "secret.py"),
        "project.license-files", "LICENSE",
    ),
    "license-files directory": (
        lambda root: link(root / "licenses", outside(root)),
        "project.license-files", "licenses/secret.py",
    ),
    "pyproject.toml": (
        lambda root: link(root / "pyproject.toml", write(
            outside(root) / "pyproject.toml", (root / "pyproject.toml").read_text())),
        None, "pyproject.toml",
    ),
    "readme": (
        lambda root: link(root / "README.md", outside(root) / "secret.py"),
        "project.readme", "README.md",
    ),
    "package data directory": (
        lambda root: link(root / "pkg" / "data", outside(root)),
        "tool.torch-ext.package-data.pkg[0]", "secret.py",
    ),
}


@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_wheel_sdist_and_metadata_refuse_the_same_escape(tree: Path, tmp_path: Path, escape: str) -> None:
    make, key, shown = ESCAPES[escape]
    make(tree)
    errors = []
    for name, hook in [
        ("wheel", lambda: pipeline.build_wheel(tree, tmp_path / "out", None)),
        ("editable", lambda: pipeline.build_wheel(tree, tmp_path / "out", None, editable=True)),
        ("sdist", lambda: pipeline.build_sdist(tree, tmp_path / "out", None)),
    ]:
        with pytest.raises(ConfigError, match="outside the project root") as caught:
            hook()
        errors.append(str(caught.value))
        assert caught.value.key == key, (name, str(caught.value))
    assert len(set(errors)) == 1, errors  # one error, word for word
    message = errors[0]
    assert "\n" not in message and shown in message
    assert "leaked" not in message
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    if key is None or key.startswith("project."):  # read for METADATA: prepare_metadata refuses it
        with pytest.raises(ConfigError, match="outside the project root"):
            pipeline.prepare_metadata(tree, tmp_path / "md", None)
        assert not list((tmp_path / "md").rglob("METADATA"))
    count("escaping symlinks refused alike by wheel, editable, sdist (and metadata)")


def test_a_broken_link_in_a_package_is_a_config_error(tree: Path, tmp_path: Path) -> None:
    link(tree / "pkg" / "gone.py", tree / "nowhere.py")
    for hook in (pipeline.build_wheel, pipeline.build_sdist):
        with pytest.raises(ConfigError, match="pkg/gone.py") as caught:
            hook(tree, tmp_path / "out", None)
        assert caught.value.key == "tool.torch-ext.packages"
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_legacy_license_file_outside_is_refused(tree: Path, tmp_path: Path) -> None:
    text = (tree / "pyproject.toml").read_text()
    text = text.replace('license = "MIT"\nlicense-files = ["LICENSE*", "licenses/*"]\n',
                        'license = { file = "COPYING" }\n')
    (tree / "pyproject.toml").write_text(text)
    link(tree / "COPYING", outside(tree) / "secret.py")
    said = "license file 'COPYING' is outside the project root"
    with pytest.raises(ConfigError, match=said) as caught:
        pipeline.prepare_metadata(tree, tmp_path / "md", None)
    assert caught.value.key == "project.license.file"


def unpack(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as archive:
        archive.extractall(into, filter="data")
    return next(into.iterdir())


def test_links_inside_the_root_ship_and_the_sdist_rebuilds_the_same_wheel(
    tree: Path, tmp_path: Path
) -> None:
    write(tree / "shared" / "helpers.py", "def helper():\n    return 42\n")
    write(tree / "vendored" / "sub" / "__init__.py", "VALUE = 7\n")
    write(tree / "vendored" / "sub" / "deep" / "__init__.py", "")
    write(tree / "docs" / "intro.md", "# contained, from docs\n")
    link(tree / "pkg" / "helpers.py", tree / "shared" / "helpers.py")  # a file link
    link(tree / "pkg" / "sub", tree / "vendored" / "sub")  # a directory link
    link(tree / "README.md", tree / "docs" / "intro.md")
    wheel = tmp_path / "wheel"
    tree_wheel = wheel / pipeline.build_wheel(tree, wheel, None)
    with zipfile.ZipFile(tree_wheel) as archive:
        names = set(archive.namelist())
        assert archive.read("pkg/helpers.py") == b"def helper():\n    return 42\n"
        assert archive.read("pkg/sub/__init__.py") == b"VALUE = 7\n"
        assert "pkg/sub/deep/__init__.py" in names
        assert "# contained, from docs" in archive.read("contained-1.0.dist-info/METADATA").decode()

    sdist = pipeline.build_sdist(tree, tmp_path / "sdist", None)
    unpacked = unpack(tmp_path / "sdist" / sdist, tmp_path / "unpacked")
    assert (unpacked / "pkg" / "sub" / "deep" / "__init__.py").is_file()
    assert not (unpacked / "pkg" / "sub").is_symlink()  # links ship as what they point to
    rebuilt = tmp_path / "rebuilt"
    rebuilt_wheel = rebuilt / pipeline.build_wheel(unpacked, rebuilt, None)
    assert rebuilt_wheel.read_bytes() == tree_wheel.read_bytes()
    count("wheels rebuilt from an sdist of a tree with in-root file and directory links")


def test_a_link_back_up_the_tree_is_not_followed_around(tree: Path, tmp_path: Path) -> None:
    link(tree / "pkg" / "loop", tree / "pkg")  # a subpackage that is its own parent
    link(tree / "pkg" / "data" / "up", tree)  # a directory link to the root
    wheel = tmp_path / "wheel"
    with zipfile.ZipFile(wheel / pipeline.build_wheel(tree, wheel, None)) as archive:
        names = archive.namelist()
    assert "pkg/__init__.py" in names and not any("loop/loop" in name for name in names)
    sdist = tmp_path / "sdist" / pipeline.build_sdist(tree, tmp_path / "sdist", None)
    with tarfile.open(sdist) as archive:
        members = archive.getnames()
    assert not any("loop/loop" in name or "up/pkg" in name for name in members), members
    count("symlink loops walked once by the wheel and the sdist")


def test_no_build_dir_of_ours_is_ever_packed(tree: Path, tmp_path: Path) -> None:
    from pep517_torch.core import plan as core_plan
    from pep517_torch.core.lock import build_lock

    text = (tree / "pyproject.toml").read_text()
    text += '\n[[tool.torch-ext.extension]]\nname = "pkg._C"\nsources = ["csrc/m.cpp"]\n'
    (tree / "pyproject.toml").write_text(text.replace(
        'packages = ["pkg"]', 'packages = ["pkg"]\nsdist-include = ["build/**", "legacy/**", "**/*.o"]'))
    write(tree / "csrc" / "m.cpp", "int m() { return 1; }\n")
    made = []
    for settings in ({"build-type": "debug"}, {"build-type": "relwithdebinfo", "build-dir": "legacy/b"},
                     {"build-dir": "build/custom-{build_type}"}):
        loaded = pipeline.load(tree, settings)  # the build dir these settings make, compiled by no one
        plan = core_plan.prepare(list(loaded.project.extensions), loaded.project.options)
        made.append(plan.build_dir)
        for leftover in ("obj/pkg._C/m.o", "out/pkg/_C.cpython-311-x86_64-linux-gnu.so", "pch/k/pch.h.gch"):
            write(plan.build_dir / leftover)
    for directory in made:
        assert (directory / "CACHEDIR.TAG").read_bytes().startswith(
            b"Signature: 8a477f597d28d172789f06886806bc55")
    made[1].joinpath("CACHEDIR.TAG").unlink()  # as an older pep517_torch left it: no tag
    older = tree / "build" / "cp311-cp311-linux_x86_64-torch2.12.0+cpu"  # another torch's, untagged
    write(older / "build.ninja", "# Generated by pep517_torch: edits are overwritten.\n")
    write(older / "obj" / "pkg._C" / "m.o")
    with build_lock(tree / "build" / "failed-before-planning", "a wheel"):  # a lock, then an error
        pass
    write(tree / "cache" / "CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n")
    write(tree / "cache" / "blob")  # another tool's tagged cache
    write(tree / "build" / "NOTES.txt", "not a build dir: ships\n")
    link(tree / "pkg" / "_C.cpython-311-x86_64-linux-gnu.so", older / "obj" / "pkg._C" / "m.o")

    sdist = tmp_path / "sdist" / pipeline.build_sdist(tree, tmp_path / "sdist", None)
    with tarfile.open(sdist) as archive:
        members = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    assert "build/NOTES.txt" in members and "csrc/m.cpp" in members
    leaked = [m for m in members if m.startswith(("legacy/b", "build/c", "build/f", "cache/")) or
              m.endswith((".o", ".so", ".gch", "build.ninja", "CACHEDIR.TAG"))]
    assert leaked == []
    count("build directories left out of an sdist (3 settings, 1 older, 1 lock only, 1 foreign cache)", 6)

"""sdist file selection and the deterministic sdist writer."""

from __future__ import annotations

import gzip
import os
import re
import tarfile
from pathlib import Path

import pytest

from pep517_torch.distribution.metadata import ProjectMetadata, build_metadata
from pep517_torch.distribution.sdist import sdist_files, write_sdist
from pep517_torch.errors import ConfigError
from tests.conftest import write


ROOT_FILES = {
    "pyproject.toml": "[project]\n",
    "README.md": "# Demo\n",
    "LICENSE": "BSD\n",
    "demo/__init__.py": "",
    "demo/dist/__init__.py": "",  # a package named dist is not the dist/ folder
    "csrc/ops.cpp": "int f() { return 1; }\n",
    "csrc/ops.h": "",
    "tests/test_ops.py": "",
    "tools/gen.sh": "#!/bin/sh\n",
    **dict.fromkeys([  # what an sdist leaves out
        ".git/config", ".hg/x", "demo/__pycache__/x.cpython-311.pyc", "demo/stale.pyc",
        "dist/old.tar.gz", ".venv/bin/python", ".venv-cuda/lib/x", "build/out/_C.so",
        "build/build.ninja", ".tox/x", "PKG-INFO", "demo/.pytest_cache/x",
    ], ""),
}


@pytest.fixture
def tree(root: Path, tmp_path: Path) -> Path:
    """The project with an executable and links: out of it, to a build output, inside it."""
    (root / "tools" / "gen.sh").chmod(0o755)
    outside = write(tmp_path / "elsewhere.txt", "secret\n")
    (root / "demo" / "outside.txt").symlink_to(outside)
    # an editable install's link to an artifact:
    (root / "demo" / "_C.so").symlink_to(root / "build" / "out" / "_C.so")
    (root / "demo" / "alias.h").symlink_to(root / "csrc" / "ops.h")
    (root / "linked_dir").symlink_to(root / "csrc", target_is_directory=True)
    return root


@pytest.fixture
def metadata(tree: Path) -> ProjectMetadata:
    project = {"name": "Demo-Proj", "version": "1.0.post0", "readme": "README.md"}
    pyproject = {"project": {**project, "license-files": ["LICENSE"]}}
    return build_metadata(pyproject, tree, version=None)


EXPECTED = [
    "LICENSE", "README.md", "csrc/ops.cpp", "csrc/ops.h", "demo/__init__.py", "demo/alias.h",
    "demo/dist/__init__.py", "linked_dir/ops.cpp", "linked_dir/ops.h", "pyproject.toml",
    "tests/test_ops.py", "tools/gen.sh",
]


def names(paths: list[Path]) -> list[str]:
    return [path.as_posix() for path in paths]


def test_default_selection(tree: Path) -> None:
    assert names(sdist_files(tree, build_dir=tree / "build")) == EXPECTED


def test_globs_and_explicit_includes(tree: Path, metadata: ProjectMetadata) -> None:
    files = sdist_files(
        tree,
        include=metadata.referenced_files,
        include_globs=["dist/*.tar.gz", ".git/*"],  # .git never ships, whatever the globs say
        exclude_globs=["tests", "**/*.h", "README.md"],  # README is referenced by the metadata
        build_dir=tree / "build",
    )
    assert names(files) == [
        "LICENSE", "README.md", "csrc/ops.cpp", "demo/__init__.py", "demo/dist/__init__.py",
        "dist/old.tar.gz", "linked_dir/ops.cpp", "pyproject.toml", "tools/gen.sh",
    ]


@pytest.mark.parametrize("glob", ["/etc/*", "../*", "a/../../b"])
def test_globs_must_stay_inside(tree: Path, glob: str) -> None:
    with pytest.raises(ConfigError, match="must be a relative glob inside the project") as caught:
        sdist_files(tree, exclude_globs=[glob])
    assert caught.value.key == "tool.torch-ext.sdist-exclude"


def test_include_glob_matching_nothing_is_an_error(tree: Path) -> None:
    with pytest.raises(ConfigError, match="matches no file") as caught:
        sdist_files(tree, include_globs=["nothing/*"])
    assert caught.value.key == "tool.torch-ext.sdist-include"


def test_explicit_include_outside_root_is_refused(tree: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="outside"):
        sdist_files(tree, include=[tmp_path / "elsewhere.txt"])


def test_archive(tmp_path: Path, tree: Path, metadata: ProjectMetadata) -> None:
    files = sdist_files(tree, include=metadata.referenced_files, build_dir=tree / "build")
    out = tmp_path / "out"
    out.mkdir()
    sdist = write_sdist(out, tree, metadata, files, source_date_epoch=1700000000)
    assert sdist == out / "demo_proj-1.0.post0.tar.gz"
    assert os.listdir(out) == [sdist.name]
    with tarfile.open(sdist) as archive:
        members = archive.getmembers()
        assert [m.name for m in members if m.isfile()] == sorted(
            [f"demo_proj-1.0.post0/{name}" for name in EXPECTED] + ["demo_proj-1.0.post0/PKG-INFO"]
        )
        assert members[0].name == "demo_proj-1.0.post0" and members[0].isdir()
        assert "demo_proj-1.0.post0/demo/dist" in [m.name for m in members if m.isdir()]
        owners_and_times = {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members}
        assert owners_and_times == {(0, 0, "", "", 1700000000)}
        modes = {m.name.split("/", 1)[-1]: m.mode for m in members}
        assert modes["tools/gen.sh"] == modes["demo"] == 0o755
        assert modes["csrc/ops.cpp"] == 0o644
        pkg_info = archive.extractfile("demo_proj-1.0.post0/PKG-INFO")
        assert pkg_info is not None and pkg_info.read() == metadata.metadata_bytes()
        alias = archive.extractfile("demo_proj-1.0.post0/demo/alias.h")
        assert alias is not None and alias.read() == b""  # the link's target, as a regular file
    header = sdist.read_bytes()[:10]
    assert header[3] & 0x08 == 0  # no FNAME field in the gzip header
    assert header[4:8] == b"\0\0\0\0"  # no gzip time stamp
    assert gzip.decompress(sdist.read_bytes())  # a valid gzip stream


def test_archive_is_deterministic(tmp_path: Path, tree: Path, metadata: ProjectMetadata) -> None:
    files = sdist_files(tree, build_dir=tree / "build")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_sdist(tmp_path / "a", tree, metadata, files, source_date_epoch=None).read_bytes()
    os.utime(tree / "csrc" / "ops.cpp", (5, 5))
    (tree / "LICENSE").chmod(0o600)
    reversed_absolute = [tree / path for path in reversed(files)]
    second = write_sdist(tmp_path / "b", tree, metadata, reversed_absolute, source_date_epoch=None)
    assert second.read_bytes() == first
    with tarfile.open(tmp_path / "a" / "demo_proj-1.0.post0.tar.gz") as archive:
        assert {m.mtime for m in archive.getmembers()} == {1451606400}


def test_bad_members_and_failures_leave_nothing(
    tmp_path: Path, tree: Path, metadata: ProjectMetadata
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for bad in [Path("../elsewhere.txt"), tmp_path / "elsewhere.txt", Path("PKG-INFO")]:
        with pytest.raises(ValueError, match=f"^{re.escape(str(bad))} cannot be an sdist member"):
            write_sdist(out, tree, metadata, [bad], source_date_epoch=None)
    with pytest.raises(FileNotFoundError, match=re.escape("gone.txt")):
        files = [Path("README.md"), Path("gone.txt")]
        write_sdist(out, tree, metadata, files, source_date_epoch=None)
    assert os.listdir(out) == []

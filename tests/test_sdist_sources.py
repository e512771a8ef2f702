"""What an sdist ships: in a git checkout the tracked files (submodules and a project in a
subfolder of its repository included) plus `sdist-include`; outside git the tree minus its
`.gitignore` files; never a wheel, an sdist, a core dump or the folder it is written to."""

from __future__ import annotations

import gzip
import re
import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.distribution.sdist import sdist_files
from tests.conftest import count, write

PYPROJECT = '[project]\nname = "demo"\nversion = "1.0"\n'
GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        [GIT or "git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always",
         *args], cwd=cwd, check=True, capture_output=True,
    )


def an_sdist(path: Path, name: str = "old-0.9") -> Path:
    """A real sdist: a gzip'd tar holding NAME/PKG-INFO."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(f"{name}/PKG-INFO")
        info.size = 5
        archive.addfile(info, io.BytesIO(b"hello"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(buffer.getvalue()))
    return path


def junk(root: Path) -> None:
    """What a week of builds, crashes and editors leaves in a project."""
    write(root / "out" / "demo-1.0-cp311-cp311-linux_x86_64.whl", "PK")  # -o out
    write(root / "wheelhouse" / "torch-2.13.0-cp311-cp311-linux_x86_64.whl", "PK")
    write(root / "stray-1.0-py3-none-any.whl", "PK")  # `pip wheel .` without -w
    an_sdist(root / "out" / "demo-0.9.tar.gz", "demo-0.9")
    an_sdist(root / "uvdist" / "demo-0.8.tar.gz", "demo-0.8")
    write(root / "uvdist" / ".gitignore", "*\n")  # what uv writes into its output folder
    write(root / ".env", "TOKEN=secret\n")
    write(root / "core.12345", "\x7fELF")
    write(root / ".DS_Store", "x")
    write(root / "demo" / ".DS_Store", "x")
    write(root / "demo" / "_C.cpython-311-x86_64-linux-gnu.so", "stale")
    write(root / "scratch" / "notes.txt", "ignored by .gitignore")
    write(root / "demo" / "gen.h", "ignored by demo/.gitignore")


def sources(root: Path) -> None:
    write(root / "pyproject.toml", PYPROJECT)
    write(root / "demo" / "__init__.py")
    write(root / "csrc" / "ops.cpp", "int f();\n")
    write(root / "data" / "table-1.0.tar.gz", "not an sdist: test data that ships")
    write(root / ".gitignore", "scratch/\n*.log\n")
    write(root / "demo" / ".gitignore", "gen.h\n")


SOURCES = [".gitignore", "csrc/ops.cpp", "data/table-1.0.tar.gz", "demo/.gitignore",
           "demo/__init__.py", "pyproject.toml"]


def names(root: Path, **kwargs: object) -> list[str]:
    return [path.as_posix() for path in sdist_files(root, **kwargs)]  # type: ignore[arg-type]


def test_outside_git_the_gitignore_files_and_the_junk_rules_decide(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    sources(root)
    junk(root)
    write(root / "build.log", "ignored by *.log")
    write(root / "demo" / "libprebuilt.so", "package data: ships")
    artifact = root / "demo" / "_C.cpython-312-x86_64-linux-gnu.so"  # where today's build links
    assert names(root, out_dir=root / "out", artifacts=[artifact]) == sorted(
        [*SOURCES, "demo/libprebuilt.so"])
    count("junk files and folders an sdist outside git leaves out", 13)


def test_a_negated_pattern_in_a_deeper_gitignore_wins(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    sources(root)
    write(root / "csrc" / "big.bin")
    write(root / "csrc" / "keep.bin")
    write(root / ".gitignore", "*.bin\n")
    write(root / "csrc" / ".gitignore", "!keep.bin\n")
    assert "csrc/keep.bin" in names(root) and "csrc/big.bin" not in names(root)


def test_an_include_glob_brings_back_an_ignored_file_but_never_a_wheel(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    sources(root)
    junk(root)
    chosen = names(root, include_globs=["scratch/*", "wheelhouse/*", "demo/*.so"],
                   artifacts=[root / "demo" / "_C.so"])
    assert "scratch/notes.txt" in chosen and "demo/_C.cpython-311-x86_64-linux-gnu.so" in chosen
    assert not any(name.endswith(".whl") for name in chosen)


@needs_git
def test_in_git_the_tracked_files_ship_and_nothing_untracked(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    sources(root)
    write(root / "notes" / "tracked-but-ignored.txt")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "add", "-f", "notes/tracked-but-ignored.txt")
    git(root, "commit", "-qm", "init")
    junk(root)
    write(root / "untracked.cpp")
    (root / "csrc" / "ops.cpp").unlink()  # tracked, deleted in the work tree: not shipped
    expected = sorted({*SOURCES, "notes/tracked-but-ignored.txt"} - {"csrc/ops.cpp"})
    assert names(root, out_dir=root / "out") == expected
    assert names(root, include_globs=["untracked.cpp"]) == sorted([*expected, "untracked.cpp"])


@needs_git
def test_in_git_a_committed_wheel_or_sdist_never_ships(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    sources(root)
    write(root / "vendor" / "dep-1.0-py3-none-any.whl", "PK")
    an_sdist(root / "vendor" / "dep-1.0.tar.gz", "dep-1.0")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "init")
    assert names(root) == SOURCES


@needs_git
def test_a_project_in_a_subfolder_of_its_repository_and_a_submodule(tmp_path: Path) -> None:
    library = tmp_path / "library"
    write(library / "include" / "lib.h", "int lib();\n")
    git(library, "init", "-q")
    git(library, "add", ".")
    git(library, "commit", "-qm", "lib")
    repo = tmp_path / "repo"
    write(repo / "README.md")
    write(repo / "other" / "tool.py")
    root = repo / "python"
    sources(root)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "submodule", "add", "-q", str(library), "python/third_party/library")
    git(repo, "commit", "-qm", "init")
    assert names(root) == sorted([*SOURCES, "third_party/library/include/lib.h"])


@needs_git
def test_an_untracked_project_inside_a_repository_is_walked(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write(repo / "README.md")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    root = repo / "unpacked"
    sources(root)
    junk(root)
    stale = root / "demo" / "_C.so"
    assert names(root, out_dir=root / "out", artifacts=[stale]) == SOURCES


def test_the_sdist_hook_leaves_out_its_own_output_folder(tmp_path: Path) -> None:
    """`python -m pep517_torch sdist -o release` twice: the second sdist holds not the first."""
    root = tmp_path / "proj"
    sources(root)
    first = pipeline.build_sdist(root, root / "release", {})
    write(root / "release" / "notes.txt", "what the user keeps next to the releases")
    an_sdist(root / "release" / "demo-1.0.tar.gz".replace("1.0", "0.1"), "demo-0.1")
    second = pipeline.build_sdist(root, root / "release", {})
    assert first == second
    with tarfile.open(root / "release" / second) as archive:
        members = sorted(m.name for m in archive.getmembers() if m.isfile())
    assert members == sorted(f"demo-1.0/{name}" for name in [*SOURCES, "PKG-INFO"])


REPO = Path(__file__).resolve().parent.parent


def test_every_printed_pip_wheel_command_writes_only_its_wheel_into_dist() -> None:
    """`pip wheel --find-links ... .` as once printed wrote 11 wheels (torch's 192 MB one) into
    the project root, and the next sdist packed them: each full command in the README and the
    docs names its output folder and leaves the dependencies out."""
    commands = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        blocks = "\n".join(re.findall(r"```(?:sh|bash|console)?\n(.*?)```", text, re.S))
        # inline: the copy-paste commands (`pip wheel .` alone names the frontend in prose)
        inline = re.findall(r"`([^`\n]*pip wheel [^`\n]*--find-links[^`\n]*)`", text)
        lines = [line.split("#")[0] for line in blocks.splitlines()]
        lines = [line for line in lines if re.search(r"\bpip wheel\b", line)]
        commands += [(doc.name, c) for c in [*lines, *inline] if re.search(r"\s(\.|\./\S*)(\s|$)", c)]
    assert commands, "no pip wheel command found: the check reads nothing"
    bad = [(doc, c) for doc, c in commands
           if not (re.search(r"\s-w\s|--wheel-dir", c) and "--no-deps" in c)]
    assert not bad, bad
    count("printed pip wheel commands that write only their wheel into dist/", len(commands))


def test_a_stale_copy_of_an_extension_stays_out_but_a_prebuilt_library_ships(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    sources(root)
    write(root / "pyproject.toml", PYPROJECT + 'dynamic = ["dependencies"]\n\n[tool.torch-ext]\n'
          'packages = ["demo"]\npackage-data = { demo = ["lib/*.so"] }\n\n'
          '[[tool.torch-ext.extension]]\nname = "demo._C"\nsources = ["csrc/*.cpp"]\n')
    write(root / "demo" / "_C.cpython-310-x86_64-linux-gnu.so", "left by setup.py develop")
    write(root / "demo" / "lib" / "libvendor.so", "shipped as package data")
    name = pipeline.build_sdist(root, tmp_path / "out", {})
    with tarfile.open(tmp_path / "out" / name) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()}
    assert "demo/lib/libvendor.so" in members
    assert "demo/_C.cpython-310-x86_64-linux-gnu.so" not in members

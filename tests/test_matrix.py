"""#21 on this machine's torch, with the tiny C-API project (a second to compile): the local
label, the sdist's PKG-INFO against the wheel's METADATA (PEP 643), the build record and the
find-links pages; `wheel --python` from pep517_torch installed as users install it, and
`wheel SDIST` (#34). uv: test_uv.py; the two-torch matrix: cuda_torch/test_matrix.py."""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from email.parser import BytesParser
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline as glue
from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.config.pyproject import tomllib
from pep517_torch.distribution.index import write_index
from pep517_torch.distribution.torch_requirement import local_label
from tests.conftest import ROOT, count
from tests.installed.venvs import installed_env, own_wheel, site_packages
from tests.tiny_project import wheel_value, write_project

TORCH = toolchain.find_torch()
pytestmark = pytest.mark.compile


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the project, its wheel, its sdist) with local-version = "torch" and a LICENSE."""
    root = write_project(tmp_path_factory.mktemp("matrix") / "proj", "labelled")
    text = (root / "pyproject.toml").read_text()
    text = text.replace("[tool.torch-ext]\n", '[tool.torch-ext]\nlocal-version = "torch"\n'
                        'dependencies = ["packaging>=20"]\n')
    (root / "pyproject.toml").write_text(text)
    (root / "LICENSE").write_text("MIT\n")
    out = root / "dist"
    wheel = out / glue.build_wheel(root, out, None)
    sdist = out / glue.build_sdist(root, out, None)
    return root, wheel, sdist


def _metadata(wheel: Path) -> tuple[object, list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        return BytesParser().parsebytes(archive.read(meta)), names


def test_the_wheel_names_its_torch_and_the_sdist_does_not(built: tuple[Path, Path, Path]) -> None:
    _, wheel, sdist = built
    label = ("pt{0}{1}cu{2}" if TORCH.cuda else "pt{0}{1}cpu").format(
        *TORCH.version.split(".")[:2], (TORCH.cuda or "").replace(".", ""))
    assert wheel.name.startswith(f"labelled-1.0+{label}-")
    assert sdist.name == "labelled-1.0.tar.gz"
    message, names = _metadata(wheel)
    assert message["Version"] == f"1.0+{label}"  # type: ignore[index]
    assert f"labelled-1.0+{label}.dist-info/pep517_torch.json" in names
    assert f"labelled-1.0+{label}.dist-info/licenses/LICENSE" in names
    assert message.get_all("License-File") == ["LICENSE"]  # type: ignore[attr-defined]


def test_every_field_the_sdist_does_not_mark_dynamic_equals_the_wheels(
    built: tuple[Path, Path, Path]
) -> None:
    _, wheel, sdist = built
    with tarfile.open(sdist) as archive:
        pkg_info = BytesParser().parsebytes(archive.extractfile("labelled-1.0/PKG-INFO").read())  # type: ignore[union-attr]
    metadata, _ = _metadata(wheel)
    assert pkg_info.get_all("Dynamic") == ["Requires-Dist"]
    assert float(pkg_info["Metadata-Version"]) >= 2.2
    fields = {key for key in pkg_info.keys()} | {key for key in metadata.keys()}  # type: ignore[attr-defined]
    for field in fields - {"Dynamic", "Requires-Dist", "Version"}:
        assert pkg_info.get_all(field) == metadata.get_all(field), field  # type: ignore[attr-defined]
    # the local label is the one difference local-version adds (wheels only, by design)
    assert metadata["Version"].split("+")[0] == pkg_info["Version"]  # type: ignore[index]
    requires = metadata.get_all("Requires-Dist")  # type: ignore[attr-defined]
    assert requires[0] == "packaging>=20" and requires[1].startswith("torch<")


def test_index_pages_list_each_wheel_under_its_torch(built: tuple[Path, Path, Path]) -> None:
    root, wheel, _ = built
    house = root / "house"
    house.mkdir()
    (house / wheel.name).write_bytes(wheel.read_bytes())
    (house / "pure-1.0-py3-none-any.whl").write_bytes((root.parent / "pure.whl").read_bytes()
                                                      if (root.parent / "pure.whl").exists()
                                                      else _pure_wheel(root.parent))
    (house / "torch-9.9.9+cpu.html").write_text("hand-written")
    result = write_index(house)
    variant = TORCH.version if "+" in TORCH.version else f"{TORCH.version}+cpu"
    assert list(result.variants) == [variant]
    assert [w.path.name for w in result.unrecorded] == ["pure-1.0-py3-none-any.whl"]
    page = (house / f"torch-{variant}.html").read_text()
    assert f"{wheel.name.replace('+', '%2B')}#sha256=" in page and "pure" not in page
    assert (house / "torch-9.9.9+cpu.html").read_text() == "hand-written"  # not index's: kept
    assert f'href="torch-{variant.replace("+", "%2B")}.html"' in (house / "index.html").read_text()
    project = (house / f"torch-{variant}" / "labelled" / "index.html").read_text()
    assert f'href="../../{wheel.name.replace("+", "%2B")}#sha256=' in project


def _pure_wheel(base: Path) -> bytes:
    path = base / "pure.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pure-1.0.dist-info/METADATA", "Metadata-Version: 2.2\nName: pure\n"
                         "Version: 1.0\n")
    return path.read_bytes()


def test_wheel_python_names_each_unusable_interpreter_before_compiling(tmp_path: Path) -> None:
    root = write_project(tmp_path / "proj", "nopython")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", bare], check=True)
    done = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(root), "--python",
                           str(tmp_path / "nope"), "--python", str(bare / "bin" / "python"),
                           "--python", sys.executable], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"pep517_torch: error: --python: {tmp_path / 'nope'}: no such interpreter",
        f"pep517_torch: error: --python: {bare / 'bin' / 'python'}: torch is not installed there"
        f" ({bare / 'bin' / 'python'} -m pip install torch)",
    ]
    assert not (root / "build").exists() and done.stdout == ""


def test_a_fake_interpreter_and_a_path_with_spaces_are_said_safely(tmp_path: Path) -> None:
    """Issue 43 item 8: what a program that is no Python prints is never shown as its version,
    and the command a line suggests runs as printed for a path with spaces."""
    root = write_project(tmp_path / "proj", "spaced")
    fake = tmp_path / "a b" / "python3"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nprintf \'{"garbage": 1: \\033[2J\\n\'\n')
    fake.chmod(0o755)
    bare = tmp_path / "with space" / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", bare], check=True)
    python = bare / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(root), "--python",
                           str(fake), "--python", str(python)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"pep517_torch: error: --python: {fake}: does not run as a Python interpreter",
        f"pep517_torch: error: --python: {python}: torch is not installed there"
        f" ({shlex.quote(str(python))} -m pip install torch)",
    ]
    suggested = done.stderr.splitlines()[1].split("(", 1)[1].rstrip(")")
    assert shlex.split(suggested)[0] == str(python)  # one argument, as a shell reads it
    count("issue 43 item 8: a fake interpreter, a path with spaces", 2)


def test_wheel_python_builds_with_that_interpreter(tmp_path: Path) -> None:
    root = write_project(tmp_path / "proj", "bypython")
    done = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(root), "--python",
                           sys.executable, "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (tmp_path / "out").glob("*.whl")
    header, rule, row = done.stdout.strip().splitlines()[-3:]
    assert header.split() == ["interpreter", "torch", "CUDA", "wheel", "seconds"]
    assert row.split()[:4] == [sys.executable, TORCH.version, TORCH.cuda or "-", wheel.name]


# -- the matrix from pep517_torch as users install it (issue 34 items 1, 2, 6) ------------------


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with pep517_torch's own wheel installed (not editable) beside this
    environment's packages, torch included."""
    base = tmp_path_factory.mktemp("installed")
    return installed_env(base / "env", own_wheel(base / "dist"))


def fake_torch_env(base: Path, version: str, python: str | Path = sys.executable) -> Path:
    """A venv of ``python`` whose torch says ``version`` (nothing else of torch: its build
    fails)."""
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(base)], check=True)
    site = site_packages(base / "bin" / "python")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(
        f"__version__ = {version!r}\nclass version:\n    cuda = None\n")
    return base / "bin" / "python"


def test_an_installed_matrix_builds_with_each_interpreters_own_torch(installed: Path, tmp_path: Path) -> None:
    """pep517_torch installed in site-packages, with torch beside it: the other interpreter
    sees its own torch (here one that says 2.99.0 and has no headers), never the caller's; it, a
    venv without torch, and an interpreter named twice are refused before anything compiles."""
    root = write_project(tmp_path / "proj", "installedmatrix")
    fake = fake_torch_env(tmp_path / "fake", "2.99.0")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    refused = subprocess.run(
        [str(installed), "-m", "pep517_torch", "wheel", str(root), "--python", str(installed),
         "--python", str(bare / "bin" / "python"), "--python", str(installed)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"pep517_torch: error: --python: {bare / 'bin' / 'python'}: torch is not installed there"
        f" ({bare / 'bin' / 'python'} -m pip install torch)",
        f"pep517_torch: error: --python: {installed}: Python 3.{sys.version_info[1]} with torch"
        f" {TORCH.version} again ({installed} has them): it would build the same wheel",
    ]
    assert not (root / "build").exists()
    # the fake torch (2.99.0, no headers) is its own, and named before anything compiles
    fails = subprocess.run(
        [str(installed), "-m", "pep517_torch", "wheel", str(root), "--python", str(installed),
         "--python", str(fake), "-o", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert fails.returncode == 2 and fails.stdout == "", fails.stdout + fails.stderr
    fake_torch = site_packages(fake) / "torch"
    assert fails.stderr.splitlines() == [
        f"pep517_torch: error: --python: {fake}: {fake_torch} does not look like a torch installation"]
    assert not (root / "build").exists() and not (tmp_path / "out").exists()
    done = subprocess.run(
        [str(installed), "-m", "pep517_torch", "wheel", str(root), "--python", str(installed),
         "-o", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (tmp_path / "out").glob("*.whl")
    assert done.stdout.splitlines()[-1].split()[:4] == [str(installed), TORCH.version,
                                                         TORCH.cuda or "-", wheel.name]
    with zipfile.ZipFile(wheel) as archive:
        record = next(n for n in archive.namelist() if n.endswith("pep517_torch.json"))
        assert f'"torch": "{TORCH.version}"' in archive.read(record).decode()


def another_torch_env(base: Path, label: str) -> Path:
    """A venv whose torch is this one under another local label (``2.13.0+other``): every
    entry of torch linked but its version file, every other package of this environment too."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(base)}))
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if entry.suffix != ".pth" and "pep517_torch" not in entry.name and entry.name != "torch":
            (site / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    real = Path(TORCH.root)
    (site / "torch").mkdir()
    for entry in real.iterdir():
        if entry.name not in ("version.py", "__pycache__"):
            (site / "torch" / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    text = (real / "version.py").read_text()
    (site / "torch" / "version.py").write_text(text.replace(TORCH.version, f"{TORCH.version.split('+')[0]}+{label}"))
    return base / "bin" / "python"


def test_two_torches_that_name_one_wheel_are_refused_before_compiling(installed: Path, tmp_path: Path) -> None:
    """Two torches, one file name: said before anything compiles, with what tells them apart
    (the torch in the version), or that nothing can (one release and CUDA: one wheel serves
    both)."""
    root = write_project(tmp_path / "proj", "samename")
    other = another_torch_env(tmp_path / "other", "other")
    tag = f"cp3{sys.version_info[1]}-cp3{sys.version_info[1]}-*"
    release = TORCH.version.split("+")[0]
    for settings, wheel, why in (
        ([], f"samename-1.0-{tag}.whl",
         "name the torch in the wheel's version with -C local-version=torch (or local-version = \"torch\")"),
        (["-Clocal-version=torch"], f"samename-1.0+{local_label(TORCH.version, None)}-{tag}.whl",
         "their torches share a release and CUDA, so one wheel serves both: build with one of them"),
    ):
        done = subprocess.run(
            [str(installed), "-m", "pep517_torch", "wheel", str(root), "--python", str(installed),
             "--python", str(other), "-o", str(tmp_path / "out"), *settings],
            capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
        assert done.stderr.splitlines() == [
            f"pep517_torch: error: --python: {other}: torch {release}+other would build {wheel}, as"
            f" {installed} (torch {TORCH.version}) would: {why}"]
        assert not (root / "build").exists() and not (tmp_path / "out").exists()


def test_two_interpreters_never_overwrite_each_others_wheel(installed: Path, tmp_path: Path) -> None:
    """Wheel variants of two torches of one release: their labels are read from the binaries,
    so both build; the second wheel is an error naming both interpreters, and the first stays."""
    root = write_project(tmp_path / "proj", "samevariant")
    other = another_torch_env(tmp_path / "other", "other")
    done = subprocess.run(
        [str(installed), "-m", "pep517_torch", "wheel", str(root), "--python", str(installed),
         "--python", str(other), "-o", str(tmp_path / "out"), "-Cvariant=torch"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    (wheel,) = (tmp_path / "out").glob("*.whl")
    assert wheel.name.endswith(f"-{local_label(TORCH.version, None)}.whl"), wheel.name
    assert f"pep517_torch: error: --python: {other} built {wheel.name}, which {installed} built" \
           " in this run: not replaced" in done.stderr, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[-2:]}
    assert rows[str(installed)][3] == wheel.name and rows[str(other)][3] == "FAILED"
    with zipfile.ZipFile(wheel) as archive:  # the first build's wheel, not the second's
        record = next(n for n in archive.namelist() if n.endswith("pep517_torch.json"))
        assert f'"torch": "{TORCH.version}"' in archive.read(record).decode()
    # `other` has no ninja of its own: its build ran the caller's, staged (never whatever
    # ninja PATH happens to hold, nor none at all)
    (log,) = (root / "build").glob("*-torch*+other/build.log")
    ninja = log.read_text().splitlines()[0].split()[1]
    assert "pep517_torch-matrix-" in ninja and ninja.endswith("/bin/ninja"), ninja


def other_python(minor: int) -> str | None:
    """An interpreter of Python 3.``minor`` on this machine (PATH, /usr/bin, pyenv), or None."""
    candidates = [shutil.which(f"python3.{minor}"), f"/usr/bin/python3.{minor}",
                  *sorted(str(p) for p in Path.home().glob(f".pyenv/versions/3.{minor}.*/bin/python"))]
    for candidate in filter(None, candidates):
        check = f"import sys; sys.exit(sys.version_info[:2] != (3, {minor}))"
        if Path(candidate).is_file() and subprocess.run(
                [candidate, "-c", check], capture_output=True, timeout=60).returncode == 0:
            return candidate
    return None


def test_targets_of_other_pythons_are_refused_in_one_line_or_built_there(
    installed: Path, tmp_path: Path
) -> None:
    """A target too old for pep517_torch, and a Python 3.10 target without tomli (which this
    3.11 environment cannot stage), are one line each naming what to do; given tomli, the 3.10
    target runs pep517_torch from the staged packages (its fake torch then fails the build
    in pep517_torch's own words)."""
    py39, py310 = other_python(9), other_python(10)
    if py39 is None or py310 is None or sys.version_info[:2] < (3, 11):
        pytest.skip("needs Python 3.9 and 3.10 interpreters beside a 3.11+ one")
    root = write_project(tmp_path / "proj", "otherpythons")
    old = fake_torch_env(tmp_path / "py39", "2.99.0", py39)
    new = fake_torch_env(tmp_path / "py310", "2.99.0", py310)
    full = subprocess.run([old, "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    refused = subprocess.run(
        [str(installed), "-m", "pep517_torch", "wheel", str(root), "--python", str(old),
         "--python", str(new)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout + refused.stderr
    assert refused.stderr.splitlines() == [
        f"pep517_torch: error: --python: {old}: Python {full}: pep517_torch needs Python >=3.10",
        f"pep517_torch: error: --python: {new}: pep517_torch needs tomli>=2 for Python 3.10, which"
        f" neither it nor {installed} has ({new} -m pip install 'tomli>=2')",
    ]
    got = subprocess.run([sys.executable, "-m", "pip", "--python", str(new), "install", "-q",
                          "tomli>=2"], capture_output=True, text=True, timeout=600)
    if got.returncode != 0:
        pytest.skip(f"tomli cannot be installed here: {got.stderr.strip()[-300:]}")
    done = subprocess.run(
        [str(installed), "-m", "pep517_torch", "wheel", str(root), "--python", str(new)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600)
    # pep517_torch ran there, on Python 3.10, and found that torch (fake: no headers) unusable
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"pep517_torch: error: --python: {new}:"
                                        f" {site_packages(new) / 'torch'} does not look like a torch installation"]


def _archive(path: Path, members: list[tuple[str, bytes, str]]) -> Path:
    """A .tar.gz of (name, type, link or content) members."""
    with tarfile.open(path, "w:gz") as archive:
        for name, kind, text in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(text.encode())
                archive.addfile(info, io.BytesIO(text.encode()))
            else:
                info.linkname = text
                archive.addfile(info)
    return path


def test_a_wheel_from_an_sdist_path(tmp_path: Path) -> None:
    """`wheel dist/x-1.0.tar.gz` unpacks into a temporary folder, builds there, and writes the
    wheel beside the sdist (with --python too); a hostile or broken archive is one line, and
    nothing of it is written."""
    root = write_project(tmp_path / "proj", "fromsdist")
    sdist = root / "dist" / glue.build_sdist(root, root / "dist", None)
    done = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(sdist)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (root / "dist").glob("fromsdist-1.0-*.whl")
    assert wheel_value(wheel, tmp_path / "unpacked", "fromsdist") == 0
    assert not (root / "build").exists()  # built in the unpacked copy, not the tree
    matrix = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(sdist), "--python",
                             sys.executable, "-o", "out"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=600)
    assert matrix.returncode == 0, matrix.stdout + matrix.stderr
    assert [w.name for w in (tmp_path / "out").glob("*.whl")] == [wheel.name]

    top, toml = "evil-1.0", ("evil-1.0/pyproject.toml", tarfile.REGTYPE, "[project]\n")
    cases = {
        "dots": ([toml, ("evil-1.0/../../escaped", tarfile.REGTYPE, "x")],
                 "member 'evil-1.0/../../escaped' lies outside the sdist's folder"),
        "absolute": ([("/tmp/evil-1.0/pyproject.toml", tarfile.REGTYPE, "x")],
                     "member '/tmp/evil-1.0/pyproject.toml' lies outside the sdist's folder"),
        "symlink": ([toml, (f"{top}/link", tarfile.SYMTYPE, "../../../etc/passwd")],
                    f"member '{top}/link' links to '../../../etc/passwd', outside the sdist's folder"),
        "hardlink": ([toml, (f"{top}/hard", tarfile.LNKTYPE, "/etc/passwd")],
                     f"member '{top}/hard' links to '/etc/passwd', outside the sdist's folder"),
        "device": ([toml, (f"{top}/tty", tarfile.CHRTYPE, "")],
                   f"member '{top}/tty' is a device, pipe or other special file"),
        "fifo": ([toml, (f"{top}/pipe", tarfile.FIFOTYPE, "")],
                 f"member '{top}/pipe' is a device, pipe or other special file"),
        "two-tops": ([toml, ("other/x", tarfile.REGTYPE, "x")],
                     "not an sdist (its members are not in one top-level folder: 'evil-1.0', 'other')"),
        "no-pyproject": ([(f"{top}/setup.py", tarfile.REGTYPE, "")],
                         f"holds no pyproject.toml at {top}/pyproject.toml"),
    }
    given = {name: _archive(tmp_path / f"{name}-1.0.tar.gz", members)
             for name, (members, _) in cases.items()}
    (tmp_path / "garbage-1.0.tar.gz").write_text("not an archive")
    expected = {**{given[name]: f"{given[name].name}: {said}" for name, (_, said) in cases.items()},
                tmp_path / "garbage-1.0.tar.gz": "garbage-1.0.tar.gz: not a .tar.gz archive",
                tmp_path / "absent-1.0.tar.gz": "absent-1.0.tar.gz: no such sdist"}
    for path, said in expected.items():
        refused = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", path.name],
                                 capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert refused.returncode == 2, (path, refused.stdout, refused.stderr)
        assert refused.stderr.startswith(f"pep517_torch: error: {said}"), refused.stderr
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert not (tmp_path.parent / "escaped").exists() and not (tmp_path / "escaped").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["out", "proj", "unpacked"]

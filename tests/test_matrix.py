"""#21 on this machine's torch, with the tiny C-API project (a second to compile): the local
label, the sdist's PKG-INFO against the wheel's METADATA (PEP 643), the build record and the
find-links pages, `wheel --python`, and uv reading the torch requirement."""

from __future__ import annotations

import io
import os
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
from pep517_torch.core import toolchain
from pep517_torch.config.pyproject import tomllib
from pep517_torch.distribution.index import write_index
from tests.conftest import ROOT
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


def test_uv_pip_compile_resolves_the_torch_the_wheel_requires(tmp_path: Path) -> None:
    """uv reads dynamic dependencies from the backend: offered torch 2.13.0+cpu and a
    too-new torch, it takes the one the wheel's pin allows."""
    uv = Path(sys.executable).parent / "uv"
    local = sorted(Path("/opt/wheels").glob("torch-*.whl")) if Path("/opt/wheels").is_dir() else []
    if not uv.exists() or not any(TORCH.version.split("+")[0] in w.name for w in local):
        pytest.skip("needs uv (test extras) and this torch's wheel in /opt/wheels")
    links = tmp_path / "links"
    links.mkdir()
    for wheel in local:
        (links / wheel.name).symlink_to(wheel)
    major, minor = (int(p) for p in TORCH.version.split(".")[:2])
    newer = links / f"torch-{major}.{minor + 1}.0-py3-none-any.whl"
    with zipfile.ZipFile(newer, "w") as archive:
        archive.writestr(f"torch-{major}.{minor + 1}.0.dist-info/METADATA",
                         f"Metadata-Version: 2.2\nName: torch\nVersion: {major}.{minor + 1}.0\n")
    root = write_project(tmp_path / "proj", "uvops")
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "cache"), "UV_NO_CONFIG": "1"}
    done = subprocess.run([str(uv), "pip", "compile", "pyproject.toml", "--no-build-isolation",
                           "--python", sys.executable, "--no-index", "--find-links", str(links),
                           "--no-deps", "--no-header"], cwd=root, capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    pinned = [line for line in done.stdout.splitlines() if line.startswith("torch==")]
    assert pinned == [f"torch=={TORCH.version}"] or pinned[0].startswith(
        f"torch=={major}.{minor}."), done.stdout
    wheel = root / "dist" / glue.build_wheel(root, root / "dist", None)
    metadata, _ = _metadata(wheel)
    requirement = next(r for r in metadata.get_all("Requires-Dist") if r.startswith("torch"))  # type: ignore[attr-defined]
    assert requirement == f"torch<{major}.{minor + 1},>={major}.{minor}"


def test_uv_build_with_a_build_constraint_builds_against_that_torch(tmp_path: Path) -> None:
    """The quickstart's uv recipe: an isolated build, kept on this torch by a constraint file,
    everything from this machine (pep517_torch's wheel, the local index, the local torch)."""
    uv = Path(sys.executable).parent / "uv"
    wheels = sorted(Path("/opt/wheels").glob(f"torch-{TORCH.version}-*.whl"))
    index = Path("/opt/pypi/simple")
    if not uv.exists() or not wheels or not index.is_dir():
        pytest.skip("needs uv, this torch's wheel in /opt/wheels and the local index /opt/pypi")
    links = tmp_path / "links"
    # pep517_torch's own requirements, as the isolated build environment will ask for them
    # (the local index lacks some: pyproject-metadata, pyelftools, auditwheel, ...)
    own_requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    fetched = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(links),
                              *own_requirements], capture_output=True, text=True, timeout=600)
    if fetched.returncode != 0:
        pytest.skip(f"pep517_torch's requirements cannot be fetched here: {fetched.stderr.strip()[-300:]}")
    own = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(ROOT), "-o", str(links)], capture_output=True,
                         text=True, timeout=300)
    assert own.returncode == 0, own.stderr
    root = write_project(tmp_path / "proj", "constrained")
    (tmp_path / "constraints.txt").write_text(f"torch=={TORCH.version.split('+')[0]}\n")
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "cache"), "UV_NO_CONFIG": "1"}
    done = subprocess.run(
        [str(uv), "build", "--wheel", "--build-constraint", str(tmp_path / "constraints.txt"),
         "--index-url", index.as_uri(), "--find-links", str(links), "--find-links",
         "/opt/wheels", "--python", sys.executable, "-o", str(tmp_path / "out"), str(root)],
        capture_output=True, text=True, env=env, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = (tmp_path / "out").glob("constrained-*.whl")
    metadata, _ = _metadata(wheel)
    major, minor = TORCH.version.split(".")[:2]
    assert f"torch<{major}.{int(minor) + 1},>={major}.{minor}" in metadata.get_all("Requires-Dist")  # type: ignore[attr-defined]
    assert "from an isolated build environment" in done.stdout + done.stderr  # uv's, not ours


# -- the matrix from pep517_torch as users install it (issue 34 items 1, 2, 6) ------------------


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with pep517_torch's own wheel installed (not editable) beside this
    environment's packages, torch included (linked into its site-packages: torch lies there,
    as in every venv where a user pip-installed both)."""
    base = tmp_path_factory.mktemp("installed")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(base / "dist"),
                    str(ROOT)], check=True, capture_output=True, timeout=600)
    (wheel,) = (base / "dist").glob("pep517_torch-*.whl")
    env = base / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(env)}))
    ours = Path(sysconfig.get_path("purelib"))
    for entry in ours.iterdir():
        if entry.suffix == ".pth" or "pep517_torch" in entry.name or entry.name == "__pycache__":
            continue
        (site / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install",
                    "-q", "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True,
                   timeout=600)
    return env / "bin" / "python"


def fake_torch_env(base: Path, version: str) -> Path:
    """A venv whose torch says ``version`` (nothing else of torch: its build fails)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(base)}))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(
        f"__version__ = {version!r}\nclass version:\n    cuda = None\n")
    return base / "bin" / "python"


def test_an_installed_matrix_builds_with_each_interpreters_own_torch(installed: Path, tmp_path: Path) -> None:
    """pep517_torch installed in site-packages, with torch beside it: the other interpreter's
    build sees its own torch (here one that says 2.99.0), never the caller's; a venv without
    torch, and an interpreter named twice, are refused before anything compiles."""
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
    done = subprocess.run(
        [str(installed), "-m", "pep517_torch", "wheel", str(root), "--python", str(installed),
         "--python", str(fake), "-o", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr  # the fake torch cannot build
    assert f"building with {fake} (Python 3.{sys.version_info[1]}, torch 2.99.0)" in done.stdout
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[-2:]}
    assert rows[str(fake)][1:4] == ["2.99.0", "-", "FAILED"]
    (wheel,) = (tmp_path / "out").glob("*.whl")
    assert rows[str(installed)][1:4] == [TORCH.version, TORCH.cuda or "-", wheel.name]
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


def test_two_interpreters_never_overwrite_each_others_wheel(installed: Path, tmp_path: Path) -> None:
    """Two torches, no local label: both builds name the same file. The second is an error
    naming both interpreters, and the first wheel stays."""
    root = write_project(tmp_path / "proj", "samename")
    other = another_torch_env(tmp_path / "other", "other")
    done = subprocess.run(
        [str(installed), "-m", "pep517_torch", "wheel", str(root), "--python", str(installed),
         "--python", str(other), "-o", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    (wheel,) = (tmp_path / "out").glob("*.whl")
    assert f"pep517_torch: error: --python: {other} built {wheel.name}, which {installed} built" \
           " in this run: not replaced" in done.stderr, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[-2:]}
    assert rows[str(installed)][3] == wheel.name and rows[str(other)][3] == "FAILED"
    with zipfile.ZipFile(wheel) as archive:  # the first build's wheel, not the second's
        record = next(n for n in archive.namelist() if n.endswith("pep517_torch.json"))
        assert f'"torch": "{TORCH.version}"' in archive.read(record).decode()


def test_a_wheel_from_an_sdist_path(tmp_path: Path) -> None:
    """`wheel dist/x-1.0.tar.gz` unpacks into a temporary folder, builds there, and writes the
    wheel beside the sdist; a hostile or broken archive is one line."""
    root = write_project(tmp_path / "proj", "fromsdist")
    sdist = root / "dist" / glue.build_sdist(root, root / "dist", None)
    done = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(sdist)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (root / "dist").glob("fromsdist-1.0-*.whl")
    assert wheel_value(wheel, tmp_path / "unpacked", "fromsdist") == 0
    assert not (root / "build").exists()  # built in the unpacked copy, not the tree
    evil = tmp_path / "evil-1.0.tar.gz"
    with tarfile.open(evil, "w:gz") as archive:
        for name in ("evil-1.0/pyproject.toml", "evil-1.0/../../escaped"):
            info = tarfile.TarInfo(name)
            info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))
    (tmp_path / "garbage.tar.gz").write_text("not an archive")
    for given, said in ((evil, "is outside the destination"), (tmp_path / "garbage.tar.gz",
                                                               "not a .tar.gz archive")):
        refused = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(given)],
                                 capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert not (tmp_path.parent / "escaped").exists()

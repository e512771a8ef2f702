"""No silently broken wheel (issue 24 items 7 and 10).

7. A build that skips every extension fails with the reasons, unless each skipped extension
   says `optional = true`; a partial skip builds and says so. Compiles nothing.
10. A setup.py project built through ``pep517_torch.setuptools`` whose own torch requirement is
   static and loose (``torch>=2.0.0``) keeps that requirement, and its module is shipped behind
   the import check: under another torch minor the import fails with a message naming both.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.errors import ConfigError
from tests.commands import run_python
from tests.conftest import write_tree
from tests.tiny_project import NAMED_MODULE, pyproject

EXT = "tool.torch-ext.extension"


def skipping_project(root: Path, *extensions: str) -> Path:
    return write_tree(root, {
        "pyproject.toml": pyproject("demo", *extensions),
        "demo/__init__.py": "",
        "csrc/a.cu": "__global__ void k() {}\n",
        "csrc/b.cpp": NAMED_MODULE,
    })


CUDA_ONLY = 'name = "demo._backend"\nsources = ["csrc/a.cu"]\nif.env.DEMO_FORCE_CUDA = "1"'
OFF = 'name = "demo._other"\nsources = ["csrc/b.cpp"]\nenabled = false'


def test_every_extension_skipped_fails_with_the_reasons(tmp_path: Path) -> None:
    root = skipping_project(tmp_path / "p", CUDA_ONLY, OFF)
    with pytest.raises(ConfigError, match="^every extension is skipped") as error:
        pipeline.build_wheel(root, tmp_path / "dist", None)
    message = str(error.value)
    assert f"demo._backend: {EXT}[0].if.env.DEMO_FORCE_CUDA" in message
    assert f"demo._other: {EXT}[1].enabled = false" in message
    assert f"{EXT}[0].optional = true" in message and "\n" not in message
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())
    # Through the CLI: one line, rc != 0, no traceback.
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", "-o",
                             str(tmp_path / "cli-dist")], cwd=root, capture_output=True, text=True)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert "every extension is skipped" in result.stderr.strip().splitlines()[-1]


def test_optional_extensions_may_all_be_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = skipping_project(tmp_path / "p", CUDA_ONLY + "\noptional = true", OFF + "\noptional = true")
    name = pipeline.build_wheel(root, tmp_path / "dist", None)
    assert name.endswith("-py3-none-any.whl")
    out = capsys.readouterr().out
    assert "skipping extension demo._backend" in out and "skipping extension demo._other" in out


def test_one_required_skipped_extension_fails_the_build_that_builds_none(tmp_path: Path) -> None:
    root = skipping_project(tmp_path / "p", CUDA_ONLY, OFF + "\noptional = true")
    with pytest.raises(ConfigError, match=rf"set {EXT.replace('.', '[.]')}\[0\][.]optional = true"):
        pipeline.build_wheel(root, tmp_path / "dist", None)


@pytest.mark.compile
def test_a_partial_skip_builds_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = skipping_project(tmp_path / "p", CUDA_ONLY, 'name = "demo._other"\nsources = ["csrc/b.cpp"]')
    name = pipeline.build_wheel(root, tmp_path / "dist", None)
    assert "-none-any" not in name
    out = capsys.readouterr().out
    assert f"pep517_torch: skipping extension demo._backend: {EXT}[0].if.env.DEMO_FORCE_CUDA" in out


# ------------------------------------------------------------------ item 10: setuptools face

SETUP_PY = """
from setuptools import setup
from pep517_torch.setuptools import BuildExtension, CppExtension
setup(name="loose", version="1.0", packages=["loose"],
      ext_modules=[CppExtension("loose._C", ["csrc/module.cpp"])],
      cmdclass={"build_ext": BuildExtension})
"""
STATIC = '[project]\nname = "loose"\nversion = "1.0"\ndependencies = ["torch>=2.0.0"]\n'
DYNAMIC = '[project]\nname = "loose"\nversion = "1.0"\ndynamic = ["dependencies"]\n'


def setuptools_wheel(root: Path, pyproject: str, out: Path) -> tuple[Path, str]:
    write_tree(root, {
        "setup.py": SETUP_PY,
        # literal, not tests.tiny_project.pyproject: setuptools is the backend here, on purpose
        "pyproject.toml": '[build-system]\nrequires = ["setuptools", "pep517_torch"]\n'
        'build-backend = "setuptools.build_meta"\n' + pyproject,
        "loose/__init__.py": "",
        "csrc/module.cpp": NAMED_MODULE.replace("TORCH_EXTENSION_NAME", "_C"),
    })
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
         "--no-cache-dir", "-w", str(out), str(root)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("*.whl")
    return wheel, result.stdout + result.stderr


EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def metadata_requirements(archive: zipfile.ZipFile) -> list[str]:
    (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    text = archive.read(name).decode()
    return [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Requires-Dist:")]


@pytest.mark.compile
def test_a_loose_static_torch_requirement_ships_the_import_check(tmp_path: Path) -> None:
    torch_version = toolchain.find_torch().version
    wheel, log = setuptools_wheel(tmp_path / "static", STATIC, tmp_path / "out-static")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert metadata_requirements(archive) == ["torch>=2.0.0"]  # the user's, kept
        archive.extractall(tmp_path / "site")
    assert [n for n in names if n.startswith("loose/_C")] == [f"loose/_C{EXT_SUFFIX}"], names
    assert "each module checks at import that torch is" in log
    site = str(tmp_path / "site")
    imported = run_python(f"import sys; sys.path.insert(0, {site!r}); import loose._C as m;"
                          " print(m.answer(), type(m).__name__, m.__file__)")
    assert imported.stdout.split() == ["42", "module", f"{site}/loose/_C{EXT_SUFFIX}"]
    other = run_python(
        f"import sys; sys.path.insert(0, {site!r}); import torch; torch.__version__ = '2.99.0';"
        " import loose._C", check=False)
    assert other.returncode != 0
    assert f"loose._C was built against torch {torch_version}, but torch 2.99.0" in other.stderr

    # With our pin (dependencies dynamic), no shim: the pin is the guard.
    pinned, _ = setuptools_wheel(tmp_path / "dynamic", DYNAMIC, tmp_path / "out-dynamic")
    with zipfile.ZipFile(pinned) as archive:
        assert "loose/_C.py" not in archive.namelist()
        [pin] = metadata_requirements(archive)
        assert pin.startswith("torch") and "<" in pin and ">=" in pin, pin

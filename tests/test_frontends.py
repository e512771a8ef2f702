"""Real frontends drive the backend: build, pip (wheel, install, -e, uninstall) and uv."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.commands import run, run_python
from pep517_torch.core.toolchain import tools as toolchain
from tests.conftest import ROOT
from tests.tiny_project import write_project

pytestmark = pytest.mark.compile
BIN = Path(sys.executable).parent
TORCH_VERSION = toolchain.find_torch().version


def only(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def compute_lightops(site: Path) -> str:
    return run_python(
        "import torch, lightops; print(lightops.scale(torch.arange(3.0), 2.0).tolist())",
        env={"PYTHONPATH": str(site)}, cwd=site,
    ).stdout.strip()


@pytest.fixture(scope="session")
def own_wheel(session_dir: Path) -> Path:
    """pep517_torch's own wheel, built by itself (it is its own build backend)."""
    out = session_dir / "own"
    run(sys.executable, "-m", "pep517_torch", "wheel", ROOT, "-o", out)
    return only(out, "pep517_torch-*.whl")


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A fresh venv that sees this environment's packages (torch, pep517_torch) read-only."""
    target = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", target)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(target)}))
    ours = sysconfig.get_path("purelib")
    (site / "zz_parent_env.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return target


def site_files(venv: Path) -> set[str]:
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv)}))
    return {str(p.relative_to(site)) for p in site.rglob("*") if "__pycache__" not in p.parts}


def test_python_m_build_no_isolation(fixture_copy) -> None:
    project = fixture_copy("light")
    run(sys.executable, "-m", "build", "--no-isolation", project, cwd=project)
    wheel = only(project / "dist", "*.whl")
    sdist = only(project / "dist", "*.tar.gz")
    assert re.fullmatch(r"lightops-0\.3\.0-cp311-cp311-manylinux_2_\d+_x86_64\.whl", wheel.name)
    assert sdist.name == "lightops-0.3.0.tar.gz"
    run(BIN / "check-wheel-contents", wheel)
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read("lightops-0.3.0.dist-info/METADATA").decode()
    assert "Requires-Dist: torch<2.14,>=2.13" in metadata


def test_python_m_build_with_isolation_uses_local_wheels(fixture_copy, own_wheel: Path,
                                                          tmp_path: Path) -> None:
    """Isolated build: pep517_torch from a local wheel, torch pinned by a constraint."""
    project = fixture_copy("light")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("torch==2.13.0\n")
    env = {"PIP_FIND_LINKS": f"{own_wheel.parent} {os.environ.get('PIP_FIND_LINKS', '/opt/wheels')}",
           "PIP_CONSTRAINT": str(constraints)}
    result = run(sys.executable, "-m", "build", "--wheel", project, cwd=project, env=env)
    wheel = only(project / "dist", "*.whl")
    assert "isolated build environment" in result.stdout + result.stderr
    site = tmp_path / "site"
    run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", site, wheel)
    assert compute_lightops(site) == "[0.0, 2.0, 4.0]"


def test_pip_shows_which_torch_an_isolated_build_used_with_v(own_wheel: Path, tmp_path: Path) -> None:
    """pip hides a backend's output unless the build fails or -v is given (pip 23.2 to 26.2
    alike): with -v, the note naming the isolated build's torch is there, as the docs say."""
    project = write_project(tmp_path / "pipnote", "pipnote")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(f"torch=={TORCH_VERSION.split('+')[0]}\n")
    env = {"PIP_FIND_LINKS": f"{own_wheel.parent} {os.environ.get('PIP_FIND_LINKS', '/opt/wheels')}",
           "PIP_CONSTRAINT": str(constraints)}
    result = run(sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", tmp_path / "out",
                 project, env=env)
    assert (f"pep517_torch: building against torch {TORCH_VERSION} from an isolated build"
            " environment; the wheel will require it") in result.stdout + result.stderr
    only(tmp_path / "out", "pipnote-1.0-*.whl")


def test_pip_wheel_install_uninstall(fixture_copy, venv: Path) -> None:
    project = fixture_copy("light")
    out = project / "wheelhouse"
    run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", out, project)
    wheel = only(out, "*.whl")
    python = venv / "bin" / "python"
    before = site_files(venv)
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel)
    installed = site_files(venv) - before
    assert any(f.startswith("lightops/_C.cpython") for f in installed)
    result = run(python, "-c", "import torch, lightops; print(lightops.scale(torch.ones(2), 3.0).tolist())")
    assert result.stdout.strip() == "[3.0, 3.0]"
    assert run(venv / "bin" / "lightops-selftest").stdout.strip() == "[0.0, 2.0, 4.0]"
    run(sys.executable, "-m", "pip", "--python", python, "uninstall", "-y", "lightops")
    leftovers = {f for f in site_files(venv) - before if not f.endswith(".pyc")}
    assert leftovers == set()


def test_pip_editable_rebuilds_after_cpp_edit(fixture_copy, venv: Path) -> None:
    project = fixture_copy("light")
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-build-isolation",
        "--no-deps", "-e", project)
    code = "import torch, lightops; print(lightops.scale(torch.ones(2), 2.0).tolist())"
    first = run(python, "-c", code, cwd=venv)
    assert first.stdout.strip() == "[2.0, 2.0]" and "rebuild" not in first.stderr
    scale = project / "csrc" / "scale.cpp"
    scale.write_text(scale.read_text().replace("factor + LIGHTOPS_FACTOR_OFFSET", "factor + 1"))
    second = run(python, "-c", code, cwd=venv)
    assert second.stdout.strip() == "[3.0, 3.0]"
    assert len([line for line in second.stderr.splitlines() if "rebuilding" in line]) == 1
    third = run(python, "-c", code, cwd=venv)
    assert third.stdout.strip() == "[3.0, 3.0]" and third.stderr == ""


def test_pip_wheel_without_v_names_the_build_log(tmp_path: Path) -> None:
    """pip shows a failing backend's last words even without -v: they name build.log, which
    holds the compiler's own output; a successful build's summary names it too."""
    from tests.tiny_project import set_value, write_project

    project = write_project(tmp_path / "logdemo", "logdemo")
    (project / "csrc" / "value.cpp").write_text("int value() { return undeclared_thing; }\n")
    failed = run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                 "-w", tmp_path / "out", project, check=False)
    assert failed.returncode != 0
    (log,) = project.glob("build/*/build.log")
    assert f"(full log: {log})" in failed.stdout + failed.stderr
    text = log.read_text()
    assert any("csrc/value.cpp:1:22: error: " in line and "undeclared_thing" in line
               for line in text.splitlines())
    assert re.search(r"^\[\d/3\] compiling csrc/value.cpp: failed after \d+\.\d s$", text, re.M)
    set_value(project, 5)
    built = run(sys.executable, "-m", "pep517_torch", "wheel", project, "-o", tmp_path / "out")
    (summary,) = [line for line in built.stdout.splitlines() if " extension: " in line]
    assert summary.endswith(f"; log: {log}")
    assert "undeclared_thing" not in log.read_text() and "compiling csrc/value.cpp: done" in log.read_text()


def test_uv_build_no_isolation(fixture_copy) -> None:
    project = fixture_copy("light")
    run(BIN / "uv", "build", "--no-build-isolation", "--python", sys.executable, "--out-dir",
        project / "uvdist", project, cwd=project, env={"UV_OFFLINE": "1", "UV_NO_CONFIG": "1"})
    wheel = only(project / "uvdist", "*.whl")
    only(project / "uvdist", "*.tar.gz")
    run(BIN / "check-wheel-contents", wheel)


def test_heavy_extension_wheel_installs_and_computes(fixture_copy, tmp_path: Path) -> None:
    """fixtures/minimal includes torch/extension.h: the real-world shape, built once."""
    project = fixture_copy("minimal")
    out = tmp_path / "out"
    run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", out, project)
    wheel = only(out, "myops-1.0.0-cp311-cp311-manylinux_2_*_x86_64.whl")
    run(BIN / "check-wheel-contents", wheel)
    site = tmp_path / "site"
    run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", site, wheel)
    result = run_python(
        "import torch, myops; x = torch.randn(5); y = torch.randn(5);"
        "print(torch.allclose(myops.fused_scale_add(x, y, 0.5), x * 0.5 + y))",
        env={"PYTHONPATH": str(site)}, cwd=site,
    )
    assert result.stdout.strip() == "True"

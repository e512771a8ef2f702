"""uv as users run it (issue 34 item 7): `uv build` and `uv pip install` of a project built in
isolation, `uv pip compile` reading the pin, and a project that builds an extension against its
own torch with `extra-build-dependencies` and `match-runtime = true` (docs/publishing.md's uv
section, run as printed). The tiny C-API project stands in for the docs' myops (a second to
compile).

Everything stays on this machine: uv sees one PEP 503 folder (tests/installed/uv_index.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain
from tests.conftest import ROOT
from tests.installed.uv_index import Unavailable, requires_dist, uv_sources
from tests.installed.venvs import installed_env, own_wheel
from tests.tiny_project import write_project

TORCH = toolchain.find_torch()
UV = Path(sys.executable).parent / "uv"
NOTE = "from an isolated build environment"
BLOCK = re.compile(r'^```(\w*)(?: title="([^"]+)")?\n(.*?)^```', re.M | re.S)

pytestmark = [pytest.mark.compile,
              pytest.mark.skipif(not UV.exists(), reason="needs uv (the test extras)")]


@dataclass(frozen=True)
class Local:
    """uv's sources on this machine and the environment that points uv at them alone."""

    own: Path  # pep517_torch's wheel
    env: dict[str, str]


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Local:
    base = tmp_path_factory.mktemp("uv")
    own = own_wheel(base / "own")
    try:
        sources = uv_sources(base, own, TORCH.version)
    except Unavailable as why:
        pytest.skip(str(why))
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("UV_", "PIP_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(sources, PATH=f"{UV.parent}{os.pathsep}{os.environ['PATH']}")
    return Local(own, env)


def uv(*args: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(UV), *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _blocks(text: str) -> list[tuple[str, str | None, str]]:
    """(language, title, text) of each fenced block of a markdown text, in order."""
    return [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(text)]


def _pin() -> str:
    major, minor = TORCH.version.split(".")[:2]
    return f"torch<{major}.{int(minor) + 1},>={major}.{minor}"


def test_the_quickstarts_uv_lines_as_printed(local: Local, tmp_path: Path) -> None:
    """`uv build` with the page's build constraint builds in isolation against the constrained
    torch and shows that it did; `uv pip compile --no-build-isolation` resolves the torch the
    wheel will require, never a newer one the index offers."""
    page = (ROOT / "docs" / "quickstart.md").read_text()
    block = page.split("## Build isolation", 1)[1].split("```console\n", 1)[1].split("```", 1)[0]
    lines = [line.split("#")[0].strip() for line in block.replace("\\\n", " ").splitlines()]
    build, compile_ = (line for line in lines if line.startswith("uv "))
    write_project(tmp_path / "myops", "myops")
    (tmp_path / "pep517_torch" / "dist").mkdir(parents=True)
    (tmp_path / "pep517_torch" / "dist" / local.own.name).symlink_to(local.own)
    (tmp_path / "constraints.txt").write_text(f"torch=={TORCH.version.split('+')[0]}\n")
    env = {**local.env, "UV_PYTHON": sys.executable}
    built = subprocess.run(["bash", "-c", build], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=1500)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp_path / "isolated").glob("myops-1.0-*.whl")
    assert requires_dist(wheel) == [_pin()]
    assert f"pep517_torch: building against torch {TORCH.version} {NOTE}" in built.stdout + built.stderr

    # a newer torch on offer (a find-links folder uv merges with the index): the pin wins
    newer = tmp_path / "newer"
    newer.mkdir()
    major, minor = (int(p) for p in TORCH.version.split(".")[:2])
    with zipfile.ZipFile(newer / f"torch-{major}.{minor + 1}.0-py3-none-any.whl", "w") as archive:
        archive.writestr(f"torch-{major}.{minor + 1}.0.dist-info/METADATA",
                         f"Metadata-Version: 2.2\nName: torch\nVersion: {major}.{minor + 1}.0\n")
    venv = installed_env(tmp_path / "venv", local.own)  # the page's active environment
    env = {**local.env, "VIRTUAL_ENV": str(venv.parent.parent), "UV_FIND_LINKS": str(newer)}
    compiled = subprocess.run(["bash", "-c", compile_], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=900)
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    assert re.findall(r"^torch==.*$", compiled.stdout, re.M) == [f"torch=={TORCH.version}"]


def test_uv_pip_install_builds_in_isolation_and_shows_why_with_v(local: Local, tmp_path: Path) -> None:
    root = write_project(tmp_path / "uvpipops", "uvpipops")
    (tmp_path / "constraints.txt").write_text(f"torch=={TORCH.version.split('+')[0]}\n")
    uv("venv", "--python", sys.executable, tmp_path / "venv", cwd=tmp_path, env=local.env)
    python = tmp_path / "venv" / "bin" / "python"
    done = uv("pip", "install", "-v", "--python", python, "--build-constraint",
              tmp_path / "constraints.txt", root, cwd=tmp_path, env=local.env)
    assert f"building against torch {TORCH.version} {NOTE}" in done.stdout + done.stderr
    computed = subprocess.run([python, "-c", "import torch, uvpipops; print(uvpipops.value(),"
                               " torch.__version__)"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
    assert computed.stdout.split() == ["0", TORCH.version], computed.stderr


def test_match_runtime_builds_against_the_projects_torch_with_the_import_check(
    local: Local, tmp_path: Path
) -> None:
    """docs/publishing.md's uv section as printed: the extension (static dependencies) is built
    in isolation against exactly the torch `uv sync` resolved for the project; its wheel keeps
    the user's requirement and carries the import check, which refuses another torch."""
    page = ROOT / "docs" / "publishing.md"
    section = page.read_text().split("## uv: build against the project's torch", 1)[1].split("\n## ", 1)[0]
    files = {title: text for _, title, text in _blocks(section) if title}
    (script,) = [text for language, _, text in _blocks(section) if language == "sh"]
    assert "<!-- runnable -->\n```sh" in section
    root = write_project(tmp_path / "myops", "myops")
    (root / "pyproject.toml").write_text(files["myops/pyproject.toml"])
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "pyproject.toml").write_text(files["app/pyproject.toml"])
    env = {**local.env, "UV_PYTHON": sys.executable}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == TORCH.version
    assert NOTE not in done.stdout + done.stderr  # uv sync hides the backend's output
    site = next((tmp_path / "app" / ".venv" / "lib").glob("python3*/site-packages"))
    (dist_info,) = site.glob("myops-*.dist-info")
    requires = [line for line in (dist_info / "METADATA").read_text().splitlines()
                if line.startswith("Requires-Dist:")]
    assert requires == ["Requires-Dist: torch>=2.13"]  # as the user wrote it: no pin
    # the import check stands for the pin, inside the module itself: no wrapper beside it
    assert [path.name.split(".")[0] for path in (site / "myops").glob("_C*")] == ["_C"]
    refused = subprocess.run(
        [tmp_path / "app" / ".venv" / "bin" / "python", "-c",
         "import torch; torch.__version__ = '2.14.1+cu130'; import myops"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    assert (f"ImportError: myops._C was built against torch {TORCH.version}, but torch"
            " 2.14.1+cu130 is installed.") in refused.stderr, refused.stderr


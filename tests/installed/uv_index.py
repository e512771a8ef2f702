"""uv's sources on this machine, for tests that run uv as users do: one PEP 503 folder listing
pep517_torch's own wheel, its dependencies and torch's (``pip download``, through pip's own
configuration), and the torch wheel pip installs from (pip's find-links: uv does not read pip's
configuration). ``UV_OFFLINE`` and a cache of its own keep uv from the network and from other
caches, an empty config home from a user's uv.toml."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from pep517_torch.config.pyproject import tomllib
from tests.conftest import ROOT


class Unavailable(Exception):
    """This machine cannot serve uv what it needs (a test skips, naming why)."""


def pip_find_links() -> list[Path]:
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                            text=True).stdout
    places = re.findall(r"find-links='([^']*)'", config) + os.environ.get("PIP_FIND_LINKS", "").split()
    return [Path(place) for text in places for place in text.split() if Path(place).is_dir()]


def simple_index(folder: Path, wheels: list[Path]) -> None:
    """A PEP 503 folder: one page per project, a file:// link per wheel."""
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        projects.setdefault(canonicalize_name(parse_wheel_filename(wheel.name)[0]), []).append(wheel)
    for name, files in projects.items():
        (folder / name).mkdir(parents=True)
        links = "".join(f'<a href="{w.resolve().as_uri()}">{w.name}</a>\n' for w in files)
        (folder / name / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    (folder / "index.html").write_text("".join(f'<a href="{n}/">{n}</a>\n' for n in projects))


def requires_dist(wheel: Path) -> list[str]:
    """The Requires-Dist lines of ``wheel``'s METADATA, as written."""
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(meta).decode()
    return [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Requires-Dist: ")]


def uv_sources(base: Path, own: Path, torch_version: str) -> dict[str, str]:
    """The variables that point uv at a local index under ``base`` alone: ``own`` (pep517_torch's
    wheel), torch ``torch_version`` (``2.13.0+cpu``) and what both require."""
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    torch_wheels = [w for place in pip_find_links() for w in place.glob(f"torch-{torch_version}-{tag}-*.whl")]
    if not torch_wheels:
        raise Unavailable(f"no torch {torch_version} wheel in pip's find-links (never downloaded)")
    links = base / "links"
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = [str(r) for r in map(Requirement, [*ours, *requires_dist(torch_wheels[0])])
              if r.marker is None or r.marker.evaluate({"extra": ""})]
    fetched = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(links),
                              "--only-binary=:all:", *wanted], capture_output=True, text=True,
                             timeout=900)
    if fetched.returncode != 0:
        raise Unavailable(f"pip cannot fetch the requirements here: {fetched.stderr.strip()[-300:]}")
    index = base / "simple"
    simple_index(index, [*links.glob("*.whl"), own, torch_wheels[0]])
    return {"UV_CACHE_DIR": str(base / "cache"), "UV_DEFAULT_INDEX": index.as_uri(),
            "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never",
            "XDG_CONFIG_HOME": str(base / "config"), "XDG_CONFIG_DIRS": str(base / "config")}

"""uv's sources on this machine, for tests that run uv as users do: one PEP 503 folder listing
pep517_torch's own wheel, its dependencies and torch's (``pip download``, through pip's own
configuration), and the torch wheel pip installs from (pip's find-links: uv does not read pip's
configuration). ``UV_OFFLINE`` and a cache of its own keep uv from the network and from other
caches, an empty config home from a user's uv.toml."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.parse
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


def resolved_index(folder: Path, requirements: list[str], skip: tuple[str, ...] = (),
                   only: tuple[str, ...] | None = None) -> list[Path]:
    """A PEP 503 folder at ``folder`` serving ``requirements`` and what they require, as pip
    resolves them here (``--dry-run --report``): files on this disk are linked where they lie
    (never copied: torch's CUDA wheels are gigabytes), the rest fetched by pip into ``folder``.
    Projects named in ``skip`` are left out, and all but ``only`` when given; returns the
    wheels listed."""
    report = folder.parent / f"{folder.name}-report.json"
    resolved = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--dry-run",
                               "--ignore-installed", "--only-binary=:all:", "--report",
                               str(report), *requirements],
                              capture_output=True, text=True, timeout=900)
    if resolved.returncode != 0:
        raise Unavailable(f"pip cannot resolve {requirements} here: {resolved.stderr.strip()[-300:]}")
    wheels, remote = [], []
    for item in json.loads(report.read_text())["install"]:
        name, url = item["metadata"]["name"], item["download_info"]["url"]
        if canonicalize_name(name) in skip or (only is not None and canonicalize_name(name) not in only):
            continue
        if url.startswith("file://"):
            wheels.append(Path(urllib.parse.unquote(url[len("file://"):])))
        else:
            remote.append(f"{name}=={item['metadata']['version']}")
    if remote:
        fetched = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                  "--only-binary=:all:", "-d", str(folder / "files"), *remote],
                                 capture_output=True, text=True, timeout=900)
        if fetched.returncode != 0:
            raise Unavailable(f"pip cannot fetch {remote} here: {fetched.stderr.strip()[-300:]}")
        wheels += sorted((folder / "files").glob("*.whl"))
    simple_index(folder, wheels)
    return wheels


def relabelled_wheel(wheel: Path, folder: Path, version: str) -> Path:
    """``wheel`` (torch's) as release ``version``: its version file, METADATA and RECORD rewritten,
    every other member copied as it is compressed (a second or two for torch's 180 MB): a
    stand-in for a torch release this machine has not, with the binaries of the real one."""
    name, old, _, tags = parse_wheel_filename(wheel.name)
    old_info, new_info = f"{name}-{old}.dist-info/", f"{name}-{version}.dist-info/"
    target = folder / wheel.name.replace(f"-{old}-", f"-{version}-", 1)
    record: list[str] = []
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(target, "w") as out:
        for info in source.infolist():
            member = info.filename.replace(old_info, new_info, 1)
            if info.filename.endswith((".dist-info/RECORD", "/version.py", ".dist-info/METADATA")):
                text = source.read(info).decode().replace(str(old), version)
                if info.filename.endswith("RECORD"):
                    continue  # written last
                out.writestr(member, text, compress_type=zipfile.ZIP_DEFLATED)
                digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
                record.append(f"{member},sha256={digest.decode()},{len(text.encode())}")
                continue
            copied = copy.copy(info)  # the compressed bytes as they are, under the new name
            copied.filename = member
            copied.flag_bits &= ~0x08  # sizes in the local header, no data descriptor
            source.fp.seek(info.header_offset)  # type: ignore[union-attr]
            header = source.fp.read(30)  # type: ignore[union-attr]
            skip = 30 + int.from_bytes(header[26:28], "little") + int.from_bytes(header[28:30], "little")
            source.fp.seek(info.header_offset + skip)  # type: ignore[union-attr]
            data = source.fp.read(info.compress_size)  # type: ignore[union-attr]
            copied.header_offset = out.fp.tell()  # type: ignore[union-attr]
            out.fp.write(copied.FileHeader())  # type: ignore[union-attr]
            out.fp.write(data)  # type: ignore[union-attr]
            out.filelist.append(copied)
            out.NameToInfo[member] = copied
            out.start_dir = out.fp.tell()  # type: ignore[union-attr]  # where zipfile writes next
            out._didModify = True  # type: ignore[attr-defined]
        lines = source.read(f"{old_info}RECORD").decode().splitlines()
        kept = [line.replace(old_info, new_info, 1) for line in lines
                if line and not line.split(",")[0].endswith(("/version.py", "/METADATA", "/RECORD"))]
        out.writestr(f"{new_info}RECORD", "\n".join([*kept, *record, f"{new_info}RECORD,,"]) + "\n",
                     compress_type=zipfile.ZIP_DEFLATED)
    return target

"""Find-links pages for a torch × CUDA matrix: one PEP 503 page per torch variant.

Each wheel pep517_torch builds against torch records that torch in
``.dist-info/pep517_torch.json``; ``write_index(DIR)`` reads it from every wheel in DIR and
writes ``torch-2.13.0+cpu.html`` (only the wheels built for that torch), ... and an
``index.html`` naming the pages. Links carry ``#sha256=`` fragments, so
``pip install myops -f DIR/torch-2.14.1+cu130.html`` installs the matching build and nothing
else: no page offers a wheel for another torch.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import urllib.parse
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..atomic import writing
from ..errors import OutputError

BUILD_RECORD = "pep517_torch.json"
PAGE = "<!DOCTYPE html>\n<html>\n<head><meta name=\"pypi:repository-version\" content=\"1.0\">" \
       "<title>{title}</title></head>\n<body>\n<h1>{title}</h1>\n{links}</body>\n</html>\n"


def build_record(torch_version: str, torch_cuda: str | None, cuda: str | None = None) -> bytes:
    """The text of ``pep517_torch.json``: the torch a wheel's binaries were built against and,
    when they need a CUDA torch, its CUDA major (``"cuda": "13"``)."""
    record = {"torch": torch_version, "torch_cuda": torch_cuda, **({"cuda": cuda} if cuda else {})}
    return (json.dumps(record, sort_keys=True) + "\n").encode()


def variant_name(torch_version: str, torch_cuda: str | None, cuda: str | None = None) -> str:
    """``2.13.0+cpu``, ``2.14.1+cu130``: torch's own label, or one made from its CUDA; binaries
    that need CUDA (``cuda``, its major) built beside a CPU torch: ``2.13.0+cu13``."""
    if cuda and not torch_cuda:
        return f"{torch_version.split('+')[0]}+cu{cuda}"
    if "+" in torch_version:
        return torch_version
    return torch_version + (f"+cu{torch_cuda.replace('.', '')}" if torch_cuda else "+cpu")


@dataclass(frozen=True)
class IndexedWheel:
    path: Path
    variant: str | None  # None: no build record (pure Python, or not built by pep517_torch)
    sha256: str


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:  # CUDA wheels run to hundreds of MB: never whole in memory
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_wheel(path: Path) -> IndexedWheel:
    try:
        digest = _sha256(path)
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if re.fullmatch(
                r"[^/]+\.dist-info/" + re.escape(BUILD_RECORD), n)]
            record = json.loads(archive.read(names[0])) if names else None
        variant = variant_name(str(record["torch"]), record.get("torch_cuda"),
                               record.get("cuda")) if record else None
    except (zipfile.BadZipFile, OSError, ValueError, KeyError, TypeError) as error:
        raise OutputError(f"{path}: not a readable wheel ({error!r})") from None
    return IndexedWheel(path, variant, digest)


def _link(wheel: IndexedWheel, base: str) -> str:
    href = urllib.parse.quote(base + wheel.path.name) + f"#sha256={wheel.sha256}"
    return f'<a href="{html.escape(href)}">{html.escape(wheel.path.name)}</a><br>\n'


def _write(path: Path, text: str) -> None:
    with writing(path):
        path.write_text(text, encoding="utf-8")


def write_index(directory: Path) -> tuple[Mapping[str, list[IndexedWheel]], list[IndexedWheel]]:
    """Write the pages into ``directory`` (the wheels' folder): (variant -> its wheels, the
    wheels without a build record, which no variant page lists)."""
    if not directory.is_dir():
        raise OutputError(f"{directory}: no such directory")
    wheels = [read_wheel(path) for path in sorted(directory.glob("*.whl"))]
    variants: dict[str, list[IndexedWheel]] = {}
    for wheel in wheels:
        if wheel.variant is not None:
            variants.setdefault(wheel.variant, []).append(wheel)
    for stale in directory.glob("torch-*.html"):
        if stale.name[len("torch-"):-len(".html")] not in variants:
            stale.unlink()
    for variant, listed in sorted(variants.items()):
        links = "".join(_link(wheel, "") for wheel in listed)
        _write(directory / page_name(variant), PAGE.format(
            title=html.escape(f"Wheels built for torch {variant}"), links=links))
    pages = "".join(
        f'<a href="{html.escape(urllib.parse.quote(page_name(v)))}">torch {html.escape(v)}</a>'
        f" ({len(listed)} wheel{'s' if len(listed) != 1 else ''})<br>\n"
        for v, listed in sorted(variants.items())
    )
    _write(directory / "index.html", PAGE.format(title="Wheels by torch variant", links=pages))
    return dict(sorted(variants.items())), [wheel for wheel in wheels if wheel.variant is None]


def page_name(variant: str) -> str:
    return f"torch-{variant}.html"

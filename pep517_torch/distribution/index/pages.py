"""The HTML ``index`` writes: PEP 503 pages (find-links pages, a simple repository's root and
project pages) and the folder's overview. Every href is relative, percent-quoted and
HTML-escaped; links to wheels carry ``#sha256=`` and, when METADATA has one,
``data-requires-python``."""

from __future__ import annotations

import html
import re
import urllib.parse
from collections.abc import Mapping, Sequence

from .folder import GENERATOR
from .record import VARIANT
from .wheels import IndexedWheel

OVERVIEW = "index.html"
_PROJECT = r"[a-z0-9]+(?:-[a-z0-9]+)*"  # a PEP 503 normalised name
_REPOSITORY = rf"torch-{VARIANT.pattern}(?:/{_PROJECT})?"
_PAGE = re.compile(rf"{re.escape(OVERVIEW)}|torch-{VARIANT.pattern}\.html|{_REPOSITORY}/index\.html")

_HTML = ("<!DOCTYPE html>\n<html>\n<head>\n"
         '<meta name="pypi:repository-version" content="1.0">\n'
         f'<meta name="generator" content="{GENERATOR}">\n'
         "<title>{title}</title>\n</head>\n<body>\n<h1>{title}</h1>\n{links}</body>\n</html>\n")


def is_page_name(relative: str) -> bool:
    """Whether ``index`` writes pages of this name: the overview, a find-links page, a simple
    repository's root or project page (never a wheel's name)."""
    return _PAGE.fullmatch(relative) is not None


def is_repository_folder(relative: str) -> bool:
    """Whether ``index`` makes folders of this name: a simple repository and its projects'."""
    return re.fullmatch(_REPOSITORY, relative) is not None


def find_links_page_name(variant: str) -> str:
    return f"torch-{variant}.html"


def repository_name(variant: str) -> str:
    return f"torch-{variant}"


def _page(title: str, links: str) -> bytes:
    return _HTML.format(title=html.escape(title), links=links).encode()


def _anchor(href: str, text: str, attributes: str = "") -> str:
    return f'<a href="{html.escape(href)}"{attributes}>{html.escape(text)}</a><br>\n'


def _wheel_link(wheel: IndexedWheel, up: str) -> str:
    href = up + urllib.parse.quote(wheel.path.name) + f"#sha256={wheel.sha256}"
    requires = (f' data-requires-python="{html.escape(wheel.requires_python)}"'
                if wheel.requires_python else "")
    return _anchor(href, wheel.path.name, requires)


def find_links_page(variant: str, wheels: Sequence[IndexedWheel]) -> bytes:
    """``torch-<variant>.html``, beside the wheels: ``pip install -f`` it."""
    return _page(f"Wheels built for torch {variant}", "".join(_wheel_link(w, "") for w in wheels))


def simple_root(variant: str, projects: Sequence[str]) -> bytes:
    """``torch-<variant>/index.html``: the repository's projects (PEP 503 normalised names)."""
    return _page(f"Simple index: wheels built for torch {variant}",
                 "".join(_anchor(f"{project}/", project) for project in projects))


def simple_project(project: str, wheels: Sequence[IndexedWheel]) -> bytes:
    """``torch-<variant>/<project>/index.html``: links two folders up, to the wheels themselves."""
    return _page(f"Links for {project}", "".join(_wheel_link(w, "../../") for w in wheels))


def overview(variants: Mapping[str, Sequence[IndexedWheel]], pages: set[str],
             repositories: set[str]) -> bytes:
    """``index.html``: for each variant its find-links page and its simple repository (those
    written: a file of someone else's in the way is not linked)."""
    lines = []
    for variant, wheels in variants.items():
        count = f"{len(wheels)} wheel{'s' if len(wheels) != 1 else ''}"
        page = find_links_page_name(variant)
        parts = [f"torch {html.escape(variant)} ({count}):"]
        if page in pages:
            parts.append(f'<a href="{html.escape(urllib.parse.quote(page))}">find-links page</a>')
        if variant in repositories:
            href = html.escape(urllib.parse.quote(repository_name(variant)) + "/")
            parts.append(f'<a href="{href}">simple repository</a>')
        lines.append(" ".join(parts) + "<br>\n")
    return _page("Wheels by torch variant", "".join(lines))

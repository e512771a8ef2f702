"""``write_index(DIR)``: what goes where. Per torch variant, the find-links page
``torch-<variant>.html`` and the simple repository ``torch-<variant>/`` (its root ``index.html`` and
one ``<project>/index.html`` per project, linking the wheels in DIR: no copies); then DIR's
``index.html`` naming them (when there is one); per version with variant wheels, its
``<name>-<version>-variants.json`` (``variants_index.py``). Pages and files of ours no longer
wanted are removed when, and only when, their name is one ``index`` writes and they still hold
what it wrote (``folder.py``): a wheel is the user's, never removed, whatever the manifest says.
Every page links only wheels this run found in DIR."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import variants_index
from . import pages
from .folder import MANIFEST, Folder, Refused, digest
from .pages import OVERVIEW
from .wheels import IndexedWheel, Skipped, scan


@dataclass
class IndexResult:
    variants: dict[str, list[IndexedWheel]]  # variant -> its wheels
    unrecorded: list[IndexedWheel]  # no build record: on no page
    skipped: list[Skipped]  # not wheels index will list
    found: int = 0  # every *.whl entry of DIR, used or skipped
    variants_json: dict[Path, list[IndexedWheel]] = field(default_factory=dict)  # written
    variants_problems: list[str] = field(default_factory=list)  # a version's file not written
    variants_notes: list[str] = field(default_factory=list)  # written, with this said
    pip_lines: list[str] = field(default_factory=list)  # what plain pip installs instead
    pages: dict[str, Path] = field(default_factory=dict)  # variant -> its find-links page
    repositories: dict[str, Path] = field(default_factory=dict)  # variant -> its simple repository
    overview: Path | None = None
    removed: list[Path] = field(default_factory=list)  # stale pages of ours
    left: list[str] = field(default_factory=list)  # one line each: what was in the way, kept


def ours(relative: str) -> bool:
    """The names of the files ``index`` writes: its pages and ``-variants.json`` files."""
    return pages.is_page_name(relative) or variants_index.is_file_name(relative)


def write_index(directory: Path) -> IndexResult:
    with Folder.opened(directory, ours, pages.is_repository_folder) as folder:
        wheels, skipped = scan(folder.fd, directory)
        plain = [w for w in wheels if w.variant_metadata is None]
        variants: dict[str, list[IndexedWheel]] = {}
        for wheel in plain:
            if wheel.variant is not None:
                variants.setdefault(wheel.variant, []).append(wheel)
        result = IndexResult(dict(sorted(variants.items())),
                             [w for w in plain if w.variant is None], skipped,
                             found=len(wheels) + len(skipped), left=list(folder.notes))
        writes = _Writes(folder, result, previous=set(folder.owned))
        for variant, listed in result.variants.items():
            _write_variant(writes, variant, listed)
        if result.variants:  # an overview of nothing is no page: a stale one of ours goes
            overview = pages.overview(result.variants, {p.name for p in result.pages.values()},
                                      set(result.repositories))
            if writes.put(OVERVIEW, overview):
                result.overview = directory / OVERVIEW
        _write_variants_json(writes, [w for w in wheels if w.variant_metadata], plain)
        writes.remove_stale()
        folder.owned = {relative: {hashed} for relative, hashed in writes.current.items()}
        folder.save_manifest()
        return result


def _write_variant(writes: _Writes, variant: str, listed: Sequence[IndexedWheel]) -> None:
    result, folder = writes.result, writes.folder
    page = pages.find_links_page_name(variant)
    if writes.put(page, pages.find_links_page(variant, listed)):
        result.pages[variant] = folder.path / page
    projects: dict[str, list[IndexedWheel]] = {}
    for wheel in listed:
        projects.setdefault(wheel.project, []).append(wheel)
    repository = pages.repository_name(variant)
    written = [project for project, of_project in sorted(projects.items())
               if writes.put(f"{repository}/{project}/index.html",
                             pages.simple_project(project, of_project))]
    if written and writes.put(f"{repository}/index.html", pages.simple_root(variant, written)):
        result.repositories[variant] = folder.path / repository


def _write_variants_json(writes: _Writes, variant_wheels: Sequence[IndexedWheel],
                         plain: Sequence[IndexedWheel]) -> None:
    """Per version (``{name}-{version}`` as the file names spell it), the merged variant
    metadata of its variant wheels, and what plain pip installs of it instead."""
    result = writes.result
    versions: dict[str, list[IndexedWheel]] = {}
    for wheel in variant_wheels:
        versions.setdefault(wheel.namever, []).append(wheel)
    for namever, listed in sorted(versions.items()):
        merged = variants_index.merge(namever, [(w.path.name, w.variant_metadata)
                                                for w in listed if w.variant_metadata])
        result.variants_problems.extend(merged.problems)
        name = variants_index.file_name(namever)
        if merged.text is None or not writes.put(name, merged.text.encode()):
            continue
        result.variants_json[writes.folder.path / name] = list(listed)
        result.variants_notes.extend(merged.notes)
        first = listed[0]
        installable = [w.path.name for w in plain
                       if (w.project, w.version) == (first.project, first.version)]
        result.pip_lines.append(variants_index.pip_line(name, first.project,
                                                        str(first.version), installable))


@dataclass
class _Writes:
    folder: Folder
    result: IndexResult
    previous: set[str]  # the files the manifest counted as ours
    current: dict[str, str] = field(default_factory=dict)  # file -> digest: ours, as it is now
    attempted: set[str] = field(default_factory=set)  # every file this run meant to write

    def put(self, relative: str, data: bytes) -> bool:
        """Write ``data`` at ``relative`` unless something not ours is there (one line in
        ``result.left``); whether the file now holds it."""
        self.attempted.add(relative)
        folder = self.folder
        try:
            there = folder.read(relative)
            if there != data:
                if there is not None and not folder.is_ours(relative):
                    self.result.left.append(
                        f"{folder.path / relative}: not written by index (or changed since):"
                        " left as it is; remove it to have it written")
                    return False
                folder.owned.setdefault(relative, set()).add(digest(data))
                folder.save_manifest()  # first: an interrupted run still knows the file is ours
                folder.write(relative, data)
        except Refused as refused:
            line = f"{refused}: left as it is"
            if line not in self.result.left:  # a folder in the way of several pages: one line
                self.result.left.append(line)
            return False
        self.current[relative] = digest(data)
        return True

    def remove_stale(self) -> None:
        """Files of ours this run did not write again, while they hold what we wrote; then
        the folders we made that are left empty."""
        folder = self.folder
        for relative in sorted(self.previous - self.attempted - {MANIFEST}):
            try:
                ours = folder.is_ours(relative)
            except Refused:
                ours = False
            if ours:
                folder.remove(relative)
                self.result.removed.append(folder.path / relative)
            elif _exists(folder, relative):
                self.result.left.append(f"{folder.path / relative}: changed since index wrote"
                                        " it: left as it is")
        for made in sorted(folder.folders, key=lambda f: -f.count("/")):
            if not any(relative.startswith(made + "/") for relative in self.current) and \
                    folder.remove_folder_if_empty(made):
                folder.folders.discard(made)


def _exists(folder: Folder, relative: str) -> bool:
    try:
        return folder.read(relative, 0) is not None
    except Refused:
        return True

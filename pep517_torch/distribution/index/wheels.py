"""The wheels of a folder, each checked before any page or ``-variants.json`` names it: a valid
wheel file name (a plain one, or a PEP 825 variant wheel's, which ends in a label), a regular
file that opens as a zip, one ``.dist-info`` whose name and version (and METADATA's) are the
file name's, and then a build record ``record.read_record`` accepts (a plain wheel) or a
``variant.json`` variantlib accepts for the file's label (a variant wheel). Whatever fails is a
``Skipped`` with one line of reason; nothing read from a wheel reaches a page or a path
unchecked. Members are read with a bound, so a zip bomb costs a few kilobytes."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (InvalidWheelFilename, NormalizedName, canonicalize_name,
                             parse_wheel_filename)
from packaging.version import InvalidVersion, Version

from ..variants_index import (VARIANT_JSON_LIMIT, VariantError, VariantMetadata, file_name,
                              is_file_name, read_variant_metadata)
from ..wheel_variant import VARIANT_JSON, variant_wheel_name
from .record import BUILD_RECORD, RECORD_LIMIT, BuildTorch, RecordError, read_record
from ...shipped_runtime.user_line import shown

METADATA_LIMIT = 1024 * 1024  # METADATA's headers come first: a long description is cut


@dataclass(frozen=True)
class IndexedWheel:
    path: Path
    project: NormalizedName
    version: Version
    build: BuildTorch | None  # None: no build record (pure Python, or not built by pep517_torch)
    sha256: str
    requires_python: str | None
    variant_metadata: VariantMetadata | None = None  # a variant wheel's (on no torch page)

    @property
    def namever(self) -> str:
        """``{name}-{version}`` as the file name spells them (the ``-variants.json``'s name)."""
        return "-".join(self.path.name.split("-")[:2])

    @property
    def variant(self) -> str | None:
        return self.build.variant if self.build else None


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str

    def line(self) -> str:
        """One line, whatever the file's name or the wheel held (shown sanitised)."""
        return f"skipped {shown(self.path)}: {shown(self.reason)}"


class _Unusable(Exception):
    pass


def scan(directory_fd: int, directory: Path) -> tuple[list[IndexedWheel], list[Skipped]]:
    """Every ``*.whl`` entry of the folder, read or skipped, in name order (together, every
    ``*.whl`` entry there is)."""
    wheels: list[IndexedWheel] = []
    skipped: list[Skipped] = []
    for name in sorted(os.listdir(directory_fd)):
        if not name.endswith(".whl"):
            continue
        try:
            wheels.append(_read(directory_fd, directory, name))
        except _Unusable as error:
            skipped.append(Skipped(directory / name, str(error)))
    return wheels, skipped


def _parse_name(name: str) -> tuple[NormalizedName, Version, str | None]:
    """The project, version and variant label (None: a plain wheel) of a wheel's file name."""
    try:
        project, version, _, _ = parse_wheel_filename(name)
        return project, version, None
    except InvalidWheelFilename as error:
        variant = variant_wheel_name(name)
        if variant is None:
            raise _Unusable(f"not a valid wheel file name ({error})") from None
    plain, label = variant
    project, version, _, _ = parse_wheel_filename(plain)
    namever = "-".join(name.split("-")[:2])
    if not is_file_name(file_name(namever)):
        raise _Unusable(f"{namever!r} cannot name a -variants.json file")
    return project, version, label


def _read(directory_fd: int, directory: Path, name: str) -> IndexedWheel:
    project, version, label = _parse_name(name)
    try:  # a wheel may be a link to a file elsewhere; a FIFO or device must not block us
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory_fd)
    except OSError as error:
        raise _Unusable(f"cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _Unusable("not a file")
    with os.fdopen(fd, "rb") as stream:
        try:
            sha256 = _sha256(stream)
            stream.seek(0)
            with zipfile.ZipFile(stream) as archive:
                dist_info, requires_python = _dist_info(archive, project, version)
                if label is not None:
                    metadata = _variant(archive, dist_info, label)
                    return IndexedWheel(directory / name, project, version, None, sha256,
                                        requires_python, metadata)
                build = _record(archive, dist_info)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError,
                NotImplementedError, RuntimeError, ValueError) as error:
            raise _Unusable(f"not a readable wheel ({error})") from None
    return IndexedWheel(directory / name, project, version, build, sha256, requires_python)


def _sha256(stream: object) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: stream.read(1 << 20), b""):  # type: ignore[attr-defined]
        digest.update(block)  # CUDA wheels run to hundreds of MB: never whole in memory
    return digest.hexdigest()


def _member(archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    with archive.open(name) as member:
        return member.read(limit + 1)


def _dist_info(archive: zipfile.ZipFile, project: NormalizedName,
               version: Version) -> tuple[str, str | None]:
    """The one ``.dist-info`` folder, its name and METADATA's agreeing with the file name, and
    METADATA's Requires-Python."""
    folders = {n.split("/", 1)[0] for n in archive.namelist() if re.match(r"[^/]+\.dist-info/", n)}
    if len(folders) != 1:
        raise _Unusable(f"{len(folders)} .dist-info folders, a wheel has one")
    (dist_info,) = folders
    named_project, _, named_version = dist_info[:-len(".dist-info")].rpartition("-")
    _same(f"{dist_info}", project, version, named_project, named_version)
    try:
        headers = BytesHeaderParser().parsebytes(
            _member(archive, f"{dist_info}/METADATA", METADATA_LIMIT))
    except KeyError:
        raise _Unusable(f"no {dist_info}/METADATA") from None
    _same(f"{dist_info}/METADATA", project, version, str(headers.get("Name", "")),
          str(headers.get("Version", "")))
    requires_python = headers.get("Requires-Python")
    if requires_python is not None:
        try:
            requires_python = str(SpecifierSet(str(requires_python)))
        except InvalidSpecifier:
            raise _Unusable(f"{dist_info}/METADATA: Requires-Python {requires_python!r} is"
                            " not a version specifier") from None
    return dist_info, requires_python


def _record(archive: zipfile.ZipFile, dist_info: str) -> BuildTorch | None:
    record_name = f"{dist_info}/{BUILD_RECORD}"
    if record_name not in archive.namelist():
        return None
    data = _member(archive, record_name, RECORD_LIMIT)
    if len(data) > RECORD_LIMIT:
        raise _Unusable(f"{record_name}: over {RECORD_LIMIT // 1024} KiB, not a build record")
    try:
        return read_record(data)
    except RecordError as error:
        raise _Unusable(f"{record_name}: {error}") from None


def _variant(archive: zipfile.ZipFile, dist_info: str, label: str) -> VariantMetadata:
    """A variant wheel's ``variant.json``, read as variantlib reads it, for the file's label."""
    member = f"{dist_info}/{VARIANT_JSON}"
    try:
        data = _member(archive, member, VARIANT_JSON_LIMIT)
    except KeyError:
        raise _Unusable(f"a variant wheel (label {label!r}) without {member}") from None
    if len(data) > VARIANT_JSON_LIMIT:
        raise _Unusable(f"{member}: over {VARIANT_JSON_LIMIT // 1024} KiB, not a variant.json")
    try:
        return read_variant_metadata(data, label)
    except VariantError as error:
        raise _Unusable(f"{member}: {error}") from None


def _same(where: str, project: NormalizedName, version: Version, named_project: str,
          named_version: str) -> None:
    try:
        same = (canonicalize_name(named_project) == project
                and Version(named_version) == version)
    except InvalidVersion:
        same = False
    if not same:
        raise _Unusable(f"{where} names {named_project!r} {named_version!r}, the file name"
                        f" {project} {version}")

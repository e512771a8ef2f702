"""A small, exact wheel writer.

https://packaging.python.org/specifications/binary-distribution-format/
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import stat
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath
from types import TracebackType

from packaging.tags import parse_tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..atomic import AtomicFile
from ..errors import OutputError
from ..shipped_runtime.user_line import format_size
from .metadata import ProjectMetadata
from .reproducible import archive_epoch
from .tags import PURE_TAG
from .wheel_variant import VARIANT_JSON, Variant

_CHUNK = 1 << 20


def wheel_filename(dist_name: str, version: str, tag: str, label: str | None = None) -> str:
    """``my_ops-1.0.0+pt213cpu-cp311-cp311-linux_x86_64.whl``: the name and version normalised
    (the binary distribution format), a wheel variant's label last (PEP 825)."""
    name = canonicalize_name(dist_name).replace("-", "_")
    return f"{name}-{Version(version)}-{tag}{f'-{label}' if label else ''}.whl"


class WheelWriter:
    """Writes ``<name>-<version>-<tag>.whl`` into ``out_dir``.

    Members are collected by :meth:`add_file` / :meth:`add_bytes` and written, sorted, by
    :meth:`finish` into a temporary file; leaving the ``with`` block without an exception
    renames it into place, any exception (KeyboardInterrupt too) deletes it.
    """

    def __init__(
        self,
        out_dir: Path,
        dist_name: str,
        version: str,
        tag: str,
        *,
        source_date_epoch: int | None,
        variant: Variant | None = None,
        max_size: Budget | None = None,
    ) -> None:
        self.dist_name = canonicalize_name(dist_name).replace("-", "_")
        self.version = str(Version(version))
        self.tag = tag
        self.tags = sorted(str(t) for t in parse_tag(tag))
        self.variant = variant  # a wheel variant: the label ends the file name (PEP 825)
        self.max_size = max_size
        self.path = Path(out_dir) / wheel_filename(dist_name, version, tag,
                                                   variant.label if variant else None)
        self.dist_info = f"{self.dist_name}-{self.version}.dist-info"
        self._date_time = time.gmtime(archive_epoch(source_date_epoch, for_zip=True))[:6]
        self._members: dict[str, Path | tuple[bytes, bool]] = {}
        self._output: AtomicFile | None = None
        self._finished = False

    @property
    def filename(self) -> str:
        return self.path.name

    def __enter__(self) -> WheelWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None and not self._finished:
            self._discard()
            raise RuntimeError("WheelWriter: leaving the with block before finish()")
        try:
            if exc_type is None:
                assert self._output is not None
                self._output.publish()
        finally:
            self._discard()  # after publishing there is nothing left to remove

    def add_file(self, arcname: str, path: Path) -> None:
        """Add the file at ``path`` (symlinks followed) as ``arcname``."""
        self._claim(arcname)
        self._members[arcname] = Path(path)

    def add_bytes(self, arcname: str, data: bytes, executable: bool = False) -> None:
        self._claim(arcname)
        self._members[arcname] = (bytes(data), executable)

    def finish(self, metadata: ProjectMetadata) -> None:
        """Write every member, then ``.dist-info`` (METADATA, WHEEL, entry points, licenses,
        RECORD), into the temporary file."""
        if (metadata.distribution_name, metadata.version) != (self.dist_name, self.version):
            raise ValueError(
                f"metadata is for {metadata.distribution_name} {metadata.version}, "
                f"the wheel for {self.dist_name} {self.version}"
            )
        if self._finished:
            raise RuntimeError("WheelWriter.finish() called twice")
        made = metadata.dist_info_files()
        made.insert(1, ("WHEEL", self._wheel_file()))  # after METADATA, as wheels always had it
        if self.variant is not None:
            made.append((VARIANT_JSON, self.variant.variant_json()))
        dist_info: list[tuple[str, Path | tuple[bytes, bool]]] = [
            (f"{self.dist_info}/{name}", content if isinstance(content, Path) else (content, False))
            for name, content in made
        ]
        for arcname, _ in dist_info:
            _check_arcname(arcname)

        self._output = AtomicFile(self.path)
        records: list[tuple[str, str, str]] = []
        with zipfile.ZipFile(self._output.file, "w") as archive:
            for arcname, source in sorted(self._members.items()) + dist_info:
                digest, size = self._write_member(archive, arcname, source)
                records.append((arcname, f"sha256={digest}", str(size)))
            record_name = f"{self.dist_info}/RECORD"
            records.append((record_name, "", ""))
            text = io.StringIO()
            csv.writer(text, lineterminator="\n").writerows(records)
            self._write_member(archive, record_name, (text.getvalue().encode(), False))
            members = archive.infolist()
        if self.max_size is not None:  # the whole archive, central directory included
            sources = {name: path for name, path in self._members.items() if isinstance(path, Path)}
            self.max_size.check(self.filename, members, self._output.file.seek(0, os.SEEK_END),
                                sources)
        self._finished = True

    def _claim(self, arcname: str) -> None:
        _check_arcname(arcname)
        if self._finished:
            raise RuntimeError("WheelWriter: adding a member after finish()")
        if arcname in self._members:
            raise ValueError(f"{arcname!r} is already in the wheel")
        if arcname.split("/", 1)[0] == self.dist_info:
            raise ValueError(f"{arcname!r}: finish() writes {self.dist_info}/ itself")

    def _wheel_file(self) -> bytes:
        lines = [
            "Wheel-Version: 1.0",
            f"Generator: pep517_torch {_generator_version()}",
            f"Root-Is-Purelib: {'true' if self.tag == PURE_TAG else 'false'}",
            *(f"Tag: {tag}" for tag in self.tags),
        ]
        return ("\n".join(lines) + "\n").encode()

    def _write_member(
        self, archive: zipfile.ZipFile, arcname: str, source: Path | tuple[bytes, bool]
    ) -> tuple[str, int]:
        info = zipfile.ZipInfo(arcname, date_time=self._date_time)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.create_system = 3  # Unix, so that the mode bits below mean the same everywhere
        hasher = hashlib.sha256()
        size = 0
        if isinstance(source, Path):
            with open(source, "rb") as src:
                status = os.fstat(src.fileno())
                info.external_attr = _file_mode(bool(status.st_mode & 0o111))
                info.file_size = status.st_size  # lets zipfile choose ZIP64 for huge libraries
                with archive.open(info, "w") as dst:
                    while chunk := src.read(_CHUNK):
                        hasher.update(chunk)
                        dst.write(chunk)
                        size += len(chunk)
        else:
            data, executable = source
            info.external_attr = _file_mode(executable)
            archive.writestr(info, data)
            hasher.update(data)
            size = len(data)
        return base64.urlsafe_b64encode(hasher.digest()).rstrip(b"=").decode("ascii"), size

    def _discard(self) -> None:
        if self._output is not None:
            self._output.discard()
            self._output = None


@dataclass(frozen=True)
class Budget:
    """``max-wheel-size``: a wheel over ``limit`` bytes is not written (the check runs on the
    complete temporary file, before it is published); ``notes`` say what a file holds
    (``sm_80 1.2 MiB, sm_90 1.3 MiB``), by its path, for the one line naming the largest
    members."""

    limit: int
    key: str = "max-wheel-size"
    notes: Mapping[Path, str] = field(default_factory=dict)

    def check(self, filename: str, members: Sequence[zipfile.ZipInfo], size: int,
              sources: Mapping[str, Path]) -> None:
        if size <= self.limit:
            return
        largest = sorted(members, key=lambda m: (-m.compress_size, m.filename))[:3]
        notes = {name: self.notes[path] for name, path in sources.items() if path in self.notes}
        named = "; ".join(
            f"{m.filename} {format_size(m.compress_size)}"
            + (f" ({notes[m.filename]})" if m.filename in notes else "")
            for m in largest
        )
        raise OutputError(
            f"{filename} would be {format_size(size)}, over {self.key} ({format_size(self.limit)}):"
            f" not written; largest members: {named}"
        )


def _file_mode(executable: bool) -> int:
    return (stat.S_IFREG | (0o755 if executable else 0o644)) << 16


def _check_arcname(arcname: str) -> None:
    """Refuse names that could land outside the install directory (a bug guard)."""
    parts = arcname.split("/")
    if (
        not arcname
        or "\\" in arcname
        or arcname.startswith("/")
        or PureWindowsPath(arcname).drive
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ValueError(f"{arcname!r} is not a safe relative archive name")


def _generator_version() -> str:
    from .._version import __version__

    return __version__


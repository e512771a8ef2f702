"""A wheel as ``ops`` reads it: the operator table its build record keeps, or its files
unpacked (every name checked, regular files only, a bound on the bytes) for a child to load,
with which of its binaries are extension modules (``PyInit_<name>``) and which are libraries."""

from __future__ import annotations

import re
import stat
import zipfile
from pathlib import Path

from ..errors import ConfigError
from ..ops.listing import Contents
from ..ops.table import OpsTable, TableError, read_table

UNPACK_LIMIT = 16 * 1024**3  # bytes a wheel may unpack to (the largest CUDA wheels are ~4 GiB)
_BINARY = re.compile(r"\.(?:so|pyd|dylib)$|\.so\.")


def _dist_info(archive: zipfile.ZipFile, wheel: Path) -> str:
    folders = {name.split("/", 1)[0] for name in archive.namelist()
               if name.split("/", 1)[0].endswith(".dist-info")}
    if len(folders) != 1:
        raise ConfigError(f"{wheel}: not a wheel (it holds {len(folders)} .dist-info folders)")
    return folders.pop()


def _open(wheel: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as error:
        raise ConfigError(f"{wheel}: not a wheel ({error})") from None


def recorded_table(wheel: Path) -> OpsTable | None:
    """The operator table of the wheel's ``pep517_torch.json`` (None: it keeps none)."""
    from ..distribution.index.record import BUILD_RECORD, RECORD_LIMIT

    import json

    with _open(wheel) as archive:
        name = f"{_dist_info(archive, wheel)}/{BUILD_RECORD}"
        try:
            info = archive.getinfo(name)
        except KeyError:
            return None
        if info.file_size > RECORD_LIMIT:
            raise ConfigError(f"{wheel}: {name} is over {RECORD_LIMIT} bytes, not a build record")
        with archive.open(info) as member:
            data = member.read(RECORD_LIMIT + 1)
    try:
        record = json.loads(data)
        if not isinstance(record, dict) or "ops" not in record:
            return None
        return read_table(record["ops"])
    except (ValueError, TableError) as error:
        raise ConfigError(f"{wheel}: {name} holds no operator table ({error})") from None


def unpack(wheel: Path, folder: Path) -> Contents:
    """The wheel's files under ``folder``; its binaries sorted into modules and libraries."""
    files: list[tuple[str, Path]] = []
    modules: list[tuple[str, str]] = []
    libraries: list[str] = []
    total = 0
    with _open(wheel) as archive:
        dist_info = _dist_info(archive, wheel)
        for info in archive.infolist():
            name = info.filename
            parts = name.split("/")
            if info.is_dir() or parts[0] == dist_info or parts[0].endswith(".data"):
                continue  # metadata, and files installed outside the packages
            if name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts):
                raise ConfigError(f"{wheel}: member {name!r} is not a path inside the wheel")
            mode = info.external_attr >> 16
            if mode and not stat.S_ISREG(mode):
                raise ConfigError(f"{wheel}: member {name!r} is not a regular file")
            total += info.file_size
            if total > UNPACK_LIMIT:
                raise ConfigError(f"{wheel}: unpacks to more than {UNPACK_LIMIT // 1024**3} GiB")
            target = folder.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, target.open("wb") as out:
                while chunk := source.read(1 << 20):
                    out.write(chunk)
            files.append((name, target))
            if _BINARY.search(parts[-1]):
                stem = parts[-1].split(".", 1)[0]
                if _defines(target, b"PyInit_" + stem.encode()):
                    modules.append((".".join([*parts[:-1], stem]), name))
                else:
                    libraries.append(name)
    return Contents(tuple(files), tuple(modules), tuple(libraries))


def _defines(path: Path, symbol: bytes) -> bool:
    """The binary's dynamic string table names ``symbol`` (a module's init function)."""
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile

        with path.open("rb") as stream:
            section = ELFFile(stream).get_section_by_name(".dynstr")
            return section is not None and symbol + b"\0" in section.data()
    except (OSError, ELFError):
        return False

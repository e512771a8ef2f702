"""The device code a linked CUDA library holds: its ``.nv_fatbin`` section, read entry by entry.

nvcc embeds one fatbin per CUDA translation unit (and one per device link) in the host ELF's
``.nv_fatbin`` section: a 16-byte header (magic ``0xBA55ED50``, version, header size, size of
the entries), then entries, each a header and a payload::

    offset  0  u16 kind (1: PTX, 2: cubin)     offset 24  u16 minor, u16 major (format)
    offset  4  u32 header size                 offset 28  u32 arch (90 for sm_90/compute_90)
    offset  8  u64 payload size (padded)       offset 40  u64 flags
    offset 16  u32 compressed size             offset 56  u64 uncompressed size (compressed)

Flags: ``0x2000`` LZ4 and ``0x8000`` zstd compression (``nvcc --compress-mode``),
``0x100000`` an arch-specific target (``sm_90a``), ``0x200000`` a family target (``sm_100f``).
This is the layout cuobjdump lists (the tests compare the two). An uncompressed cubin is an ELF
whose ``.note.nv.tkinfo`` names the toolkit that made it (``release 13.0``): the CUDA version
of what was built, read from the binary.

A leaf (pyelftools only): the compile core reports it in the build summary and the timeline,
the backend derives wheel-variant properties and size notes from it.
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..shipped_runtime.user_line import format_size

MAGIC = 0xBA55ED50
_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # through the uncompressed size (64 bytes)
KIND_PTX, KIND_CUBIN = 1, 2
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000
_RELEASE = re.compile(rb"Cuda compilation tools, release (\d+)\.(\d+)")


@dataclass(frozen=True)
class Entry:
    """One cubin or PTX in a fatbin."""

    ptx: bool
    arch: int  # 90 for sm_90 / compute_90
    suffix: str  # "", "a" (arch-specific) or "f" (family)
    stored: int  # bytes in the file
    size: int  # bytes once decompressed (== stored when not compressed)
    compression: str | None  # None, "lz4" or "zstd"
    release: tuple[int, int] | None  # the toolkit that made a readable cubin, e.g. (13, 0)

    @property
    def name(self) -> str:
        """``sm_90``, ``sm_90a`` (cubins), ``compute_90`` (PTX), as nvcc's -gencode names them."""
        return f"{'compute' if self.ptx else 'sm'}_{self.arch}{self.suffix}"


@dataclass(frozen=True)
class DeviceCode:
    """Everything in one library's fatbins."""

    entries: tuple[Entry, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.entries)

    @property
    def stored(self) -> int:
        return sum(entry.stored for entry in self.entries)

    def by_target(self) -> dict[str, tuple[int, int]]:
        """Target name -> (stored bytes, decompressed bytes), cubins by arch, then PTX."""
        totals: dict[str, tuple[int, int]] = {}
        order = sorted(self.entries, key=lambda e: (e.ptx, e.arch, e.suffix))
        for entry in order:
            stored, size = totals.get(entry.name, (0, 0))
            totals[entry.name] = (stored + entry.stored, size + entry.size)
        return totals

    @property
    def cubin_archs(self) -> tuple[str, ...]:
        """``("80", "90a")``: the archs with machine code, in order."""
        return tuple(dict.fromkeys(
            f"{e.arch}{e.suffix}" for e in sorted(self.entries, key=lambda e: (e.arch, e.suffix))
            if not e.ptx
        ))

    @property
    def ptx_archs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(
            f"{e.arch}{e.suffix}" for e in sorted(self.entries, key=lambda e: (e.arch, e.suffix))
            if e.ptx
        ))

    @property
    def release(self) -> tuple[int, int] | None:
        """The newest toolkit release any readable cubin names (None: none readable)."""
        return max((e.release for e in self.entries if e.release), default=None)

    def describe(self) -> str:
        """``sm_80 1.2 MiB, sm_90 1.3 MiB, PTX compute_90 0.4 MiB`` (stored sizes; a compressed
        target adds what it holds once decompressed)."""
        parts = []
        for name, (stored, size) in self.by_target().items():
            shown = f"{'PTX ' if name.startswith('compute_') else ''}{name} {format_size(stored)}"
            if size != stored:
                shown += f" ({format_size(size)} decompressed)"
            parts.append(shown)
        return ", ".join(parts)

    def to_json(self) -> dict[str, dict[str, int]]:
        """For the timeline: target -> {"bytes": stored, "decompressed": size}."""
        return {name: {"bytes": stored, "decompressed": size}
                for name, (stored, size) in self.by_target().items()}


def read_device_code(path: Path) -> DeviceCode:
    """The fatbin entries of an ELF file (an empty DeviceCode: none, or not an ELF)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with path.open("rb") as stream:
            section = ELFFile(stream).get_section_by_name(".nv_fatbin")
            data = section.data() if section is not None else b""
    except (OSError, ELFError):
        return DeviceCode()
    return DeviceCode(tuple(parse(data)))


def parse(data: bytes) -> Iterable[Entry]:
    """The entries of every fatbin in ``data`` (a ``.nv_fatbin`` section's bytes); fatbins
    follow each other, each aligned to 8 bytes."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        magic, _, header_size, size = _HEADER.unpack_from(data, offset)
        if magic != MAGIC:
            offset += 8
            continue
        position, end = offset + header_size, min(offset + header_size + size, len(data))
        while position + _ENTRY.size <= end:
            fields = _ENTRY.unpack_from(data, position)
            kind, entry_header, payload = fields[0], fields[2], fields[3]
            arch, flags, decompressed = fields[8], fields[11], fields[13]
            if entry_header < _ENTRY.size or kind not in (KIND_PTX, KIND_CUBIN):
                break  # not a layout we know: stop rather than guess
            body = data[position + entry_header:position + entry_header + payload]
            compression = "zstd" if flags & FLAG_ZSTD else "lz4" if flags & FLAG_LZ4 else None
            suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
            if kind == KIND_CUBIN and suffix == "f":
                suffix = ""  # a family target's cubin is its arch's (cuobjdump says sm_100)
            yield Entry(
                ptx=kind == KIND_PTX,
                arch=arch,
                suffix=suffix,
                stored=payload,
                size=decompressed if compression and decompressed else payload,
                compression=compression,
                release=_release(body) if kind == KIND_CUBIN and compression is None else None,
            )
            position += entry_header + payload
        offset = max(end, offset + 8)
        offset += -offset % 8


def _release(cubin: bytes) -> tuple[int, int] | None:
    """The toolkit release in a cubin's ``.note.nv.tkinfo`` (ptxas's or nvlink's)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        note = ELFFile(io.BytesIO(cubin)).get_section_by_name(".note.nv.tkinfo")
        found = _RELEASE.search(note.data()) if note is not None else None
    except (ELFError, ValueError, struct.error):
        return None
    return (int(found.group(1)), int(found.group(2))) if found else None

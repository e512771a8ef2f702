"""The shared libraries an ELF file names (DT_NEEDED): does a built module need torch's CUDA?

A small reader of the dynamic section (64- and 32-bit, either byte order) instead of a
dependency: the packaging layer asks one question of each artifact it ships.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

_DT_NEEDED, _DT_STRTAB, _PT_DYNAMIC, _PT_LOAD = 1, 5, 2, 1

# torch's CUDA libraries and the CUDA runtime: a module linking one needs a CUDA torch of the
# same CUDA major (the variant no version pin can name).
_CUDA_LIBRARY = re.compile(r"^lib(c10_cuda|torch_cuda(_[a-z]+)?|cudart)\.so")


def needed_libraries(path: Path) -> list[str]:
    """The DT_NEEDED names of ``path``; [] for anything that is not a dynamic ELF file."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return []
    wide = data[4] == 2
    order = "<" if data[5] == 1 else ">"
    try:
        return _needed(data, wide, order)
    except (struct.error, IndexError, UnicodeDecodeError):
        return []


def _needed(data: bytes, wide: bool, order: str) -> list[str]:
    if wide:
        phoff, = struct.unpack_from(order + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36)
        header, dyn = order + "IIQQQQQQ", order + "qQ"
    else:
        phoff, = struct.unpack_from(order + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x2A)
        header, dyn = order + "IIIIIIII", order + "iI"
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz): to map DT_STRTAB
    dynamic: tuple[int, int] | None = None
    for index in range(phnum):
        fields = struct.unpack_from(header, data, phoff + index * phentsize)
        if wide:
            kind, _, offset, vaddr, _, filesz = fields[:6]
        else:
            kind, offset, vaddr, _, filesz = fields[:5]
        if kind == _PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif kind == _PT_DYNAMIC:
            dynamic = (offset, filesz)
    if dynamic is None:
        return []
    entries: list[tuple[int, int]] = []
    size = struct.calcsize(dyn)
    for position in range(dynamic[0], dynamic[0] + dynamic[1], size):
        tag, value = struct.unpack_from(dyn, data, position)
        if tag == 0:
            break
        entries.append((tag, value))
    strtab = next((value for tag, value in entries if tag == _DT_STRTAB), None)
    if strtab is None:
        return []
    base = next((offset + strtab - vaddr for vaddr, offset, filesz in loads
                 if vaddr <= strtab < vaddr + filesz), None)
    if base is None:
        return []
    names = []
    for tag, value in entries:
        if tag == _DT_NEEDED:
            end = data.index(b"\0", base + value)
            names.append(data[base + value:end].decode())
    return names


def links_cuda(path: Path) -> bool:
    """Whether ``path`` links libc10_cuda, libtorch_cuda or the CUDA runtime."""
    return any(_CUDA_LIBRARY.match(name) for name in needed_libraries(path))

"""What a linked ELF file needs from others, read with pyelftools (never by parsing ``nm``).

A leaf both the compile core's stable-ABI audit and the distribution layer's manylinux tag use:
the NEEDED libraries, the undefined dynamic symbols with the symbol version (``GLIBC_2.32``)
and library each one binds to, and an object file's undefined symbols (who needs a symbol), read
from its symbol table in bulk.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError


@dataclass(frozen=True)
class Needed:
    """An undefined dynamic symbol: its name, and the version (``GLIBC_2.32``) and library
    (``libc.so.6``) it is bound to, when the link recorded one."""

    name: str
    version: str | None = None
    library: str | None = None


@dataclass(frozen=True)
class DynamicInfo:
    path: Path
    needed_libraries: tuple[str, ...]  # DT_NEEDED, in order
    undefined: tuple[Needed, ...]  # undefined dynamic symbols (weak ones too when asked)


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(4) == b"\x7fELF"
    except OSError:
        return False


def read_dynamic(path: Path, *, weak: bool = False, symbols: bool = True) -> DynamicInfo:
    """The NEEDED libraries and undefined dynamic symbols of ``path``; ``weak``: the weak ones
    too (an import check makes torch's weak: core/postlink/guard_patch.py); without ``symbols``, the
    NEEDED libraries alone (torch's own libraries hold 100,000 dynamic symbols, which
    pyelftools reads one by one: seconds)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection

    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            needed: list[str] = []
            versions: dict[int, tuple[str, str]] = {}  # version index -> (version, library)
            versym = dynsym = None
            for section in elf.iter_sections():
                if isinstance(section, DynamicSection):
                    needed += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
                elif isinstance(section, GNUVerNeedSection):
                    for library, auxiliaries in section.iter_versions():
                        for aux in auxiliaries:
                            versions[aux.entry.vna_other] = (aux.name, library.name)
                elif isinstance(section, GNUVerSymSection):
                    versym = section
                elif section.name == ".dynsym":
                    dynsym = section
            undefined: list[Needed] = []
            for index, symbol in enumerate(dynsym.iter_symbols() if dynsym is not None and symbols else ()):
                if not symbol.name or symbol.entry.st_shndx != "SHN_UNDEF":
                    continue
                if symbol.entry.st_info.bind == "STB_WEAK" and not weak:
                    continue  # __gmon_start__, _ITM_*: optional, absent is fine
                version = library = None
                if versym is not None:
                    number = versym.get_symbol(index).entry.ndx
                    number = number if isinstance(number, int) else 0
                    version, library = versions.get(number & 0x7FFF, (None, None))
                undefined.append(Needed(symbol.name, version, library))
            return DynamicInfo(path, tuple(needed), tuple(undefined))
    except (OSError, ELFError) as exc:
        raise BuildError(f"cannot read {path} as an ELF file: {exc}") from None


def needed_libraries(path: Path) -> list[str]:
    """The DT_NEEDED names of ``path``; [] for anything that is not a readable ELF file."""
    if not is_elf(path):
        return []
    try:
        return list(read_dynamic(path, symbols=False).needed_libraries)
    except BuildError:
        return []


def object_undefined(path: Path) -> frozenset[str]:
    """The undefined symbols of an object file (its ``.symtab``); none for what is not one."""
    try:
        return frozenset(_symtab_undefined(path.read_bytes()))
    except (OSError, struct.error, IndexError, ValueError, OverflowError):
        return frozenset()


# Read with struct, in bulk: a unity TU's object has thousands of COMDAT sections and symbols,
# which pyelftools parses one by one: too slow for every build that explains its tag.
_SECTION = {1: "IIIIIIIIII", 2: "IIQQQQIIQQ"}  # name type flags addr offset size link info ...
_SYMBOL = {1: ("IIIBBH", 5), 2: ("IBBHQQ", 3)}  # the layout and where st_shndx sits in it
_SHT_SYMTAB = 2


def _symtab_undefined(data: bytes) -> list[str]:
    if data[:4] != b"\x7fELF" or data[4] not in _SECTION:
        return []
    width, order = data[4], "<" if data[5] == 1 else ">"
    offset_format, at = (order + "Q", 0x28) if width == 2 else (order + "I", 0x20)
    (shoff,) = struct.unpack_from(offset_format, data, at)
    shentsize, shnum = struct.unpack_from(order + "HH", data, 0x3A if width == 2 else 0x2E)
    if shoff == 0 or shentsize < struct.calcsize(order + _SECTION[width]):
        return []

    def section(index: int) -> tuple[int, ...]:
        return struct.unpack_from(order + _SECTION[width], data, shoff + index * shentsize)

    if shnum == 0:  # extended numbering (>= 0xff00 sections): the count is in section 0's size
        shnum = section(0)[5]
    symtab = next((s for s in map(section, range(shnum)) if s[1] == _SHT_SYMTAB), None)
    if symtab is None:
        return []
    strtab_offset = section(symtab[6])[4]
    layout, shndx_at = _SYMBOL[width]
    table = memoryview(data)[symtab[4]:symtab[4] + symtab[5]]
    table = table[:len(table) - len(table) % struct.calcsize(order + layout)]
    names = []
    for entry in struct.iter_unpack(order + layout, table):
        if entry[shndx_at] == 0 and entry[0]:  # SHN_UNDEF, with a name
            start = strtab_offset + entry[0]
            names.append(data[start:data.index(b"\0", start)].decode("utf-8", "replace"))
    return names


def users(symbol: str, objects: Iterable[Path]) -> list[Path]:
    """The object files among ``objects`` that leave ``symbol`` undefined: who needs it."""
    return [o for o in objects if symbol in object_undefined(o)]


@functools.cache
def _cxa_demangle():  # type: ignore[no-untyped-def]
    import ctypes.util  # here: reading an ELF file (the platform tag) needs no ctypes

    name = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    try:
        function = ctypes.CDLL(name).__cxa_demangle
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_void_p
    function.argtypes = [
        ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_int),
    ]
    return function


@functools.cache
def demangle(symbol: str) -> str:
    """``_ZN3c104impl...`` -> ``c10::impl::...`` (libstdc++'s own demangler); other names as
    they are."""
    function = _cxa_demangle()
    if function is None or not symbol.startswith("_Z"):
        return symbol
    import ctypes

    status = ctypes.c_int()
    pointer = function(symbol.encode(), None, None, ctypes.byref(status))
    if not pointer or status.value != 0:
        return symbol
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        libc = ctypes.CDLL(None)
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free(pointer)

"""The post-link step of a guarded artifact: rewires a linked ELF file so that its import check
(``resources/import_guard.c``, linked in) runs before anything of it touches torch.

A library loads with RTLD_NOW (Python's imports, ctypes): every undefined symbol and every
NEEDED library is resolved before any code of it runs, so a check inside it could never speak
first. Here, in the file as linked:

- every undefined symbol that is not versioned by a library that stays (glibc, libstdc++...)
  becomes weak: one that the running torch lacks resolves to 0 instead of failing the load (the
  symbols that were weak already are listed in the check's block: they may stay unresolved);
- the libraries only a CUDA torch has (``libc10_cuda.so``, ``libtorch_cuda.so``, the CUDA
  runtime, what libtorch_cuda needs) leave DT_NEEDED, with their symbol-version needs: under a
  CUDA torch ``libtorch.so`` (which stays) brings them into the library's scope;
- DT_INIT_ARRAY and DT_FINI_ARRAY hold the check's constructor and destructor alone, which run
  the library's own (its operator registrations) only once the running torch passed;
- ``PyInit_<name>`` enters through the check's wrapper, which raises the ImportError.

Standard library only, run as a script by the link edge of build.ninja
(``python guard_patch.py FILE --drop NAME ... [--pyinit NAME]``); ELF64 little-endian,
x86_64 and aarch64 (:data:`MACHINES`). Anything unexpected is an error naming the file: the
link edge then fails, and no half-patched file is ever renamed into place.
"""

from __future__ import annotations

import mmap
import struct
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

MAGIC = b"pep517_torchGRD1"
MACHINES = {62: ("x86_64", 8), 183: ("aarch64", 1027)}  # e_machine: (name, R_*_RELATIVE)
WEAK_BEFORE_CAPACITY = 256
# struct guard_block of import_guard.c: the u64 fields after the magic, the weak list, the
# three function pointers (guard_init, guard_fini, guard_pyinit)
_FIELDS = ("layout", "self", "init_array", "init_count", "fini_array", "fini_count", "pyinit",
           "dynsym", "dynsym_count", "dynstr", "rela", "rela_count", "jmprel", "jmprel_count",
           "weak_before_count")
_WEAK_LIST_AT = 16 + 8 * len(_FIELDS)
FUNCTIONS_AT = _WEAK_LIST_AT + 4 * WEAK_BEFORE_CAPACITY
BLOCK_SIZE = FUNCTIONS_AT + 3 * 8

DT_NULL, DT_NEEDED, DT_PLTRELSZ, DT_STRTAB, DT_SYMTAB, DT_RELA, DT_RELASZ = 0, 1, 2, 5, 6, 7, 8
DT_PLTREL, DT_JMPREL, DT_INIT_ARRAY, DT_FINI_ARRAY, DT_INIT_ARRAYSZ, DT_FINI_ARRAYSZ = 20, 23, 25, 26, 27, 28
DT_VERSYM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFF0, 0x6FFFFFFE, 0x6FFFFFFF
SHT_DYNSYM, SHT_GNU_VERNEED = 11, 0x6FFFFFFE
STB_GLOBAL, STB_WEAK, STT_TLS = 1, 2, 6
PT_LOAD = 1


class PatchError(Exception):
    """What stops the patch, worded for the build's one line."""


@dataclass
class Report:
    """What a patch did, for tests and the build log."""

    weakened: int = 0
    dropped: list[str] = field(default_factory=list)
    weak_before: list[int] = field(default_factory=list)
    pyinit: bool = False


class _Elf:
    """A linked ELF64 little-endian file in memory, read and written in place."""

    def __init__(self, data: bytearray | mmap.mmap) -> None:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise PatchError("not a 64-bit little-endian ELF file")
        self.data = data
        self.machine = struct.unpack_from("<H", data, 18)[0]
        if self.machine not in MACHINES:
            raise PatchError(f"ELF machine {self.machine} has no import check (x86_64, aarch64 do)")
        phoff, shoff = struct.unpack_from("<QQ", data, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 54)
        self.loads = []  # (vaddr, offset, filesz)
        for index in range(phnum):
            kind, _, offset, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + index * phentsize)
            if kind == PT_LOAD:
                self.loads.append((vaddr, offset, filesz))
        self.sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        self.section_headers = shoff, shentsize
        dynamic = [s for s in self.sections if s[1] == 6]
        if not dynamic:
            raise PatchError("no dynamic section (not a shared library)")
        self.dynamic_offset, self.dynamic_size = dynamic[0][4], dynamic[0][5]
        self.dynamic = self._read_dynamic()
        self._relative: dict[int, int] | None = None

    def _read_dynamic(self) -> list[tuple[int, int]]:
        entries = []
        for at in range(self.dynamic_offset, self.dynamic_offset + self.dynamic_size, 16):
            tag, value = struct.unpack_from("<qQ", self.data, at)
            if tag == DT_NULL:
                break
            entries.append((tag, value))
        return entries

    def write_dynamic(self) -> None:
        if (len(self.dynamic) + 1) * 16 > self.dynamic_size:
            raise PatchError("the dynamic section has no room")
        at = self.dynamic_offset
        for tag, value in self.dynamic:
            struct.pack_into("<qQ", self.data, at, tag, value)
            at += 16
        self.data[at:self.dynamic_offset + self.dynamic_size] = bytes(self.dynamic_offset + self.dynamic_size - at)

    def tag(self, tag: int) -> int | None:
        return next((value for t, value in self.dynamic if t == tag), None)

    def set_tag(self, tag: int, value: int) -> None:
        index = next(i for i, (t, _) in enumerate(self.dynamic) if t == tag)
        self.dynamic[index] = (tag, value)

    def offset(self, vaddr: int) -> int:
        for start, offset, size in self.loads:
            if start <= vaddr < start + size:
                return offset + vaddr - start
        raise PatchError(f"address {vaddr:#x} is in no loaded segment")

    def vaddr(self, offset: int) -> int:
        for start, file_offset, size in self.loads:
            if file_offset <= offset < file_offset + size:
                return start + offset - file_offset
        raise PatchError(f"file offset {offset:#x} is in no loaded segment")

    def string(self, offset: int) -> str:
        start = self.offset(self.tag(DT_STRTAB) or 0) + offset
        end = self.data.find(b"\0", start)
        if end < 0:
            raise PatchError("a dynamic string runs past the end of the file")
        return self.data[start:end].decode("utf-8", "replace")

    def relocations(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(address, count) of DT_RELA and of DT_JMPREL (Elf64_Rela, 24 bytes each)."""
        if self.tag(DT_JMPREL) is not None and self.tag(DT_PLTREL) not in (None, DT_RELA):
            raise PatchError("PLT relocations are not RELA")
        return ((self.tag(DT_RELA) or 0, (self.tag(DT_RELASZ) or 0) // 24),
                (self.tag(DT_JMPREL) or 0, (self.tag(DT_PLTRELSZ) or 0) // 24))

    def link_value(self, vaddr: int) -> int:
        """The address a pointer at ``vaddr`` holds once relocated: its RELATIVE relocation's
        addend, or (RELR, REL) the word the file holds there."""
        if self._relative is None:
            relative, self._relative = MACHINES[self.machine][1], {}
            for address, count in self.relocations():
                start = self.offset(address) if count else 0
                for offset, info, addend in struct.iter_unpack("<QQq", self.data[start:start + 24 * count]):
                    if info & 0xFFFFFFFF == relative:
                        self._relative[offset] = addend
        if vaddr in self._relative:
            return self._relative[vaddr]
        return int(struct.unpack_from("<Q", self.data, self.offset(vaddr))[0])


def _symbol_versions(elf: _Elf) -> dict[int, str]:
    """Version index (vna_other) -> the library (vn_file) it is needed from."""
    libraries: dict[int, str] = {}
    address, count = elf.tag(DT_VERNEED), elf.tag(DT_VERNEEDNUM) or 0
    at = elf.offset(address) if address else 0
    for _ in range(count):
        _, aux_count, file, aux, following = struct.unpack_from("<HHIII", elf.data, at)
        entry = at + aux
        for _ in range(aux_count):
            _, _, other, _, aux_next = struct.unpack_from("<IHHII", elf.data, entry)
            libraries[other] = elf.string(file)
            entry += aux_next
        at += following
    return libraries


def _drop_version_needs(elf: _Elf, dropped: set[str]) -> None:
    """Rewrite .gnu.version_r without the entries of ``dropped`` libraries (in place: it only
    shrinks), and DT_VERNEEDNUM and the section's count with it."""
    address, count = elf.tag(DT_VERNEED), elf.tag(DT_VERNEEDNUM) or 0
    if not address or not count:
        return
    start = at = elf.offset(address)
    end = start + next((s[5] for s in elf.sections if s[1] == SHT_GNU_VERNEED), 0)
    kept: list[tuple[bytes, list[bytes]]] = []
    for _ in range(count):
        header = bytes(elf.data[at:at + 16])
        _, aux_count, file, aux, following = struct.unpack("<HHIII", header)
        auxiliaries, entry = [], at + aux
        for _ in range(aux_count):
            auxiliaries.append(bytes(elf.data[entry:entry + 16]))
            entry += struct.unpack_from("<I", elf.data, entry + 12)[0]
        if elf.string(file) not in dropped:
            kept.append((header, auxiliaries))
        at += following
    if len(kept) == count:
        return
    out = bytearray()
    for number, (header, auxiliaries) in enumerate(kept):
        version, _, file, _, _ = struct.unpack("<HHIII", header)
        size = 16 + 16 * len(auxiliaries)
        following = size if number + 1 < len(kept) else 0
        out += struct.pack("<HHIII", version, len(auxiliaries), file, 16, following)
        for index, auxiliary in enumerate(auxiliaries):
            out += auxiliary[:12] + struct.pack("<I", 16 if index + 1 < len(auxiliaries) else 0)
    elf.data[start:end] = out + bytes(end - start - len(out))
    elf.set_tag(DT_VERNEEDNUM, len(kept))
    shoff, shentsize = elf.section_headers
    for index, section in enumerate(elf.sections):
        if section[1] == SHT_GNU_VERNEED:
            struct.pack_into("<I", elf.data, shoff + index * shentsize + 44, len(kept))


def _find_block(elf: _Elf) -> int:
    """The block's file offset: its magic, once, in the writable data (a search of the data
    sections alone: CUDA libraries run to hundreds of MB of device code)."""
    found = []
    for _, kind, flags, _, offset, size, *_ in elf.sections:
        if kind == 1 and flags & 0x1:  # SHT_PROGBITS, SHF_WRITE
            at = elf.data.find(MAGIC, offset, offset + size)
            while at >= 0:
                found.append(at)
                at = elf.data.find(MAGIC, at + 1, offset + size)
    if len(found) != 1:
        raise PatchError("the import check's block is missing or not unique")
    return found[0]


def _dynsym_count(elf: _Elf) -> int:
    for section in elf.sections:
        if section[1] == SHT_DYNSYM:
            return section[5] // 24
    raise PatchError("no .dynsym section")


def _section_of(elf: _Elf, vaddr: int) -> int:
    for index, section in enumerate(elf.sections):
        if section[3] <= vaddr < section[3] + section[5] and section[2] & 0x4:  # SHF_EXECINSTR
            return index
    raise PatchError(f"address {vaddr:#x} is in no code section")


def _weaken(elf: _Elf, dropped: set[str], report: Report) -> int:
    """Undefined symbols -> weak (see the module's docstring); their versions of dropped
    libraries -> unversioned. Returns the .dynsym count."""
    libraries = _symbol_versions(elf)
    count = _dynsym_count(elf)
    symtab = elf.offset(elf.tag(DT_SYMTAB) or 0)
    versym_address = elf.tag(DT_VERSYM)
    versym = elf.offset(versym_address) if versym_address else None
    for index in range(1, count):
        at = symtab + 24 * index
        info, shndx = elf.data[at + 4], struct.unpack_from("<H", elf.data, at + 6)[0]
        if shndx != 0:
            continue
        version = struct.unpack_from("<H", elf.data, versym + 2 * index)[0] & 0x7FFF if versym else 1
        library = libraries.get(version)
        if library in dropped:
            struct.pack_into("<H", elf.data, versym + 2 * index, 1)  # type: ignore[operator]
        if info >> 4 == STB_WEAK:
            report.weak_before.append(index)
        elif info >> 4 == STB_GLOBAL and info & 0xF != STT_TLS and (version <= 1 or library in dropped):
            elf.data[at + 4] = (STB_WEAK << 4) | (info & 0xF)
            report.weakened += 1
    return count


def _redirect(elf: _Elf, array: int, size: int, function: int, what: str) -> tuple[int, int]:
    """Point DT_<what>_ARRAY at the entry of ``function`` alone: (the array, its count)."""
    address, length = elf.tag(array), elf.tag(size)
    if address is None or not length:
        raise PatchError(f"no {what} array holds the import check")
    for index in range(length // 8):
        if elf.link_value(address + 8 * index) == function:
            elf.set_tag(array, address + 8 * index)
            elf.set_tag(size, 8)
            return address, length // 8
    raise PatchError(f"the import check is not among the {what} functions")


def _wrap_pyinit(elf: _Elf, name: str, wrapper: int, count: int) -> int:
    """Point the dynamic symbol ``name`` at ``wrapper``: the address it had (0: none)."""
    symtab = elf.offset(elf.tag(DT_SYMTAB) or 0)
    wanted = name.encode()
    for index in range(1, count):
        at = symtab + 24 * index
        st_name, _, _, shndx, value = struct.unpack_from("<IBBHQ", elf.data, at)
        if shndx != 0 and value and elf.string(st_name).encode() == wanted:
            struct.pack_into("<HQQ", elf.data, at + 6, _section_of(elf, wrapper), wrapper, 0)
            return int(value)
    return 0


def patch(data: bytearray | mmap.mmap, drop: Iterable[str], pyinit: str | None,
          bringer: str = "libtorch.so") -> Report:
    """Rewire ``data`` (a linked shared library) in place; ``drop``: NEEDED names only a CUDA
    torch has, which ``bringer`` (NEEDED, it stays) brings under such a torch; ``pyinit``: the
    module's init function to wrap."""
    elf = _Elf(data)
    report = Report()
    block = _find_block(elf)
    fields = dict(zip(_FIELDS, struct.unpack_from(f"<{len(_FIELDS)}Q", data, block + 16)))
    if fields["layout"] != 1 or fields["self"] != 0:
        raise PatchError("the import check is patched already, or of another layout")
    block_vaddr = elf.vaddr(block)
    init, fini, wrapper = (elf.link_value(block_vaddr + FUNCTIONS_AT + 8 * i) for i in range(3))
    dropped = {elf.string(value) for tag, value in elf.dynamic if tag == DT_NEEDED} & set(drop)
    needed = [elf.string(value) for tag, value in elf.dynamic if tag == DT_NEEDED]
    if dropped and bringer not in needed:
        raise PatchError(f"it needs {sorted(dropped)[0]} but not {bringer}, which would bring it")
    count = _weaken(elf, dropped, report)
    _drop_version_needs(elf, dropped)
    elf.dynamic = [(t, v) for t, v in elf.dynamic if not (t == DT_NEEDED and elf.string(v) in dropped)]
    report.dropped = [name for name in needed if name in dropped]
    fields["init_array"], fields["init_count"] = _redirect(elf, DT_INIT_ARRAY, DT_INIT_ARRAYSZ, init, "init")
    fields["fini_array"], fields["fini_count"] = _redirect(elf, DT_FINI_ARRAY, DT_FINI_ARRAYSZ, fini, "fini")
    fields["pyinit"] = _wrap_pyinit(elf, pyinit, wrapper, count) if pyinit else 0
    report.pyinit = bool(fields["pyinit"])
    (fields["rela"], fields["rela_count"]), (fields["jmprel"], fields["jmprel_count"]) = elf.relocations()
    fields.update(self=block_vaddr, dynsym=elf.tag(DT_SYMTAB) or 0, dynsym_count=count,
                  dynstr=elf.tag(DT_STRTAB) or 0, weak_before_count=len(report.weak_before))
    struct.pack_into(f"<{len(_FIELDS)}Q", data, block + 16, *(fields[name] for name in _FIELDS))
    weak = report.weak_before[:WEAK_BEFORE_CAPACITY]
    struct.pack_into(f"<{len(weak)}I", data, block + _WEAK_LIST_AT, *weak)
    elf.write_dynamic()
    return report


def patch_file(path: str, drop: Sequence[str], pyinit: str | None) -> Report:
    """Patch ``path`` in place, through a mapping: only the pages it changes are touched (the
    link edge patches a file of its own, renamed into place once patched)."""
    with open(path, "r+b") as file, mmap.mmap(file.fileno(), 0) as data:
        report = patch(data, drop, pyinit)  # type: ignore[arg-type]
        data.flush()
    return report


def main(argv: Sequence[str]) -> int:
    """``guard_patch.py FILE [--drop NAME]... [--pyinit NAME]``"""
    path, drop, pyinit = argv[0], [], None
    rest = list(argv[1:])
    while rest:
        option, value = rest.pop(0), rest.pop(0)
        if option == "--drop":
            drop.append(value)
        elif option == "--pyinit":
            pyinit = value
        else:
            raise PatchError(f"unknown option {option}")
    patch_file(path, drop, pyinit)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (PatchError, OSError, struct.error, IndexError, ValueError) as exc:
        target = sys.argv[1] if len(sys.argv) > 1 else "(no file given)"
        sys.stderr.write(f"pep517_torch: error: cannot add the import check to {target}: {exc}\n")
        sys.exit(1)

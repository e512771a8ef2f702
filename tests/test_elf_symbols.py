"""abi/elf.object_undefined: an object file's undefined symbols, read in bulk with struct, agree
with pyelftools' reading on every shape the assembler makes: 64- and 32-bit, a few sections or
more than an ELF header can count, and nothing at all for what is no object file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from pep517_torch.abi import elf
from tests.conftest import write

pytestmark = pytest.mark.skipif(shutil.which("as") is None, reason="needs GNU as")


def assemble(directory: Path, name: str, text: str, *flags: str) -> Path:
    obj = directory / f"{name}.o"
    subprocess.run(["as", *flags, str(write(directory / f"{name}.s", text)), "-o", str(obj)],
                   check=True)
    return obj


def pyelftools_undefined(obj: Path) -> frozenset[str]:
    with obj.open("rb") as stream:
        table = ELFFile(stream).get_section_by_name(".symtab")
        return frozenset(s.name for s in table.iter_symbols()
                         if s.name and s.entry.st_shndx == "SHN_UNDEF")


CALLS = ".text\n.globl mine\nmine:\n\tcall external_one\n\tcall external_two\n\tret\n"


@pytest.mark.parametrize("flags", [(), ("--32",)], ids=["elf64", "elf32"])
def test_undefined_symbols_match_pyelftools(tmp_path: Path, flags: tuple[str, ...]) -> None:
    obj = assemble(tmp_path, "calls", CALLS, *flags)
    assert elf.object_undefined(obj) == {"external_one", "external_two"}
    assert elf.object_undefined(obj) == pyelftools_undefined(obj)


def test_more_sections_than_the_header_counts(tmp_path: Path) -> None:
    # past 0xff00 sections (a unity TU's COMDAT groups can get there) e_shnum is 0 and the
    # count lives in section 0: a reader that trusts e_shnum finds no symbol table at all
    sections = "".join(f'.section .text.f{i},"ax",@progbits\n\tnop\n' for i in range(66_000))
    obj = assemble(tmp_path, "many", sections + CALLS)
    with obj.open("rb") as stream:
        assert ELFFile(stream).header.e_shnum == 0
    assert elf.object_undefined(obj) == {"external_one", "external_two"}


@pytest.mark.parametrize("content", [b"", b"\x7fELF", b"\x7fELF\x02\x01" + b"\xff" * 100,
                                     b"not an object at all\n"])
def test_what_is_no_object_file_has_no_symbols(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "odd.o"
    path.write_bytes(content)
    assert elf.object_undefined(path) == frozenset()
    assert elf.object_undefined(tmp_path / "missing.o") == frozenset()


def test_a_truncated_object_has_no_symbols_rather_than_an_error(tmp_path: Path) -> None:
    data = assemble(tmp_path, "calls", CALLS).read_bytes()
    for size in range(0, len(data), 97):
        (tmp_path / "cut.o").write_bytes(data[:size])
        assert elf.object_undefined(tmp_path / "cut.o") <= {"external_one", "external_two"}


def test_a_header_that_lies_about_its_sections_is_read_as_no_object(tmp_path: Path) -> None:
    data = bytearray(assemble(tmp_path, "calls", CALLS).read_bytes())
    data[0x3A:0x3E] = b"\0\0\0\0"  # e_shentsize 0 and e_shnum 0: section 0 repeated forever
    (tmp_path / "lying.o").write_bytes(bytes(data))
    assert elf.object_undefined(tmp_path / "lying.o") == frozenset()


def test_needed_libraries_read_the_dynamic_section_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's libtorch_cpu.so has ~100,000 dynamic symbols: its NEEDED list (the import check
    reads it on every build under a CUDA torch) must not walk them one by one."""
    from pep517_torch.core.toolchain.tools import find_torch

    library = find_torch().library_dir / "libtorch_cpu.so"
    full = elf.read_dynamic(library)
    assert len(full.undefined) > 1000 and "libc10.so" in full.needed_libraries
    alone = elf.read_dynamic(library, symbols=False)
    assert alone.needed_libraries == full.needed_libraries and alone.undefined == ()
    from elftools.elf.sections import SymbolTableSection

    def walked(*_: object) -> None:
        raise AssertionError("needed_libraries walked the dynamic symbols")

    monkeypatch.setattr(SymbolTableSection, "iter_symbols", walked)
    assert elf.needed_libraries(library) == list(full.needed_libraries)

"""What a C++ compiler's or nvcc's flag list says, read one way for every check.

A flag list is single arguments (never shell-split again); an option's value is attached
(``-DX``, ``-std=c++20``, ``--define-macro=X``) or the next argument (``-D X``, ``-arch sm_80``).
On top of that: which GPU architectures it chooses (``core/cuda/arch_flags.py``), which macros it defines
and undefines, also through the options that hand arguments on to the preprocessor or the host
compiler (gcc's ``-Wp,`` and ``-Xpreprocessor``, clang's ``-Xclang``, nvcc's ``-Xcompiler`` and
``--compiler-options``, whose values nvcc splits at commas and spaces), which files it reads
more options from (``@file``, nvcc's ``--options-file``), and which C++ standard it asks for.

A header forced in with ``-include``/``-imacros`` may define or undefine anything, as a source
may: what it says is the source's business, not the flags'.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# nvcc options that choose GPU architectures.
ARCH_OPTIONS = frozenset(
    {"-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code"}
)
# Options whose value may be the next argument (so "-Xcompiler -arch" style values are not
# mistaken for options); nvcc's and gcc's.
VALUE_OPTIONS = ARCH_OPTIONS | frozenset(
    {
        "-Xcompiler", "--compiler-options", "-Xlinker", "--linker-options", "-Xptxas",
        "--ptxas-options", "-Xnvlink", "--nvlink-options", "-Xfatbin", "--fatbin-options",
        "-Xarchive", "--archive-options", "-Xcudafe", "-ccbin", "--compiler-bindir", "-o",
        "--output-file", "-I", "--include-path", "-isystem", "--system-include", "-include",
        "--pre-include", "-D", "--define-macro", "-U", "--undefine-macro", "-L",
        "--library-path", "-l", "--library", "-x", "--x", "-std", "--std", "--options-file",
        "-optf", "-Xpreprocessor", "-Xclang", "-Xassembler", "-imacros", "-iquote",
        "-idirafter", "-iprefix", "-isysroot", "-MF", "-MT", "-MQ", "--param",
    }
)
_ATTACHED = ("-D", "-U", "-I", "-L", "-l")  # -DX: the value follows the option's letters
_DEFINE = frozenset({"-D", "--define-macro"})
_UNDEFINE = frozenset({"-U", "--undefine-macro"})
_HOST = frozenset({"-Xcompiler", "--compiler-options"})  # nvcc: arguments for the host compiler
_PREPROCESSOR = frozenset({"-Xpreprocessor", "-Xclang"})
_OPTIONS_FILE = frozenset({"--options-file", "-optf"})
_STD = frozenset({"-std", "--std"})


@dataclass(frozen=True)
class Option:
    """One option of a flag list: where it starts, its name, its value (None: none given)."""

    index: int
    name: str
    value: str | None


def options(flags: Sequence[str]) -> list[Option]:
    """``flags`` as options, each with its value (attached or the next argument)."""
    found: list[Option] = []
    index = 0
    while index < len(flags):
        flag = flags[index]
        name, equals, value = flag.partition("=")
        if flag in VALUE_OPTIONS:
            has_value = index + 1 < len(flags)
            found.append(Option(index, flag, flags[index + 1] if has_value else None))
            index += 2 if has_value else 1
            continue
        if equals and name in VALUE_OPTIONS:
            found.append(Option(index, name, value))
        elif flag.startswith(_ATTACHED) and len(flag) > 2:
            found.append(Option(index, flag[:2], flag[2:]))
        else:
            found.append(Option(index, flag, None))
        index += 1
    return found


@dataclass(frozen=True)
class Macro:
    """A macro a flag list defines (``value``: None when given without one) or undefines;
    ``index`` is the argument that says so (an ``-Xcompiler`` or ``-Wp,`` one, if it is)."""

    index: int
    name: str
    value: str | None
    undefine: bool = False


@dataclass(frozen=True)
class Macros:
    """What a flag list does to macros, and the arguments naming files it reads options from
    (what those say is unknown)."""

    macros: tuple[Macro, ...]
    option_files: tuple[int, ...]

    def named(self, name: str) -> list[Macro]:
        return [macro for macro in self.macros if macro.name == name]

    def values(self, name: str) -> list[str | None]:
        """The value of each define of ``name`` (None: defined without one)."""
        return [macro.value for macro in self.named(name) if not macro.undefine]


def macros(flags: Sequence[str], *, nvcc: bool = False) -> Macros:
    """The macros ``flags`` (an nvcc command's when ``nvcc``) define and undefine."""
    found: list[Macro] = []
    files: list[int] = []
    _read(list(enumerate(flags)), nvcc, found, files)
    return Macros(tuple(found), tuple(dict.fromkeys(files)))


def _read(args: list[tuple[int, str]], nvcc: bool, found: list[Macro], files: list[int]) -> None:
    origin = [where for where, _ in args]
    handed_on: list[tuple[int, str]] = []  # for the host compiler or the preprocessor
    for option in options([flag for _, flag in args]):
        where, name, value = origin[option.index], option.name, option.value
        if name in _DEFINE or name in _UNDEFINE:
            for item in (value.split(",") if nvcc else [value]) if value is not None else ():
                macro, equals, text = item.partition("=")
                found.append(Macro(where, macro.strip(), text if equals else None, name in _UNDEFINE))
        elif nvcc and name in _HOST and value:
            handed_on += [(where, arg) for arg in re.split(r"[,\s]+", value) if arg]
        elif name.startswith("-Wp,"):
            handed_on += [(where, arg) for arg in name.split(",")[1:] if arg]
        elif name in _PREPROCESSOR and value:
            handed_on.append((where, value))
        elif name.startswith("@") or name in _OPTIONS_FILE:
            files.append(where)
    if handed_on:
        _read(handed_on, False, found, files)


# ------------------------------------------------------------------------- C++ standards

# -std values as __cplusplus: gcc's and clang's spellings (GNU dialects too), nvcc's.
_STANDARDS = {
    "98": 199711, "03": 199711, "0x": 201103, "11": 201103, "1y": 201402, "14": 201402,
    "1z": 201703, "17": 201703, "2a": 202002, "20": 202002, "2b": 202302, "23": 202302,
    "2c": 202400, "26": 202400,
}
_STD_VALUE = re.compile(r"(?:c|gnu)\+\+(\w\w)")


def standard_name(cplusplus: int) -> str:
    """``202002`` -> ``C++20``."""
    year = next((y for y, value in _STANDARDS.items() if value == cplusplus and y.isdigit()), None)
    return f"C++{year}" if year is not None else f"__cplusplus {cplusplus}"


@dataclass(frozen=True)
class Standard:
    """A ``-std`` a flag list asks for: the argument it starts at, as given, as __cplusplus."""

    index: int
    flag: str
    cplusplus: int | None  # None: a value this reading does not know (left to the compiler)


def requested_standard(flags: Sequence[str], *, nvcc: bool = False) -> Standard | None:
    """The C++ standard ``flags`` ask for (the last ``-std`` wins, as with the compilers; an
    nvcc command's own, else its host compiler's through ``-Xcompiler``), or None."""
    chosen: Standard | None = None
    host: list[tuple[int, str]] = []
    for option in options(flags):
        if option.name in _STD and option.value is not None:
            given = flags[option.index]
            shown = given if "=" in given else f"{given} {option.value}"
            match = _STD_VALUE.fullmatch(option.value)
            chosen = Standard(option.index, shown, _STANDARDS.get(match[1]) if match else None)
        elif nvcc and option.name in _HOST and option.value:
            host += [(option.index, arg) for arg in re.split(r"[,\s]+", option.value) if arg]
    if chosen is None and host:
        inner = requested_standard([arg for _, arg in host])
        if inner is not None:
            chosen = Standard(host[inner.index][0], inner.flag, inner.cplusplus)
    return chosen

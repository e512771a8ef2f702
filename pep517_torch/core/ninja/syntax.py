"""Escaping for the two languages a build.ninja line is read in: ninja's, then the shell's.

ninja runs every command through ``/bin/sh -c``, and substitutes ``$in``/``$out`` verbatim, so
a file named ``$(touch x).cpp`` would execute. Commands here therefore never use ``$in`` or
``$out`` for user paths: each edge gets pre-quoted variables instead.

Not the ``ninja`` package's own ``ninja_syntax``: its ``escape_path`` leaves a lone ``$`` as it
is (``a$b.cpp`` would read as the variable ``$b``), knows nothing of ``|`` (which starts a build
line's implicit inputs) or of characters no line can hold, and its writer wraps long lines with
``$`` continuations, where core/compile_record.py reads one build line per edge.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable


_UNWRITABLE = {"\n": "a newline", "\r": "a carriage return", "\0": "a NUL character"}


def unwritable_character(text: str) -> str | None:
    """What in ``text`` no build.ninja line (and no command-line argument) can hold, as words
    for an error message; None when it can be written. The config layer and the JIT refuse
    such values by name; :func:`_refuse_newline` is the writer's last-resort guard. A name
    that is not UTF-8 (Python keeps each undecodable byte as a lone surrogate) cannot be
    written either: build.ninja, the compile database and the ledger are UTF-8 text."""
    if _SUSPECT.search(text) is None:  # one C call for the usual text (the JIT's warm path)
        return None
    undecodable = _UNDECODABLE.search(text)
    if undecodable is not None:
        return f"{_as_bytes(undecodable[0])}, which is not UTF-8 (build files are UTF-8 text)"
    return next((name for char, name in _UNWRITABLE.items() if char in text), None)


def shown(text: str) -> str:
    """``text`` as an error message shows it: its repr, or its bytes' where it is not UTF-8."""
    if _UNDECODABLE.search(text) is None:
        return repr(text)
    try:
        return repr(os.fsencode(text))
    except UnicodeError:  # a surrogate no file name decodes to
        return ascii(text)


def _as_bytes(surrogate: str) -> str:
    try:
        return f"the byte {os.fsencode(surrogate)!r}"
    except UnicodeError:
        return f"the character {ascii(surrogate)}"


# ninja's build lines have no escape for "|" (it starts the implicit inputs): a path holding one
# names another file. Control characters are refused with it: ninja's reader of compiler
# dependency files ends a path at each (a file named with one is never up to date), and no one
# names a file with them on purpose. ninja (1.11; 1.13 still for * ; < > ^ `) misreads some
# printable characters in depfiles as well; those build correctly (tests/test_hardening.py builds
# a project named with ' " ; &) and are recompiled on every build: see docs/guarantees.md.
DEPFILE_REBUILDS = frozenset("&'*;<>?^`\"")
_SUSPECT = re.compile("[\x00-\x1f\x7f|\ud800-\udfff]")  # whatever either function below could object to
_UNDECODABLE = re.compile("[\ud800-\udfff]")


def unnameable_character(path: str) -> str | None:
    """What in ``path`` keeps ninja from naming it as a build input or output, as words for an
    error message; else None."""
    if _SUSPECT.search(path) is None:
        return None
    problem = unwritable_character(path)
    if problem is not None:
        return problem
    if "|" in path:
        return "'|', which ninja reads as the start of a build line's implicit inputs"
    bad = re.search("[\x01-\x1f\x7f]", path)
    if bad is not None:
        return f"the control character {bad[0]!r}, which ninja's reader of dependency files splits at"
    return None


def _refuse_newline(text: str) -> None:
    problem = unwritable_character(text)
    if problem is not None:
        raise ValueError(f"{problem} cannot be written into build.ninja: {text!r}")


def escape_path(path: str) -> str:
    """A path as it appears in a ``build`` line (outputs and inputs)."""
    _refuse_newline(path)
    if "|" in path:
        raise ValueError(f"'|' cannot be written into a build line: {path!r}")
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def escape_value(text: str) -> str:
    """Text as the value of a variable binding (only ``$`` is special there)."""
    _refuse_newline(text)
    return text.replace("$", "$$")


def shell_args(args: Iterable[str]) -> str:
    """Arguments quoted for ``sh -c`` and escaped for ninja: each stays exactly one argument."""
    import shlex  # planning only: the JIT's warm path imports this module too

    return escape_value(" ".join(shlex.quote(str(a)) for a in args))


class NinjaWriter:
    """Collects lines of a build.ninja; ``text()`` returns the file's content."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def comment(self, text: str) -> None:
        self._lines.extend(f"# {line}" for line in text.splitlines())

    def newline(self) -> None:
        self._lines.append("")

    def variable(self, name: str, value: str, indent: int = 0) -> None:
        self._lines.append(f"{'  ' * indent}{name} = {value}".rstrip())

    def pool(self, name: str, depth: int) -> None:
        self._lines += [f"pool {name}", f"  depth = {depth}"]

    def rule(self, name: str, **bindings: str) -> None:
        self._lines.append(f"rule {name}")
        for key, value in bindings.items():
            self.variable(key, value, indent=1)

    def build(
        self,
        outputs: list[str],
        rule: str,
        inputs: Iterable[str] = (),
        *,
        implicit: Iterable[str] = (),
        order_only: Iterable[str] = (),
        variables: dict[str, str] | None = None,
    ) -> None:
        line = f"build {' '.join(map(escape_path, outputs))}: {rule}"
        line += "".join(f" {escape_path(p)}" for p in inputs)
        implicit, order_only = list(implicit), list(order_only)
        if implicit:
            line += " | " + " ".join(map(escape_path, implicit))
        if order_only:
            line += " || " + " ".join(map(escape_path, order_only))
        self._lines.append(line)
        for key, value in (variables or {}).items():
            self.variable(key, value, indent=1)

    def default(self, targets: Iterable[str]) -> None:
        self._lines.append("default " + " ".join(map(escape_path, targets)))

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"

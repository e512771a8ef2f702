"""A small, deterministic TOML writer with comments (tables, dotted keys, readable arrays)."""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
WIDTH = 96
ESCAPES = {
    "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\",
}


def key(part: str) -> str:
    return part if BARE_KEY.fullmatch(part) else string(part)


def dotted(parts: tuple[str, ...]) -> str:
    return ".".join(key(part) for part in parts)


def _control(ch: str) -> bool:
    return ord(ch) < 0x20 or ord(ch) == 0x7F


def _escaped(value: str, keep_newlines: bool) -> str:
    out = []
    for ch in value:
        if keep_newlines and ch == "\n":
            out.append(ch)
        elif ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif _control(ch):
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def string(value: str) -> str:
    """A literal string when that reads better (backslashes, no quotes), else a basic one."""
    if "\\" in value and "'" not in value and not any(_control(ch) for ch in value):
        return f"'{value}'"
    return '"' + _escaped(value, keep_newlines=False) + '"'


def multiline_string(value: str) -> str:
    return '"""\n' + _escaped(value, keep_newlines=True) + '"""'


def value(item: Any, indent: int = 0) -> str:
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, float):
        if math.isnan(item):
            return "nan"
        return repr(item) if math.isfinite(item) else ("inf" if item > 0 else "-inf")
    if isinstance(item, str):
        return multiline_string(item) if "\n" in item and len(item) > 60 else string(item)
    if isinstance(item, (list, tuple)):
        parts = [value(x, indent + 4) for x in item]
        inline = "[" + ", ".join(parts) + "]"
        if len(inline) + indent <= WIDTH - 20 and "\n" not in inline:
            return inline
        pad = " " * (indent + 4)
        return "[\n" + "".join(f"{pad}{p},\n" for p in parts) + " " * indent + "]"
    if isinstance(item, dict):
        if not item:
            return "{}"
        return "{ " + ", ".join(f"{key(k)} = {value(v, indent)}" for k, v in item.items()) + " }"
    raise TypeError(f"cannot write {type(item).__name__} as TOML")


@dataclass
class Entry:
    keys: tuple[str, ...]
    value: Any
    comments: list[str] = field(default_factory=list)


@dataclass
class Table:
    """``[name]`` (or ``[[name]]``) with entries; ``disabled`` tables are written commented."""

    name: tuple[str, ...]
    entries: list[Entry] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    array: bool = False
    disabled: bool = False

    def add(self, keys: str | tuple[str, ...], item: Any, *comments: str) -> None:
        parts = (keys,) if isinstance(keys, str) else keys
        self.entries.append(Entry(parts, item, list(comments)))


def comment_lines(text: str) -> list[str]:
    """``text`` as wrapped comment lines; a "- " item gets a hanging indent."""
    hanging = "#   " if text.startswith(("- ", "  ")) else "# "
    return textwrap.wrap(text, WIDTH, initial_indent="# ", subsequent_indent=hanging,
                         break_on_hyphens=False, break_long_words=False) or ["#"]


def render(tables: list[Table], *, enable_disabled: bool = False) -> str:
    """The TOML text; ``enable_disabled`` writes disabled tables live (for checking them)."""
    blocks: list[str] = []
    for table in tables:
        lines: list[str] = []
        for text in table.comments:
            lines += comment_lines(text)
        body: list[str] = []
        header = dotted(table.name)
        body.append(f"[[{header}]]" if table.array else f"[{header}]")
        for entry in table.entries:
            for text in entry.comments:
                body += comment_lines(text)
            rendered = f"{dotted(entry.keys)} = {value(entry.value)}"
            body += rendered.split("\n")
        if table.disabled and not enable_disabled:
            body = [line if line.startswith("#") else f"# {line}".rstrip() for line in body]
        blocks.append("\n".join(lines + body))
    return "\n\n".join(blocks) + "\n"

"""Merging generated tables into an existing pyproject.toml, keeping its other tables as written."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...config.pyproject import tomllib
from ...errors import MigrateError

REPLACED_ROOTS = ("build-system", "project")
KEY_PART = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*(\.|$)""")


@dataclass
class Block:
    """A table header and the lines up to the next one (None: the lines before any header)."""

    name: tuple[str, ...] | None
    lines: list[str] = field(default_factory=list)


def _header_name(line: str) -> tuple[str, ...] | None:
    match = re.fullmatch(r"\s*\[\[?(.*?)\]\]?\s*(#.*)?", line)
    if not match:
        return None
    inner, parts, position = match.group(1), [], 0
    while position < len(inner):
        part = KEY_PART.match(inner, position)
        if part is None:
            return None
        token = part.group(1)
        parts.append(tomllib.loads(f"k = {token}")["k"] if token[0] in "\"'" else token)
        position = part.end()
    return tuple(parts) or None


def _scan(line: str, state: dict[str, Any]) -> None:
    """Track multi-line strings and bracket depth across lines (enough to find headers)."""
    i = 0
    while i < len(line):
        if state["string"]:
            delimiter = state["string"]
            if line.startswith(delimiter, i) and (delimiter == "'''" or line[i - 1:i] != "\\"):
                state["string"] = None
                i += len(delimiter)
                continue
            if delimiter == '"""' and line[i] == "\\":
                i += 2
                continue
            i += 1
            continue
        ch = line[i]
        if ch == "#":
            return
        if line.startswith('"""', i) or line.startswith("'''", i):
            state["string"] = line[i:i + 3]
            i += 3
            continue
        if ch in "\"'":
            end = i + 1
            while end < len(line) and line[end] != ch:
                end += 2 if ch == '"' and line[end] == "\\" else 1
            i = end + 1
            continue
        if ch in "[{":
            state["depth"] += 1
        elif ch in "]}":
            state["depth"] -= 1
        i += 1


def split_blocks(text: str) -> list[Block]:
    blocks = [Block(None)]
    state: dict[str, Any] = {"string": None, "depth": 0}
    for line in text.splitlines():
        at_top = state["string"] is None and state["depth"] == 0
        name = _header_name(line) if at_top and line.lstrip().startswith("[") else None
        if name is not None:
            leading: list[str] = []
            previous = blocks[-1].lines
            while previous and previous[-1].lstrip().startswith("#"):
                leading.insert(0, previous.pop())  # comments just above belong to the header
            blocks.append(Block(name, leading))
        blocks[-1].lines.append(line)
        _scan(line, state)
    return blocks


def owned(name: tuple[str, ...]) -> bool:
    """Whether migrate writes this table (and so drops the existing one)."""
    return name[0] in REPLACED_ROOTS or name[:2] == ("tool", "torch-ext")


def splice(existing: str, generated: str) -> str:
    """``generated`` in place of the existing build-system / project / tool.torch-ext tables."""
    blocks = split_blocks(existing)
    head = "\n".join(blocks[0].lines).strip("\n")
    kept = ["\n".join(b.lines).strip("\n") for b in blocks[1:] if b.name and not owned(b.name)]
    parts = ([head] if head else []) + [generated.strip("\n")] + [k for k in kept if k]
    result = "\n\n".join(parts) + "\n"
    _check_kept(existing, result)
    return result


def _check_kept(before_text: str, after_text: str) -> None:
    before, after = tomllib.loads(before_text), _loads(after_text)
    for key, item in before.items():
        if key in REPLACED_ROOTS:
            continue
        if key == "tool" and isinstance(item, dict):
            mine = {k: v for k, v in item.items() if k != "torch-ext"}
            theirs = {k: v for k, v in after.get("tool", {}).items() if k != "torch-ext"}
            same = mine == theirs
        else:
            same = after.get(key) == item
        if not same:
            raise MigrateError(f"pyproject.toml: table [{key}] would not survive the merge"
                               " intact; merge the printed tables by hand")


def _loads(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MigrateError(f"pyproject.toml: merging produced invalid TOML ({exc}); merge the"
                           " printed tables by hand") from None


def merge_project(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """An existing [project] wins for its static keys; its dynamic ones come from setup.py."""
    merged = {**ours, **{k: v for k, v in theirs.items() if k != "dynamic"}}
    dynamic = [k for k in ours.get("dynamic", []) if k not in merged]
    computed = {"version", "dependencies"}  # pep517_torch fills these in
    left = [k for k in theirs.get("dynamic", []) if k not in merged and k not in dynamic]
    merged.pop("dynamic", None)
    if dynamic + left:
        merged["dynamic"] = dynamic + left
    unknown = [k for k in left if k not in computed]
    notes = [f"[project] dynamic {', '.join(unknown)}: setup.py gave no value, and pep517_torch"
             " only computes a dynamic version and dependencies"] if unknown else []
    order = ["name", "version", *ours, *theirs]
    return {k: merged[k] for k in dict.fromkeys(order) if k in merged}, notes

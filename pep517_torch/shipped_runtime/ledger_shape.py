"""The shape of the build folder's ledger, each section as the layer that keeps it writes it:
what ``ledger.read`` checks a ledger read back against (``state_file.py``). A ledger that is
not of this shape is no ledger of ours: it is named, and treated as absent."""

from __future__ import annotations

from typing import Any

from .state_file import IDENTITY, ListOf, Map


def _fact(value: Any) -> str | None:
    """A machine fact: [path, *identity] (the identity absent when the file was missing)."""
    if not (isinstance(value, list) and value and isinstance(value[0], str) and len(value) in (1, 6)
            and all(type(n) is int for n in value[1:])):
        return "is not [path, device, inode, size, mtime, ctime]"
    return None


def _file(value: Any) -> str | None:
    """A file the compile core decided with: missing (null), its identity, or its identity and
    content hash (null: it changed while the build read it). One call per file: the ledger of
    a large project holds tens of thousands."""
    if value is None:
        return None
    if (type(value) is list and 5 <= len(value) <= 6 and type(value[0]) is int
            and type(value[1]) is int and type(value[2]) is int and type(value[3]) is int
            and type(value[4]) is int
            and (len(value) == 5 or value[5] is None or type(value[5]) is str)):
        return None
    return "is not a file's identity [device, inode, size, mtime, ctime] (and content hash)"


SECTIONS: dict[str, Any] = {
    "compile": {"current?": bool, "env": Map((str, None)), "flags?": Map((str, None)),
                "facts": Map((_fact, None)),
                "files": Map(_file), "outputs?": Map([str])},
    "explain": {"at": str, "at_ns?": int, "by": str, "outcome": str, "everything": (str, None),
                "missed?": str, "steps": [ListOf(str, 2)]},
    "steps": {"descriptions": Map(str), "details": Map(Map(object)), "ccache?": bool},
    "platform": {"key": str, "decision": (ListOf(str, 2), None)},
    "editable": {"root": str, "config_settings": Map((str, [str])), "env": Map((str, None)),
                 "artifacts": [ListOf(str, 2)],
                 "rebuild": {"ninja": str, "build_dir": str, "targets": [str]},
                 "watched": Map((IDENTITY, None))},
    "unity_groups": Map({"flags": str, "groups": [[str]]}),
    "unity_apart": [str],
}
SHAPE = {"build_dir": str, "root?": (str, None),  # and "format", ledger.py's to check
         **{f"{name}?": shape for name, shape in SECTIONS.items()}}

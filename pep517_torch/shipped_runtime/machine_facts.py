"""The machine facts only an interpreter knows, for ``build_inputs.FACTS``: this Python,
pep517_torch itself, where the import system finds ninja and the libraries that shape a wheel,
PATH's folders; and the words for a change of each (``build_inputs.py`` records the files
among them by their identity).

A no-op replay records them (its records are per interpreter); a compile's objects depend on
the compiler, torch and nvcc alone, which ``build_inputs.py`` observes itself. Imported only
where one of these facts is observed or checked, never on the JIT's warm path. Standard
library only (``shipped_runtime/``'s rule), and nothing of ``build_inputs.py``, which imports
this module; pep517_torch's version is read from its ``_version.py`` by name, and only where
this runtime is pep517_torch's own (not the copy an editable hook ships).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

# Libraries whose code shapes a wheel or its metadata, where the import system finds them: an
# upgrade, or another copy found first, builds again. torch's own files: the ``torch`` fact.
LIBRARIES = ("packaging", "pyproject_metadata", "auditwheel", "elftools", "torch")
# pep517_torch's own package, when this runtime is pep517_torch's (not an editable hook's copy)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OURS = (__package__ or "").startswith("pep517_torch.")


def python(env: Mapping[str, str]) -> list[str]:
    """This interpreter: executable, version, platform, machine."""
    machine = os.uname().machine if hasattr(os, "uname") else ""
    return [sys.executable, sys.version, sys.platform, machine]


def backend(env: Mapping[str, str]) -> list[str] | None:
    """pep517_torch's version and a digest of its own files' identities: a checkout edited
    without a new version is another backend. None: this runtime is a copy (an editable hook's)."""
    if not _OURS:
        return None
    import hashlib
    import importlib

    digest = hashlib.blake2b(digest_size=16)
    folders = [_PACKAGE]
    while folders:
        folder = folders.pop()
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        for entry in entries:
            if entry.name == "__pycache__":
                continue
            if entry.is_dir():
                folders.append(entry.path)
                continue
            st = entry.stat()
            line = f"{entry.path}\0{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}\n"
            digest.update(line.encode("utf-8", "surrogateescape"))
    version = importlib.import_module("pep517_torch._version").__version__
    return [version, digest.hexdigest()]


def where(name: str) -> str | None:
    """Where the module ``name`` would be imported from (found, not imported); None: nowhere."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.has_location and spec.origin:
        return spec.origin
    return next(iter(spec.submodule_search_locations or ()), None)


def path_folders(env: Mapping[str, str]) -> list[str]:
    """PATH's folders, once each, in order: a tool added, removed or replaced in one changes
    the folder's mtime and ctime."""
    return list(dict.fromkeys(env.get("PATH", os.defpath).split(os.pathsep)))


def change(name: str, recorded: Any, now: Any) -> str:
    """How the fact ``name`` differs (``recorded`` != ``now``), in words."""
    if name == "python":
        return (f"Python changed: {recorded[0]} {recorded[1].split()[0]} ->"
                f" {now[0]} {now[1].split()[0]}" if recorded[:2] != now[:2]
                else f"Python changed: {recorded[2:]} -> {now[2:]}")
    if name == "backend":
        if recorded is None or now is None or recorded[0] != now[0]:
            return f"pep517_torch changed: {_version(recorded)} -> {_version(now)}"
        return "pep517_torch's own files changed (an edited checkout)"
    if name == "ninja":
        return _file_change("ninja", recorded, now)
    if name == "libraries":
        for library in sorted({*recorded, *now}):
            if recorded.get(library) != now.get(library):
                return _file_change(library, recorded.get(library), now.get(library))
    if name == "path":
        before, after = [entry[0] for entry in recorded], [entry[0] for entry in now]
        if before != after:
            return f"PATH changed: {os.pathsep.join(before)!r} -> {os.pathsep.join(after)!r}"
        folder = next(old[0] for old, new in zip(recorded, now) if old != new)
        return f"PATH folder {folder or '.'} changed (a tool added, removed or replaced)"
    return f"{name} changed"


def _version(value: Any) -> str:
    return "unknown" if value is None else str(value[0])


def _file_change(words: str, recorded: list[Any] | None, now: list[Any] | None) -> str:
    if recorded is None:
        return f"{words} appeared ({now[0] if now else '?'})"
    if now is None:
        return f"{words} {recorded[0]} is gone"
    if now[0] != recorded[0]:
        return f"{words} is another one: {recorded[0]} -> {now[0]}"
    return f"{words} {recorded[0]} changed"

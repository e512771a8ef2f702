"""Paths and globs relative to the project root, refusing anything that escapes it."""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigError
from ..project_tree import require_inside


def absolute(root: Path, value: str) -> Path:
    """``value`` made absolute against ``root``; with ``..`` in it, resolved as the OS would."""
    path = root / value
    if ".." in path.parts:
        try:
            return path.resolve()
        except (OSError, RuntimeError):
            pass
    return Path(os.path.normpath(path))


def contained(root: Path, value: str, key: str, what: str) -> Path:
    """``value`` as an absolute path that must not leave the project root."""
    if "\0" in value:
        raise ConfigError(f"{what} {value!r} contains a NUL character", key)
    require_inside(root, root / value, key, what, shown=value)
    return absolute(root, value)


def existing_file(root: Path, value: str, key: str, what: str) -> Path:
    path = contained(root, value, key, what)
    if not path.is_file():
        raise ConfigError(f"{what} {value!r} does not exist (relative to {root})", key)
    return path


def directory(root: Path, value: str, key: str, what: str) -> Path:
    """An include or library directory: relative ones stay inside the root, absolute ones
    may be anywhere (system directories; they are never packed)."""
    if "\0" in value:
        raise ConfigError(f"{what} {value!r} contains a NUL character", key)
    if os.path.isabs(value):
        return Path(os.path.normpath(value))
    return contained(root, value, key, what)


def expand_glob(
    root: Path,
    pattern: str,
    key: str,
    what: str,
    *,
    base: Path | None = None,
    skip_dir: Path | None = None,
) -> list[Path]:
    """The files ``pattern`` matches (relative to ``base``, default the root; ``**`` recurses),
    sorted; at least one.

    The pattern may not leave ``base`` through ``..``, and no match may resolve outside the
    root through a symlink; files under ``skip_dir`` (the build directory) are not matched.
    """
    base = base or root
    if not pattern or "\0" in pattern:
        raise ConfigError(f"{what} glob {pattern!r} is empty or contains a NUL character", key)
    if not Path(os.path.normpath(base / pattern)).is_relative_to(base):
        where = "the project root" if base == root else f"the package directory {base}"
        raise ConfigError(f"{what} glob {pattern!r} points outside {where}", key)
    try:
        matches = list(_glob(base, [part for part in pattern.split("/") if part]))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{what} glob {pattern!r} cannot be expanded: {exc}", key) from None
    files: list[Path] = []
    seen: set[str] = set()
    for match in sorted(set(matches)):
        path = absolute(base, match)
        if skip_dir is not None and path.is_relative_to(skip_dir):
            continue
        if not path.is_file():
            continue
        real = os.path.realpath(path)
        if real in seen:  # one file reached through two directory links is one source
            continue
        seen.add(real)
        files.append(require_inside(root, path, key, what, shown=match))
    if not files:
        raise ConfigError(f"{what} glob {pattern!r} matches no file (relative to {base})", key)
    return files


def _glob(base: Path, parts: list[str], prefix: str = "") -> Iterator[str]:
    """``glob.glob(pattern, root_dir=base, recursive=True)`` as relative paths, except that
    ``**`` never enters a directory twice: a symlink to an ancestor (a cycle) or to a
    directory already walked is not followed."""
    if not parts:
        yield prefix.rstrip("/")
        return
    part, rest = parts[0], parts[1:]
    here = base / prefix if prefix else base
    if part == "**":
        for directory in _directories_once(here):
            yield from _glob(base, rest, prefix + directory)
            if not rest:  # a final `**` matches the files below too
                names = sorted(os.listdir(here / directory))
                yield from (prefix + directory + name for name in names if not name.startswith("."))
    elif glob.has_magic(part):
        try:
            names = sorted(os.listdir(here))
        except OSError:
            return
        hidden_ok = part.startswith(".")
        for name in fnmatch.filter(names, part):
            if hidden_ok or not name.startswith("."):
                if rest == [] or (here / name).is_dir():
                    yield from _glob(base, rest, f"{prefix}{name}/")
    elif rest == [] and os.path.lexists(here / part) or (here / part).is_dir():
        yield from _glob(base, rest, f"{prefix}{part}/")


def _directories_once(top: Path) -> Iterator[str]:
    """``""`` and every non-hidden directory below ``top`` as ``"a/b/"``, following symlinked
    directories but entering each real directory once."""
    entered = {os.path.realpath(top)}
    yield ""
    for dirpath, dirnames, _ in os.walk(top, followlinks=True):
        kept = []
        for name in sorted(dirnames):
            if name.startswith("."):
                continue
            real = os.path.realpath(os.path.join(dirpath, name))
            if real in entered:
                continue
            entered.add(real)
            kept.append(name)
        dirnames[:] = kept
        relative = os.path.relpath(dirpath, top)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        for name in kept:
            yield f"{prefix}{name}/"

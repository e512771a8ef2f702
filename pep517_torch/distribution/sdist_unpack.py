"""An sdist unpacked to build a wheel from it (``python -m pep517_torch wheel x-1.0.tar.gz``).

An sdist is someone else's archive: every member is checked before anything is written (one
top-level folder; no member or link target outside it; regular files, folders and links only),
whatever the Python, and tarfile's ``data`` filter (PEP 706) extracts where it exists.
"""

from __future__ import annotations

import posixpath
import tarfile
from pathlib import Path

from ..errors import ConfigError


def unpack_sdist(sdist: Path, into: Path) -> Path:
    """Unpack ``sdist`` (``name-version.tar.gz``) into the folder ``into``; the project folder it
    holds (its one top-level folder, with a pyproject.toml). A file that is no such sdist, or
    a member that would land outside that folder, is a ConfigError naming the file."""
    try:
        with tarfile.open(sdist, "r:*") as archive:
            members = archive.getmembers()
            for member in members:
                if member.name.startswith("/") or _normal(member.name).split("/")[0] == "..":
                    raise ConfigError(f"{sdist}: member {member.name!r} lies outside the sdist's"
                                      " folder: not unpacked")
            top = _top_folder(sdist, members)
            for member in members:
                problem = _member_problem(member, top)
                if problem:
                    raise ConfigError(f"{sdist}: member {member.name!r} {problem}: not unpacked")
            if hasattr(tarfile, "data_filter"):
                archive.extractall(into, filter="data")
            else:  # Python < 3.10.12: the checks above are the filter
                archive.extractall(into)
    except tarfile.ReadError:
        raise ConfigError(f"{sdist}: not a .tar.gz archive") from None
    except (tarfile.TarError, OSError, EOFError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{sdist}: cannot be unpacked as an sdist ({reason})") from None
    root = into / top
    if not (root / "pyproject.toml").is_file():
        raise ConfigError(f"{sdist}: holds no pyproject.toml at {top}/pyproject.toml")
    return root


def _top_folder(sdist: Path, members: list[tarfile.TarInfo]) -> str:
    tops = {_normal(member.name).split("/")[0] for member in members}
    if len(tops) != 1 or tops & {"", "."}:
        shown = ", ".join(sorted(repr(top) for top in tops)[:3]) or "none"
        raise ConfigError(f"{sdist}: not an sdist (its members are not in one top-level folder:"
                          f" {shown})")
    return tops.pop()


def _member_problem(member: tarfile.TarInfo, top: str) -> str | None:
    """Why ``member`` (inside the archive's top folder ``top``) may not be unpacked, or None."""
    if member.issym():
        target = _normal(posixpath.join(posixpath.dirname(member.name), member.linkname))
        if member.linkname.startswith("/") or not _inside(target, top):
            return f"links to {member.linkname!r}, outside the sdist's folder"
    elif member.islnk():
        if member.linkname.startswith("/") or not _inside(_normal(member.linkname), top):
            return f"links to {member.linkname!r}, outside the sdist's folder"
    elif not (member.isfile() or member.isdir()):
        return "is a device, pipe or other special file"
    return None


def _normal(name: str) -> str:
    return posixpath.normpath(name) if name else ""


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")

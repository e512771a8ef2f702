"""Source distributions.

https://packaging.python.org/specifications/source-distribution-format/
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from ..errors import ConfigError
from .metadata import ProjectMetadata
from .reproducible import AtomicFile, archive_epoch

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr"})
# Directories left out by default; include globs can bring their files back.
JUNK_DIRS = frozenset(
    {"__pycache__", ".tox", ".nox", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}
)
INCLUDE_KEY = "tool.torch-ext.sdist-include"
EXCLUDE_KEY = "tool.torch-ext.sdist-exclude"


def sdist_files(
    root: Path,
    *,
    include: Iterable[Path] = (),
    include_globs: Iterable[str] = (),
    exclude_globs: Iterable[str] = (),
    build_dir: Path | None = None,
) -> list[Path]:
    """The files of ``root`` an sdist ships, relative to ``root``, sorted.

    Everything under ``root`` except: VCS directories, ``__pycache__``, ``*.pyc``, caches of
    test and lint tools, ``dist/`` at the top, ``.venv*``, ``build_dir``, a top-level
    ``PKG-INFO`` (the writer makes a fresh one) and symlinks leading outside ``root`` or into
    ``build_dir``; then minus ``exclude_globs``. ``include_globs`` add files the default rules
    left out (never VCS, ``build_dir`` or outside-root ones); ``include`` (``pyproject.toml``
    always, plus the readme and license files) is shipped whatever the globs say.
    """
    root = root.resolve()
    build = build_dir.resolve() if build_dir is not None else None
    chosen = {path for path in _walk(root, build) if _shippable(path, root, build)}
    for pattern in include_globs:
        matches = _glob_files(root, pattern, INCLUDE_KEY)
        if not matches:
            raise ConfigError(f"{pattern!r} matches no file", INCLUDE_KEY)
        chosen |= {path for path in matches if _shippable(path, root, build, hard_rules_only=True)}
    for pattern in exclude_globs:
        chosen -= set(_glob_files(root, pattern, EXCLUDE_KEY))
    for path in [root / "pyproject.toml", *include]:
        path = root / path  # relative paths are taken relative to root
        if not path.is_file():
            raise ConfigError(f"{path} is part of every sdist but does not exist")
        if not _inside(path, root):
            raise ConfigError(f"{path} lies outside the project directory {root}")
        chosen.add(path)
    return sorted(path.relative_to(root) for path in chosen)


def _walk(root: Path, build: Path | None) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        directory = Path(dirpath)
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in VCS_DIRS
            and name not in JUNK_DIRS
            and not name.startswith(".venv")
            and not (directory == root and name == "dist")
            and (directory / name).resolve() != build
            and not (directory / name).is_symlink()  # never followed: loops, duplicates
        )
        yield from (directory / name for name in filenames)


def _glob_files(root: Path, pattern: str, key: str) -> list[Path]:
    pure = PurePosixPath(pattern)
    if pure.is_absolute() or ".." in pure.parts or "\\" in pattern:
        raise ConfigError(f"{pattern!r} must be a relative glob inside the project", key)
    files: list[Path] = []
    for match in root.glob(pattern):
        if match.is_dir() and not match.is_symlink():
            files.extend(path for path in _walk(match, None))
        elif match.is_file():
            files.append(match)
    return files


def _shippable(
    path: Path, root: Path, build: Path | None, *, hard_rules_only: bool = False
) -> bool:
    relative = path.relative_to(root)
    if VCS_DIRS.intersection(relative.parts) or "__pycache__" in relative.parts:
        return False
    if path.suffix in (".pyc", ".pyo") or relative == Path("PKG-INFO") or not path.is_file():
        return False
    target = path.resolve()
    if not _inside(target, root) or (build is not None and _inside(target, build)):
        return False
    if hard_rules_only:
        return True
    return not (
        JUNK_DIRS.intersection(relative.parts)
        or any(part.startswith(".venv") for part in relative.parts[:-1])
        or (relative.parts[0] == "dist" and len(relative.parts) > 1)
    )


def _inside(path: Path, directory: Path) -> bool:
    return path.resolve().is_relative_to(directory)


def write_sdist(
    out_dir: Path,
    root: Path,
    metadata: ProjectMetadata,
    files: Iterable[Path],
    *,
    source_date_epoch: int | None,
) -> Path:
    """Write ``<name>-<version>.tar.gz`` holding ``files`` (relative to ``root``, or absolute
    inside it) and ``PKG-INFO`` under ``<name>-<version>/``; return its path.

    Byte-identical for identical inputs: members sorted, owner root with empty names, one
    mtime, modes 0o644/0o755, and a gzip header without a file name or time.
    """
    root = root.resolve()
    stem = f"{metadata.distribution_name}-{metadata.version}"
    mtime = archive_epoch(source_date_epoch)
    members: dict[str, Path | bytes] = {"PKG-INFO": metadata.metadata_bytes()}
    for file in files:
        path = root / file
        if not _inside(path, root) or path.resolve() == root / "PKG-INFO":
            raise ValueError(f"{file} cannot be an sdist member")
        members[path.relative_to(root).as_posix()] = path
    directories = {str(parent) for name in members for parent in PurePosixPath(name).parents}
    directories.discard(".")
    members.update(dict.fromkeys(directories, b""))  # b"" marks a directory below

    destination = Path(out_dir) / f"{stem}.tar.gz"
    output = AtomicFile(destination)
    try:
        with (
            gzip.GzipFile(filename="", mode="wb", fileobj=output.file, mtime=0) as compressed,
            tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive,
        ):
            archive.addfile(_tar_info(stem, tarfile.DIRTYPE, 0o755, 0, mtime))
            for name, source in sorted(members.items()):
                _add_member(archive, f"{stem}/{name}", source, name in directories, mtime)
        output.publish()
    finally:
        output.discard()
    return destination


def _add_member(
    archive: tarfile.TarFile, name: str, source: Path | bytes, is_directory: bool, mtime: int
) -> None:
    if is_directory:
        archive.addfile(_tar_info(name, tarfile.DIRTYPE, 0o755, 0, mtime))
    elif isinstance(source, bytes):
        info = _tar_info(name, tarfile.REGTYPE, 0o644, len(source), mtime)
        archive.addfile(info, io.BytesIO(source))
    else:
        with open(source, "rb") as file:
            status = os.fstat(file.fileno())
            mode = 0o755 if status.st_mode & 0o111 else 0o644
            archive.addfile(_tar_info(name, tarfile.REGTYPE, mode, status.st_size, mtime), file)


def _tar_info(name: str, kind: bytes, mode: int, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.mtime = kind, mode, size, mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info

"""Source distributions.

https://packaging.python.org/specifications/source-distribution-format/
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath

from ..atomic import AtomicFile
from ..errors import ConfigError
from ..project_tree import is_build_dir, is_inside, require_inside
from .metadata import ProjectMetadata
from .reproducible import archive_epoch
from .sdist_sources import IgnoreFiles, credential, is_leftover, is_never_shipped, names, tracked_files

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr"})
# Directories left out by default; include globs can bring their files back.
JUNK_DIRS = frozenset(
    {"__pycache__", ".tox", ".nox", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}
)
TOP_OUTPUT_DIRS = frozenset({"dist", "wheelhouse"})  # frontends' and cibuildwheel's outputs
INCLUDE_KEY = "tool.torch-ext.sdist-include"
EXCLUDE_KEY = "tool.torch-ext.sdist-exclude"


def sdist_files(
    root: Path,
    *,
    include: Iterable[Path] = (),
    include_globs: Iterable[str] = (),
    exclude_globs: Iterable[str] = (),
    build_dir: Path | None = None,
    out_dir: Path | None = None,
    artifacts: Iterable[Path] = (),
    warn: Callable[[str], None] | None = None,
) -> list[Path]:
    """The files of ``root`` an sdist ships, relative to ``root``, sorted.

    The candidates: in a git checkout (``pyproject.toml`` tracked), the files git tracks below
    ``root``, submodules included; elsewhere, every file under ``root`` except those a
    ``.gitignore`` ignores, VCS directories, ``__pycache__``, ``*.pyc``, caches of test and
    lint tools, ``dist/`` and ``wheelhouse/`` at the top, ``.venv*``, compiled objects, stale
    copies of the project's extensions (``artifacts``: where each is linked or copied into
    the tree), ``.DS_Store`` and ``.env`` files. Never shipped, whatever git or a glob says:
    wheels, sdists, core dumps, ``out_dir`` (where this sdist goes), build directories
    (``build_dir``, any directory tagged with a ``CACHEDIR.TAG``, and our older untagged
    ones), a top-level ``PKG-INFO`` (the writer makes a fresh one) and symlinks leading outside
    ``root`` or into a build directory. Then minus ``exclude_globs``. Symlinks inside the root
    ship as what they point to, directories included (a link back up the tree is not
    followed). ``include_globs`` add files the default rules left out (never one of the
    never-shipped); ``include`` (``pyproject.toml`` always, plus the readme and license files)
    is shipped whatever the globs say. Well-known credential files (``.pypirc``, ``.netrc``,
    ``.env``, ``.ssh/``, ...) are left out unless an include glob names them; one git tracks
    ships, and ``warn`` hears of it.
    """
    root = root.resolve()
    tracked = tracked_files(root)
    tree = _Tree(
        root,
        build_dir.resolve() if build_dir is not None else None,
        out_dir.resolve() if out_dir is not None else None,
        IgnoreFiles(root) if tracked is None else None,
        frozenset((Path(path).parent, Path(path).name.split(".")[0]) for path in artifacts),
    )
    tracked_secrets: set[Path] = set()
    if tracked is None:
        chosen = {path for path in tree.walk(root, pruning=True) if tree.shippable(path)}
    else:
        candidates = (
            member
            for path in tracked
            if tree.enterable(path)
            for member in (tree.walk(path) if path.is_dir() else [path])
        )
        chosen = {path for path in candidates if tree.shippable(path, hard_rules_only=True)}
        tracked_secrets = {path for path in chosen if credential(path.relative_to(root))}
    for pattern in include_globs:
        matches = tree.glob(pattern, INCLUDE_KEY)
        if not matches:
            raise ConfigError(f"{pattern!r} matches no file", INCLUDE_KEY)
        chosen |= {path for path in matches if tree.shippable(path, hard_rules_only=True)
                   and _named_if_secret(path.relative_to(root), pattern)}
    for pattern in exclude_globs:
        # `**` does not descend into symlinked directories: a file is also left out when the
        # file it resolves to is.
        excluded = set(tree.glob(pattern, EXCLUDE_KEY))
        targets = {path.resolve() for path in excluded}
        chosen = {path for path in chosen if path not in excluded and path.resolve() not in targets}
    for path in [root / "pyproject.toml", *include]:
        path = root / path  # relative paths are taken relative to root
        if not path.is_file():
            raise ConfigError(f"{path} is part of every sdist but does not exist")
        chosen.add(require_inside(root, path, None, "file"))
    if tracked is not None and warn is not None:
        for path in sorted(tracked_secrets & chosen):
            warn(f"{path.relative_to(root)} is a well-known credential file, and git tracks it:"
                 " the sdist ships it (git rm --cached it, or add it to sdist-exclude)")
    return sorted(path.relative_to(root) for path in chosen)


def _named_if_secret(relative: Path, pattern: str) -> bool:
    """A credential file comes in through an include glob only when the glob names it."""
    found = credential(relative)
    return found is None or names(pattern, found)


class _Tree:
    """The walk rules of one sdist: which directories are entered, which files may ship."""

    def __init__(
        self,
        root: Path,
        build: Path | None,
        out: Path | None,
        ignores: IgnoreFiles | None,
        artifacts: frozenset[tuple[Path, str]],
    ) -> None:
        self.root = root
        self.artifacts = artifacts
        self.build = build
        self.out = out
        self.ignores = ignores
        self._build_output: dict[Path, bool] = {}

    def enterable(self, path: Path) -> bool:
        """Whether a tracked path may be read: it exists, and a link stays in the tree."""
        if path.is_symlink() and path.is_dir() and not self._in_tree(path.resolve()):
            return False
        return path.exists()

    def walk(self, top: Path, *, pruning: bool = False) -> Iterator[Path]:
        """Files below ``top``, following symlinked directories that stay in the tree; one
        leading to a directory above it (a loop) or entered through another link is skipped.
        ``pruning``: the default walk, which leaves out junk and ignored directories."""
        entered: set[Path] = set()
        chains: dict[str, frozenset[Path]] = {}
        for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
            directory = Path(dirpath)
            chain = chains.pop(dirpath, frozenset()) | {directory.resolve()}
            kept = []
            for name in sorted(dirnames):
                child = directory / name
                if _junk_name(name, directory == self.root) or self._is_build_output(child):
                    continue
                if pruning and self.ignores is not None and self.ignores.ignored(child, True):
                    continue
                if child.is_symlink():
                    target = child.resolve()
                    if target in chain or target in entered or not self._in_tree(target):
                        continue
                    entered.add(target)
                chains[str(child)] = chain
                kept.append(name)
            dirnames[:] = kept
            yield from (directory / name for name in filenames)

    def glob(self, pattern: str, key: str) -> list[Path]:
        pure = PurePosixPath(pattern)
        if pure.is_absolute() or ".." in pure.parts or "\\" in pattern:
            raise ConfigError(f"{pattern!r} must be a relative glob inside the project", key)
        files: list[Path] = []
        try:
            for match in self.root.glob(pattern):
                if match.is_dir():
                    if not match.is_symlink() or self._in_tree(match.resolve()):
                        files.extend(self.walk(match))
                elif match.is_file():
                    files.append(match)
        except OSError as error:  # a symlink loop under '**', an unreadable directory
            raise ConfigError(f"{pattern!r} cannot be expanded: {error}", key) from None
        return files

    def shippable(self, path: Path, *, hard_rules_only: bool = False) -> bool:
        relative = path.relative_to(self.root)
        if VCS_DIRS.intersection(relative.parts) or "__pycache__" in relative.parts:
            return False
        if path.suffix in (".pyc", ".pyo") or relative == Path("PKG-INFO") or not path.is_file():
            return False
        target = path.resolve()
        if not is_inside(self.root, target) or self._under_build_output(path.parent):
            return False
        if target != path and not self._in_tree(target.parent):
            return False
        if is_never_shipped(path) or self._under_out(path) or self._under_out(target):
            return False
        if hard_rules_only:
            return True
        return not (
            credential(relative) is not None
            or JUNK_DIRS.intersection(relative.parts)
            or any(part.startswith(".venv") for part in relative.parts[:-1])
            or (relative.parts[0] in TOP_OUTPUT_DIRS and len(relative.parts) > 1)
            or is_leftover(path, self.artifacts)
            or (self.ignores is not None and self.ignores.ignored(path, False))
        )

    def _under_out(self, path: Path) -> bool:
        return self.out is not None and self.out != self.root and path.is_relative_to(self.out)

    def _in_tree(self, target: Path) -> bool:
        """Whether a link's (resolved) target is a part of the tree an sdist may ship from:
        inside the root, outside VCS directories and build directories."""
        if not target.is_relative_to(self.root):
            return False
        return not VCS_DIRS.intersection(target.relative_to(self.root).parts) and not (
            self._under_build_output(target)
        )

    def _under_build_output(self, directory: Path) -> bool:
        """Whether ``directory`` or one above it (below the root) is a build directory."""
        return any(
            self._is_build_output(candidate)
            for candidate in [directory, *directory.parents]
            if candidate != self.root and candidate.is_relative_to(self.root)
        )

    def _is_build_output(self, directory: Path) -> bool:
        known = self._build_output.get(directory)
        if known is None:
            known = directory == self.build or (
                self.build is not None and directory.resolve() == self.build
            ) or is_build_dir(directory)
            self._build_output[directory] = known
        return known


def _junk_name(name: str, at_top: bool) -> bool:
    return (
        name in VCS_DIRS
        or name in JUNK_DIRS
        or name.startswith(".venv")
        or (at_top and name in TOP_OUTPUT_DIRS)
    )


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
        if not is_inside(root, path) or path.resolve() == root / "PKG-INFO":
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


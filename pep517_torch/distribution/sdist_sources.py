"""Where an sdist's candidate files come from: git, or the tree minus its ignore files.

In a git checkout (the project's ``pyproject.toml`` is tracked) the candidates are the files git
tracks below the project, submodules included, as flit and meson-python ship them; outside git,
every file of the tree that no ``.gitignore`` on its way ignores (``pathspec`` reads them as git
does). Either way some files never ship: wheels, sdists and core dumps are build output or
leftovers, never sources.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from ..errors import ConfigError

# Soft defaults of a tree walked without git (an include glob brings them back): what a build,
# an editor or a crash leaves behind, and files that hold secrets.
LEFTOVER_NAMES = re.compile(r"\.DS_Store|Thumbs\.db|\.env|\.env\..+|.*\.(o|obj)")
# Well-known files that hold credentials (docs/configuration.md lists them): outside git they
# never ship unless an sdist-include glob names them; a tracked one ships with a warning.
# Certificates (*.pem) are left out: projects ship them as test data.
CREDENTIAL_NAMES = frozenset({
    ".pypirc", ".npmrc", ".netrc", "_netrc", ".git-credentials", ".env",  # package indexes, git, env
    "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk",  # SSH keys
})
_ENV_FILE = re.compile(r"\.env\.(?!(?:example|sample|template|dist)$).+")  # .env.local, not .env.example
CREDENTIAL_DIRS = frozenset({".ssh", ".gnupg", ".aws"})  # every file inside
CREDENTIAL_FILES = frozenset({(".docker", "config.json"), (".kube", "config")})


def credential(relative: Path) -> str | None:
    """What makes ``relative`` (a path below the project) a well-known credential file, as the
    name an sdist-include glob must say to ship it (``.pypirc``, ``.ssh``, ``credentials``);
    None for any other file."""
    parts = relative.parts
    directory = next((part for part in parts[:-1] if part in CREDENTIAL_DIRS), None)
    if directory is not None:
        return directory
    name = parts[-1]
    if name in CREDENTIAL_NAMES or _ENV_FILE.fullmatch(name):
        return name
    if len(parts) > 1 and (parts[-2], name) in CREDENTIAL_FILES:
        return name
    return None


def names(pattern: str, credential_name: str) -> bool:
    """Whether an sdist-include glob names a credential file itself (``.env``,
    ``deploy/.pypirc``, ``.ssh/*``), rather than matching it with wildcards (``**``)."""
    return credential_name in pattern.split("/")
_LIBRARY_SUFFIXES = (".so", ".pyd", ".dylib")
_ELF_CORE = b"\x7fELF"  # an ELF file whose e_type (bytes 16-17) is ET_CORE, 4
_SDIST_NAME = re.compile(r"[^/]+-[^-/]+\.tar\.gz")


def tracked_files(root: Path) -> list[Path] | None:
    """The files git tracks below ``root`` (submodules included), absolute; None when
    ``root`` is not a git checkout whose ``pyproject.toml`` is tracked (or git is missing)."""
    git = shutil.which("git")
    if git is None:
        return None
    command = [git, "-c", "core.quotepath=off", "ls-files", "-z", "--cached",
               "--recurse-submodules", "--", "."]
    try:
        listed = subprocess.run(command, cwd=root, capture_output=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0:  # not a work tree (or one git refuses to read): no git here
        return None
    names = [os.fsdecode(name) for name in listed.stdout.split(b"\0") if name]
    if "pyproject.toml" not in names:  # an untracked project inside some repository
        return None
    return [root / name for name in names]


def is_never_shipped(path: Path) -> bool:
    """A wheel, an sdist or a core dump: build output or a crash, whatever git or a glob says."""
    name = path.name
    if name.endswith(".whl") or _is_core_dump(path):
        return True
    return bool(_SDIST_NAME.fullmatch(name)) and _holds_pkg_info(path)


def _is_core_dump(path: Path) -> bool:
    """``core.PID`` / ``vgcore.PID`` by name; a bare ``core`` only when it is an ELF core."""
    if re.fullmatch(r"(vg)?core\.\d+", path.name):
        return True
    if path.name != "core":
        return False
    try:
        with open(path, "rb") as file:
            head = file.read(18)
    except OSError:
        return False
    return head[:4] == _ELF_CORE and head[16:18] in (b"\x04\x00", b"\x00\x04")


def is_leftover(path: Path, artifacts: frozenset[tuple[Path, str]]) -> bool:
    """Editor and OS droppings, secrets, objects, and a compiled copy of one of the project's
    own extensions (``pkg/_C.cpython-310-x86_64-linux-gnu.so`` left by an old ``setup.py
    develop``; ``artifacts`` holds each extension's (directory, module name)). A prebuilt
    library the project ships as package data is none of these."""
    name = path.name
    if LEFTOVER_NAMES.fullmatch(name):
        return True
    stem = name.split(".")[0]
    return name.endswith(_LIBRARY_SUFFIXES) and (path.parent, stem) in artifacts


def _holds_pkg_info(path: Path) -> bool:
    """Whether a ``NAME-VERSION.tar.gz`` is an sdist: ``NAME-VERSION/PKG-INFO`` is in it."""
    stem = path.name[: -len(".tar.gz")]
    try:
        with tarfile.open(path, "r:gz") as archive:
            for _, member in zip(range(64), archive):
                if member.name.lstrip("./") == f"{stem}/PKG-INFO":
                    return True
    except (OSError, tarfile.TarError, EOFError):
        return False
    return False


class IgnoreFiles:
    """The ``.gitignore`` files of a tree walked without git, applied as git applies them: a
    deeper file's patterns win over a shallower one's, and an ignored directory is not entered."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[Path, object | None] = {}

    def ignored(self, path: Path, is_dir: bool) -> bool:
        directory = path.parent
        while True:
            spec = self._spec(directory)
            if spec is not None:
                relative = path.relative_to(directory).as_posix() + ("/" if is_dir else "")
                verdict = spec.check_file(relative).include  # type: ignore[attr-defined]
                if verdict is not None:  # the deepest file with a matching pattern decides
                    return bool(verdict)
            if directory == self.root or not directory.is_relative_to(self.root):
                return False
            directory = directory.parent

    def _spec(self, directory: Path) -> object | None:
        if directory not in self._specs:
            self._specs[directory] = self._load(directory / ".gitignore")
        return self._specs[directory]

    @staticmethod
    def _load(path: Path) -> object | None:
        try:
            lines = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
        import pathspec  # only for trees outside git

        return pathspec.GitIgnoreSpec.from_lines(lines)

"""An sdist never packs a well-known credential file by accident (issue 35 item 13).

Outside git, `.pypirc`, `.npmrc`, `.netrc`, `.git-credentials`, `.env` (not `.env.example`),
SSH keys and everything in `.ssh/`, `.gnupg/`, `.aws/`, `.docker/config.json`, `.kube/config`
stay out, at any depth, unless an `sdist-include` glob names them (a `**` does not); in a git
checkout a tracked one ships (the user tracked it) with one warning line naming it. The
archives are read back; nothing compiles.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from tests.commands import run_cli
from tests.conftest import count, write
from tests.test_sdist_sources import git, needs_git
from tests.tiny_project import pyproject

CREDENTIALS = [
    ".pypirc", ".npmrc", ".netrc", "_netrc", ".git-credentials", ".env", ".env.local",
    ".env.production", "id_rsa", "id_ed25519", "id_ecdsa_sk", ".ssh/id_rsa", ".ssh/config",
    ".ssh/id_ed25519.pub", ".gnupg/private-keys-v1.d/key.key", ".aws/credentials", ".aws/config",
    ".docker/config.json", ".kube/config", "deploy/.pypirc", "sub/dir/.env", "keys/id_dsa",
]
NOT_CREDENTIALS = ["cert.pem", "docker/config.json", "config", "pkg/env.py", "credentials.md",
                   ".envrc.sample", "aws/credentials.py"]


def project(root: Path, tool: str = "") -> Path:
    write(root / "pyproject.toml", pyproject("cred", dynamic=False, packages=["pkg"], tool=tool))
    write(root / "pkg" / "__init__.py")
    for name in CREDENTIALS + NOT_CREDENTIALS:
        write(root / name, "password = hunter2\n")
    write(root / ".env.example", "PASSWORD=\n")
    return root


def shipped(root: Path, tmp_path: Path) -> tuple[set[str], list[str]]:
    out = tmp_path / "out"
    result = run_cli("sdist", str(root), "-o", str(out))
    assert result.returncode == 0, result.stderr
    (sdist,) = out.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()}
    return names, [line for line in result.stderr.splitlines() if "warning" in line]


def test_outside_git_no_credential_file_ships(tmp_path: Path) -> None:
    names, warnings = shipped(project(tmp_path / "p"), tmp_path)
    assert not names & set(CREDENTIALS), sorted(names & set(CREDENTIALS))
    assert set(NOT_CREDENTIALS) <= names and warnings == []
    count("item 13: credential files kept out of an sdist outside git", len(CREDENTIALS))
    count("item 13: look-alike files shipped", len(NOT_CREDENTIALS))


def test_a_wildcard_does_not_bring_them_back_but_naming_them_does(tmp_path: Path) -> None:
    tool = 'sdist-include = ["**/*", ".env", "deploy/.pypirc", ".ssh/*"]\n'
    names, _ = shipped(project(tmp_path / "p", tool), tmp_path)
    named = {".env", "deploy/.pypirc", ".ssh/id_rsa", ".ssh/config", ".ssh/id_ed25519.pub"}
    assert names & set(CREDENTIALS) == named, sorted(names & set(CREDENTIALS))
    assert ".env.example" in names  # a template: **/* brings it back, as it did
    count("item 13: credential files only when sdist-include names them", len(CREDENTIALS))


@needs_git
def test_in_git_a_tracked_credential_ships_with_one_warning_each(tmp_path: Path) -> None:
    root = project(tmp_path / "p", 'sdist-exclude = ["deploy/.pypirc"]\n')
    git(root, "init", "-q")
    tracked = [".env", ".pypirc", "sub/dir/.env", ".ssh/id_rsa", "deploy/.pypirc"]
    git(root, "add", "pyproject.toml", "pkg", ".env.example", "cert.pem", *tracked)
    git(root, "commit", "-qm", "x")
    names, warnings = shipped(root, tmp_path)
    shipping = set(tracked) - {"deploy/.pypirc"}  # excluded: neither shipped nor warned of
    assert names & set(CREDENTIALS) == shipping
    assert len(warnings) == len(shipping), warnings
    for name in shipping:
        (line,) = [w for w in warnings if w.startswith(f"pep517_torch: warning: {name} is a well-known credential file")]
        assert "git tracks it" in line and "sdist-exclude" in line
    assert {"cert.pem", ".env.example"} <= names
    count("item 13: tracked credential files warned of", len(tracked))


@needs_git
def test_the_pep517_hook_warns_too(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    git(root, "init", "-q")
    git(root, "add", "pyproject.toml", "pkg", ".netrc")
    git(root, "commit", "-qm", "x")
    code = f"import pep517_torch.buildapi as b; print(b.build_sdist({str(tmp_path / 'hook')!r}))"
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "warning" in line] == [
        "pep517_torch: warning: .netrc is a well-known credential file, and git tracks it: the sdist"
        " ships it (git rm --cached it, or add it to sdist-exclude)"]
    count("item 13: tracked credential files warned of")

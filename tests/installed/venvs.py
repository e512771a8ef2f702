"""pep517_torch as users install it: its own wheel, and fresh venvs where that wheel is installed
(not editable) beside another environment's packages, torch among them. Commands run from such a
venv, outside the checkout, exercise what `pip install ./pep517_torch` gives a user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def own_wheel(dest: Path) -> Path:
    """pep517_torch's wheel, built from this checkout as `make dist` builds it."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest),
                    str(ROOT)], check=True, capture_output=True, timeout=600)
    (wheel,) = dest.glob("pep517_torch-*.whl")
    return wheel


def site_packages(python: str | Path) -> Path:
    """The site-packages folder of ``python``'s environment."""
    return Path(subprocess.run([str(python), "-c", "import sysconfig;"
                                " print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


def installed_env(base: Path, wheel: Path, python: str | Path = sys.executable) -> Path:
    """A fresh venv at ``base`` with ``wheel`` installed (not editable) and every other package
    of ``python``'s environment linked into its site-packages, torch included (as in every venv
    where a user pip-installed both), and that environment's ninja and uv binaries in its ``bin/``;
    returns its interpreter."""
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(base)], check=True)
    env_python = base / "bin" / "python"
    site = site_packages(env_python)
    for entry in site_packages(python).iterdir():
        if entry.suffix == ".pth" or "pep517_torch" in entry.name or entry.name == "__pycache__":
            continue  # an editable pep517_torch is a .pth file and a dist-info
        (site / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    for tool in ("ninja", "uv"):  # the binaries of linked packages (the uv package finds its own)
        binary = Path(python).parent / tool
        if binary.is_file():
            (base / "bin" / tool).symlink_to(binary.resolve())
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True,
                   timeout=600)
    return env_python

"""Stand-ins for torch: a torch that is only a version, the real one at another path, and a
torch the compile core is made to find in place of the real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain


def version_only_torch(site_packages: Path, version: str) -> toolchain.TorchInstall:
    """A torch package in ``site_packages`` that has a version.py and nothing else."""
    root = site_packages / "torch"
    root.mkdir(parents=True)
    (root / "version.py").write_text(f"__version__ = '{version}'\ncuda = None\n")
    return toolchain.find_torch(root)


def relocated_torch(tmp_path: Path, real: toolchain.TorchInstall) -> toolchain.TorchInstall:
    """The same torch build at another path, as an isolated build environment has it."""
    root = tmp_path / "pip-build-env-x" / "site-packages" / "torch"
    root.mkdir(parents=True)
    for name in ("include", "lib", "version.py"):
        (root / name).symlink_to(real.root / name)
    return toolchain.find_torch(root)


def substitute_torch(
    monkeypatch: pytest.MonkeyPatch,
    root: Path,
    version: str,
    cuda_version: str | None,
    *,
    cuda_runtime: bool = False,
) -> toolchain.TorchInstall:
    """Make the compile core see another torch (a directory with only what is asked for)."""
    (root / "lib").mkdir(parents=True, exist_ok=True)
    if cuda_runtime:
        macros = root / "include" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
        macros.parent.mkdir(parents=True)
        macros.write_text("")
        (root / "lib" / "libc10_cuda.so").write_text("")
    torch = toolchain.TorchInstall(root, version, cuda_version, None)
    monkeypatch.setattr(toolchain, "find_torch", lambda *a: torch)
    return torch

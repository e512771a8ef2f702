"""Shared test fixtures.

Compiling a translation unit that includes torch/extension.h costs ~30 CPU-seconds, so tests
that need one share the session-scoped builds defined here; everything else compiles tiny
sources (<torch/library.h>, pybind11 alone) or nothing at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
HOSTILE_NAME = "dir with spaces ünï $x 'q' \"dq\" #h ;s &a"
COUNTS: dict[str, int] = {}


def count(what: str, n: int = 1) -> None:
    """Record how many cases a hardening test tried (printed at the end of the run)."""
    COUNTS[what] = COUNTS.get(what, 0) + n


# Modules that take longest, started first so that `make test`'s two workers end together.
HEAVY_FIRST = ("test_hardening", "test_jit", "test_frontends", "test_core_build", "test_cuda_build",
               "test_migrate", "test_setuptools_face", "test_doc_configuration", "test_noop_replay",
               "test_pch_health")
# Session-scoped builds several modules share: the modules using one run on one worker.
SHARED_BUILDS = ("torch_built_wheels",)


def _module(item: pytest.Item) -> str:
    return item.module.__name__  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Heavy modules first (a stable sort keeps the rest in order). Under pytest-xdist
    (`--dist loadgroup`) each module is one group, so its module-scoped builds are made once,
    and the modules that share a session build are one group. (The CUDA-torch tier's venv has
    no xdist: no groups there.)"""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(_module(item).rsplit(".", 1)[-1], len(rank)))
    if not config.pluginmanager.hasplugin("xdist"):
        return
    shared = {_module(item): name for item in items for name in SHARED_BUILDS if name in item.fixturenames}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(shared.get(_module(item), _module(item))))


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if COUNTS:
        terminalreporter.section("cases tried")
        for what, n in sorted(COUNTS.items()):
            terminalreporter.write_line(f"{n:6d}  {what}")


def write(path: Path, text: str = "") -> Path:
    """Write ``text`` to ``path``, making its directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """A project from {relative path: text}; returns ``root``."""
    for name, text in files.items():
        write(root / name, text)
    return root


@pytest.fixture
def jit_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private TORCH_EXTENSIONS_DIR for tests that build JIT extensions."""
    root = tmp_path / "torch_extensions"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(root))
    return root


@pytest.fixture
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A project directory holding the test module's ``ROOT_FILES`` ({relative path: text})."""
    return write_tree(tmp_path / "project", request.module.ROOT_FILES)


@pytest.fixture
def fixture_copy(tmp_path: Path):
    """Copy a project from fixtures/ into a fresh directory (optionally a hostile-named one)."""

    def copy(name: str, *, hostile: bool = False) -> Path:
        target = tmp_path / (HOSTILE_NAME if hostile else "p") / name
        shutil.copytree(FIXTURES / name, target, ignore=shutil.ignore_patterns("build", "dist"))
        return target

    return copy


@pytest.fixture(scope="session", autouse=True)
def machine_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The machine-wide caches (precompiled headers) of this test session: never the user's.

    Tests that build and their child processes share it, as builds on one machine do. No
    compiler launcher unless a test asks for one: a ccache that `make tools` installed would
    otherwise serve every compile from its own cache, across runs. No PCH made in the
    background after a wheel build (core/pch/background.py): it would appear in the shared
    cache while other tests count what their builds precompile; tests/test_pch_background.py
    turns it on, with caches of its own."""
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one machine: its workers share the cache
        root = tmp_path_factory.getbasetemp().parent / "machine-cache"
        root.mkdir(exist_ok=True)
    else:
        root = tmp_path_factory.mktemp("machine-cache")
    settings = {"PEP517_TORCH_CACHE_DIR": str(root), "PEP517_TORCH_COMPILER_LAUNCHER": "none",
                "PEP517_TORCH_PCH_BACKGROUND": "0"}
    previous = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    yield root
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("session")


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """Mount a tiny tmpfs (``tmpfs("64k")``, ``tmpfs("64k", read_only=True)``): a full or
    read-only directory that even root cannot write past. Skips where mount is not permitted."""
    mounted: list[Path] = []

    def mount(size: str, *, read_only: bool = False) -> Path:
        target = tmp_path / f"tmpfs{len(mounted)}"
        target.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip() or result.returncode}")
        mounted.append(target)
        return target

    yield mount
    for target in mounted:
        subprocess.run(["umount", "-l", str(target)], check=False)


@pytest.fixture(scope="session")
def torch_built_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | BaseException]:
    """fixtures/migrate's good shapes built with setuptools + torch's BuildExtension, once."""
    from tests.setup_py_builds import build_all_with_torch

    return build_all_with_torch(tmp_path_factory.mktemp("torch_built"))

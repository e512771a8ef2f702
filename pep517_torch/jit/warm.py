"""The JIT's warm path: load what is already built, shared by ``load()`` and ``load_inline()``.

Already built (by any process): one stamp read and a few stats, then the import: no
subprocess, no ninja, no heavy import. Otherwise the cold path (``cold.py``) locks, builds,
stamps.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType

from ..core.toolchain.lookup import torch_flavour
from ..core.ninja.syntax import unwritable_character
from ..errors import ConfigError
from ..shipped_runtime.environment import PCH, TORCH_EXTENSIONS_DIR, switch, user_cache_home
from . import stamp
from .request import ArtifactKind, JitRequest

# (name, key) -> (target, what load() returned); name -> the last version handed out.
_loaded: dict[tuple[str, str], tuple[str, object]] = {}
_versions: dict[str, int] = {}


def _torch() -> ModuleType:
    import torch

    return torch


def _flavour(torch: ModuleType) -> str:
    return torch_flavour(getattr(torch.version, "cuda", None), getattr(torch.version, "hip", None))


def extensions_root(env: Mapping[str, str] = os.environ) -> Path:
    """TORCH_EXTENSIONS_DIR, else ~/.cache/pep517_torch/jit/py311_cpu (torch's naming)."""
    if env.get(TORCH_EXTENSIONS_DIR):
        return Path(env[TORCH_EXTENSIONS_DIR]).expanduser()
    python = f"py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    return user_cache_home(env) / "pep517_torch" / "jit" / f"{python}_{_flavour(_torch())}"


def one_line(values: Iterable[str], argument: str) -> None:
    """Every path and flag reaches build.ninja and a command line: one line each."""
    for value in values:
        problem = unwritable_character(value)
        if problem:
            raise ConfigError(f"{value!r} contains {problem}: it cannot reach a command line", argument)


def check_extensions_dir(env: Mapping[str, str]) -> None:
    """TORCH_EXTENSIONS_DIR, the shared PCH cache's home whatever the build directory, must fit
    on a command line: checked before anything is built or written, not on the warm path."""
    one_line([env.get(TORCH_EXTENSIONS_DIR, "")], TORCH_EXTENSIONS_DIR)


def use_pch(requested: bool | None, env: Mapping[str, str]) -> bool:
    """``use_pch`` as load() got it, else PEP517_TORCH_PCH (on unless a word for no)."""
    return requested if requested is not None else switch(env, PCH, default=True)


def _import(kind: ArtifactKind, module_name: str, artifact: str) -> object:
    if kind == "executable":
        return artifact
    if kind == "library":
        _torch().ops.load_library(artifact)
        return artifact
    loader = importlib.machinery.ExtensionFileLoader(module_name, artifact)
    spec = importlib.util.spec_from_file_location(module_name, artifact, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def jit_load(
    request: JitRequest,
    build_dir: str | os.PathLike[str],
    *,
    verbose: bool,
    pch: bool | None,
    env: Mapping[str, str] = os.environ,
) -> object:
    """Build (if needed) and load what ``request`` describes.

    A process that already loaded ``name`` and is asked for a different build of it gets
    ``name_v1``, ``name_v2``... (a loaded shared object cannot be replaced in place).
    The warm check works on strings: path objects only on the cold path.
    """
    torch = _torch()
    # Not the PCH choice: objects are the same with and without it (tests/test_core_build.py),
    # so turning it on or off rebuilds nothing, and the warm path reads one variable fewer.
    key = stamp.fingerprint(request, torch.__file__, torch.__version__)
    base = request.name
    directory = os.fspath(build_dir)
    if (base, key) in _loaded:
        target, result = _loaded[(base, key)]
        stamp_file = stamp.stamp_path(directory, target)
        if stamp.is_fresh(stamp_file, key, request.artifact(directory, target), env):
            return result
    version = _versions[base] + 1 if base in _versions else 0
    target = f"{base}_v{version}" if version else base
    artifact = request.artifact(directory, target)
    stamp_file = stamp.stamp_path(directory, target)
    if stamp.is_fresh(stamp_file, key, artifact, env):
        result = _import(request.kind, target, artifact)
    else:
        check_extensions_dir(env)
        from . import cold

        # the cold path loads what it built itself: it lists the operators that load registers
        result = cold.build(request, target, Path(directory), key, Path(stamp_file),
                            verbose=verbose, pch=use_pch(pch, env), env=env,
                            load=lambda: _import(request.kind, target, artifact))
    _loaded[(base, key)] = (target, result)
    _versions[base] = version
    return result

"""Compiler caches (ccache, sccache) in front of c++ and nvcc, and how many hits they served."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ToolchainError
from .identity import which
from .toolchain import Compiler, split_command


def find_launcher(setting: str, compiler: Compiler, env: Mapping[str, str]) -> list[str]:
    """The cache launcher to put in front of c++ and nvcc: [] when none."""
    if setting == "none" or compiler.launcher:
        return []
    if setting == "auto":
        for name in ("ccache", "sccache"):
            found = which(name, env)
            if found:
                return [found]
        return []
    args = split_command(setting, "compiler-launcher")
    found = which(args[0], env)
    if found is None:
        raise ToolchainError(f"compiler-launcher {args[0]!r} not found on PATH")
    return [found, *args[1:]]


def cache_hits(launcher: Sequence[str]) -> int | None:
    """The launcher's total cache hits so far (None: unknown launcher or no statistics)."""
    if not launcher:
        return None
    name = Path(launcher[0]).name
    try:
        if name == "sccache":
            out = subprocess.run([launcher[0], "--show-stats", "--stats-format", "json"],
                                 capture_output=True, text=True, timeout=30, check=True).stdout
            counts = json.loads(out).get("stats", {}).get("cache_hits", {}).get("counts", {})
            return sum(counts.values())
        if name == "ccache":
            out = subprocess.run([launcher[0], "--print-stats"], capture_output=True, text=True,
                                 timeout=30, check=True).stdout
            found = re.findall(r"^(?:direct|preprocessed)_cache_hit\t(\d+)$", out, re.M)
            return sum(map(int, found))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return None

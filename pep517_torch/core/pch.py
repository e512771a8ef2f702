"""Precompiled headers: torch/extension.h (or a project header) parsed once per flag set.

Mechanism (gcc and clang alike): a stub header ``<dir>/pch.h`` that includes the real header
is precompiled to ``<dir>/pch.h.gch``, and every TU whose first line of code includes that
header is compiled with ``-include <dir>/pch.h``. The compiler uses the .gch when it is valid
and otherwise reads the stub as text: the same result either way, so a PCH that cannot apply
falls back silently and objects are identical with and without it.

When to build torch/extension.h's PCH: always for the JIT's shared cache (the next extension
with the same flags finds it ready); for a wheel when more TUs use it than heavy compiles can
run at once, i.e. when some TU would queue anyway. TUs never wait for it: it is built beside
the first TUs, and those that start after it exists use it. A TU's command line is the same
whether or not the .gch exists, so deciding differently next time rebuilds nothing. A project
``pch-header`` is always built first, and its users depend on it (its content can change).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import scan
from .spec import ExtensionSpec
from .toolchain import Compiler

TORCH_HEADER = "torch/extension.h"


@dataclass
class PchPlan:
    key: str
    directory: Path
    include_line: str  # what the stub includes
    flags: tuple[str, ...]
    project_header: bool
    users: list[Path] = field(default_factory=list)
    build: bool = True  # whether this graph builds the .gch (its users use it either way)

    @property
    def stub(self) -> Path:
        return self.directory / "pch.h"

    @property
    def output(self) -> Path:
        return self.directory / "pch.h.gch"

    def decide(self, *, shared: bool, heavy_jobs: int) -> None:
        self.build = self.project_header or shared or len(self.users) > heavy_jobs

    def use_flags(self, launcher: str | None) -> tuple[str, ...]:
        extra = ("-fpch-preprocess",) if launcher == "ccache" else ()
        return ("-include", str(self.stub), *extra)


def _starts_with_header(source: Path, spec: ExtensionSpec) -> bool:
    first = scan.first_directive_include(source)
    if first is None:
        return False
    if spec.pch_header is None:
        return first == TORCH_HEADER
    for directory in (source.parent, *spec.include_dirs):
        candidate = directory / first
        if candidate.is_file() and candidate.resolve() == spec.pch_header.resolve():
            return True
    return False


def supported(compiler: Compiler, launcher: Sequence[str]) -> bool:
    """gcc and clang; not behind sccache, which refuses to cache PCH users at all."""
    if compiler.family not in ("gcc", "clang"):
        return False
    names = {Path(a).name for a in launcher} | {compiler.launcher or ""}
    return "sccache" not in names


def plan(
    spec: ExtensionSpec,
    cxx_sources: Sequence[Path],
    pch_flags: tuple[str, ...],
    compiler: Compiler,
    cache_dir: Path,
    torch_version: str,
    plans: dict[str, PchPlan],
) -> PchPlan | None:
    """Register the spec's PCH users in ``plans`` (shared by flag set); None when none apply."""
    users = [s for s in cxx_sources if _starts_with_header(s, spec)]
    if not users:
        return None
    if spec.pch_header is None:
        include_line = f"#include <{TORCH_HEADER}>"
    else:
        include_line = f'#include "{spec.pch_header}"'
    identity = "\0".join([*compiler.command, compiler.version_text, torch_version, include_line])
    key = hashlib.sha256("\0".join([identity, *pch_flags]).encode()).hexdigest()[:16]
    entry = plans.get(key)
    if entry is None:
        entry = PchPlan(key, cache_dir / key, include_line, pch_flags, spec.pch_header is not None)
        plans[key] = entry
    entry.users.extend(users)
    return entry


def write_stub(entry: PchPlan) -> None:
    entry.directory.mkdir(parents=True, exist_ok=True)
    content = f"{entry.include_line}\n"
    try:
        if entry.stub.read_text() == content:
            return  # unchanged: keep its mtime so the .gch stays up to date
    except OSError:
        pass
    entry.stub.write_text(content)

"""Precompiled headers: a torch umbrella header (or a project header) parsed once per flag set.

Mechanism (gcc and clang alike): a stub header ``<dir>/pch.h`` that includes the real header
is precompiled to ``<dir>/pch.h.gch``, and every TU that reaches that header before any other
code is compiled with ``-include <dir>/pch.h``. The compiler uses the .gch when it is valid
and otherwise reads the stub as text: the same result either way, so a PCH that cannot apply
falls back silently and objects are identical with and without it.

Which header: the torch umbrella (``scan.TORCH_UMBRELLAS``) a TU includes first, directly or
through project headers that start by including it (``"ops.h"`` whose first line includes
``<torch/extension.h>``): torch's umbrellas are ``#pragma once``, so including one ahead of
the TU changes nothing. Each umbrella a project uses gets its own PCH.

Where: a torch umbrella's PCH goes to the machine-wide cache (``cache.py``) that every
project and the JIT share. Its key names the compiler, the torch build, the flags and the
header, not where torch is installed: gcc accepts a .gch whose headers were read elsewhere, so
builds in throwaway isolated environments share one (with debug info, or with clang, which
checks its inputs' paths, the installation path is part of the key). A project ``pch-header``
is the project's own: it lives in the build directory.

When to build: for the JIT always (the next extension with the same flags finds it ready); for
a wheel when more TUs use it than heavy compiles can run at once, i.e. when some TU would queue
anyway, or when the machine-wide cache already has it (then it costs nothing). TUs never wait
for it: it is built beside the first TUs, and those that start after it exists use it. A TU's
command line is the same whether or not the .gch exists, so deciding differently next time
rebuilds nothing. A project ``pch-header`` is always built first, and its users depend on it
(its content can change).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import scan
from .seal import STUB
from ..flags import ExtensionFlags
from ..spec import ExtensionSpec
from ..toolchain.tools import Compiler, TorchInstall



@dataclass
class PchPlan:
    key: str
    directory: Path
    include_line: str  # what the stub includes
    flags: tuple[str, ...]
    project_header: bool
    shared: bool  # in the machine-wide cache: exists = up to date, whichever build made it
    info: dict[str, object] = field(default_factory=dict)  # what the entry is, for people
    users: list[Path] = field(default_factory=list)
    build: bool = True  # whether this graph builds the .gch (its users use it either way)

    @property
    def stub(self) -> Path:
        return self.directory / STUB

    @property
    def stub_text(self) -> str:
        """What the stub holds, as the graph's stub edge writes it."""
        return f"{self.include_line}\n"

    @property
    def output(self) -> Path:
        return self.directory / f"{STUB}.gch"

    @property
    def header(self) -> str:
        return self.include_line.split(None, 1)[1]

    def decide(self, *, eager: bool, heavy_jobs: int) -> None:
        self.build = (
            self.project_header or eager or len(self.users) > heavy_jobs or self.output.exists()
        )

    def use_flags(self, launcher: str | None) -> tuple[str, ...]:
        extra = ("-fpch-preprocess",) if launcher == "ccache" else ()
        return ("-include", str(self.stub), *extra)


def unsupported_reason(compiler: Compiler, launcher: str | None, shared_cache: bool) -> str | None:
    """Why no PCH can help this build (None: it can). ``shared_cache``: the launcher's cache
    hands objects between machines, and a .gch is not reproducible (caches key on its bytes)."""
    if compiler.family not in ("gcc", "clang"):
        return f"{compiler.family} compiler"
    if launcher == "sccache":
        return "sccache does not cache the compiles that use one"
    if launcher == "distcc":
        return "distcc's hosts compile preprocessed text, which a .gch cannot be part of"
    if shared_cache:
        return "a cache shared between machines would miss on every machine's own .gch"
    return None


def _uses_project_header(source: Path, spec: ExtensionSpec) -> bool:
    assert spec.pch_header is not None
    first = scan.leading_include(source)
    if first is None:
        return False
    for directory in (source.parent, *spec.include_dirs):
        candidate = directory / first.header
        if candidate.is_file() and candidate.resolve() == spec.pch_header.resolve():
            return True
    return False


def relocatable(compiler: Compiler, flags: Sequence[str]) -> bool:
    """Whether a PCH may be used with torch installed elsewhere: gcc checks no input paths, and
    without debug info no path the PCH recorded reaches an object."""
    debug = any(f.startswith("-g") and f != "-g0" for f in flags)
    return compiler.family == "gcc" and not debug


def _key(parts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def plan(
    spec: ExtensionSpec,
    cxx_sources: Sequence[Path],
    flags: ExtensionFlags,
    compiler: Compiler,
    torch: TorchInstall,
    plans: dict[str, PchPlan],
    *,
    cache_dir: Path,
    shared: bool,
    build_dir: Path,
) -> dict[Path, PchPlan]:
    """Register the spec's PCH users in ``plans`` (shared by key): each user's plan.

    ``cache_dir`` holds torch umbrellas' PCHs (``shared``: the machine-wide cache); a project
    ``pch-header``'s goes to ``build_dir``/pch.
    """
    compiler_id = [str(compiler.path), compiler.family, compiler.version_text]
    chosen: dict[Path, PchPlan] = {}
    if spec.pch_header is not None:
        include_line = f'#include "{spec.pch_header}"'
        users = [s for s in cxx_sources if _uses_project_header(s, spec)]
        if users:
            key = _key([*compiler_id, str(torch.root), torch.version, include_line, *flags.pch])
            entry = plans.setdefault(key, PchPlan(
                key, build_dir / "pch" / key, include_line, flags.pch, True, False
            ))
            entry.users.extend(users)
            chosen = dict.fromkeys(users, entry)
        return chosen
    moves = relocatable(compiler, flags.umbrella_pch)
    where = str(torch.root)
    for source in cxx_sources:
        header = scan.leading_header(source, spec.include_dirs)
        if header is None:
            continue
        include_line = f"#include <{header}>"
        torch_id = [torch.version, torch.build] if moves else [torch.version, torch.build, where]
        key_flags = [f.replace(where, "<torch>") for f in flags.umbrella_pch] if moves else flags.umbrella_pch
        key = _key([*compiler_id, *torch_id, include_line, *key_flags])
        entry = plans.get(key)
        if entry is None:
            info = {"header": header, "compiler": f"{compiler.family} {compiler.version_text}",
                    "torch": torch.version, "flags": list(key_flags), "relocatable": moves}
            entry = PchPlan(key, cache_dir / key, include_line, flags.umbrella_pch, False, shared, info)
            plans[key] = entry
        entry.users.append(source)
        chosen[source] = entry
    return chosen

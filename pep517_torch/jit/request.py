"""What one ``load()`` asks for: ``api.py`` builds it, ``warm.py`` keys and stamps it,
``cold.py`` turns it into an ExtensionSpec. On the warm path, so standard library only (the
kind is ``core.spec.Kind``'s value, not the enum: ``core.spec`` stays off the warm path)."""

from __future__ import annotations

import os
from typing import Literal, NamedTuple

ArtifactKind = Literal["module", "library", "executable"]  # core.spec.Kind's values


class JitRequest(NamedTuple):
    """A normalised ``load()`` call: absolute paths, flags split into single arguments.

    A NamedTuple, not a frozen dataclass: importing it costs a fifth (the warm path's import
    pays for each class it makes) and its repr is one formatting call."""

    name: str
    sources: tuple[str, ...]
    include_dirs: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()
    cuda_cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    with_cuda: bool | None = None
    kind: ArtifactKind = "module"
    stable_abi: str | None = None  # LibTorch stable-ABI target ("2.10"), our addition

    def canonical(self) -> str:
        """Every field, named, in one text: the request's part of the stamp's key, the same in
        every process of one Python (the key holds its version). repr, not JSON: the warm path
        pays for every microsecond, and json's first call in a process costs tens of them."""
        return repr(self)

    def artifact(self, build_dir: str | os.PathLike[str], target: str) -> str:
        """Where the build of ``target`` (``name`` or ``name_v1``...) lands."""
        return os.path.join(build_dir, target if self.kind == "executable" else f"{target}.so")

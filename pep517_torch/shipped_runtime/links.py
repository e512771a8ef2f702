"""An editable install's in-tree links to its build outputs, healed on import."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from .files import copy_atomic, symlink_atomic


def link_artifacts(artifacts: Iterable[Sequence[str]]) -> None:
    """Point each in-tree path at its build output again if it went missing; refresh a copy
    (standing in where symlinks are not allowed) older than the output. An output not built
    yet is left alone."""
    for built, in_tree in artifacts:
        if not os.path.exists(built):
            continue
        if os.path.lexists(in_tree):
            is_stale_copy = not os.path.islink(in_tree) and (
                os.path.getmtime(built) > os.path.getmtime(in_tree)
            )
            if is_stale_copy:
                copy_atomic(Path(built), Path(in_tree))
            continue
        try:
            symlink_atomic(Path(in_tree), Path(built))
        except OSError:
            copy_atomic(Path(built), Path(in_tree))

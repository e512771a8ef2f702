"""An editable install's in-tree paths to its build outputs: the one way they are made, at
install time and again (healed) on import."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from .files import copy_atomic, symlink_atomic


class NotOurs(FileExistsError):
    """The in-tree path is a file of the user's (a stale in-place build?), not our link."""


def link_into_tree(in_tree: Path, built: Path, *, refresh_copies: bool = False) -> None:
    """Make ``in_tree`` a symlink to ``built`` (a copy where the filesystem allows no symlink),
    its folder included (an operator library's own). A link is replaced; a regular file there
    is the user's (:class:`NotOurs`) unless ``refresh_copies``, the import hook's healing, says
    it is a copy standing in for a link: then it is copied again when older than ``built``."""
    if in_tree.is_symlink():
        if os.readlink(in_tree) == str(built):
            return
    elif os.path.lexists(in_tree):
        if not refresh_copies:
            raise NotOurs(in_tree)
        if os.path.getmtime(built) > os.path.getmtime(in_tree):
            copy_atomic(built, in_tree)
        return
    in_tree.parent.mkdir(parents=True, exist_ok=True)
    try:
        symlink_atomic(in_tree, built)
    except OSError:
        copy_atomic(built, in_tree)


def link_artifacts(artifacts: Iterable[Sequence[str]]) -> None:
    """The hook's healing on import: each in-tree path of an output built so far points at it
    again (:func:`link_into_tree`, copies refreshed)."""
    for built, in_tree in artifacts:
        if os.path.exists(built):
            link_into_tree(Path(in_tree), Path(built), refresh_copies=True)

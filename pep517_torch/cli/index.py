"""``index DIR`` as the CLI says it: the pages written for a folder of wheels, line by line
(`index`, and `matrix` over its outputs)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..shipped_runtime.user_line import say


def index_folder(directory: Path) -> None:
    """``index DIR``: the pages of DIR's wheels, and what was written, said line by line."""
    from ..distribution.index import write_index

    result = write_index(directory)
    for skipped in result.skipped:
        say(skipped.line())
    for line in result.left:
        say(line)
    for variant, wheels in result.variants.items():
        count = f"{len(wheels)} wheel{'s' if len(wheels) != 1 else ''} built for torch {variant}"
        if variant in result.pages:
            say(f"{result.pages[variant]}: {count} (pip install -f {result.pages[variant]})",
                sys.stdout)
        if variant in result.repositories:
            say(f"{result.repositories[variant]}/: the simple repository of {count} (pip install"
                f" --index-url {result.repositories[variant].as_uri()}/)", sys.stdout)
    for wheel in result.unrecorded:
        say(f"{wheel.path.name}: no torch build record (not built against torch by"
            " pep517_torch): on no variant page", sys.stdout)
    for removed in result.removed:
        say(f"removed {removed} (no wheel of its torch is left)", sys.stdout)
    if result.overview is not None:
        say(f"wrote {result.overview}", sys.stdout)
    _write_variants_json(directory)


def _write_variants_json(directory: Path) -> None:
    """PEP 825's ``<name>-<version>-variants.json`` beside the pages (uv reads it to choose a
    wheel variant), and what plain pip, which skips variant wheels, can install instead."""
    from ..distribution.variants_index import write_variants_json

    found = write_variants_json(directory)
    for path, wheels in found.written.items():
        say(f"wrote {path}: {len(wheels)} variant wheel{'s' * (len(wheels) != 1)}", sys.stdout)
    for line in [*found.skipped, *found.pip_lines()]:
        say(line, sys.stdout)

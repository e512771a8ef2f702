"""``index DIR`` as the CLI says it: the pages written for a folder of wheels, line by line
(`index`, and `matrix` over its outputs)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import Pep517TorchError
from ..shipped_runtime.user_line import say


def index_folder(directory: Path) -> None:
    """``index DIR``: the pages of DIR's wheels, and what was written, said line by line; a
    folder with no wheel is an error (no page written)."""
    from ..distribution.index import write_index

    result = write_index(directory)
    for line in [*(s.line() for s in result.skipped), *result.left, *result.variants_problems,
                 *result.variants_notes]:
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
        say(f"removed {removed} (index wrote it; no wheel here is left for it to list)", sys.stdout)
    if result.overview is not None:
        say(f"wrote {result.overview}", sys.stdout)
    for path, wheels in result.variants_json.items():
        say(f"wrote {path}: {len(wheels)} variant wheel{'s' * (len(wheels) != 1)}", sys.stdout)
    for line in result.pip_lines:
        say(line, sys.stdout)
    if not result.found:
        raise Pep517TorchError(f"{directory}: no wheel (*.whl) here: no page written")

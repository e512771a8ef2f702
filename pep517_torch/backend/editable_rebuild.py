"""``python -m pep517_torch.backend.editable_rebuild BUILD_DIR [INSTALL_JSON]``: an editable
install plans its build again, run by its import hook once pyproject.toml, a folder of sources,
a source's content or a compile variable changed.

The build folder's ledger (its ``editable`` section, distribution/editable.py) records the
project root, the -C settings and the environment variables the configuration read at install
time (the hook keeps a copy, passed as INSTALL_JSON, for when the build folder is gone); the
build then runs through the compile core as a wheel build would (content-hash rebuilds
included), the extensions are linked into the source tree again and the state is recorded
anew for the hook.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import Pep517TorchError, print_error


def main(argv: Sequence[str] | None = None) -> int:
    from ..distribution.editable import SECTION, read_state
    from ..shipped_runtime import ledger
    from .editable_install import rebuild_editable

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2):
        print("usage: python -m pep517_torch.backend.editable_rebuild BUILD_DIR [INSTALL_JSON]",
              file=sys.stderr)
        return 2
    build_dir = Path(args[0])
    try:
        if len(args) == 2 and ledger.section(build_dir, SECTION) is None:
            state = json.loads(args[1])  # the build folder is gone: what the install recorded
        else:
            state = read_state(build_dir)
        recorded: dict[str, str | None] = state["env"]
        env = {name: value for name, value in os.environ.items() if name not in recorded}
        env.update({name: value for name, value in recorded.items() if value is not None})
        rebuild_editable(Path(state["root"]), state["config_settings"], env, build_dir)
    except Pep517TorchError as exc:
        print_error(exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

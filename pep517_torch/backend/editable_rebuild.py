"""``python -m pep517_torch.backend.editable_rebuild STATE_FILE``: an editable install plans its build
again, run by its import hook once pyproject.toml or a folder of sources changed.

The state file (distribution/editable.py) records the project root, the -C settings and the
environment variables the configuration read at install time (the hook keeps a copy, passed
as INSTALL_JSON, for when the state file is gone with the build directory); the build then runs through the
compile core as a wheel build would (content-hash rebuilds included), the extensions are linked
into the source tree again and the state file is rewritten for the hook.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import Pep517TorchError, print_error


def main(argv: Sequence[str] | None = None) -> int:
    from .editable_install import rebuild_editable
    from ..distribution.editable import read_state

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2):
        print("usage: python -m pep517_torch.backend.editable_rebuild STATE_FILE [INSTALL_JSON]",
              file=sys.stderr)
        return 2
    state_file = Path(args[0])
    try:
        if len(args) == 2 and not state_file.is_file():
            state = json.loads(args[1])  # the build directory is gone: what the install recorded
        else:
            state = read_state(state_file)
        recorded: dict[str, str | None] = state["env"]
        env = {name: value for name, value in os.environ.items() if name not in recorded}
        env.update({name: value for name, value in recorded.items() if value is not None})
        rebuild_editable(Path(state["root"]), state["config_settings"], env, state_file)
    except Pep517TorchError as exc:
        print_error(exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

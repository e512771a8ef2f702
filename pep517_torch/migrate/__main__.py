"""``python -m pep517_torch.migrate [setup.py] [--write] [--force]``: a launcher of
``python -m pep517_torch migrate`` (the command line is cli's)."""

import sys

from ..cli import main

raise SystemExit(main(["migrate", *sys.argv[1:]]))

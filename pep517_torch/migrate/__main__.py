"""``python -m pep517_torch.migrate [setup.py] [--write] [--force]``."""

import sys

from . import main

raise SystemExit(main(sys.argv[1:]))

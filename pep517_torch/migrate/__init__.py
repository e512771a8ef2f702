"""``python -m pep517_torch migrate``: a torch extension's setup.py -> pyproject.toml.

This module is what ``cli/`` needs to offer the command (its arguments, and :func:`run`), and
stays light: every ``python -m pep517_torch`` call imports it. The command is
:mod:`.command`; the setup.py runs under interception (:mod:`.intercept`), and what the runs
recorded is converted (:mod:`.convert`). See docs/migrate.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import MigrateError

__all__ = ["DESCRIPTION", "MigrateError", "Migration", "add_arguments", "migrate", "run", "write"]
DEFAULT_TIMEOUT = 300.0  # seconds one run of setup.py may take (migrate --timeout)
DESCRIPTION = ("Convert a torch extension's setup.py into pyproject.toml tables for pep517_torch."
               " setup.py runs with setup() intercepted: nothing is built.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments, added to the parser ``cli/`` makes for it (the command line
    is cli's)."""
    parser.add_argument("setup_py", nargs="?", default="setup.py",
                        help="the setup.py (or its directory); default: ./setup.py")
    parser.add_argument("--write", action="store_true",
                        help="create or update pyproject.toml next to setup.py instead of"
                        " printing the tables")
    parser.add_argument("--force", action="store_true",
                        help="with --write: replace an existing [tool.torch-ext] table")
    parser.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help="stop a run of setup.py that takes longer, and everything it"
                        f" started (default: {DEFAULT_TIMEOUT:g})")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def __getattr__(name: str) -> Any:
    if name in ("Migration", "migrate", "write"):  # the Python API, imported on first use
        from . import command

        return getattr(command, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run(args: argparse.Namespace) -> int:
    """The command, its arguments parsed (:func:`.command.run`)."""
    from .command import run as run_command

    return run_command(args)

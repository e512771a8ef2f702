"""One way to word and print a line for the user: ``pep517_torch: <message>`` on stderr.

Every face and the editable hook print their notes, progress headers, waits and errors
through this module; a face that hands lines to a callback (a build's ``log``, the JIT's quiet
``say``) words them with :func:`user_line` and lets the callback print.
"""

from __future__ import annotations

import sys
from typing import TextIO

PREFIX = "pep517_torch: "
ERROR = PREFIX + "error: "  # how an error's line starts (the hook finds it in a rebuild's output)


def user_line(message: str) -> str:
    """``message`` worded as pep517_torch's: ``pep517_torch: wrote dist/x.whl``."""
    return PREFIX + message


def error_line(message: str) -> str:
    return ERROR + message


def print_line(line: str, file: TextIO | None = None) -> None:
    """Print a line as it is (already worded, or a tool's own), flushed; stderr by default."""
    print(line, file=sys.stderr if file is None else file, flush=True)


def say(message: str, file: TextIO | None = None) -> None:
    """Print ``message`` worded as pep517_torch's, on stderr unless ``file`` is given."""
    print_line(user_line(message), file)


def log(line: str) -> None:
    """A build's own output (its notes, progress and summary, already worded), on stdout, in
    order with what ninja prints there: the hooks, the CLI and setup.py's build_ext alike."""
    print_line(line, sys.stdout)


def format_size(size: float) -> str:
    """``12 B``, ``340.0 KiB``, ``1.2 MiB``: sizes as every line shows them (powers of 1024)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")

"""One way to word and print a line for the user: ``pep517_torch: <message>`` on stderr.

Every face and the editable hook print their notes, progress headers, waits and errors
through this module; a face that hands lines to a callback (a build's ``log``, the JIT's quiet
``say``) words them with :func:`user_line` and lets the callback print.

Text that comes from outside (a file read back, a wheel's name or METADATA, a lock's owner
line, a child process's answer) never reaches the terminal raw: :func:`shown` is the one
sanitiser, every control character written as an escape (``\x1b``), and every line worded here
goes through :func:`printable` (the same, newlines and tabs kept).
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

PREFIX = "pep517_torch: "
ERROR = PREFIX + "error: "  # how an error's line starts (the hook finds it in a rebuild's output)


def shown(text: object) -> str:
    """``text`` as one printable line: each control, format or separator character (newlines
    too) escaped as Python writes it (``\x1b``, ``\n``, ``\u202e``); a line of printable text
    as it is."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def printable(text: str) -> str:
    """:func:`shown`, keeping the newlines and tabs of a message of several lines (a compiler's
    error, quoted)."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or char in "\n\t" else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    named = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}.get(char)
    return named or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
                     else f"\\U{code:08x}")


def user_line(message: str) -> str:
    """``message`` worded as pep517_torch's: ``pep517_torch: wrote dist/x.whl`` (control
    characters escaped, :func:`printable`)."""
    return PREFIX + printable(message)


def error_line(message: str) -> str:
    return ERROR + printable(message)


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


# A command whose reader left (`python -m pep517_torch explain | head -1`) ends with the status
# a shell shows for a program SIGPIPE ended (128 + 13), as git and the coreutils end there.
CLOSED_STDOUT = 141


def closed_stdout() -> int:
    """After a BrokenPipeError on stdout: what is still buffered goes nowhere (Python flushes
    stdout at exit, and would say it failed), as the Python documentation's recipe for SIGPIPE
    does; the status to exit with."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return CLOSED_STDOUT

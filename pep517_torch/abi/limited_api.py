"""CPython limited-API (abi3) targets: ``cp310`` is Python 3.10, ``Py_LIMITED_API=0x030A0000``
and the wheel tag ``cp310-abi3-<platform>``.

One reading of a target for every layer: config checks the setting, the compile core defines
the macro, the distribution layer tags the wheel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DEFAULT = "cp310"  # torch's min_supported_cpython
OLDEST_MINOR = 8  # cp38
PATTERN = r"^cp3[0-9]+$"
MACRO = "Py_LIMITED_API"


def problem(target: str) -> str | None:
    """Why ``target`` is no limited-API target, or None."""
    if re.fullmatch(PATTERN[1:-1], target) is None or python_minor(target) < OLDEST_MINOR:
        return (
            f"{target!r} is not a supported limited-API target"
            f" (cp3{OLDEST_MINOR} or newer, e.g. {DEFAULT!r})"
        )
    return None


def python_minor(target: str) -> int:
    """``cp310`` -> 10."""
    return int(target[3:])


def macro_value(target: str) -> int:
    """``cp310`` -> ``0x030A0000``, the Py_LIMITED_API value of that target."""
    return (3 << 24) | (python_minor(target) << 16)


def target_of_macro(value: object) -> str | None:
    """``0x030A0000`` (a Py_LIMITED_API value, any integer literal) -> ``cp310``; None when it
    is no Python 3 version."""
    try:
        number = int(str(value), 0)
    except ValueError:
        return None
    return f"cp3{(number >> 16) & 0xFF}" if number >> 24 == 3 else None


def newest(targets: Iterable[str]) -> str:
    """The target a wheel holding extensions of each of ``targets`` needs: the newest."""
    return max(targets, key=python_minor)

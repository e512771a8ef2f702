"""LibTorch stable-ABI targets: ``"2.10"`` is the oldest torch a stable-ABI artifact loads under.

One reading of a target for every layer: config checks the setting, the compile core defines
``TORCH_TARGET_VERSION`` (packed as torch/headeronly/version.h packs ``TORCH_ABI_VERSION``: one
byte each for major, minor and patch from the top, so 2.10 is ``0x020a000000000000``) and audits
the linked artifact, the distribution layer writes ``torch>=2.10`` and the import check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

OLDEST = (2, 10)  # the first torch with torch/csrc/stable and TORCH_TARGET_VERSION
PATTERN = r"^[0-9]+\.[0-9]+$"
MACRO = "TORCH_TARGET_VERSION"
_INTEGER_SUFFIX = re.compile(r"(?i)(?:ull|llu|ul|lu|ll|u|l)$")


def problem(target: str) -> str | None:
    """Why ``target`` is no stable-ABI target, or None."""
    if re.fullmatch(PATTERN[1:-1], target) is None:
        return f"{target!r} is not a torch version as MAJOR.MINOR (e.g. \"2.10\")"
    if parse(target) < OLDEST:
        oldest = ".".join(map(str, OLDEST))
        return f"{target!r} is older than torch {oldest}, the first with the stable ABI"
    return None


def normalised(target: str) -> str:
    """``"02.10"`` -> ``"2.10"``: the target as torch's versions spell it (what the pin, the
    import check and messages show), as packaging normalises every other version."""
    return "%d.%d" % parse(target)


def parse(target: str) -> tuple[int, int]:
    """``"2.10"`` -> ``(2, 10)``."""
    major, minor = target.split(".")
    return int(major), int(minor)


def packed(target: str) -> int:
    """``"2.10"`` -> ``0x020a000000000000``: TORCH_TARGET_VERSION's value for that target."""
    major, minor = parse(target)
    return (major << 56) | (minor << 48)


def macro_text(target: str) -> str:
    """The define's text: ``0x020a000000000000``."""
    return f"0x{packed(target):016x}"


def newest(targets: Iterable[str]) -> str:
    """The target a wheel of artifacts built for each of ``targets`` needs: the newest."""
    return max(targets, key=parse)


def torch_problem(target: str, torch_version: str) -> str | None:
    """Why torch ``torch_version`` cannot build for ``target`` (it is older), or None."""
    match = re.match(r"\s*v?(\d+)\.(\d+)", torch_version)
    if match is None:
        return None
    building = (int(match.group(1)), int(match.group(2)))
    if parse(target) > building:
        return (
            f"stable ABI {target} is newer than torch {torch_version}, which builds it: a torch"
            f" can only target its own version or an older one (install torch>={target} to"
            " build)"
        )
    return None


def target_of_macro(value: object) -> str | None:
    """A TORCH_TARGET_VERSION value (``0x020a000000000000``, ``TORCH_VERSION_2_10_0``) ->
    ``"2.10"``; None when it reads as no stable-ABI target."""
    text = str(value).strip()
    named = re.fullmatch(r"TORCH_VERSION_(\d+)_(\d+)_0", text)
    if named:
        target = f"{int(named.group(1))}.{int(named.group(2))}"
    else:
        try:
            number = int(_INTEGER_SUFFIX.sub("", text), 0)
        except ValueError:
            return None
        target = f"{number >> 56}.{(number >> 48) & 0xFF}"
        if number != packed(target):
            return None  # a patch or ABI tag we would not reproduce
    return target if problem(target) is None else None


def undefine_problem(target: str) -> str:
    """Why a user's undefine of TORCH_TARGET_VERSION is refused."""
    return (
        f"the extension undefines {MACRO}, which keeps the build to stable ABI {target} (without"
        " it, torch's headers offer what the building torch has); remove that flag or stable-abi"
    )


def define_problem(value: str | None, target: str) -> str | None:
    """Why a user's ``-DTORCH_TARGET_VERSION=value`` disagrees with ``target``, or None."""
    number: int | None = None
    if value is not None:
        try:
            number = int(_INTEGER_SUFFIX.sub("", value.strip()), 0)
        except ValueError:
            number = None
    if number == packed(target):
        return None
    shown = f"{MACRO}={value}" if value is not None else MACRO
    return (
        f"the extension defines {shown}, but stable ABI {target} is {MACRO}={macro_text(target)};"
        " remove that define (it is set for you) or change stable-abi"
    )

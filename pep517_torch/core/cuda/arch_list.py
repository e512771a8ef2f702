"""The syntax of CUDA architecture lists: a pure parser, no nvcc needed.

The config layer checks ``cuda-arch-list``, ``TORCH_CUDA_ARCH_LIST`` and ``-Ccuda-arch-list``
with it as it reads them; :mod:`.arch_flags` turns parsed entries into the flags a toolkit can build.

Syntax of ``cuda-arch-list`` (and of ``TORCH_CUDA_ARCH_LIST``): a list of entries, or one string
of entries separated by ``;``, ``,`` or spaces.

``X.Y``
    machine code (SASS) for compute capability X.Y, ``-gencode=arch=compute_XY,code=sm_XY``;
    it runs on X.Y and later GPUs of major X.
``X.Y+PTX``
    also embeds PTX (``code=compute_XY``), which the driver compiles for newer GPUs, later
    majors included.
``X.Ya``
    arch-specific features (``9.0a``, ``10.0a``, ``12.0a``...; 9.0 and newer): ``code=sm_90a``,
    runs on X.Y only.
``X.Yf``
    family-specific features (``10.0f``, ``12.0f``...; 10.0 and newer, nvcc 12.9+): runs on X.Y
    and later GPUs of its family. ``a`` and ``f`` entries take ``+PTX`` too.
a name
    torch 2.13's names, case-insensitive (:data:`NAMED_ARCHES`): Maxwell → ``5.0;5.2+PTX``,
    Pascal → ``6.0;6.1+PTX``, Volta → ``7.0+PTX``, Turing → ``7.5+PTX``, Ampere →
    ``8.0;8.6+PTX``, Ada → ``8.9+PTX``, Hopper → ``9.0+PTX``, Blackwell →
    ``10.0;10.3;12.0;12.1+PTX``, plus Kepler, Kepler+Tesla, Maxwell+Tegra, Volta+Tegra,
    Ampere+Tegra (8.7) and Blackwell+Tegra (11.0).
``native``
    the GPUs visible now (``nvidia-smi``), clamped to what this nvcc can build; with no GPU
    visible, the default (:mod:`.arch_flags`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...errors import ConfigError

# torch 2.13's table (torch.utils.cpp_extension._get_cuda_arch_flags).
NAMED_ARCHES: dict[str, str] = {
    "kepler+tesla": "3.7",
    "kepler": "3.5+PTX",
    "maxwell+tegra": "5.3",
    "maxwell": "5.0;5.2+PTX",
    "pascal": "6.0;6.1+PTX",
    "volta+tegra": "7.2",
    "volta": "7.0+PTX",
    "turing": "7.5+PTX",
    "ampere+tegra": "8.7",
    "ampere": "8.0;8.6+PTX",
    "ada": "8.9+PTX",
    "hopper": "9.0+PTX",
    "blackwell+tegra": "11.0",
    "blackwell": "10.0;10.3;12.0;12.1+PTX",
}
ACCEPTED_FORMS = (
    "X.Y, X.Y+PTX, X.Ya or X.Yf (arch/family-specific, also with +PTX), a name "
    "(Maxwell, Pascal, Volta, Turing, Ampere, Ada, Hopper, Blackwell, ...) or native, "
    "separated by ';', ',' or spaces"
)
_ENTRY_RE = re.compile(r"(\d+)\.(\d)([af]?)(\+ptx)?", re.IGNORECASE)
_VARIANT_ORDER = {"": 0, "a": 1, "f": 2}


@dataclass(frozen=True)
class ArchEntry:
    """One architecture to build for, or the ``native`` placeholder."""

    major: int
    minor: int
    variant: str = ""  # "", "a" (arch-specific) or "f" (family-specific)
    ptx: bool = False
    native: bool = False
    origin: str = field(default="", compare=False)  # the entry as written, for messages
    key: str | None = field(default=None, compare=False)

    @property
    def number(self) -> str:
        return f"{self.major}{self.minor}{self.variant}"

    @property
    def sort_key(self) -> tuple[int, int, int]:
        return self.major, self.minor, _VARIANT_ORDER[self.variant]

    def __str__(self) -> str:
        if self.native:
            return "native"
        return f"{self.major}.{self.minor}{self.variant}{'+PTX' if self.ptx else ''}"


def format_arch_list(entries: Sequence[ArchEntry]) -> str:
    return ";".join(map(str, entries))


def parse_arch_list(value: str | Sequence[str], *, key: str) -> list[ArchEntry]:
    """Parse an arch list; ConfigError naming ``key`` and the entry for anything unknown."""
    items = [value] if isinstance(value, str) else list(value)
    entries: list[ArchEntry] = []
    for token in (t for item in items for t in re.split(r"[;,\s]+", item) if t):
        expanded = NAMED_ARCHES.get(token.lower())
        for text in expanded.split(";") if expanded else [token]:
            entries.append(_parse_entry(text, origin=token, key=key))
    return entries


def _parse_entry(text: str, *, origin: str, key: str) -> ArchEntry:
    if text.lower() == "native":
        return ArchEntry(0, 0, native=True, origin=origin, key=key)
    match = _ENTRY_RE.fullmatch(text)
    if match is None:
        raise ConfigError(
            f"unknown CUDA architecture {origin!r}{_hint(origin)}; expected {ACCEPTED_FORMS}", key
        )
    major, minor, variant, ptx = match.groups()
    return ArchEntry(int(major), int(minor), variant.lower(), bool(ptx), origin=origin, key=key)


def _hint(entry: str) -> str:
    nvcc_style = re.fullmatch(r"(?:sm|compute)_(\d+)(\d)([af]?)", entry, re.IGNORECASE)
    if nvcc_style:
        return f" (did you mean {nvcc_style[1]}.{nvcc_style[2]}{nvcc_style[3].lower()}?)"
    if entry.lower() in ("all", "all-major"):
        return " (list the architectures instead, or leave it unset for the default)"
    return ""


def arch_list_problem(value: str) -> str | None:
    """What is wrong with an arch list (its first unknown entry), or None."""
    try:
        parse_arch_list(value, key="")
    except ConfigError as exc:
        return str(exc)
    return None

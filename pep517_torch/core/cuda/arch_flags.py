"""CUDA architecture lists → nvcc ``-gencode`` flags.

The syntax of an arch list, and its parser, are in :mod:`.arch_list` (no nvcc needed).

Every entry must be one the toolkit's nvcc can build (``nvcc --list-gpu-code``), else the
configuration error lists what it can build.

Default, when no list is given (the faces read ``TORCH_CUDA_ARCH_LIST`` into it): the
visible GPUs, the newest with ``+PTX``. With no GPU visible and a CUDA build of torch: torch's
own arch list (``torch.cuda.get_arch_list()``) as far as this nvcc can build it, PTX for the
newest: the extension then runs wherever that torch does (torch 2.14.1+cu130 with nvcc 13.0:
``7.5;8.0;8.6;9.0;10.0;12.0+PTX``). Otherwise (a CPU torch, or none of torch's archs buildable)
the lowest architecture of every major from 8 on that this nvcc can build, and PTX for the
newest of those: ``8.0;9.0;10.0;11.0;12.0+PTX`` for nvcc 13.0, ``8.0;9.0;10.0;12.0+PTX`` for
nvcc 12.8. That SASS runs on every GPU of those majors and the PTX on anything newer. Either
way one note says what was chosen and why.

If the user's own nvcc flags already choose architectures (``-gencode``/``--generate-code``,
``-arch``/``--gpu-architecture``, ``-code``/``--gpu-code``, as ``-x=y`` or ``-x y``), no arch
flags are added and the list is ignored. Each ``sm_XY``/``compute_XY``/``lto_XY`` they name
(``a``/``f`` variants included) must be one this nvcc can build, checked like a list entry
before anything compiles; ``native``, ``all`` and ``all-major`` are left to nvcc.

Flags come in a stable order: by compute capability, plain before ``a`` before ``f``, each SASS
flag followed by its PTX flag, without duplicates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ...errors import ConfigError
from .arch_list import ArchEntry, format_arch_list, parse_arch_list
from .toolkit import CudaToolkit
from .checks import visible_gpu_archs
from ..flag_syntax import ARCH_OPTIONS, options

_NVCC_ARCH_NAME = re.compile(r"(?:sm|compute|lto)_(\d+)(\d)([af]?)")


@dataclass(frozen=True)
class ArchDecision:
    """What to pass to nvcc, what that builds (for printing) and one line to show the user."""

    flags: list[str]
    archs: list[str]  # "sm_80", "sm_90", "compute_90", ...
    note: str | None = None


# ------------------------------------------------------------------------------- resolution


def resolve_arch_flags(
    entries: Sequence[ArchEntry] | None,
    toolkit: CudaToolkit,
    *,
    user_nvcc_flags: Sequence[str],
    env: Mapping[str, str],
    flag_key: Callable[[int], str] = lambda index: f"extra_cuda_cflags[{index}]",
    choose: str = "cuda_arch_list",
    torch_archs: Sequence[str] = (),
) -> ArchDecision:
    """Decide the ``-gencode`` flags for one nvcc command line (see the module docstring).

    ``flag_key`` names where the user's flag at an index of ``user_nvcc_flags`` was given;
    ``choose`` is where the caller's face sets the arch list (named in the notes);
    ``torch_archs``: ``torch.cuda.get_arch_list()`` of a CUDA torch (``checks.torch_arch_list``)."""
    user_arch = arch_options(user_nvcc_flags)
    if user_arch:
        check_user_arch_flags(user_nvcc_flags, toolkit, flag_key)
        key = (entries[0].key if entries else None) or choose
        ignored = f"; {key} ({format_arch_list(entries)}) ignored" if entries else ""
        flags = [flag for _, flag in user_arch]
        return ArchDecision(
            [],
            _archs_named_by(flags),
            f"{flag_key(user_arch[0][0])} chooses the GPU architectures ({' '.join(flags)}):"
            f" adding no arch flags{ignored}",
        )
    if not entries:
        chosen, note = _visible_or_default(
            toolkit, env, why="no architectures chosen", choose=choose, torch_archs=torch_archs
        )
        return _decision(chosen, note=note)
    explicit = [e for e in entries if not e.native]
    _check_buildable(explicit, toolkit)
    native = next((e for e in entries if e.native), None)
    if native is None:
        return _decision(explicit, note=None)
    why = f"{native.key or choose} has native"
    chosen, note = _visible_or_default(toolkit, env, why=why, choose=choose, torch_archs=torch_archs)
    return _decision([*explicit, *chosen], note=note)


def _visible_or_default(
    toolkit: CudaToolkit,
    env: Mapping[str, str],
    *,
    why: str,
    choose: str,
    torch_archs: Sequence[str] = (),
) -> tuple[list[ArchEntry], str]:
    """The visible GPUs' entries, else the default; and the note saying which and why."""
    gpus = visible_gpu_archs(env)
    entries, skipped = gpu_entries(gpus, toolkit)
    skipped_note = f" ({'; '.join(skipped)})" if skipped else ""
    if entries:
        chosen = format_arch_list(_merged(entries))
        return entries, (
            f"{why}: building for the visible GPUs ({', '.join(gpus)}): {chosen}{skipped_note};"
            f" set {choose} to choose"
        )
    gpu_part = f"no usable GPU visible{skipped_note}" if gpus else "no GPU visible"
    from_torch, left_out = torch_default_entries(torch_archs, toolkit)
    if from_torch:
        unbuildable = (
            f"; left out {', '.join(left_out)}: nvcc {toolkit.version_str} cannot build them"
            if left_out else ""
        )
        return from_torch, (
            f"{gpu_part} and {why}: building for {format_arch_list(from_torch)} (torch's own arch"
            f" list {' '.join(torch_archs)}{unbuildable}; PTX for the newest); set {choose} to choose"
        )
    default = default_arch_entries(toolkit)
    if not default:
        return [], (
            f"{why} and nvcc {toolkit.version_str} lists no GPU architectures: nvcc's own default"
            f" applies; set {choose} to choose"
        )
    return default, (
        f"{gpu_part} and {why}: building for {format_arch_list(default)} (the default for "
        f"nvcc {toolkit.version_str}); set {choose} to choose"
    )


def _supported(toolkit: CudaToolkit) -> list[tuple[int, int]]:
    pairs = (arch.split(".") for arch in toolkit.supported_archs)
    return sorted((int(major), int(minor)) for major, minor in pairs)


def default_arch_entries(toolkit: CudaToolkit) -> list[ArchEntry]:
    """The lowest arch of every major from 8 on that nvcc supports; PTX for the newest of them."""
    supported = _supported(toolkit)
    lowest: dict[int, tuple[int, int]] = {}
    for major, minor in supported:
        if major >= 8:
            lowest.setdefault(major, (major, minor))
    chosen = sorted(lowest.values()) or supported[-1:]  # an nvcc that stops before 8.0
    return [ArchEntry(a, b, ptx=(a, b) == chosen[-1]) for a, b in chosen]


def torch_default_entries(
    torch_archs: Sequence[str], toolkit: CudaToolkit
) -> tuple[list[ArchEntry], list[str]]:
    """torch's arch list (``sm_80``, ``compute_90``, ...) as entries nvcc can build, PTX for the
    newest; and the names left out because this nvcc cannot build them."""
    supported = set(_supported(toolkit))
    chosen: dict[tuple[int, int], bool] = {}  # (major, minor) -> PTX asked for
    left_out: list[str] = []
    for name in torch_archs:
        match = _NVCC_ARCH_NAME.fullmatch(name)
        if match is None or match[3]:
            continue  # arch-specific builds of torch's own kernels do not carry over
        pair = (int(match[1]), int(match[2]))
        if supported and pair not in supported:
            left_out.append(name)
            continue
        chosen[pair] = chosen.get(pair, False) or name.startswith("compute_")
    if not chosen:
        return [], left_out
    newest = max(chosen)
    return [ArchEntry(a, b, ptx=ptx or (a, b) == newest) for (a, b), ptx in sorted(chosen.items())], left_out


def gpu_entries(gpus: Sequence[str], toolkit: CudaToolkit) -> tuple[list[ArchEntry], list[str]]:
    """Entries that run on GPUs of these compute capabilities, and why any GPU is left out.

    A capability nvcc lacks falls back to the newest lower minor of its major (SASS runs on later
    minors), or, for a GPU newer than nvcc, the newest arch nvcc has with PTX.
    """
    supported = _supported(toolkit)
    entries: list[ArchEntry] = []
    skipped: list[str] = []
    for gpu in gpus:
        major, minor = map(int, gpu.split("."))
        same_major = [s for s in supported if s[0] == major and s[1] <= minor]
        if same_major:
            entries.append(ArchEntry(*same_major[-1]))
        elif supported and (major, minor) > supported[-1]:
            entries.append(ArchEntry(*supported[-1], ptx=True))
        else:
            skipped.append(f"GPU {gpu}: nvcc {toolkit.version_str} cannot build for it")
    if entries:
        newest = max(entries, key=lambda e: e.sort_key)
        entries.append(ArchEntry(newest.major, newest.minor, ptx=True))
    return entries, skipped


def _buildable(entry: ArchEntry, toolkit: CudaToolkit, supported: set[tuple[int, int]]) -> bool:
    if entry.variant == "a":
        ok = (entry.major, entry.minor) >= (9, 0) and toolkit.version >= (12, 0)
    elif entry.variant == "f":
        ok = entry.major >= 10 and toolkit.version >= (12, 9)
    else:
        ok = True
    return ok and (entry.major, entry.minor) in supported


def _renamed(entry: ArchEntry, supported: set[tuple[int, int]]) -> str:
    if (entry.major, entry.minor) == (10, 1) and (11, 0) in supported:
        return " (CUDA 13 renamed 10.1 to 11.0)"
    return ""


def _check_buildable(entries: Sequence[ArchEntry], toolkit: CudaToolkit) -> None:
    supported = set(_supported(toolkit))
    if not supported:
        return  # an nvcc without --list-gpu-code: let nvcc itself judge
    for entry in entries:
        if not _buildable(entry, toolkit, supported):
            named = entry.origin and entry.origin != str(entry)
            origin = f" (from {entry.origin!r})" if named else ""
            raise ConfigError(
                f"nvcc {toolkit.version_str} ({toolkit.nvcc}) cannot build for {entry}{origin}"
                f"{_renamed(entry, supported)}; it can build {_buildable_summary(toolkit)}",
                entry.key,
            )


def check_user_arch_flags(
    flags: Sequence[str], toolkit: CudaToolkit, flag_key: Callable[[int], str]
) -> None:
    """Every architecture the user's arch options name must be one this nvcc can build."""
    supported = set(_supported(toolkit))
    if not supported:
        return  # an nvcc without --list-gpu-code: let nvcc itself judge
    for index, option in arch_options(flags):
        for name in _archs_named_by([option], every=True):
            match = _NVCC_ARCH_NAME.fullmatch(name)
            if match is None:
                continue  # native, all, all-major, or anything else nvcc judges itself
            entry = ArchEntry(int(match[1]), int(match[2]), match[3])
            if not _buildable(entry, toolkit, supported):
                raise ConfigError(
                    f"{option!r} names {name}, which nvcc {toolkit.version_str} ({toolkit.nvcc})"
                    f" cannot build{_renamed(entry, supported)}; it can build"
                    f" {_buildable_names(toolkit)}",
                    flag_key(index),
                )


def _buildable_names(toolkit: CudaToolkit) -> str:
    """What nvcc builds, in the names its options take."""
    supported = _supported(toolkit)
    names = ", ".join(f"sm_{a}{b}" for a, b in supported)
    if toolkit.version >= (12, 0):
        names += ", " + ", ".join(f"sm_{a}{b}a" for a, b in supported if (a, b) >= (9, 0))
    if toolkit.version >= (12, 9):
        names += ", " + ", ".join(f"sm_{a}{b}f" for a, b in supported if a >= 10)
    return f"{names} (and compute_ or lto_ of each)"


def _buildable_summary(toolkit: CudaToolkit) -> str:
    plain = [f"{a}.{b}" for a, b in _supported(toolkit)]
    specific = [f"{a}.{b}a" for a, b in _supported(toolkit) if (a, b) >= (9, 0)]
    family = [f"{a}.{b}f" for a, b in _supported(toolkit) if a >= 10]
    parts = [", ".join(plain)]
    if specific and toolkit.version >= (12, 0):
        parts.append(f"arch-specific {', '.join(specific)}")
    if family and toolkit.version >= (12, 9):
        parts.append(f"family-specific {', '.join(family)}")
    return "; ".join(parts) + " (each optionally +PTX)"


def _merged(entries: Sequence[ArchEntry]) -> list[ArchEntry]:
    """One entry per architecture (PTX if any asked for it), in the documented order."""
    by_arch: dict[tuple[int, int, int], ArchEntry] = {}
    for entry in entries:
        seen = by_arch.get(entry.sort_key)
        ptx = entry.ptx or (seen is not None and seen.ptx)
        by_arch[entry.sort_key] = ArchEntry(entry.major, entry.minor, entry.variant, ptx)
    return [by_arch[k] for k in sorted(by_arch)]


def _decision(entries: Sequence[ArchEntry], *, note: str | None) -> ArchDecision:
    flags: list[str] = []
    archs: list[str] = []
    for entry in _merged(entries):
        flags.append(f"-gencode=arch=compute_{entry.number},code=sm_{entry.number}")
        archs.append(f"sm_{entry.number}")
        if entry.ptx:
            flags.append(f"-gencode=arch=compute_{entry.number},code=compute_{entry.number}")
            archs.append(f"compute_{entry.number}")
    return ArchDecision(flags, archs, note)


# ------------------------------------------------------------------------ user's own flags


def arch_options(flags: Sequence[str]) -> list[tuple[int, str]]:
    """(index in ``flags``, the option as one ``-x=value`` string) for each option choosing GPU
    architectures."""
    return [
        (option.index, option.name if option.value is None else f"{option.name}={option.value}")
        for option in options(flags)
        if option.name in ARCH_OPTIONS
    ]


def user_arch_flags(flags: Sequence[str]) -> list[str]:
    """The options in ``flags`` that choose GPU architectures, each as one ``-x=value`` string."""
    return [flag for _, flag in arch_options(flags)]


def archs_named_by(flags: Sequence[str]) -> list[str]:
    """The GPU targets nvcc ``flags`` build (``sm_80``, ``compute_90``), for people to read."""
    return _archs_named_by(user_arch_flags(flags))


def _archs_named_by(arch_flags: Sequence[str], *, every: bool = False) -> list[str]:
    """What user arch options name, for printing: gencode/-code targets, else -arch values;
    ``every``: the gencode ``arch=`` values and every -arch value too (to check them)."""
    codes: list[str] = []
    arches: list[str] = []
    for flag in arch_flags:
        name, _, value = flag.partition("=")
        value = value.replace('"', "").replace("'", "")
        if name in ("-gencode", "--generate-code"):
            arch, _, code = value.partition("code=")
            codes.extend(v for v in re.split(r"[\[\],]", code) if v)
            arches.extend(v for v in re.split(r"[,=]", arch) if v and v != "arch")
        elif name in ("-code", "--gpu-code"):
            codes.extend(v for v in value.split(",") if v)
        else:
            arches.extend(v for v in value.split(",") if v)
    return list(dict.fromkeys([*codes, *arches] if every else codes or arches))

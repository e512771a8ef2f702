"""The manylinux tag a wheel's binaries earn: auditwheel's policies against what their ELF needs.

Each shipped binary's symbol versions (``GLIBC_2.32``, ``GLIBCXX_3.4.30``, ``CXXABI_1.3.13``,
``GCC_7.0.0``) and NEEDED libraries are read with :mod:`pep517_torch.abi.elf`; the policies (the
libraries and symbol versions each ``manylinux_2_X`` allows) are auditwheel's own. Torch's
libraries and the CUDA libraries a CUDA build of torch brings count as supplied by the torch
requirement, as published extensions say with ``auditwheel repair --exclude``.
"""

from __future__ import annotations

import fnmatch
import platform
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..abi import elf
from ..abi.platform_tags import policies as machine_policies
from ..errors import ConfigError

# Loaded with torch (its wheel's torch/lib, or the nvidia-* wheels its CUDA build requires),
# and the driver every CUDA program needs.
TORCH_SUPPLIED = (
    "libtorch*.so*", "libc10*.so*", "libshm.so*", "libtorch_python.so*", "libgomp.so*",
    "libcudart.so*", "libcublas*.so*", "libcudnn*.so*", "libcufft*.so*", "libcurand.so*",
    "libcusolver*.so*", "libcusparse*.so*", "libnccl.so*", "libnvrtc*.so*", "libnvJitLink.so*",
    "libnvToolsExt.so*", "libnvtx3*.so*", "libcupti.so*", "libcufile*.so*", "libnvshmem*.so*",
    "libcuda.so*",
)
SUPPLIED_HELP = "torch's own and its CUDA libraries count as supplied by the torch requirement"


@dataclass(frozen=True)
class Binary:
    """A shipped ELF file, what it is called in messages (its source, or its wheel path), and,
    for a built artifact, its object files with the source each compiles."""

    path: Path
    shown: str
    objects: tuple[tuple[Path, str], ...] = ()


@dataclass(frozen=True)
class Decision:
    tag: str  # the platform tag: manylinux_2_34_x86_64, linux_x86_64
    note: str  # what decided it, for the build summary


@dataclass(frozen=True)
class _Need:
    version: str
    symbol: str
    binary: Binary


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version.partition("_")[2]))


def torch_supplied(library: str) -> bool:
    return any(fnmatch.fnmatch(library, pattern) for pattern in TORCH_SUPPLIED)


def _who(need: _Need) -> str:
    users = elf.users(need.symbol, [path for path, _ in need.binary.objects])
    shown = dict(need.binary.objects)
    where = shown[users[0]] if users else need.binary.shown
    return f"{where} needs {need.version} ({elf.demangle(need.symbol)})"


def _violations(policy, needs: Sequence[_Need]) -> list[_Need]:  # type: ignore[no-untyped-def]
    allowed = policy.symbol_versions
    out = []
    for need in needs:
        prefix = need.version.partition("_")[0]
        if prefix in allowed and need.version.partition("_")[2] not in allowed[prefix]:
            out.append(need)
    return sorted(out, key=lambda n: (n.version.partition("_")[0], _key(n.version)), reverse=True)


def decide(mode: str, binaries: Sequence[Binary], shipped_names: set[str], linux_tag: str) -> Decision:
    """The platform tag for ``binaries`` under ``platform-tag = mode`` (``auto``, ``linux`` or a
    tag); ``shipped_names`` are the file names of libraries the wheel itself holds."""
    if mode in ("linux", linux_tag):  # linux_<arch> promises nothing: every binary earns it
        return Decision(linux_tag, f"platform-tag = \"{mode}\"")
    if platform.libc_ver()[0] != "glibc":
        if mode != "auto":
            raise ConfigError(f"{mode} needs a glibc system; this one is not",
                              "tool.torch-ext.platform-tag")
        return Decision(linux_tag, f"{linux_tag}: not a glibc system (musllinux is not computed)")
    policies = machine_policies()
    needs: list[_Need] = []
    foreign: list[tuple[str, Binary]] = []
    for binary in binaries:
        info = elf.read_dynamic(binary.path)
        needs += [_Need(n.version, n.name, binary) for n in info.undefined if n.version]
        for library in info.needed_libraries:
            if not (torch_supplied(library) or library in shipped_names or "ld-linux" in library):
                foreign.append((library, binary))
    ordered = sorted((p for p in policies if p.name != policies.linux.name), reverse=True)
    if mode != "auto":
        return _explicit(mode, policies, needs, foreign)
    outside = [(lib, b) for lib, b in foreign if lib not in policies.lowest.whitelist]
    if outside:
        library, binary = outside[0]
        return Decision(linux_tag, (
            f"{linux_tag}: {binary.shown} needs {library}, which no manylinux policy allows and"
            " torch does not supply: PyPI refuses this wheel; run `auditwheel repair` on it"
            " (with --exclude for torch's libraries) or ship the library in the wheel"
        ))
    previous = None
    for policy in ordered:  # strictest first
        if _violations(policy, needs) or any(lib not in policy.whitelist for lib, _ in foreign):
            previous = policy
            continue
        base = re.sub(r"^(manylinux_\d+_\d+)_.*$", r"\1", policy.name)
        if previous is None:
            return Decision(policy.name, f"{base}: the strictest manylinux policy holds")
        broken = _violations(previous, needs)
        if broken:
            return Decision(policy.name, f"{base}: {_who(broken[0])}")
        library, binary = next((lb for lb in foreign if lb[0] not in previous.whitelist))
        return Decision(policy.name, f"{base}: {binary.shown} needs {library}")
    return Decision(linux_tag, f"{linux_tag}: no manylinux policy holds")


def _explicit(mode: str, policies, needs: Sequence[_Need], foreign) -> Decision:  # type: ignore[no-untyped-def]
    try:
        policy = policies.get_policy_by_name(mode)
    except LookupError:
        known = ", ".join(p.name for p in policies if p.name != policies.linux.name)
        raise ConfigError(
            f"{mode!r} is no platform tag of this machine's architecture (auto, linux, or one"
            f" of {known})", "tool.torch-ext.platform-tag"
        ) from None
    broken = _violations(policy, needs)
    if broken:
        raise ConfigError(f"the binaries do not satisfy {mode}: {_who(broken[0])}",
                          "tool.torch-ext.platform-tag")
    for library, binary in foreign:
        if library not in policy.whitelist:
            raise ConfigError(
                f"the binaries do not satisfy {mode}: {binary.shown} needs {library}, which"
                f" {mode} does not allow ({SUPPLIED_HELP})", "tool.torch-ext.platform-tag")
    return Decision(mode, f"{mode}: platform-tag")

"""The Linux platform tags a wheel may carry: auditwheel's policies for this machine (glibc,
its architecture), the one vocabulary the config layer checks a ``platform-tag`` setting
against and the distribution layer decides a wheel's tag with."""

from __future__ import annotations

import platform
import sys


def policies():  # type: ignore[no-untyped-def]
    """auditwheel's manylinux policies for this machine (imported on first use)."""
    from auditwheel.architecture import Architecture
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies

    return WheelPolicies(libc=Libc.GLIBC, arch=Architecture.detect())


def tag_problem(value: str) -> str | None:
    """Why ``value`` is no ``platform-tag`` setting on this machine, or None: ``auto``,
    ``linux``, or a tag of auditwheel's policies for this architecture (checked on glibc
    Linux only; elsewhere the tag is not computed)."""
    if value in ("auto", "linux") or not sys.platform.startswith("linux"):
        return None
    if platform.libc_ver()[0] != "glibc":
        return None
    found = policies()
    try:
        found.get_policy_by_name(value)
    except LookupError:
        known = ", ".join(p.name for p in found if p.name != found.linux.name)
        return f"{value!r} is no platform tag of this machine's architecture (auto, linux, or one of {known})"
    return None

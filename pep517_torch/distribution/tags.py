"""Wheel tags and extension-module file suffixes for the running interpreter."""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Sequence

from packaging import tags

from ..errors import ConfigError
from ..abi import limited_api

PURE_TAG = "py3-none-any"


def python_tag() -> str:
    """The interpreter tag of the running Python, e.g. ``cp311``."""
    return next(iter(tags.sys_tags())).interpreter


def platform_tag() -> str:
    """The platform tag of the running Python, e.g. ``linux_x86_64`` or ``macosx_11_0_arm64``."""
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    # A 32-bit interpreter on a 64-bit Linux kernel reports the kernel's machine.
    if platform == "linux_x86_64" and sys.maxsize <= 2**32:
        return "linux_i686"
    return platform


def wheel_tag(
    *, native_code: bool, limited_api: str | None = None, platform: str | None = None
) -> str:
    """The tag of a wheel built here: ``py3-none-any`` without ``native_code`` (compiled
    files), else ``cp311-cp311-<platform>`` or ``cp310-abi3-<platform>``.

    ``limited_api`` is the minimum CPython of a limited-API build, as ``"cp310"``; ``platform``
    the platform tag (default: the interpreter's, ``linux_x86_64``).
    """
    if not native_code:
        return PURE_TAG
    platform = platform or platform_tag()
    if limited_api is not None:
        _check_limited_api(limited_api)
        return f"{limited_api}-abi3-{platform}"
    first = next(iter(tags.sys_tags()))
    return f"{first.interpreter}-{first.abi}-{platform}"


def extensions_wheel_tag(limited_apis: Sequence[str | None], platform: str | None = None) -> str:
    """The tag of a wheel holding extensions built with these limited-API minimums (None: a
    full-API build): pure without extensions, abi3 for the highest minimum when every one is
    limited, the interpreter's own tag otherwise."""
    if not limited_apis:
        return wheel_tag(native_code=False)
    if all(limited_apis):
        for target in limited_apis:
            _check_limited_api(target)  # type: ignore[arg-type]
        newest = limited_api.newest(limited_apis)  # type: ignore[arg-type]
        return wheel_tag(native_code=True, limited_api=newest, platform=platform)
    return wheel_tag(native_code=True, platform=platform)


def _check_limited_api(target: str) -> None:
    problem = limited_api.problem(target)
    if problem:
        raise ConfigError(problem)
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        raise ConfigError("the limited API (abi3) needs a CPython build without free threading")

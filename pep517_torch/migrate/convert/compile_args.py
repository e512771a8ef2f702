"""What an extension's compile and link arguments say in pep517_torch's own keys.

``-fopenmp`` is ``openmp = true`` (and the define that comes with it is ours to add), ``-s``
is ``strip = true``, a ``Py_LIMITED_API`` define is the limited-API target and, with it, a
``TORCH_TARGET_VERSION`` define is ``stable-abi`` (pep517_torch defines both); everything else
stays a flag, verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...abi import limited_api
from ...abi import stable_abi
from ...core.flags import OPENMP_DEFINE

LIMITED_API_DEFINE = "Py_LIMITED_API"
OPENMP_FLAGS = ("-fopenmp", "-Xcompiler=-fopenmp")
STRIP_FLAGS = ("-s", "-Wl,-s", "-Wl,--strip-all")


@dataclass
class Arguments:
    """One extension's macros and flags, as pep517_torch keys take them."""

    macros: dict[str, str | int | bool]
    cflags: list[str]
    cuda_flags: list[str]
    ldflags: list[str]
    openmp: bool = False
    strip: bool = False
    limited_api_value: str | int | bool | None = None  # a Py_LIMITED_API define's value, if any
    stable_abi: str | None = None  # a TORCH_TARGET_VERSION define's target ("2.10"), if any


def macro_value(value: Any) -> str | int | bool:
    if value is None:
        return True
    return value if isinstance(value, int) and not isinstance(value, bool) else str(value)


def limited_api_tag(hex_value: Any) -> str | None:
    """``0x030A0000`` -> ``cp310``."""
    return limited_api.target_of_macro(hex_value)


def _without_openmp(flags: list[str]) -> list[str]:
    kept: list[str] = []
    for flag in flags:
        if flag == "-fopenmp" and kept[-1:] == ["-Xcompiler"]:
            kept.pop()
        elif flag not in OPENMP_FLAGS:
            kept.append(flag)
    return kept


def take_define(flags: list[str], name: str) -> tuple[list[str], list[str | bool]]:
    """``flags`` without ``-DNAME[=value]`` (or ``-D NAME[=value]``), and the values they gave."""
    kept: list[str] = []
    values: list[str | bool] = []
    index = 0
    while index < len(flags):
        flag = flags[index]
        width = 2 if flag == "-D" and index + 1 < len(flags) else 1
        text = flags[index + 1] if width == 2 else flag[2:] if flag.startswith("-D") else None
        if text is not None and text.partition("=")[0] == name:
            values.append(text.partition("=")[2] if "=" in text else True)
        else:
            kept += flags[index:index + width]
        index += width
    return kept, values


def interpret(macros: dict[str, str | int | bool], cflags: list[str], cuda_flags: list[str],
              ldflags: list[str], *, limited: bool) -> Arguments:
    """Move what pep517_torch has a key for out of the macros and flags."""
    args = Arguments(dict(macros), list(cflags), list(cuda_flags), list(ldflags))
    args.openmp = "-fopenmp" in args.cflags
    if args.openmp:
        args.cflags, args.cuda_flags, args.ldflags = map(
            _without_openmp, (args.cflags, args.cuda_flags, args.ldflags))
        args.macros.pop(OPENMP_DEFINE, None)
        args.cflags = take_define(args.cflags, OPENMP_DEFINE)[0]
        args.cuda_flags = take_define(args.cuda_flags, OPENMP_DEFINE)[0]
    args.strip = any(flag in STRIP_FLAGS for flag in args.ldflags)
    args.ldflags = [flag for flag in args.ldflags if flag not in STRIP_FLAGS]
    if limited:
        args.limited_api_value = args.macros.pop(LIMITED_API_DEFINE, None)
        args.cflags, in_cflags = take_define(args.cflags, LIMITED_API_DEFINE)
        args.cuda_flags, in_cuda_flags = take_define(args.cuda_flags, LIMITED_API_DEFINE)
        if args.limited_api_value is None and in_cflags + in_cuda_flags:
            args.limited_api_value = (in_cflags + in_cuda_flags)[0]
        _take_stable_abi(args)
    return args


def _take_stable_abi(args: Arguments) -> None:
    """A TORCH_TARGET_VERSION define (macro, C++ or nvcc flag) whose every value names one
    target becomes that target; anything else stays as it was."""
    name = stable_abi.MACRO
    values = [args.macros[name]] if name in args.macros else []
    values += take_define(args.cflags, name)[1] + take_define(args.cuda_flags, name)[1]
    targets = {stable_abi.target_of_macro(value) for value in values}
    if not values or len(targets) != 1 or None in targets:
        return
    args.macros.pop(name, None)
    args.cflags = take_define(args.cflags, name)[0]
    args.cuda_flags = take_define(args.cuda_flags, name)[0]
    args.stable_abi = targets.pop()

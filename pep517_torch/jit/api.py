"""``load`` and ``load_inline``: drop-in replacements for torch.utils.cpp_extension's."""

from __future__ import annotations

import keyword
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..core.ninja.syntax import shown, unnameable_character, unwritable_character
from ..core.suffixes import CUDA_HEADER_SUFFIXES, is_header
from ..errors import ConfigError
from ..shipped_runtime.environment import TORCH_EXTENSIONS_DIR
from .request import ArtifactKind, JitRequest
from .warm import check_extensions_dir, extensions_root, jit_load, one_line

CXX_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
    char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
    co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not
    not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires
    return short signed sizeof static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using virtual void
    volatile wchar_t while xor xor_eq
""".split())


def _nameable(paths: Iterable[str], argument: str) -> None:
    """Every source and build directory becomes a ninja build-line path."""
    for path in paths:
        problem = unnameable_character(path)
        if problem:
            raise ConfigError(f"{shown(path)} contains {problem}: rename or move it", argument)


def _entries(value: object, argument: str, *, paths: bool = False) -> Sequence[str]:
    """A list argument's entries, each a one-line str (a path-like too, for ``paths``). torch
    iterates these arguments: a str is read as its characters (``extra_cflags="-O2"`` passes
    ``-``, ``O`` and ``2`` to the compiler), a number fails inside torch; both are refused here
    naming the argument. A list or tuple costs one type test per entry (the warm path)."""
    if value is None:
        return ()
    if type(value) is not list and type(value) is not tuple:
        if isinstance(value, str):
            chars = ", ".join(repr(c) for c in value[:4]) + (", ..." if len(value) > 4 else "")
            raise ConfigError(
                f"must be a list of strings, not the string {value!r}: torch's load() would"
                f" read it as the entries {chars}; pass [{value!r}]", argument,
            )
        if isinstance(value, bytes) or not hasattr(value, "__iter__") or hasattr(value, "keys"):
            raise ConfigError(f"must be a list of strings, not {type(value).__name__}", argument)
        value = list(value)  # type: ignore[call-overload]
    entries: list[str] = value  # type: ignore[assignment]
    for index, entry in enumerate(entries):
        if type(entry) is not str:
            text = os.fspath(entry) if paths and hasattr(entry, "__fspath__") else None
            if type(text) is not str:
                raise ConfigError(
                    f"entry {index} is {entry!r} ({type(entry).__name__}): every entry must be a"
                    f" str{' or a path' if paths else ''}", argument,
                )
            entry = text
        problem = None if paths else unwritable_character(entry)  # paths: the caller says "move it"
        if problem:
            raise ConfigError(f"{shown(entry)} contains {problem}: it cannot reach a command line", argument)
    return entries


def _split_flags(flags: object, what: str) -> tuple[str, ...]:
    """torch joins flag strings with spaces for a shell; we split them the same way, safely."""
    entries = _entries(flags, what)
    if not entries:
        return ()
    import shlex  # only when there are flags: the warm path of a flag-less load() stays light

    out: list[str] = []
    for flag in entries:
        try:
            out += shlex.split(flag)
        except ValueError as exc:
            raise ConfigError(f"cannot parse flag {flag!r}: {exc}", what) from None
    one_line(out, what)
    return tuple(out)


def _include_dirs(paths: object) -> tuple[str, ...]:
    dirs = tuple(os.path.abspath(os.path.expanduser(os.fspath(p)))
                 for p in _entries(paths, "extra_include_paths", paths=True))
    one_line(dirs, "extra_include_paths")
    return dirs


def _check_name(name: str) -> None:
    """An ASCII identifier: it becomes the module name, TORCH_EXTENSION_NAME and PyInit_<name>
    (Python looks for PyInitU_... in a non-ASCII one, which pybind11 cannot define)."""
    if (
        not isinstance(name, str)
        or not name.isidentifier()
        or not name.isascii()
        or keyword.iskeyword(name)
    ):
        raise ConfigError(
            f"extension name {name!r} must be a valid Python identifier, ASCII and not a"
            " keyword (it becomes the module name, TORCH_EXTENSION_NAME and PyInit_<name>)",
            "name",
        )


def _build_directory(name: str, build_directory: str | os.PathLike[str] | None) -> str:
    """The build directory, once it is known to fit on a command line (a string: the warm path
    builds no path objects; the cold path checks TORCH_EXTENSIONS_DIR for the shared PCH)."""
    if build_directory is not None:
        path = os.path.abspath(os.path.expanduser(os.fspath(build_directory)))
        _nameable([path], "build_directory")
        return path
    path = os.path.join(extensions_root(), name)
    _nameable([path], TORCH_EXTENSIONS_DIR)  # the default under ~/.cache
    return path


def _refuse_sycl(sources: object, flags: object, with_sycl: bool | None) -> None:
    if sources or flags or with_sycl:
        raise ConfigError("SYCL extensions are not supported by pep517_torch", "with_sycl")


def _kind(is_python_module: bool, is_standalone: bool) -> ArtifactKind:
    if is_python_module and is_standalone:
        raise ConfigError(
            "is_python_module=True and is_standalone=True are mutually exclusive: a standalone"
            " executable cannot be imported",
            "is_standalone",
        )
    if is_standalone:
        return "executable"
    return "module" if is_python_module else "library"


def load(
    name: str,
    sources: str | Sequence[str],
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_sycl_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    with_sycl: bool | None = None,
    is_python_module: bool = True,
    is_standalone: bool = False,
    keep_intermediates: bool = True,
    *,
    use_pch: bool | None = None,
    stable_abi: str | None = None,
) -> object:
    """Build (once) and load a C++/CUDA extension, like ``torch.utils.cpp_extension.load``.

    Returns the module; with ``is_python_module=False`` the library is loaded into
    ``torch.ops`` and its path returned; with ``is_standalone=True`` the executable's path.
    ``use_pch`` (our addition; default on, ``PEP517_TORCH_PCH=0`` turns it off) shares a
    precompiled torch/extension.h between JIT extensions built with the same flags.
    ``stable_abi`` (our addition, e.g. ``"2.10"``) builds against LibTorch's stable ABI for
    every torch from that version on, as the ``stable-abi`` key does for wheels.
    ``keep_intermediates`` is accepted for compatibility (it only mattered for ROCm hipify).
    """
    del keep_intermediates
    _check_name(name)
    stable_abi = _check_stable_abi(stable_abi)
    _refuse_sycl(None, extra_sycl_cflags, with_sycl)
    kind = _kind(is_python_module, is_standalone)
    # os.PathLike's test without the ABC machinery (tens of µs on a first call).
    if isinstance(sources, str) or hasattr(sources, "__fspath__"):
        sources = [sources]
    sources = _entries(sources, "sources", paths=True)
    if not sources:
        raise ConfigError(f"extension {name!r}: sources is empty", "sources")
    # torch accepts headers among the sources (a .cuh even turns CUDA on); they are not
    # compiled, and ninja's depfiles track them like any other included header. The compile
    # core checks that the rest exist and are sources.
    paths, headers = [], []
    for source in sources:
        path = os.path.abspath(os.path.expanduser(os.fspath(source)))
        _nameable([path], "sources")
        (headers if is_header(path) else paths).append(path)
    if not paths:
        raise ConfigError(f"extension {name!r}: sources holds only headers", "sources")
    if with_cuda is None and any(os.path.splitext(h)[1] in CUDA_HEADER_SUFFIXES for h in headers):
        with_cuda = True
    request = JitRequest(
        name=name,
        sources=tuple(paths),
        include_dirs=_include_dirs(extra_include_paths),
        cflags=_split_flags(extra_cflags, "extra_cflags"),
        cuda_cflags=_split_flags(extra_cuda_cflags, "extra_cuda_cflags"),
        ldflags=_split_flags(extra_ldflags, "extra_ldflags"),
        with_cuda=with_cuda,
        kind=kind,
        stable_abi=stable_abi,
    )
    return jit_load(request, _build_directory(name, build_directory), verbose=verbose, pch=use_pch)


def _check_stable_abi(target: object) -> str | None:
    """The target, normalised (``"02.10"`` -> ``"2.10"``), once it is one."""
    if target is None:
        return None
    from ..abi.stable_abi import normalised, problem

    if not isinstance(target, str):
        raise ConfigError(f"must be a str such as '2.10', not {type(target).__name__}", "stable_abi")
    message = problem(target)
    if message:
        raise ConfigError(message, "stable_abi")
    return normalised(target)


def _texts(value: object, argument: str) -> list[str]:
    """``cpp_sources``/``cuda_sources`` given as a list: source texts (lines of code may break)."""
    if value is None or isinstance(value, bytes) or not hasattr(value, "__iter__") or hasattr(value, "keys"):
        raise ConfigError(f"must be a str or a list of str, not {type(value).__name__}", argument)
    texts = list(value)  # type: ignore[call-overload]
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ConfigError(f"entry {index} is {text!r} ({type(text).__name__}), not a str", argument)
    return texts


def _bindings(functions: str | Sequence[str] | Mapping[str, str], with_error_handling: bool) -> str:
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, Mapping):
        docs = dict(functions)
    elif isinstance(functions, Sequence):
        docs = {f: f for f in functions}
    else:
        raise ConfigError(
            f"must be a str, list or dict, not {type(functions).__name__}", "functions"
        )
    lines = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
    for function, doc in docs.items():
        parts = function.split("::") if isinstance(function, str) else [None]
        if parts[0] == "" and len(parts) > 1:
            parts = parts[1:]  # ::f, from the global namespace
        if not all(part and part.isidentifier() and part.isascii() and part not in CXX_KEYWORDS
                   for part in parts):
            raise ConfigError(
                f"{function!r} is not a C++ function name (an identifier, optionally qualified:"
                " f, ns::f)",
                "functions",
            )
        if not isinstance(doc, str):
            raise ConfigError(f"the docstring of {function!r} must be a str", "functions")
        target = f"torch::wrap_pybind_function({function})" if with_error_handling else function
        escaped = doc.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        lines.append(f'm.def("{function}", {target}, "{escaped}");')
    lines.append("}")
    return "\n".join(lines)


def load_inline(
    name: str,
    cpp_sources: str | Sequence[str],
    cuda_sources: str | Sequence[str] | None = None,
    sycl_sources: str | Sequence[str] | None = None,
    functions: str | Sequence[str] | Mapping[str, str] | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_sycl_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    with_sycl: bool | None = None,
    is_python_module: bool = True,
    with_pytorch_error_handling: bool = True,
    keep_intermediates: bool = True,
    use_pch: bool | None = None,
    no_implicit_headers: bool = False,
    *,
    stable_abi: str | None = None,
) -> object:
    """Like ``torch.utils.cpp_extension.load_inline``: sources as strings.

    ``use_pch=None`` (default) means on unless ``PEP517_TORCH_PCH=0``; torch's own PCH is
    written into torch's install folder, ours into a shared cache next to the JIT builds.
    """
    _check_name(name)
    stable_abi = _check_stable_abi(stable_abi)
    _refuse_sycl(sycl_sources, extra_sycl_cflags, with_sycl)
    if stable_abi is not None and functions is not None:
        raise ConfigError("binds functions with pybind11, which the stable ABI excludes: register"
                          " operators with STABLE_TORCH_LIBRARY instead", "functions")
    check_extensions_dir(os.environ)
    cuda = None  # refused before anything is written, as every argument is
    if cuda_sources is not None:
        cuda = [cuda_sources] if isinstance(cuda_sources, str) else _texts(cuda_sources, "cuda_sources")
    build_dir = Path(_build_directory(name, build_directory))
    for flags, argument in ((extra_cflags, "extra_cflags"), (extra_cuda_cflags, "extra_cuda_cflags"),
                            (extra_ldflags, "extra_ldflags")):
        _split_flags(flags, argument)  # refused before the sources are written
    _include_dirs(extra_include_paths)
    cpp = [cpp_sources] if isinstance(cpp_sources, str) else _texts(cpp_sources, "cpp_sources")
    if not no_implicit_headers:
        cpp.insert(0, "#include <torch/csrc/stable/library.h>" if stable_abi else "#include <torch/extension.h>")
    if functions is not None:
        cpp.append(_bindings(functions, with_pytorch_error_handling))
    from ..atomic import write_if_changed  # not on load()'s warm path
    from ..project_tree import make_build_dir

    make_build_dir(build_dir)
    main = build_dir / "main.cpp"
    write_if_changed(main, "\n".join(cpp) + "\n")
    sources = [str(main)]
    if cuda_sources and cuda is not None:
        if not no_implicit_headers:
            torch_header = "<torch/csrc/stable/library.h>" if stable_abi else "<torch/types.h>"
            cuda[:0] = [f"#include {torch_header}", "#include <cuda.h>", "#include <cuda_runtime.h>"]
        kernel = build_dir / "cuda.cu"
        write_if_changed(kernel, "\n".join(cuda) + "\n")
        sources.append(str(kernel))
    return load(
        name,
        sources,
        extra_cflags=extra_cflags,
        extra_cuda_cflags=extra_cuda_cflags,
        extra_ldflags=extra_ldflags,
        extra_include_paths=extra_include_paths,
        build_directory=str(build_dir),
        verbose=verbose,
        with_cuda=with_cuda,
        is_python_module=is_python_module,
        use_pch=use_pch,
        stable_abi=stable_abi,
    )

"""Checks of single string values, for the settings model's ``check`` metadata: each returns
what is wrong with a value (the error message after its key), or None."""

from __future__ import annotations

import keyword
import re
import sys

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def no_keyword_parts(value: str) -> str | None:
    bad = [part for part in value.split(".") if keyword.iskeyword(part)]
    return f"{bad[0]!r} is a Python keyword and cannot name a module" if bad else None


# Top-level names Python's `site` imports at every interpreter start of an environment: a
# wheel that ships one runs its code in every process there (and a compiled one, which `site`
# cannot import, prints an error at every start).
STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})


def shipped_name_problem(value: str, *, compiled: bool = False) -> str | None:
    """What breaks when a wheel ships a module, package or (``compiled``) extension of this
    dotted name, or None: a keyword part, a part named ``__init__`` (it would be the package's
    own module: ``import pkg`` loads it instead of ``pkg/__init__.py``) or ``__pycache__``
    (installers and cleaners delete those folders), a top-level ``__main__`` (``import
    __main__`` is always the running script), a startup module, and a compiled
    ``pkg.__main__`` (``python -m pkg`` needs a code object, which an extension has not)."""
    problem = no_keyword_parts(value)
    if problem:
        return problem
    parts = value.split(".")
    if "__init__" in parts:
        package = ".".join(parts[:parts.index("__init__")]) or "its package"
        return (f"a module named '__init__' would be the package {package} itself: `import"
                f" {package}` loads it instead of {package.replace('.', '/')}/__init__.py; rename it")
    if "__pycache__" in parts:
        return "'__pycache__' folders are Python's bytecode caches, which installers and cleaners delete; rename it"
    if parts[0] == "__main__":
        return "`import __main__` is always the running script, never this module; rename it"
    if parts[0] in STARTUP_MODULES:
        return (f"Python imports {parts[0]!r} at every interpreter start of the environment it is"
                " installed in: the wheel would run it in every process there; rename it")
    if compiled and parts[-1] == "__main__":
        return ("`python -m` runs a package's __main__ from its code, which a compiled module has"
                " not; compile the extension under another name and import it from a __main__.py")
    return None


def extension_name_problem(value: str) -> str | None:
    """A module name Python can import as a compiled extension."""
    problem = shipped_name_problem(value, compiled=True)
    if problem:
        return problem
    parts = value.split(".")
    non_ascii = next((part for part in parts if not part.isascii()), None)
    if non_ascii is not None:
        return (
            f"{non_ascii!r} is not ASCII: Python would look for PyInitU_... in a non-ASCII"
            " extension module, which PYBIND11_MODULE and TORCH_EXTENSION_NAME cannot define"
        )
    top = parts[0]
    if top in sys.stdlib_module_names:
        what = "an extension named" if len(parts) == 1 else "a package named"
        return (
            f"{what} {top!r} can never be imported: `import {top}` finds the standard-library"
            " module first; rename it"
        )
    return None


def relative_glob(value: str) -> str | None:
    """An sdist glob: relative, inside the project (the sdist writer refuses the others too,
    but every command reads the same settings)."""
    if value.startswith("/") or "\\" in value or ".." in value.split("/"):
        return f"{value!r} must be a relative glob inside the project (no '/' start, '..' or '\\')"
    return None


def library_name(value: str) -> str | None:
    """A ``-l`` name: ``m``, ``cublas``, not a flag or a path."""
    if value.startswith("-l") and len(value) > 2:
        return f"{value!r}: name the library without -l: {value[2:]!r}"
    if value.startswith("-") or "/" in value or not value:
        return (f"{value!r} is not a library name (`m` links libm): put flags in extra-ldflags"
                " and a library file's directory in library-dirs")
    return None


def valid_specifier(value: str) -> str | None:
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return f"{value!r} is not a PEP 440 version specifier set (e.g. '>=2.5,<3')"
    return None


def valid_requirement(value: str) -> str | None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(value)
    except InvalidRequirement as exc:
        return f"{value!r} is not a PEP 508 requirement ({exc})"
    return None


def valid_version(value: str) -> str | None:
    try:
        Version(value)
    except InvalidVersion:
        return f"{value!r} is not a PEP 440 version"
    return None


def one_group_regex(value: str) -> str | None:
    try:
        groups = re.compile(value).groups
    except re.error as exc:
        return f"invalid regular expression: {exc}"
    return None if groups == 1 else f"the pattern must have exactly one group, it has {groups}"


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", re.I)


def split_list(value: list[str] | str | None) -> list[str]:
    """`"8.0;8.6 9.0,10.0"` and `["8.0", "8.6"]` alike become a list of non-empty entries."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    return [part for item in items for part in re.split(r"[;,\s]+", item) if part]


def parse_size(value: str) -> int:
    """``"5G"`` -> bytes (K, M, G, T are powers of 1024; an optional ``B``/``iB`` is allowed)."""
    found = _SIZE.fullmatch(value.strip())
    if found is None:
        raise ValueError(
            f"{value!r} is not a size: bytes, or a number with K, M, G or T (powers of 1024),"
            " e.g. '8G' or '500M'"
        )
    power = " KMGT".index(found.group(2).upper() or " ")
    return int(float(found.group(1)) * 1024**power)


def valid_size(value: str) -> str | None:
    try:
        parse_size(value)
    except ValueError as exc:
        return str(exc)
    return None

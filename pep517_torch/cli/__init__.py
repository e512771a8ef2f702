"""``python -m pep517_torch`` / ``pep517-torch``: wheel, matrix, sdist, index, doctor, cache,
trace, explain, ops, migrate.

``wheel`` builds against the torch installed in *this* environment (no isolation, never a
download): the wheel runs with exactly the torch it was built for.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, Pep517TorchError, print_error
from ..shipped_runtime.user_line import closed_stdout, error_line, print_line, say, shown
from .arguments import PROG, parser



def parse_config_settings(pairs: Sequence[str]) -> dict[str, str | list[str]]:
    settings: dict[str, str | list[str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"-C expects KEY=VALUE, got {pair!r}")
        previous = settings.get(key)
        if previous is None:
            settings[key] = value
        else:  # repeated keys become a list, as pip and build pass them
            settings[key] = [*([previous] if isinstance(previous, str) else previous), value]
    return settings


def _resolved(given: str | Path) -> Path:
    """A path given on the command line, absolute and without links: a symbolic-link loop (or
    a path the system cannot look up) is one error naming it, not a traceback."""
    try:
        return Path(given).resolve()
    except (RuntimeError, OSError) as exc:  # Python 3.11/3.12: RuntimeError("Symlink loop")
        reason = getattr(exc, "strerror", None) or "a symbolic link loop"
        raise ConfigError(f"{given}: cannot be resolved ({reason})") from None


OUR_BACKENDS = frozenset({"pep517_torch"})
REQUIRES_KEY = "build-system.requires"


def build_system(root: Path) -> Mapping[str, Any]:
    """The ``[build-system]`` table, once it is one this CLI may build: a ``requires`` that is
    a list of requirement strings and a ``build-backend``, when given, that is ours."""
    from ..config import read_pyproject

    table = read_pyproject(root).get("build-system", {})
    if not isinstance(table, dict):
        raise ConfigError("must be a table", "build-system")
    backend = table.get("build-backend")
    if backend is not None and backend not in OUR_BACKENDS:
        raise ConfigError(
            f"is {backend!r}, not pep517_torch: this CLI builds only pep517_torch projects;"
            " build this one with `pip wheel --no-build-isolation --no-deps -w dist .`",
            "build-system.build-backend",
        )
    requires = table.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(item, str) for item in requires):
        raise ConfigError(
            f"must be a list of requirement strings (e.g. [\"pep517_torch\", \"torch\"]), got"
            f" {requires!r}", REQUIRES_KEY,
        )
    return table


def missing_build_requirements(root: Path, extra: Sequence[str] = ()) -> list[str]:
    """[build-system] requires entries (and ``extra``: what get_requires_for_build_wheel would
    add) not satisfied in this environment."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    missing = []
    for index, text in enumerate([*build_system(root).get("requires", []), *extra]):
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            raise ConfigError(
                f"{text!r} is not a requirement: {str(exc).splitlines()[0]}",
                f"{REQUIRES_KEY}[{index}]",
            ) from None
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        if _is_this_backend(requirement):
            continue
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            missing.append(text)
            continue
        if requirement.specifier and not requirement.specifier.contains(installed, prereleases=True):
            missing.append(f"{text} (installed: {installed})")
    return missing


def _is_this_backend(requirement: object) -> bool:
    """The running pep517_torch satisfies a requirement on itself, installed or not (a
    ``--python`` build imports it from this checkout)."""
    from packaging.utils import canonicalize_name

    from .._version import __version__

    name = getattr(requirement, "name", "")
    specifier = getattr(requirement, "specifier", None)
    return canonicalize_name(name) == "pep517-torch" and (
        specifier is None or specifier.contains(__version__, prereleases=True)
    )


def _wheel(args: argparse.Namespace) -> int:
    given = Path(args.path)
    if given.name.endswith((".tar.gz", ".tgz")) and not given.is_dir():
        if not given.is_file():
            raise ConfigError(f"{given}: no such sdist")
        # as `python -m build` does: the wheel from the unpacked sdist, beside it by default
        import tempfile

        from ..distribution.sdist_unpack import unpack_sdist

        out = Path(args.outdir) if args.outdir else _resolved(given).parent
        with tempfile.TemporaryDirectory(prefix="pep517_torch-sdist-") as scratch:
            say(f"building from {given}, unpacked into {scratch}", sys.stdout)
            return _wheel_of(unpack_sdist(given, Path(scratch)), _resolved(out), args)
    root = _resolved(given)
    out = Path(args.outdir) if args.outdir else root / "dist"
    return _wheel_of(root, _resolved(out), args)


def _wheel_of(root: Path, out: Path, args: argparse.Namespace) -> int:
    from ..backend import pipeline

    if args.python:
        from .matrix.interpreters import build_matrix

        return build_matrix(root, out, args.python, args.config_setting)
    from ..backend.op_listing import stub_requirements

    settings = parse_config_settings(args.config_setting)
    missing = missing_build_requirements(root, stub_requirements(root, settings))
    if missing:
        quoted = " ".join(shlex.quote(m.split(" (")[0]) for m in missing)
        print_line(error_line(
            "build requirements missing from this environment: " + ", ".join(missing)
            + f"\n  install them with: {shlex.quote(sys.executable)} -m pip install {quoted}"
        ))
        return 1
    pipeline.build_wheel(root, out, parse_config_settings(args.config_setting))
    return 0


def _sdist(args: argparse.Namespace) -> int:
    from ..backend import pipeline

    root = _resolved(args.path)
    build_system(root)
    out = Path(args.outdir) if args.outdir else root / "dist"
    name = pipeline.build_sdist(root, _resolved(out), parse_config_settings(args.config_setting))
    say(f"wrote {out / name}", sys.stdout)
    return 0


def _index(args: argparse.Namespace) -> int:
    from .index import index_folder

    index_folder(_resolved(args.directory))
    return 0


def _matrix(args: argparse.Namespace) -> int:
    from .matrix.command import run_matrix

    if args.json and not args.list:
        raise ConfigError("--json goes with --list (--list --json)", "--json")
    root = _resolved(args.path)
    out = _resolved(Path(args.outdir) if args.outdir else root / "wheelhouse")
    return run_matrix(root, out, args.only, args.config_setting, args.list, args.json)


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import run_checks

    return run_checks(_resolved(args.path))


def _cache(args: argparse.Namespace) -> int:
    import os
    import time

    from ..config.checks import parse_size
    from ..config.layers import environment_layer
    from ..core.pch import cache as pch_cache
    from ..core.spec import DEFAULT_PCH_CACHE_BYTES
    from ..shipped_runtime.environment import CACHE_DIR, PCH_CACHE_SIZE
    from .matrix.environments import UNUSED_DAYS, cached_envs, clear_envs, envs_root

    configured = environment_layer(os.environ).get("pch_cache_size")
    limit = parse_size(configured.value) if configured else DEFAULT_PCH_CACHE_BYTES
    root = pch_cache.pch_root(os.environ)
    if args.clear:
        removed, busy = pch_cache.clear(root)
        freed = pch_cache.format_size(sum(e.size for e in removed))
        say(f"removed {pch_cache.count_text(len(removed))} ({freed}) from {root}"
            + (f"; {len(busy)} in use by a running build kept" if busy else ""), sys.stdout)
        envs, held = clear_envs(os.environ)
        if envs or held:
            say(f"removed {envs} matrix environment{'s' * (envs != 1)} from {envs_root(os.environ)}"
                + (f"; {held} in use kept" if held else ""), sys.stdout)
        return 0
    found = pch_cache.entries(root)
    total = pch_cache.format_size(sum(e.size for e in found))
    origin = CACHE_DIR if os.environ.get(CACHE_DIR) else "default"
    print(f"precompiled-header cache: {root} ({origin})")
    print(f"{pch_cache.count_text(len(found))}, {total} of {pch_cache.format_size(limit)}"
          f" ({PCH_CACHE_SIZE if configured else 'default'} bound;"
          " least recently used go first)")
    for entry in reversed(found):
        info = entry.info
        age = time.time() - entry.last_used
        damage = pch_cache.damage(entry.directory)
        state = f"  DAMAGED: {damage} (the next build removes it)" if damage else ""
        print(shown(f"  {entry.key}  <{info.get('header', '?')}>  {info.get('compiler', '?')},"
                    f" torch {info.get('torch', '?')}  {pch_cache.format_size(entry.size)}"
                    f"  used {_age(age)} ago{state}"))
    envs = cached_envs(os.environ)
    if envs:
        print(f"matrix environments: {envs_root(os.environ)} ({len(envs)}; one unused for"
              f" {UNUSED_DAYS} days goes at the next matrix run; --clear removes them)")
    for folder, made in envs:
        print(shown(f"  {folder.name}  torch {made.get('torch', '?')} from {made.get('index', '?')}"
                    f"  used {_age(time.time() - made.get('used', 0))} ago"))
    return 0


def _ops(args: argparse.Namespace) -> int:
    from .ops import run

    return run(args)


def _explain(args: argparse.Namespace) -> int:
    from .explain import explain

    return explain(_resolved(args.path), parse_config_settings(args.config_setting))


def _trace(args: argparse.Namespace) -> int:
    from ..atomic import write_atomic
    from ..core.ninja import trace_view
    from ..errors import OutputError

    build_dir = _trace_dir(args.build_dir)
    try:
        found = trace_view.read(build_dir)
    except OSError as exc:
        raise ConfigError(f"cannot read {build_dir / trace_view.TRACE_NAME}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    print(trace_view.table(found))  # step names are checked as one printable line each
    if args.html:
        page = Path(args.html)
        try:
            write_atomic(page, trace_view.render(found, str(build_dir)))
        except OSError as exc:
            raise OutputError(f"cannot write {page}: {exc.strerror or exc}") from None
        say(f"wrote {page}", sys.stdout)
    return 0


def _trace_dir(given: str | None) -> Path:
    """The build directory named, else ``.`` when it holds a trace, else the build directory
    under ``./build`` that wrote one last (a project's default build directories live there)."""
    from ..shipped_runtime.trace import TRACE_NAME

    if given is not None:
        return Path(given)
    if (Path(TRACE_NAME)).is_file():
        return Path(".")
    found = [p for p in Path("build").glob(f"**/{TRACE_NAME}") if p.is_file()]
    if not found:
        raise ConfigError(f"no {TRACE_NAME} in . or under ./build: name the build directory"
                          f" ({PROG} trace BUILD_DIR)")
    return max(found, key=lambda p: p.stat().st_mtime_ns).parent


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"


def _migrate(args: argparse.Namespace) -> int:
    from .. import migrate

    return migrate.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; every command that prints ends quietly (``user_line.closed_stdout``:
    status 141) when its reader closed stdout early."""
    try:
        try:
            code = _main(argv)
        finally:  # argparse's --help and --version exit: what they wrote is flushed here too
            sys.stdout.flush()
    except BrokenPipeError:
        return closed_stdout()
    return code


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    handlers = {"wheel": _wheel, "sdist": _sdist, "doctor": _doctor, "cache": _cache,
                "trace": _trace, "index": _index, "explain": _explain, "matrix": _matrix,
                "migrate": _migrate, "ops": _ops}
    try:
        return handlers[args.command](args)
    except Pep517TorchError as exc:
        print_error(exc)
        return 2 if isinstance(exc, ConfigError) else 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130

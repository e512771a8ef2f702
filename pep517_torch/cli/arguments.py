"""The command line's arguments, every command's: ``cli/`` owns the command line (migrate and
ops add their own arguments through the functions they offer)."""

from __future__ import annotations

import argparse

PROG = "python -m pep517_torch"  # how the command line is invoked, in every usage line


def _settings_epilog() -> str:
    from ..config.schema import config_settings_help

    import shutil
    import textwrap

    indent = 24
    width = max(shutil.get_terminal_size().columns - 2, 60)
    lines = ["-C settings (they win over pyproject.toml and the environment):"]
    for key, text in config_settings_help():
        wrapped = textwrap.wrap(text, width - indent)
        if len(key) + 4 > indent:
            lines.append(f"  {key}")
        else:
            lines.append(f"  {key.ljust(indent - 2)}{wrapped.pop(0)}")
        lines += [" " * indent + line for line in wrapped]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """Every command's arguments: the command line is cli's (migrate and ops add their own
    through the functions they offer)."""
    from .._version import __version__
    from .matrix.command import add_matrix_parser

    top = argparse.ArgumentParser(
        prog=PROG, description="Build PyTorch C++/CUDA extensions from pyproject.toml."
    )
    top.add_argument("--version", action="version", version=f"pep517_torch {__version__}")
    commands = top.add_subparsers(dest="command", required=True)
    for name, helptext in (
        ("wheel", "build a wheel against this environment's torch"),
        ("sdist", "build a source distribution"),
    ):
        sub = commands.add_parser(
            name, help=helptext, description=helptext[0].upper() + helptext[1:] + ".",
            epilog=_settings_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument("path", nargs="?", default=".", help=(
            "project directory (default: .), or an sdist (name-version.tar.gz)" if name == "wheel"
            else "project directory (default: .)"))
        sub.add_argument("-o", "--outdir", help=(
            "output directory (default: PATH/dist; for an sdist, its folder)" if name == "wheel"
            else "output directory (default: PATH/dist)"))
        sub.add_argument(
            "-C", "--config-setting", action="append", default=[], metavar="KEY=VALUE",
            help="a setting, as pip's --config-settings (e.g. -Cbuild-type=debug); keys below",
        )
        if name == "wheel":
            sub.add_argument(
                "--python", action="append", default=[], metavar="PY",
                help="build with this interpreter and its torch instead (repeat: one wheel"
                " each, then a table)",
            )
    add_matrix_parser(commands, _settings_epilog())
    index = commands.add_parser(
        "index", help="write PEP 503 find-links pages and simple repositories, one per torch"
        " variant, for DIR's wheels",
    )
    index.add_argument("directory", metavar="DIR", help="the folder of wheels (pages go there)")
    doctor = commands.add_parser("doctor", help="check torch, compilers, nvcc, ninja, memory")
    doctor.add_argument("path", nargs="?", default=".", help="project directory to check too")
    cache = commands.add_parser(
        "cache", help="show the machine-wide precompiled-header cache (or --clear it)"
    )
    cache.add_argument("--clear", action="store_true", help="remove every entry not in use")
    explain_parser = commands.add_parser(
        "explain", help="say why the last build did what it did (and what changed since)",
        description="Why each step of the last build ran (the first input that changed: a file,"
        " a variable, the compiler, torch, a copied build folder), or that nothing changed.",
    )
    explain_parser.add_argument("path", nargs="?", default=".", help="project directory (default: .)")
    explain_parser.add_argument("-C", "--config-setting", action="append", default=[],
                                metavar="KEY=VALUE", help="the settings the build was given")
    trace_parser = commands.add_parser(
        "trace", help="show where the last build's time went (its build-trace.json)",
        description="The steps of the last build in BUILD_DIR, slowest first: seconds, job slot"
        " and share of the wall time.",
    )
    trace_parser.add_argument("build_dir", nargs="?", metavar="BUILD_DIR",
                              help="build directory (default: ., else the newest under ./build)")
    trace_parser.add_argument("--html", metavar="FILE",
                              help="also write the timeline as one self-contained HTML page")
    from .. import migrate
    from .ops import add_parser as add_ops_parser

    add_ops_parser(commands)
    migrate.add_arguments(commands.add_parser(
        "migrate", help="convert a setup.py to pyproject.toml", description=migrate.DESCRIPTION))
    return top

"""``ops [PATH|WHEEL] [--json] [--check]``: the operators a build registered, and opcheck on
the project's samples.

PATH (default ``.``) is a project (its last build's artifacts, loaded in a child process with
this interpreter's torch or ``--python``'s), a wheel (the table its build record keeps; loaded
again with ``--load`` or ``--check``), or a JIT build directory (the table its build wrote).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from ..errors import ConfigError, OpsError
from ..ops.listing import OPCHECK_TESTS, TIMEOUT, Contents, list_ops
from ..ops.render import printable, rows_text, table_text
from ..ops.table import JIT_TABLE, Answer, OpsTable, TableError, read_table
from ..ops.verdicts import judge_all
from ..shipped_runtime.user_line import say


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "ops", help="list the operators a build registered (kernels per dispatch key, what"
        " torch.compile will trip on); --check runs torch.library.opcheck on samples",
        description="The operators a build registered: schema, the dispatch keys with a kernel,"
        " and what torch.compile will trip on. PATH: a project (its last build, loaded in a child"
        " process), a wheel (its recorded table), or a JIT build directory.",
    )
    parser.add_argument("path", nargs="?", default=".", metavar="PATH|WHEEL",
                        help="project directory (default: .), a .whl, or a JIT build directory")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    parser.add_argument("--check", action="store_true", help="run torch.library.opcheck on"
                        " each sample of ops-samples (or --samples): one row per op and test;"
                        " exit 1 on any failure")
    parser.add_argument("--samples", metavar="FILE", help="the samples file (a Python file whose"
                        " samples() returns {\"ns::op\": [args, ...]}); default: ops-samples")
    parser.add_argument("--load", action="store_true", help="a wheel: load it again instead of"
                        " printing the table its build recorded")
    parser.add_argument("--python", metavar="PY", help="the interpreter whose torch loads the"
                        " build (default: this one)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, metavar="SECONDS",
                        help=f"longest the child may run (default: {TIMEOUT:.0f})")
    parser.add_argument("-C", "--config-setting", action="append", default=[],
                        metavar="KEY=VALUE", help="the settings the build was given")


def run(args: argparse.Namespace) -> int:
    from . import _resolved

    given = Path(args.path)
    python = args.python or sys.executable
    if given.name.endswith(".whl") and given.is_file():
        return _wheel(given, args, python)
    root = _resolved(given)
    if not root.is_dir():
        raise ConfigError(f"{given}: no such project directory, wheel or JIT build directory")
    if not (root / "pyproject.toml").is_file() and (root / JIT_TABLE).is_file():
        if args.check:
            raise ConfigError(f"{given}: --check needs a project or a wheel, not a JIT build directory")
        return _show(_read_file(root / JIT_TABLE), args)
    return _project(root, args, python)


def _project(root: Path, args: argparse.Namespace, python: str) -> int:
    from ..backend.op_listing import contents
    from ..backend.stages import load
    from ..core.naming import artifact_name
    from . import parse_config_settings

    loaded = load(root, parse_config_settings(args.config_setting))
    project = loaded.project
    if not project.extensions:
        raise ConfigError(f"{root}: the project builds no extension here, so it registers no operator")
    out = project.options.output_dir or project.options.build_dir / "out"
    artifacts = {spec.name: out / artifact_name(spec) for spec in project.extensions}
    missing = [name for name, path in artifacts.items() if not path.is_file()]
    if missing:
        raise ConfigError(
            f"{', '.join(missing)}: not built in {project.options.build_dir} (build it first:"
            f" python -m pep517_torch wheel {args.path})")
    samples = _samples(args, project.ops_samples, root) if args.check else None
    found = contents(project, artifacts)
    with tempfile.TemporaryDirectory(prefix="pep517_torch-ops-") as scratch:
        answer = list_ops(found, python, samples=samples, tests=OPCHECK_TESTS,
                          timeout=args.timeout, scratch=Path(scratch))
    return _answered(answer, args)


def _samples(args: argparse.Namespace, configured: Path | None, root: Path | None) -> Path:
    if args.samples:
        path = Path(args.samples).absolute()
        if not path.is_file():
            raise ConfigError(f"{args.samples}: no such file", "--samples")
        return path
    if configured is None:
        raise ConfigError("--check needs samples: set ops-samples = \"tests/op_samples.py\" in"
                          " [tool.torch-ext] (a file whose samples() returns {\"ns::op\":"
                          " [args, ...]}), or pass --samples FILE")
    if not configured.is_file():
        shown = configured.relative_to(root) if root and configured.is_relative_to(root) else configured
        raise ConfigError(f"{shown} does not exist", "tool.torch-ext.ops-samples")
    return configured


def _wheel(wheel: Path, args: argparse.Namespace, python: str) -> int:
    from .wheel_contents import recorded_table, unpack

    if not (args.load or args.check or args.python):
        table = recorded_table(wheel)
        if table is not None:
            return _show(table, args, recorded=True)
    samples = _samples(args, None, None) if args.check else None
    with tempfile.TemporaryDirectory(prefix="pep517_torch-ops-") as scratch:
        found: Contents = unpack(wheel, Path(scratch) / "wheel")
        answer = list_ops(found, python, samples=samples, tests=OPCHECK_TESTS,
                          timeout=args.timeout, scratch=Path(scratch))
    return _answered(answer, args)


def _answered(answer: Answer, args: argparse.Namespace) -> int:
    if answer.samples_error:
        raise OpsError(printable(answer.samples_error))
    return _show(answer.table, args)


def _read_file(path: Path) -> OpsTable:
    try:
        with path.open("rb") as handle:
            data = handle.read(16 * 1024 * 1024 + 1)
        return read_table(data)
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    except TableError as error:
        raise ConfigError(f"{path}: not an operator table ({error})") from None


def _show(table: OpsTable, args: argparse.Namespace, *, recorded: bool = False) -> int:
    verdicts = judge_all(table.ops)
    failed = any(row.status == "failed" for row in table.rows)
    if args.json:
        value = table.as_json()
        value["verdicts"] = [{"op": v.op, "code": v.code, "message": v.message} for v in verdicts]
        print(json.dumps(value, indent=2, sort_keys=True))
        return 1 if failed else 0
    print(table_text(table, verdicts))
    if recorded:
        say("the table the wheel's build recorded (--load lists it again under this torch)",
            sys.stdout)
    if args.check:
        print()
        print(rows_text(table.rows))
    return 1 if failed else 0

"""The migrate command: a torch extension's setup.py -> pyproject.toml tables, printed or written.

The setup.py runs with ``setup()`` intercepted (nothing is built: :mod:`.intercept`), as often
as needed to see the choices it makes from its environment; :mod:`.variants` turns those into
`cuda` tables and overrides (:mod:`.convert`), :mod:`.convert.render` writes the TOML and
:mod:`.convert.pyproject_file` merges it into an existing pyproject.toml. See docs/migrate.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from ..config.pyproject import tomllib
from ..errors import MigrateError
from ..shipped_runtime.user_line import closed_stdout
from . import DEFAULT_TIMEOUT

__all__ = ["MigrateError", "Migration", "migrate", "run", "write"]
MOVED_DEPENDENCIES = (
    "pyproject.toml's static dependencies moved to [tool.torch-ext] dependencies, with"
    " \"dependencies\" in dynamic: PEP 621 lets the build add the torch pin only to a dynamic"
    " list, and kept static the wheel would carry only their own torch requirement, which"
    " admits torch releases its extensions fail to load under (torch-requirement = \"none\""
    " keeps them static)"
)


@dataclass
class Migration:
    """The generated tables for one setup.py, and where they go."""

    setup_py: Path
    pyproject: Path
    text: str  # [build-system], [project] and [tool.torch-ext], with comments
    existing_text: str | None  # the pyproject.toml already there
    existing: dict[str, Any]
    # what the config parser says of the result with its suggestions on, and the backend's
    # own validation of the file as written (empty: valid)
    problems: list[str]
    fails_here: list[str] = field(default_factory=list)  # why a build here would fail

    @property
    def has_torch_ext(self) -> bool:
        return "torch-ext" in self.existing.get("tool", {})


def _setup_path(value: str | os.PathLike[str]) -> Path:
    path = Path(os.path.abspath(value))
    return path / "setup.py" if path.is_dir() else path


def _read_existing(pyproject: Path) -> tuple[str | None, dict[str, Any]]:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        raise MigrateError(f"{pyproject}: cannot be read ({exc})") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MigrateError(f"{pyproject}: invalid TOML: {exc}") from None


def check_text(text: str) -> list[str]:
    """Problems the config parser finds in generated text (suggestions switched on too)."""
    from ..config import parse_settings
    from ..errors import ConfigError

    try:
        parse_settings(tomllib.loads(text))
    except (ConfigError, tomllib.TOMLDecodeError) as exc:
        return [str(exc)]
    return []


def migrate(setup_py: str | os.PathLike[str] = "setup.py", *,
            timeout: float = DEFAULT_TIMEOUT) -> Migration:
    """Run ``setup_py`` (or ``<dir>/setup.py``) intercepted and generate its tables; each run
    of it, in a process of its own, may take ``timeout`` seconds."""
    from .builds_here import build_here, validation_problems
    from .convert.tables import dynamic_dependencies
    from .convert.metadata import settle_license, settle_version
    from .convert.pyproject_file import merge_project
    from .convert.render import render_plan
    from .convert.torch_pin import decide_torch_requirement
    from .matches_runs import disagreements, facts_here
    from .variants import make_plan

    path = _setup_path(setup_py)
    if not path.is_file():
        raise MigrateError(f"{path}: no such file")
    plan = make_plan(path, timeout)
    pyproject = path.parent / "pyproject.toml"
    existing_text, existing = _read_existing(pyproject)
    if isinstance(existing.get("project"), dict):
        merged, notes = merge_project(plan.base.project, existing["project"])
        notes += [text for _, text in settle_license(merged, existing["project"], path.parent)]
        notes += [text for _, text in settle_version(merged, existing, plan.base.tool)]
        plan.base.project = merged
        kept = set(existing["project"]) - {"dynamic"}  # notes on values the file keeps are moot
        kept |= {"version"} if "version" not in merged else set()
        plan.base.notes = [(where, text) for where, text in plan.base.notes
                           if where.partition(":")[2] not in kept]
        plan.base.notes += [("project", note) for note in notes]
        if "version" in merged:
            plan.base.tool.pop("version", None)
        if "dependencies" in merged:  # the file's list wins, and goes where the pin may join it
            plan.base.tool.pop("dependencies", None)
            dynamic_dependencies(merged, plan.base.tool)
            if "dependencies" not in merged:
                plan.note("project", MOVED_DEPENDENCIES)
    build_system = existing.get("build-system", {})
    if not isinstance(build_system, dict):
        build_system = {}
    carried = [str(r) for r in build_system.get("requires", [])]
    problems = check_text(render_plan(plan, carried_requires=carried, enable_disabled=True))
    wheel_torch = None
    if not problems:
        written = _as_written(existing_text, render_plan(plan, carried_requires=carried))
        here = build_here(tomllib.loads(written), path.parent)
        plan.fails_here += here.problems
        wheel_torch = here.torch_requirements
        plan.disagreements = disagreements(written, path.parent, plan.observed, facts_here(),
                                           frozenset(plan.need_cuda))
    decide_torch_requirement(plan, wheel_torch)
    text = render_plan(plan, carried_requires=carried)
    problems += [problem for problem in validation_problems(_as_written(existing_text, text), path.parent)
                 if problem not in problems + plan.fails_here]
    return Migration(path, pyproject, text, existing_text, existing, problems, plan.fails_here)


def _as_written(existing_text: str | None, text: str) -> str:
    """The pyproject.toml :func:`write` would write (the tables alone where the merge fails:
    the other tables are not the backend's)."""
    from .convert.pyproject_file import splice

    try:
        return text if existing_text is None else splice(existing_text, text)
    except MigrateError:
        return text


def write(migration: Migration, *, force: bool = False) -> Path:
    """Create or update pyproject.toml next to the setup.py; other tables are kept."""
    from .convert.pyproject_file import splice

    if migration.has_torch_ext and not force:
        raise MigrateError(f"{migration.pyproject}: already has a [tool.torch-ext] table;"
                           " pass --force to replace it")
    text = migration.text
    if migration.existing_text is not None:
        text = splice(migration.existing_text, migration.text)
    target = migration.pyproject
    write_atomic(target, text, durable=True)  # the user's own file
    return target


def _closed_streams() -> set[int]:
    """Reopen stdin, stdout or stderr on /dev/null where the caller closed them (``>&-``), so
    that no file migrate opens takes their number (and output meant for them lands in it);
    returns the ones that were closed, with ``sys.stdout``/``sys.stderr`` writing to the
    null device in their place."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.add(fd)
    for fd in sorted(closed):
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    if 1 in closed or sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    if 2 in closed or sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    return closed


def run(args: argparse.Namespace) -> int:
    """The command, its arguments parsed: 0 done, 1 written but the result needs fixing, 2 bad
    input."""
    closed = _closed_streams()
    if 1 in closed and not args.write:
        print("error: stdout is closed, so the tables cannot be printed: pass --write to write"
              " them into pyproject.toml", file=sys.stderr)
        return 2
    try:
        migration = migrate(args.setup_py, timeout=args.timeout)
        if args.write:
            target = write(migration, force=args.force)
    except MigrateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted: nothing was written", file=sys.stderr)
        return 130
    for problem in migration.problems:
        print(f"warning: the result does not validate: {problem}", file=sys.stderr)
    for problem in migration.fails_here:
        print(f"warning: built on this machine, the result fails: {problem}", file=sys.stderr)
    status = 1 if migration.problems or migration.fails_here else 0
    if not args.write:
        try:
            sys.stdout.write(migration.text)
            sys.stdout.flush()
        except BrokenPipeError:  # `| head`: quietly, as every command
            return closed_stdout()
        except OSError as exc:  # a full disk
            print(f"error: the tables could not be printed ({exc.strerror or exc})",
                  file=sys.stderr)
            return 2
        if migration.has_torch_ext:
            print(f"note: {migration.pyproject} already has [tool.torch-ext]; --write needs"
                  " --force to replace it", file=sys.stderr)
        return status
    print(f"wrote {target}; setup.py is no longer used by the build: review the notes, then"
          " delete it", file=sys.stderr)
    tool = migration.existing.get("tool", {})
    project = migration.existing.get("project", {})
    scm = isinstance(project, dict) and "version" in (project.get("dynamic") or [])
    stale = sorted(name for name in tool if name.startswith("setuptools")  # setuptools-scm's
                   and not (scm and name == "setuptools_scm")) if isinstance(tool, dict) else []
    if stale:
        print(f"note: [tool.{'], [tool.'.join(stale)}] kept; pep517_torch ignores them",
              file=sys.stderr)
    return status

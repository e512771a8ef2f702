"""A build's operators (``ops-check``) and stubs (``stubs``): after the compile, before the
wheel is written, a child process with the build's torch lists what the artifacts register
(``ops/``); the summary says one line per op and a verdict line per problem, ``strict``
makes those errors, the wheel's build record keeps the table and its stubs ship beside their
modules. When ninja has work and the sources may register operators, the child is started
then (``ops/early.py``): its ``import torch`` overlaps the compile, not the time after the link."""

from __future__ import annotations

import ast
import re
import shutil
import sys
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.naming import artifact_name
from ..core.spec import Kind
from ..errors import OpsError
from ..ops.early import EarlyChild
from ..ops.listing import Contents, list_ops, no_listing
from ..ops.render import printable, summary_lines
from ..ops.table import OpsTable
from ..ops.verdicts import Verdict, judge_all
from ..shipped_runtime.user_line import log, user_line

if TYPE_CHECKING:
    from ..config import ResolvedProject
    from ..core.build import BuildResult
    from ..core.plan import BuildPlan
    from ..core.toolchain.tools import TorchInstall
    from .stages import Loaded

STUBGEN_REQUIREMENT = "pybind11-stubgen>=3.0,<4"  # the API child.py calls
# What a source (or a project header it includes) holds when it registers operators:
# TORCH_LIBRARY*, STABLE_TORCH_LIBRARY*, c10::RegisterOperators, torch::Library itself.
_REGISTERS_IN_SOURCE = re.compile(rb"TORCH_LIBRARY|RegisterOperators|torch::Library\b")

# The listing child runs in this process's environment, as the compilers do (core.plan.tool_env).
# Not loaded.env: that is the audited snapshot, and copying it counts every variable as read,
# which leaves no no-op record behind (an op library would never replay).
CHILD_ENV = None


@dataclass(frozen=True)
class BuiltOps:
    """What a build's listing found: the table, its verdicts, the stubs the wheel gains
    (archive name -> text, ``py.typed`` markers included) and the lines to say again when the
    build is replayed."""

    table: OpsTable
    verdicts: tuple[Verdict, ...] = ()
    stub_files: Mapping[str, bytes] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    seconds: float | None = None  # the listing's wall time after the compile (None: no child)
    early: bool = False  # the child started during the compile answered


def contents(project: ResolvedProject, artifacts: Mapping[str, Path],
             unloadable: Collection[str] = ()) -> Contents:
    """The wheel's files as the listing child loads them: the shipped Python files and data,
    each module and library where the wheel puts it (those named in ``unloadable`` shipped,
    not loaded)."""
    built = [spec for spec in project.extensions if spec.kind is not Kind.EXECUTABLE]
    loaded = [spec for spec in built if spec.name not in unloadable]
    return Contents(
        files=(*project.files, *((artifact_name(spec), artifacts[spec.name]) for spec in built)),
        modules=tuple((spec.name, artifact_name(spec)) for spec in loaded if spec.kind is Kind.MODULE),
        libraries=tuple(artifact_name(spec) for spec in loaded if spec.kind is Kind.LIBRARY),
    )


def needing_cuda_torch(project: ResolvedProject, torch: TorchInstall) -> dict[str, str]:
    """The extensions the build's torch cannot load (they need a CUDA torch: stable-ABI CUDA
    kernels built beside a CPU torch), each with the problem the table says of it."""
    from ..core.postlink.import_guard import needs_cuda_torch

    if torch.has_cuda_runtime:
        return {}
    return {spec.name: f"{spec.name} is not loaded: it needs a CUDA torch, and the build's"
            f" torch {torch.version} has none (list the wheel under one: python -m pep517_torch"
            " ops WHEEL --python PY)"
            for spec in project.extensions if needs_cuda_torch(spec, torch)}


def listing_child(loaded: Loaded) -> EarlyChild:
    """The child a build may start while it compiles (``with`` it: it ends with the block).
    Called under the build directory's lock: the listings' scratch folders found there are
    killed builds' (a SIGKILL spares no ``finally``), removed."""
    build_dir = loaded.project.options.build_dir
    for folder in build_dir.glob(".pep517_torch-ops-*") if build_dir.is_dir() else ():
        shutil.rmtree(folder, ignore_errors=True)
    return EarlyChild(sys.executable, env=CHILD_ENV, scratch=build_dir)


def start_early(loaded: Loaded, child: EarlyChild, *, editable: bool) -> Callable[[BuildPlan], None] | None:
    """What the compile calls when ninja has work: ``child`` started if the build will list
    its operators and may find some (None: it will not list)."""
    if not _lists(loaded, editable):
        return None

    def on_work(plan: BuildPlan) -> None:
        try:
            likely = _may_register(loaded, editable)
        except OSError:  # a file that went away meanwhile: the compile will say; guess yes
            likely = True
        if likely:
            child.start()

    return on_work


def _lists(loaded: Loaded, editable: bool) -> bool:
    project = loaded.project
    return project.ops_check != "off" or (project.stubs and not editable)


def _may_register(loaded: Loaded, editable: bool) -> bool:
    """Whether the build's listing will start a child, guessed before the compile from the
    sources: a stub to write, a shipped module using torch.library, or a source (or a project
    header it reaches) naming torch's registration macros. A wrong yes costs an idle child; a
    wrong no (a macro hidden in a header outside the project), a child after the link."""
    from ..core import scan

    project = loaded.project
    assert loaded.torch is not None
    skipped = needing_cuda_torch(project, loaded.torch)
    specs = [spec for spec in project.extensions
             if spec.kind is not Kind.EXECUTABLE and spec.name not in skipped]
    if project.stubs and not editable and any(spec.kind is Kind.MODULE for spec in specs):
        return True
    if Contents(files=project.files).python_users():
        return True
    for spec in specs:
        for path in scan.reached_files(spec.sources, spec.include_dirs):
            try:
                if _REGISTERS_IN_SOURCE.search(path.read_bytes()):
                    return True
            except OSError:
                return True
    return False


def list_build_ops(loaded: Loaded, result: BuildResult | None, *, editable: bool,
                   early: EarlyChild | None = None) -> BuiltOps | None:
    """List what ``result``'s artifacts registered (None: ``ops-check = "off"``, or nothing
    was built), asking ``early`` first (a child started during the compile); print the
    lines; raise OpsError where ``strict`` (or a stub) says so."""
    project = loaded.project
    if result is None or not _lists(loaded, editable):
        return None
    started = time.perf_counter()
    assert loaded.torch is not None
    strict = project.ops_check == "strict"
    skipped = needing_cuda_torch(project, loaded.torch)
    found = contents(project, result.artifacts, skipped)
    stub_modules = [name for name, _ in found.modules] if project.stubs and not editable else []
    seconds, answered_early = None, False
    if not stub_modules and not found.registers_ops():
        table, stub_error = no_listing(loaded.torch.version), None
    else:
        try:
            answer = list_ops(found, sys.executable, stubs=stub_modules, env=CHILD_ENV,
                              scratch=project.options.build_dir,
                              early=early.take() if early is not None else None)
        except OpsError as error:
            if strict or stub_modules:
                raise OpsError(f"{error} (ops-check = \"strict\" needs the listing)" if strict
                               and not stub_modules else str(error)) from None
            note = user_line(f"note: the operators could not be listed: {printable(str(error))}")
            log(note)
            return BuiltOps(OpsTable(torch=loaded.torch.version, listed=False,
                                     problems=(printable(str(error))[:2000],)), notes=(note,),
                            seconds=time.perf_counter() - started)
        table, stub_error = answer.table, answer.stub_error
        seconds, answered_early = time.perf_counter() - started, answer.early
    table = replace(table, problems=(*skipped.values(), *table.problems))
    verdicts = tuple(judge_all(table.ops)) if project.ops_check != "off" else ()
    if project.ops_check != "off":
        for line in summary_lines(table, verdicts):
            log(user_line(line))
    if strict and (verdicts or table.problems):
        first = [*(v.line() for v in verdicts), *table.problems]
        raise OpsError(
            f"ops-check = \"strict\": {len(first)} operator problem{'s' * (len(first) != 1)}:"
            f" {printable('; '.join(first))}")
    stub_files = _stub_files(stub_error, table.stubs, project) if stub_modules else {}
    notes = tuple(user_line(f"op {printable(v.line())}") for v in verdicts)
    notes += tuple(user_line(f"ops: {printable(problem)}") for problem in table.problems)
    return BuiltOps(table, verdicts, stub_files, notes, seconds, answered_early)


def _stub_files(error: str | None, stubs: Mapping[str, str], project: ResolvedProject) -> dict[str, bytes]:
    """Each stub, parsed (one that does not is the build's error), and ``py.typed`` in each
    package holding one that does not ship its own."""
    if error:
        raise OpsError(f"stubs = true: {printable(error)}")
    files: dict[str, bytes] = {}
    shipped = {arcname for arcname, _ in project.files}
    for arcname, text in sorted(stubs.items()):
        try:
            ast.parse(text, filename=arcname)
        except SyntaxError as problem:
            raise OpsError(f"stubs = true: the stub {arcname} that pybind11-stubgen wrote does"
                           f" not parse (line {problem.lineno}: {printable(str(problem.msg))})") from None
        if arcname in shipped:
            continue  # the project's own stub wins
        files[arcname] = text.encode()
        package = arcname.rpartition("/")[0]
        marker = f"{package}/py.typed" if package else "py.typed"
        if package and marker not in shipped:
            files[marker] = b""
    return files


def stub_requirements(root: Path, config_settings: Mapping[str, str | list[str]] | None) -> list[str]:
    """``[pybind11-stubgen]`` when the project may ask for stubs: ``stubs = true`` in the
    table or any override, or ``-Cstubs`` true. Read without resolving (no torch is needed
    yet); a project that does not parse asks for nothing (its build says why)."""
    from ..config.pyproject import parse_settings, read_pyproject
    from ..errors import ConfigError
    from ..shipped_runtime.environment import TRUE_WORDS

    given = (config_settings or {}).get("stubs")
    if given is not None:
        value = given[-1] if isinstance(given, list) else given
        return [STUBGEN_REQUIREMENT] if str(value).lower() in TRUE_WORDS else []
    try:
        settings = parse_settings(read_pyproject(root))
    except (ConfigError, OSError):
        return []
    asked = settings.stubs or any(o.settings.get("stubs") is True for o in settings.overrides)
    return [STUBGEN_REQUIREMENT] if asked else []

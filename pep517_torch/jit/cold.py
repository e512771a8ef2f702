"""The JIT's cold path: lock the build directory, build through the compile core, stamp."""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

from ..atomic import writing
from ..core import build as core_build
from ..core import compile_record
from ..core.ninja import trace_view
from ..core.lock import build_lock
from ..core.spec import BuildOptions, ExtensionSpec, Kind
from ..config.layers import environment_options
from ..ops.table import JIT_TABLE
from ..shipped_runtime.trace import TRACE_NAME
from ..shipped_runtime.state_file import Unreadable
from ..shipped_runtime.user_line import print_line, shown, user_line
from . import stamp
from .request import JitRequest

# The compile core's spec field -> the argument of load() it comes from: the core's errors
# name those (the environment's settings are named by environment_options).
SPEC_ARGUMENTS = (
    ("name", "name"),
    ("sources", "sources"),
    ("include_dirs", "extra_include_paths"),
    ("extra_cflags", "extra_cflags"),
    ("extra_cuda_cflags", "extra_cuda_cflags"),
    ("extra_ldflags", "extra_ldflags"),
    ("with_cuda", "with_cuda"),
    ("stable_abi", "stable_abi"),
    ("py_limited_api", "stable_abi"),
)


def _spec(request: JitRequest, target: str) -> ExtensionSpec:
    return ExtensionSpec(
        name=target,
        sources=tuple(map(Path, request.sources)),
        include_dirs=tuple(map(Path, request.include_dirs)),
        extra_cflags=request.cflags,
        extra_cuda_cflags=request.cuda_cflags,
        extra_ldflags=request.ldflags,
        with_cuda=request.with_cuda,
        kind=Kind(request.kind),
        python_abi_suffix=False,
        stable_abi=request.stable_abi,
        py_limited_api=_limited_api(request),
        keys=SPEC_ARGUMENTS,
    )


def _limited_api(request: JitRequest) -> str | None:
    """A stable-ABI build is a limited-API one (cp310, torch's oldest CPython)."""
    if request.stable_abi is None:
        return None
    from ..abi.limited_api import DEFAULT

    return DEFAULT


def _say(verbose: bool) -> Callable[[str], None] | None:
    """stderr when someone may be watching: ``verbose=True`` or a terminal. Otherwise the JIT
    is silent, as torch's ``load()`` is (libraries call it in their import path); build.log in
    the build directory has everything."""
    try:
        watched = verbose or bool(sys.stderr and sys.stderr.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stderr
        watched = verbose
    return print_line if watched else None


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the first frame outside this package
    (the user's ``load()`` or ``load_inline()`` call), seen from the function calling this."""
    package = str(Path(__file__).parent.parent)
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def build(
    request: JitRequest,
    target: str,
    build_dir: Path,
    key: str,
    stamp_file: Path,
    *,
    verbose: bool,
    pch: bool,
    env: Mapping[str, str],
    load: Callable[[], object],
) -> object:
    """Build ``target`` (unless another process did while this one waited for the lock), then
    ``load()`` it: what that returned, its operators listed as it loaded when this process
    built it."""
    spec = _spec(request, target)
    say = _say(verbose)
    options = BuildOptions(
        build_dir=build_dir,
        verbose=verbose,
        quiet=say is None,
        env=dict(env),
        output_dir=build_dir,
        pch=pch,
        pch_eager=True,  # the next extension with the same flags finds it ready
        **environment_options(env),  # MAX_JOBS etc. mean here what they mean for wheels
    )
    with build_lock(build_dir, f"'{target}'", say=say or (lambda line: None)):
        if not stamp.is_fresh(stamp_file, key, request.artifact(build_dir, target), env):
            artifact = Path(request.artifact(build_dir, target))
            why = _why_stale(stamp_file, key, artifact, env, say)
            if stamp.replaced_artifact(stamp_file, artifact):
                # ninja trusts an output newer than its inputs: a truncated one would stay.
                if say is not None:
                    say(user_line(f"{artifact} is not the file this build made: relinking it"))
                artifact.unlink(missing_ok=True)
            stamp.invalidate(stamp_file)
            _build(spec, options, key, stamp_file, artifact, say, why)
            # under the lock: the table kept beside the artifact is this build's
            return _load_listing(spec, artifact, load, say)
    return load()  # another process built it while we waited


def _why_stale(stamp_file: Path, key: str, artifact: Path, env: Mapping[str, str],
               say: Callable[[str], None] | None) -> str | None:
    """Why the stamp does not hold (None: there is none, a first build), said in one line
    when someone watches (``verbose=True`` or a terminal): what changed since the build
    (``stamp.why_stale``: a variable, a machine fact, an input, the part of the key that
    differs). A stamp that cannot be used is named too (as a warning when unwatched, unless it
    is only another pep517_torch's format): then built again as if there were none."""
    try:
        data = stamp.load(stamp_file)
    except Unreadable as error:
        line = user_line(f"{error}: ignored; building '{stamp_file.stem}' again")
        if say is not None:
            say(line)
        elif not error.why.startswith(stamp.OTHER_FORMAT):
            warnings.warn(line, stacklevel=_caller_stacklevel())
        return str(error)
    if data is None:
        return None
    why = stamp.why_stale(data, key, artifact, env)
    if why is not None and say is not None and not stamp.replaced_artifact(stamp_file, artifact):
        say(user_line(f"'{stamp_file.stem}' is out of date: {shown(why)}"))  # relinked: said then
    return why


def _build(
    spec: ExtensionSpec, options: BuildOptions, key: str, stamp_file: Path, artifact: Path,
    say: Callable[[str], None] | None, why: str | None,
) -> None:
    def warn(plan: core_build.BuildPlan) -> None:
        if say is None:  # unwatched: what a build note warns of still reaches the caller, as torch's do
            level = _caller_stacklevel()
            for note in plan.notes:
                warnings.warn(user_line(note), stacklevel=level)

    started = time.perf_counter()
    result = core_build.build(
        [spec], options, log=say or print_line, what=f"Error building extension '{spec.name}'",
        header=user_line(f"building extension '{spec.name}'..."), on_plan=warn, by="the JIT",
        missed=why,
    )
    plan, run = result.plan, result.run
    elapsed = time.perf_counter() - started
    recorded = compile_record.recorded_inputs(plan.build_dir)  # sources and project headers
    mine = (paths for obj, paths in recorded.items() if obj.startswith(f"obj/{spec.name}/"))
    inputs = [*spec.sources, *(p for paths in mine for p in paths)]
    (artifact.parent / JIT_TABLE).unlink(missing_ok=True)  # the last build's
    with writing(stamp_file.parent):
        stamp.write(stamp_file, key, inputs, options.env, artifact, facts=plan.facts,
                    cuda=any(spec.with_cuda or spec.uses_cuda for spec in plan.specs))
    if say is not None and run.steps:
        extra = f", {run.precompiled} header precompiled" if run.precompiled else ""
        log = f" (log: {run.log_file})" if run.log_file else ""
        launched = f" {plan.launcher_use}" if plan.launcher_use else ""
        say(user_line(f"built '{spec.name}' in {elapsed:.1f} s: {run.compiled} compiled{launched},"
                      f" {run.linked} linked{extra}{log}"))
        if run.timeline is not None:  # the slowest steps, idle job slots
            for line in trace_view.summary_lines(run.timeline, plan.build_dir / TRACE_NAME):
                say(user_line(line))


def _load_listing(spec: ExtensionSpec, artifact: Path, load: Callable[[], object],
                  say: Callable[[str], None] | None) -> object:
    """``load()``, and the operators it registered when the new artifact calls torch's
    registration API at all, asked of torch's dispatcher in this process before and after
    (``ops/in_process.py``: this process holds torch already; a child would import it
    again), kept as ``pep517_torch_ops.json`` beside it (``python -m pep517_torch ops
    BUILD_DIR`` prints it): one line per op when someone watches, each verdict a warning when
    nobody does. A listing that fails is a note: the build stands."""
    from ..ops.listing import Contents

    if spec.kind is Kind.EXECUTABLE:
        return load()
    files = ((artifact.name, artifact),)
    found = (Contents(files, modules=((spec.name, artifact.name),)) if spec.kind is Kind.MODULE
             else Contents(files, libraries=(artifact.name,)))
    if not found.registers_ops():
        return load()
    from ..atomic import write_atomic
    from ..ops.in_process import Loading
    from ..ops.render import printable, summary_lines
    from ..ops.verdicts import judge_all

    loading = Loading(load, spec.name if spec.kind is Kind.MODULE else artifact.name)
    if loading.table is None:
        line = user_line(f"note: the operators of '{spec.name}' could not be listed:"
                         f" {printable(str(loading.error))}")
        if say is not None:
            say(line)
        else:
            warnings.warn(line, stacklevel=_caller_stacklevel())
        return loading.result
    import json

    write_atomic(artifact.parent / JIT_TABLE, json.dumps(loading.table.as_json(), indent=1) + "\n")
    verdicts = judge_all(loading.table.ops)
    if say is not None:
        for line in summary_lines(loading.table, verdicts):
            say(user_line(line))
    else:
        for verdict in verdicts:
            warnings.warn(user_line(f"op {printable(verdict.line())}"), stacklevel=_caller_stacklevel())
    return loading.result

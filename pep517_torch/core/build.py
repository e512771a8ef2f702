"""Running a build: a plan's ninja, its progress and log, what the run recorded, the result.

:func:`build` is the compile core's one entry point (plan, then run); planning is ``plan.py``'s.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..atomic import writing
from ..errors import BuildError, OutputError
from ..shipped_runtime import trace
from ..shipped_runtime.environment import set_ccache_defaults
from ..shipped_runtime.files import remove_leftover_temporaries
from ..shipped_runtime.ninja import LOG_NAME
from ..shipped_runtime.user_line import print_line, user_line
from ..shipped_runtime import ledger
from ..shipped_runtime.ninja import COMMAND_CHANGED, explained_outputs
from . import compile_record
from .postlink import stable_audit
from .toolchain import tools as toolchain
from .unity import groups as unity
from .pch import cache as pch_cache, health as pch_health, timings as pch_timings, wait as pch_wait
from .toolchain import launcher as launchers
from .ninja.report import Log, NinjaRun, failed_targets, run_ninja
from .plan import BuildPlan, prepare, tool_env
from .spec import BuildOptions, ExtensionSpec

if TYPE_CHECKING:
    from ..abi.fatbin import DeviceCode
    from .cuda.toolkit import CudaToolkit


@dataclass(frozen=True)
class BuildResult:
    plan: BuildPlan
    run: NinjaRun
    # each CUDA artifact's device code (spec name -> its fatbins' cubins and PTX), read from it
    device_code: Mapping[str, DeviceCode] = dataclasses.field(default_factory=dict)

    @property
    def artifacts(self) -> dict[str, Path]:
        return self.plan.artifacts

    def summary(self) -> str:
        """``2 extensions: 3 compiled, 2 linked, 1 header precompiled in 9.1 s; log: …/build.log``
        (the log only when this build wrote it: a build with nothing to do keeps the last);
        behind a launcher, ``3 compiled through ccache (…)`` names it and how to turn it off."""
        run, count = self.run, len(self.plan.artifacts)
        plural = "s" * (run.precompiled != 1)
        pch = f", {run.precompiled} header{plural} precompiled" if run.precompiled else ""
        cached = f" ({run.cache_hits} {run.cache_words})" if run.cache_hits is not None else ""
        launched = f" {self.plan.launcher_use}" if self.plan.launcher_use else ""
        log = f"; log: {run.log_file}" if run.log_file else ""
        first = (
            f"{count} extension{'s' * (count != 1)}: {run.compiled} compiled{cached}{launched},"
            f" {run.linked} linked{pch} in {run.seconds:.1f} s{log}"
        )
        code = [f"device code of {name}: {found.describe()}"
                for name, found in self.device_code.items() if found]
        timeline = run.timeline  # then the slowest steps and idle job slots, a line each
        if not timeline:  # a no-op
            return "\n".join([first, *code])
        from .ninja import trace_view

        trace_file = self.plan.build_dir / trace.TRACE_NAME
        return "\n".join([first, *code, *trace_view.summary_lines(timeline, trace_file)])


def run(
    plan: BuildPlan,
    options: BuildOptions,
    *,
    log: Log = print_line,
    what: str = "build",
    header: str | None = None,
    by: str = "a build",
    on_work: Callable[[BuildPlan], None] | None = None,
    missed: str | None = None,
) -> NinjaRun:
    """Run the plan's ninja; the plan's notes, progress and the tools' output go to ``log``
    (unless ``options.quiet``) and all of it to ``build.log`` in the build directory. Why each
    step ran goes to the build folder's ledger (``explain``), ``by`` naming who built and
    ``missed`` why the face's faster path (a no-op replay, a JIT stamp) did not answer.
    ``on_work`` is called just before ninja starts, when the build records say it has work
    (not on a run known to have nothing to do; again on a retry)."""
    env = tool_env(options)
    root = options.source_root
    launcher_name = launchers.launcher_name(plan.launcher, plan.compiler)
    if launcher_name == "ccache":  # ours, or the user's CXX="ccache g++"
        set_ccache_defaults(env, None if root is None else str(root))
    skip = compile_record.current(plan.build_dir, root, env)
    # ccache: this run's own hits, from its stats log; sccache has none: its server's count
    # while the build ran (every build sharing the server), said as such
    hits_before = None if skip or launcher_name != "sccache" else launchers.cache_hits(plan.launcher, env)
    started_ns = time.time_ns()
    recorder = trace.Recorder(
        plan.build_dir, plan.descriptions, plan.steps, jobs=plan.jobs.jobs, env=env,
        ccache=launcher_name == "ccache",
    )
    recorder.remember()
    explained: list[str] = []
    present: dict[Path, bool] = {}  # each machine-cache PCH: whether it existed as ninja started
    try:
        with pch_cache.Hold(entry.directory for entry in plan.pch_cache), recorder:
            for entry in plan.pch_cache:
                with writing(entry.directory):
                    pch_cache.write_info(entry.directory, entry.info)
            if skip:
                result = _nothing_to_do(plan, options, log)
            else:
                present = _pch_present(plan, options, log)
                with writing(plan.build_dir):  # a run that fails must not leave "nothing to do"
                    compile_record.forget_current(plan.build_dir, root)
                remove_leftover_temporaries(plan.build_dir)  # every face holds the build lock
                if on_work is not None:
                    on_work(plan)
                try:
                    result = run_ninja(
                        plan.ninja,
                        plan.build_dir,
                        jobs=plan.jobs.jobs,
                        verbose=options.verbose,
                        show_progress=not options.quiet,
                        log=log,
                        env=env,
                        what=what,
                        header=header,
                        notes=plan.notes,
                        descriptions=plan.descriptions,
                        log_file=plan.build_dir / LOG_NAME,
                        explained=explained,
                    )
                except BuildError as exc:
                    raise ((plan.stable and stable_audit.non_stable_include(exc))
                           or _with_directory_hint(exc, plan)) from None
    except BuildError as exc:
        _explain(plan, recorder.timeline, explained, by, "failed", missed)
        failed_unity = _failed_unity_units(plan, exc)
        if failed_unity:
            # A clash the scan could not see (or an error of one member): file by file, for
            # good in this build directory; an error of a file's own shows again there.
            unity.keep_apart(plan.build_dir, [m for members in failed_unity.values() for m in members])
            shown = "; ".join(plan.descriptions[obj].removeprefix("compiling ") for obj in failed_unity)
            first = (exc.first_error or "").splitlines()[:1]
            log(user_line(f"{shown} failed as one unity TU{f' ({first[0]})' if first else ''}:"
                          " compiling those files one by one"))
            return run(prepare(plan.specs, options), options, log=log, what=what, header=header,
                       by=by, on_work=on_work, missed=missed)
        reason = pch_health.pch_failure(plan.pch_cache, plan.uses_pch, exc)
        if reason is None:
            raise
        # Once, without any PCH: a PCH may only ever make a build faster.
        log(user_line(f"{reason}: building again without precompiled headers"))
        retry = dataclasses.replace(options, pch=False)
        return run(prepare(plan.specs, retry), retry, log=log, what=what, header=header, by=by,
                   on_work=on_work, missed=missed)
    result.timeline = recorder.timeline
    if plan.pch_cache_dir is not None and plan.pch_cache:
        if not skip:
            pch_timings.record_build(plan.pch_cache_dir, plan.pch_cache, present, plan.steps,
                                     result.timeline)
        pch_cache.evict(plan.pch_cache_dir, options.pch_cache_size)
    if not skip:
        _record_inputs(plan, env, started_ns)
    _explain(plan, result.timeline, explained, by, "nothing to do" if skip else "built", missed)
    if launcher_name == "ccache" and not skip:
        result.cache_hits = recorder.cache_hits()
    hits_after = launchers.cache_hits(plan.launcher, env) if hits_before is not None else None
    if hits_before is not None and hits_after is not None:
        result.cache_hits = hits_after - hits_before
        result.cache_words = "from cache as sccache's server counts them"  # every build it serves
    stable_audit.audit_all(plan.stable)
    return result


def _pch_present(plan: BuildPlan, options: BuildOptions, log: Log) -> dict[Path, bool]:
    """Which machine-cache PCHs exist as ninja starts, once a PCH the background is making
    was waited for or not (``pch/wait.py``)."""
    if plan.pch_cache_dir is not None:
        say = (lambda line: None) if options.quiet else log
        pch_wait.wait_for_background(plan.pch_cache, plan.pch_cache_dir, plan.steps,
                                     plan.jobs.heavy, say)
    return {entry.output: entry.output.exists() for entry in plan.pch_cache}


def _explain(plan: BuildPlan, timeline: trace.Timeline | None, explained: list[str], by: str,
             outcome: str, missed: str | None) -> None:
    """Why each step of this run ran, in the ledger for ``explain``: the plan's own reasons
    (a folder made elsewhere, a changed variable or fact, an input whose content changed), else
    ninja's (``-d explain``)."""
    steps = [(step.name, step.outputs) for step in timeline.steps] if timeline else []
    reasons, _ = explained_outputs(explained)
    if plan.changes.commands:  # a flags variable changed the C++ compiles' and links' commands
        for output, reason in reasons.items():
            detail = plan.steps.get(output, {})
            if reason == COMMAND_CHANGED and detail.get("kind") in ("compile", "pch", "link") \
                    and "archs" not in detail:  # nvcc reads no flags variable
                reasons[output] = f"{reason}, as {plan.changes.commands}"
    section = ledger.explanation(by, outcome, steps, everything=plan.changes.everything,
                                 ours=plan.changes.outputs, ninja=reasons, missed=missed)
    try:
        with writing(plan.build_dir):
            ledger.update(plan.build_dir, plan.root, explain=section)
    except OutputError:
        pass  # no explanation is no reason to fail a build


def _failed_unity_units(plan: BuildPlan, error: BuildError) -> dict[str, tuple[Path, ...]]:
    """The unity TUs (object -> members) among the failed steps of ``error``."""
    failed = set(failed_targets(error.output))
    return {obj: members for obj, members in plan.unity.items() if obj in failed}


# What gcc, nvcc and clang say of an #include they cannot find, and the linker of a -l: each
# with the directories that would have held it.
_NOT_FOUND = (
    (re.compile(r"fatal error: (\S+: No such file or directory|'[^']+' file not found)"), "include_dirs"),
    (re.compile(r"cannot find -l\S+|library not found for -l"), "library_dirs"),
)


def _with_directory_hint(exc: BuildError, plan: BuildPlan) -> BuildError:
    """A header (or library) not found while an include (or library) directory is missing or
    empty: the error's first line names that directory as well (its note scrolled away with
    the build's progress), and the compiler's own error stays last."""
    kinds = [kind for pattern, kind in _NOT_FOUND if pattern.search(exc.first_error or "")]
    if not kinds:
        return exc
    hints = [note for spec in plan.specs for note in spec.missing_directories(plan.root, kinds)]
    head, colon, error = str(exc).partition(":\n")
    if not hints or not colon:
        return exc
    return BuildError(f"{head}; {'; '.join(hints)}{colon}{error}", exc.output, exc.first_error)


def _nothing_to_do(plan: BuildPlan, options: BuildOptions, log: Log) -> NinjaRun:
    """What ninja would have said with nothing to do (compile_record.py knows without running it):
    the plan's notes, no steps, and the last build's log left as it was."""
    if not options.quiet:
        for note in plan.notes:
            log(user_line(note))
    return NinjaRun()


def _record_inputs(plan: BuildPlan, env: dict[str, str], started_ns: int) -> None:
    """After ninja succeeded: what every step decided with (compile_record.py), so that the
    next build knows what changed, and whether ninja has anything to do without running it."""
    # The PCH stubs this build wrote into the machine cache are its outputs, not inputs.
    ours = [plan.pch_cache_dir] if plan.pch_cache_dir is not None else []
    with writing(plan.build_dir):
        compile_record.record(plan.build_dir, plan.root, header_dependencies(plan),
                              [plan.torch.root, *ours], started_ns=started_ns, env=env,
                              now=plan.facts)


def build(
    specs: Sequence[ExtensionSpec],
    options: BuildOptions,
    *,
    log: Log = print_line,
    torch: toolchain.TorchInstall | None = None,
    toolkit: CudaToolkit | None = None,
    what: str = "build",
    header: str | None = None,
    on_plan: Callable[[BuildPlan], None] | None = None,
    by: str = "a build",
    on_work: Callable[[BuildPlan], None] | None = None,
    missed: str | None = None,
) -> BuildResult:
    """Plan and run: the compile core's one entry point. ``torch`` and ``toolkit`` as in
    :func:`prepare`; ``on_plan`` sees the plan before it runs (the JIT turns its notes into
    warnings); the rest as in :func:`run`."""
    plan = prepare(specs, options, torch=torch, toolkit=toolkit)
    if on_plan is not None:
        on_plan(plan)
    ran = run(plan, options, log=log, what=what, header=header, by=by, on_work=on_work,
              missed=missed)
    code = read_device_code(plan)
    if ran.timeline is not None and ran.timeline.steps and code:
        # the timeline's linking step of each CUDA library carries what it holds, by arch
        extra = {plan.targets[name]: {"device_code": found.to_json()}
                 for name, found in code.items() if found}
        ran.timeline = trace.annotate(plan.build_dir, ran.timeline, extra)
    return BuildResult(plan, ran, code)


def read_device_code(plan: BuildPlan) -> dict[str, DeviceCode]:
    """Each artifact's cubins and PTX, from its ``.nv_fatbin`` (what was built, whatever the
    arch list said; empty for one without device code)."""
    from ..abi.fatbin import read_device_code as read

    return {name: read(path) for name, path in plan.artifacts.items()}


def header_dependencies(plan: BuildPlan) -> dict[str, list[Path]]:
    """Each object's recorded header dependencies (``ninja -t deps``), absolute, after a build."""
    try:
        output = subprocess.run(
            [str(plan.ninja), "-C", str(plan.build_dir), "-t", "deps"],
            capture_output=True, text=True, check=True, errors="replace",
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"cannot read ninja's dependency log: {exc}") from None
    deps: dict[str, list[Path]] = {}
    current: list[Path] | None = None
    for line in output.splitlines():
        if line and not line.startswith(" "):
            target = line.split(":", 1)[0]
            current = deps.setdefault(target, [])
        elif line.strip() and current is not None:  # relative: behind a cache (see _arguments)
            current.append(Path(os.path.normpath(plan.build_dir / line.strip())))
    return deps

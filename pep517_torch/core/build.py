"""The compile core's entry point: specs + options → one ninja graph → built artifacts."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import write_if_changed, writing
from ..errors import BuildError, ConfigError, ToolchainError
from ..project_tree import mark_build_dir
from . import flags as flags_mod
from . import graph, inputs, jobs, pch, pch_cache, pch_health, pch_seal, scan, stable_audit
from . import toolchain, trace, trace_view, unity, up_to_date
from . import launcher as launchers
from .progress import LOG_NAME
from .runner import Log, NinjaRun, _stderr, failed_targets, run_ninja
from .spec import BuildOptions, ExtensionSpec, first_duplicate, is_cuda_source


@dataclass(frozen=True)
class BuildPlan:
    """A written build.ninja and everything needed to run or re-run it."""

    build_dir: Path
    ninja: Path
    ninja_file: Path
    artifacts: dict[str, Path]  # spec name -> absolute artifact path
    targets: dict[str, str]  # spec name -> ninja target (relative to build_dir)
    jobs: jobs.JobPlan
    notes: tuple[str, ...]
    compiler: toolchain.Compiler
    torch: toolchain.TorchInstall
    launcher: tuple[str, ...]
    descriptions: dict[str, str]  # ninja output -> what building it means, for error messages
    pch_cache: tuple[pch.PchPlan, ...] = ()  # the machine-wide cache's entries this build uses
    pch_cache_dir: Path | None = None  # that cache (None: PCHs stay in the build directory)
    steps: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)  # for the trace
    stable: tuple[stable_audit.StableArtifact, ...] = ()  # audited after every run
    # spec name -> each object file and the source it compiles (as shown): who needs a symbol
    objects: dict[str, tuple[tuple[Path, str], ...]] = dataclasses.field(default_factory=dict)
    specs: tuple[ExtensionSpec, ...] = ()  # what it builds (a retry without PCHs plans them again)
    uses_pch: bool = False  # some compile uses a precompiled header, or some edge makes one
    unity: dict[str, tuple[Path, ...]] = dataclasses.field(default_factory=dict)  # object -> members


@dataclass(frozen=True)
class BuildResult:
    plan: BuildPlan
    run: NinjaRun

    @property
    def artifacts(self) -> dict[str, Path]:
        return self.plan.artifacts

    def summary(self) -> str:
        """``2 extensions: 3 compiled, 2 linked, 1 header precompiled in 9.1 s; log: …/build.log``
        (the log only when this build wrote it: a build with nothing to do keeps the last)."""
        run, count = self.run, len(self.plan.artifacts)
        plural = "s" * (run.precompiled != 1)
        pch = f", {run.precompiled} header{plural} precompiled" if run.precompiled else ""
        cached = f" ({run.cache_hits} from cache)" if run.cache_hits is not None else ""
        log = f"; log: {run.log_file}" if run.log_file else ""
        first = (
            f"{count} extension{'s' * (count != 1)}: {run.compiled} compiled{cached},"
            f" {run.linked} linked{pch} in {run.seconds:.1f} s{log}"
        )
        timeline = run.timeline  # then the slowest steps and idle job slots, a line each
        trace_file = self.plan.build_dir / trace.TRACE_NAME
        return "\n".join([first, *(trace_view.summary_lines(timeline, trace_file) if timeline else [])])


def _check_build_dir(build_dir: Path) -> None:
    try:
        build_dir.mkdir(parents=True, exist_ok=True)
        mark_build_dir(build_dir)  # CACHEDIR.TAG: sdists, backups and archivers leave it out
        probe = build_dir / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ToolchainError(f"build directory {build_dir} is not writable: {exc}") from None


def _check_torch_cuda_headers(
    spec: ExtensionSpec, found: list[scan.Include], torch: toolchain.TorchInstall
) -> None:
    if torch.has_cuda_runtime:
        return
    offending = scan.torch_cuda_includes(found)
    if offending:
        first = offending[0]
        raise ToolchainError(
            f"{first.file}:{first.line} includes <{first.header}>, but torch {torch.version} is"
            f" a CPU build without torch's CUDA headers and libraries (c10_cuda, torch_cuda)."
            f" Extension {spec.name!r} needs a CUDA build of torch (on Linux x86_64, PyPI's"
            f" torch=={torch.version.split('+')[0]} is one; download.pytorch.org has +cuXYZ"
            " builds), or guard those includes"
        )


@dataclass(frozen=True)
class CudaSetup:
    toolkit: Any  # cuda.CudaToolkit (imported only when an extension uses CUDA)
    host_compiler: str | None  # nvcc's -ccbin
    include_dirs: tuple[Path, ...]
    library_dirs: tuple[Path, ...]


def _cuda_setup(
    specs: Sequence[ExtensionSpec],
    options: BuildOptions,
    compiler: toolchain.Compiler,
    torch: toolchain.TorchInstall,
    notes: list[str],
    found: Any = None,
) -> CudaSetup:
    """``found``: the toolkit the caller found already (None: look here)."""
    from . import cuda, cuda_checks

    toolkit = found or cuda.require_cuda(options.env, torch_cuda=torch.cuda)
    allow = options.allow_cuda_version_mismatch
    notes.extend(cuda_checks.check_versions(
        toolkit, torch.cuda, allow_mismatch=allow,
        override_key=options.key_of("allow_cuda_version_mismatch"),
    ))
    host = options.env.get("CC")
    host_compiler = compiler
    if host:
        host_compiler = toolchain.find_compiler(options.env, "CC")
    elif options.env.get("CXX"):
        host = str(compiler.path)  # nvcc's host compiler = the C++ TUs' compiler
    nvcc_flags = [f for s in specs for f in s.extra_cuda_cflags]
    cuda_checks.check_host_compiler(
        toolkit, host_compiler.family, host_compiler.version, nvcc_flags,
        flags_key=" or ".join(dict.fromkeys(s.key_of("extra_cuda_cflags") for s in specs)),
    )
    if not torch.has_cuda_runtime:
        notes.append(
            f"torch {torch.version} is a CPU build: CUDA sources compile and link against"
            " cudart, but torch's CUDA runtime APIs (c10::cuda, at::cuda) are unavailable"
        )
    return CudaSetup(
        toolkit,
        host,
        (*toolkit.include_dirs, *toolkit.extra_include_dirs),
        (*toolkit.library_dirs, *toolkit.extra_library_dirs),
    )


def _arch_flags(
    spec: ExtensionSpec, options: BuildOptions, toolkit: Any, notes: list[str],
    torch: toolchain.TorchInstall | None = None,
) -> tuple[tuple[str, ...], int]:
    """The arch flags nvcc gets, and how many GPU targets each CUDA object builds."""
    from . import arch, cuda_checks

    value = options.cuda_arch_list or spec.cuda_arch_list
    if options.cuda_arch_list:
        key = options.key_of("cuda_arch_list") or "cuda_arch_list"
    else:
        key = spec.key_of("cuda_arch_list")
    entries = arch.parse_arch_list(";".join(value), key=key) if value else None
    decision = arch.resolve_arch_flags(
        entries, toolkit, user_nvcc_flags=spec.extra_cuda_cflags, env=options.env,
        flag_key=lambda index: spec.key_of("extra_cuda_cflags", index),
        choose=options.key_of("cuda_arch_list") or spec.key_of("cuda_arch_list"),
        torch_archs=cuda_checks.torch_arch_list(torch.library_dir)
        if torch is not None and torch.has_cuda_runtime else (),
    )
    if decision.note and decision.note not in notes:
        notes.append(decision.note)
    return tuple(decision.flags), max(len(decision.archs), 1)


def _with_cuda_headers(spec: ExtensionSpec) -> ExtensionSpec:
    """with-cuda = auto: a source that includes a ``.cuh`` header makes it a CUDA extension."""
    if spec.with_cuda is not None or spec.uses_cuda:
        return spec
    found = scan.walk_includes(spec.sources, spec.include_dirs)
    if any(include.header.endswith(".cuh") for include in found):
        return dataclasses.replace(spec, with_cuda=True)
    return spec


@dataclass
class _Planner:
    """What planning every extension shares: tools, options, PCH registry, notes."""

    options: BuildOptions
    tools: flags_mod.ResolvedTools
    toolkit: Any
    build_dir: Path
    output_dir: Path
    pch_dir: Path | None  # torch umbrellas' PCHs; None: no PCH (off, or the tools can't)
    pch_shared: bool  # pch_dir is the machine-wide cache
    notes: list[str]
    pch_plans: dict[str, pch.PchPlan] = dataclasses.field(default_factory=dict)

    def plan(self, spec: ExtensionSpec) -> graph.ExtensionPlan:
        for index, source in enumerate(spec.sources):
            if not source.is_file():
                raise ConfigError(
                    f"source file {source} does not exist", spec.key_of("sources", index)
                )
        includes = {s: scan.walk_includes([s], spec.include_dirs) for s in spec.sources}
        _check_torch_cuda_headers(spec, [i for found in includes.values() for i in found], self.tools.torch)
        arch_flags, gpu_targets = (
            _arch_flags(spec, self.options, self.toolkit, self.notes, self.tools.torch)
            if spec.uses_cuda else ((), 0)
        )
        ext_flags = flags_mod.compute(
            spec, self.tools, source_root=self.options.source_root, arch_flags=arch_flags,
            build_dir=self.build_dir,
        )
        nvcc_sources = {s for s in spec.sources if spec.uses_cuda and is_cuda_source(s)}
        pch_users: dict[Path, pch.PchPlan] = {}
        # A stable-ABI TU includes no torch/extension.h: nothing of torch is worth a PCH.
        torch_pch = spec.stable_abi is None or spec.pch_header is not None
        if self.pch_dir is not None and spec.pch and torch_pch:
            cxx_sources = [s for s in spec.sources if s not in nvcc_sources]
            pch_users = pch.plan(
                spec, cxx_sources, ext_flags, self.tools.compiler, self.tools.torch,
                self.pch_plans, cache_dir=self.pch_dir, shared=self.pch_shared,
                build_dir=self.build_dir,
            )
        output = self.output_dir / graph.artifact_name(spec)
        plan = graph.ExtensionPlan(spec, ext_flags, os.path.relpath(output, self.build_dir))
        base = graph.display_base(spec, self.options.source_root)
        for source in spec.sources:
            plan.units.append(graph.CompileUnit(
                source,
                graph.object_name(spec, source, base),
                nvcc=source in nvcc_sources,
                heavy=scan.uses_torch_headers(includes[source]),
                pch=pch_users.get(source),
                gpu_targets=gpu_targets if source in nvcc_sources else 0,
            ))
        return plan


def check(specs: Sequence[ExtensionSpec], options: BuildOptions) -> tuple[str, ...]:
    """Every check :func:`prepare` makes (tools, nvcc, flags, arch lists, torch's CUDA headers),
    writing nothing; returns the notes a build would print."""
    return prepare(specs, options, check_only=True).notes


def prepare(
    specs: Sequence[ExtensionSpec],
    options: BuildOptions,
    *,
    check_only: bool = False,
    torch: toolchain.TorchInstall | None = None,
    toolkit: Any = None,
) -> BuildPlan:
    """Discover tools, compute flags, plan PCHs and write build.ninja (compiles nothing).

    Everything that can fail is checked before the build directory is created or written;
    ``check_only`` stops there (the plan then names no artifacts). ``torch`` and ``toolkit``
    (a ``cuda.CudaToolkit``) are what the caller found already; None: found here."""
    if not specs:
        raise ConfigError("nothing to build: no extensions")
    specs = [_with_cuda_headers(spec) for spec in specs]
    duplicate = first_duplicate([s.name for s in specs])
    if duplicate is not None:
        first, second = (specs[i] for i in duplicate)
        raise ConfigError(
            f"extension name {second.name!r} is already used by {first.key_of('name')}",
            second.key_of("name"),
        )
    build_dir = options.build_dir.resolve()
    env = options.env
    compiler = toolchain.find_compiler(env)
    torch = torch or toolchain.find_torch()
    stable_audit.check_targets(specs, torch.version)
    ninja = toolchain.find_ninja(env)
    launcher = launchers.find_launcher(options.compiler_launcher, compiler, env)
    launcher_name = launchers.launcher_name(launcher, compiler)
    tool_env = _tool_env(options)
    distributed = None
    if launcher_name == launchers.DISTCC:
        distributed = launchers.distcc_slots((launcher or compiler.command)[0], tool_env)
    notes: list[str] = []
    tools = flags_mod.ResolvedTools(compiler, torch, toolchain.python_include_dir())
    cuda = None
    if any(s.uses_cuda for s in specs):
        cuda = _cuda_setup(specs, options, compiler, torch, notes, toolkit)
        tools = dataclasses.replace(
            tools,
            cuda_include_dirs=cuda.include_dirs,
            cuda_library_dirs=cuda.library_dirs,
            host_compiler_for_nvcc=cuda.host_compiler,
        )
    job_plan = jobs.plan_jobs(options.jobs, distributed)
    use_pch = options.pch and any(spec.pch for spec in specs)
    if use_pch:
        shared = launchers.shares_objects(launcher_name, launcher, tool_env)
        reason = pch.unsupported_reason(compiler, launcher_name, shared)
        if reason is not None:
            use_pch = False
            notes.append(f"precompiled headers off: {reason}")
    pch_dir, shared_pch = _pch_dir(options, build_dir, notes) if use_pch else (build_dir, False)
    planner = _Planner(
        options,
        tools,
        cuda.toolkit if cuda else None,
        build_dir,
        (options.output_dir or build_dir / "out").resolve(),
        pch_dir if use_pch else None,
        shared_pch,
        notes,
    )
    plans = [planner.plan(spec) for spec in specs]
    unity_sources: dict[Path, str] = {}
    if options.unity:
        unity_sources, unity_notes = unity.apply(
            plans, job_plan.heavy, build_dir, planner.pch_plans.values()
        )
        notes.extend(unity_notes)
    if cuda is not None:
        _set_nvcc_threads(plans, job_plan, cuda.toolkit, _tool_env(options))
    if check_only:
        return BuildPlan(build_dir, ninja, build_dir / "build.ninja", {}, {}, job_plan,
                         tuple(notes), compiler, torch, tuple(launcher), {})
    # Every check passed (tools, flags, arch lists nvcc can build): only now write anything.
    _check_build_dir(build_dir)
    with writing(build_dir):
        for path, content in unity_sources.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_if_changed(path, content)
    if shared_pch:
        pch_health.check_entries(plans, planner.pch_plans, notes)
    for entry in planner.pch_plans.values():
        entry.decide(eager=options.pch_eager and shared_pch, heavy_jobs=job_plan.heavy)
    if shared_pch:
        pch_health.skip_unkeepable(planner.pch_plans.values(), pch_dir, options.pch_cache_size, notes)
    text = graph.render(
        plans,
        list(planner.pch_plans.values()),
        build_dir=build_dir,
        cxx=[*launcher, *compiler.command],
        nvcc=[*(launcher if launchers.wraps_nvcc(launcher_name) else []), str(cuda.toolkit.nvcc)]
        if cuda else None,
        heavy_depth=job_plan.heavy,
        source_root=options.source_root,
        launcher_name=launcher_name,
        heavy_flags=flags_mod.heavy_tuning(compiler),
        local_heavy_depth=job_plan.local_heavy_depth,
        arguments=launchers.command_arguments(launcher_name, options.source_root, build_dir),
        nvcc_dlink=[str(cuda.toolkit.nvcc)] if cuda else None,
        pch_seal=[sys.executable, pch_seal.__file__] if shared_pch else (),
    )
    objects = stable_audit.objects(plans, build_dir, options.source_root)
    ninja_file = build_dir / "build.ninja"
    with writing(build_dir):  # a full disk: one line naming it, not a traceback
        if write_if_changed(ninja_file, text) or not (build_dir / COMPDB).exists():
            unity_units = {u.object: (u.source, u.members) for p in plans for u in p.units if u.members}
            _write_compile_commands(ninja, build_dir, unity_units)
        inputs.discard_changed(build_dir)  # ninja rebuilds what an edit with an old mtime changed
    return BuildPlan(
        build_dir=build_dir,
        ninja=ninja,
        ninja_file=ninja_file,
        artifacts={p.spec.name: (build_dir / p.output).resolve() for p in plans},
        targets={p.spec.name: p.output for p in plans},
        jobs=job_plan,
        notes=tuple(notes),
        compiler=compiler,
        torch=torch,
        launcher=tuple(launcher),
        descriptions=_descriptions(plans, options.source_root),
        pch_cache=tuple(p for p in planner.pch_plans.values() if p.shared),
        pch_cache_dir=pch_dir if shared_pch else None,
        steps=graph.step_details(
            plans, list(planner.pch_plans.values()), build_dir=build_dir,
            launcher_name=launcher_name, nvcc_launched=launchers.wraps_nvcc(launcher_name),
        ),
        stable=stable_audit.artifacts(plans, build_dir, objects),
        objects=objects,
        specs=tuple(specs),
        uses_pch=bool(planner.pch_plans),
        unity={u.object: u.members for p in plans for u in p.units if u.members},
    )


_THREADS_FLAGS = ("-t", "--threads")


def _set_nvcc_threads(
    plans: Sequence[graph.ExtensionPlan], job_plan: jobs.JobPlan, toolkit: Any, env: dict[str, str]
) -> None:
    """nvcc --threads for each .cu with several GPU targets, within the jobs budget (jobs.py);
    none where the extension's own flags already say, or nvcc predates the flag (11.2)."""
    if tuple(toolkit.version) < (11, 2):
        return
    units = [unit for plan in plans for unit in plan.units]
    requested = env.get(jobs.NVCC_THREADS_ENV)
    for plan in plans:
        own = any(
            flag in _THREADS_FLAGS or flag.startswith(("--threads=", "-t="))
            for flag in plan.spec.extra_cuda_cflags
        )
        for unit in plan.units:
            if unit.nvcc and not own and (unit.gpu_targets > 1 or requested):
                unit.nvcc_threads = jobs.nvcc_threads(unit.gpu_targets, len(units), job_plan, requested)


def _descriptions(plans: Sequence[graph.ExtensionPlan], source_root: Path | None) -> dict[str, str]:
    described = {}
    for plan in plans:
        base = source_root or graph.display_base(plan.spec, None)
        for unit in plan.units:
            described[unit.object] = f"compiling {unit.shown(base)}"
        described[plan.output] = f"linking {plan.spec.name}"
        if plan.dlink_object:
            described[plan.dlink_object] = f"device-linking {plan.spec.name}"
    return described


def _pch_dir(options: BuildOptions, build_dir: Path, notes: list[str]) -> tuple[Path, bool]:
    """Where torch headers' PCHs go, and whether that is the machine-wide cache."""
    if options.pch_cache_size > 0:
        machine = options.pch_cache_dir or pch_cache.pch_root(_tool_env(options))
        problem = pch_cache.unwritable(machine)
        if problem is None:
            return machine.resolve(), True
        notes.append(f"precompiled headers kept in the build directory: {problem}")
    return build_dir / "pch", False


def _tool_env(options: BuildOptions) -> dict[str, str]:
    """The environment the tools run in (DISTCC_HOSTS, CCACHE_*, SCCACHE_* included)."""
    return {**os.environ, **options.env}


COMPDB = "compile_commands.json"


def _write_compile_commands(
    ninja: Path, build_dir: Path, unity_units: Mapping[str, tuple[Path, Path]]
) -> None:
    """compile_commands.json for editors and clangd, regenerated when build.ninja changes;
    ``unity_units`` (object -> generated source, members): each member gets its own entry."""
    result = subprocess.run(
        [str(ninja), "-C", str(build_dir), "-t", "compdb", "cxx", "nvcc"],
        capture_output=True, text=True, check=False, errors="replace",
    )
    if result.returncode != 0:
        return
    try:
        entries = json.loads(result.stdout)
    except ValueError:
        return
    listed = []
    for entry in entries:
        source, members = unity_units.get(entry.get("output"), (None, ()))
        if source is None:
            listed.append(entry)
            continue
        command = str(entry.get("command", ""))
        listed += [{**entry, "file": str(member),
                    "command": command.replace(shlex.quote(str(source)), shlex.quote(str(member)))}
                   for member in members]
    write_if_changed(build_dir / COMPDB, json.dumps(listed, indent=2) + "\n")


def run(
    plan: BuildPlan,
    options: BuildOptions,
    *,
    log: Log = _stderr,
    what: str = "build",
    header: str | None = None,
) -> NinjaRun:
    """Run the plan's ninja; the plan's notes, progress and the tools' output go to ``log``
    (unless ``options.quiet``) and all of it to ``build.log`` in the build directory."""
    env = _tool_env(options)
    if plan.launcher and Path(plan.launcher[0]).name == "ccache":
        env.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros,include_file_mtime,include_file_ctime")
        if options.source_root is not None:  # ccache's own relative paths, for debug builds
            env.setdefault("CCACHE_BASEDIR", str(options.source_root))
    skip = up_to_date.current(plan.build_dir)
    hits_before = None if skip else launchers.cache_hits(plan.launcher, env)
    started_ns = time.time_ns()
    recorder = trace.Recorder(
        plan.build_dir, plan.descriptions, plan.steps, jobs=plan.jobs.jobs, env=env,
        ccache=launchers.launcher_name(plan.launcher, plan.compiler) == "ccache",
    )
    recorder.remember()
    try:
        with pch_cache.Hold(entry.directory for entry in plan.pch_cache), recorder:
            for entry in plan.pch_cache:
                with writing(entry.directory):
                    pch_cache.write_info(entry.directory, entry.info)
            if skip:
                result = _nothing_to_do(plan, options, log)
            else:
                up_to_date.forget(plan.build_dir)  # a failed run must not leave the last record
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
                    )
                except BuildError as exc:
                    raise (plan.stable and stable_audit.non_stable_include(exc)) or exc from None
    except BuildError as exc:
        failed_unity = _failed_unity_units(plan, exc)
        if failed_unity:
            # A clash the scan could not see (or an error of one member): one by one, for good
            # in this build directory; an error of the files' own shows again there.
            unity.keep_apart(plan.build_dir, [m for members in failed_unity.values() for m in members])
            shown = "; ".join(plan.descriptions[obj].removeprefix("compiling ") for obj in failed_unity)
            first = (exc.first_error or "").splitlines()[:1]
            log(f"pep517_torch: {shown} failed as one unity TU{f' ({first[0]})' if first else ''}:"
                " compiling those files one by one")
            return run(prepare(plan.specs, options), options, log=log, what=what, header=header)
        reason = pch_health.pch_failure(plan.pch_cache, plan.uses_pch, exc)
        if reason is None:
            raise
        # Once, without any PCH: a PCH may only ever make a build faster.
        log(f"pep517_torch: {reason}: building again without precompiled headers")
        retry = dataclasses.replace(options, pch=False)
        return run(prepare(plan.specs, retry), retry, log=log, what=what, header=header)
    result.timeline = recorder.timeline
    if plan.pch_cache_dir is not None and plan.pch_cache:
        pch_cache.evict(plan.pch_cache_dir, options.pch_cache_size)
    if not skip:
        _record_inputs(plan, result, started_ns)
    hits_after = launchers.cache_hits(plan.launcher, env) if hits_before is not None else None
    if hits_before is not None and hits_after is not None:
        result.cache_hits = hits_after - hits_before
    stable_audit.audit_all(plan.stable)
    return result


def _failed_unity_units(plan: BuildPlan, error: BuildError) -> dict[str, tuple[Path, ...]]:
    """The unity TUs (object -> members) among the failed steps of ``error``."""
    failed = set(failed_targets(error.output))
    return {obj: members for obj, members in plan.unity.items() if obj in failed}


def _nothing_to_do(plan: BuildPlan, options: BuildOptions, log: Log) -> NinjaRun:
    """What ninja would have said with nothing to do (up_to_date.py knows without running it):
    the plan's notes, no steps, and the last build's log left as it was."""
    if not options.quiet:
        for note in plan.notes:
            log(f"pep517_torch: {note}")
    return NinjaRun()


def _record_inputs(plan: BuildPlan, result: NinjaRun, started_ns: int) -> None:
    """After ninja succeeded: the content of what each object read (inputs.py) and the stamps
    that let the next build skip ninja (up_to_date.py)."""
    deps = None
    if result.steps or not inputs.has_record(plan.build_dir):
        # The PCH stubs this build wrote into the machine cache are its outputs, not inputs.
        ours = [plan.pch_cache_dir] if plan.pch_cache_dir is not None else []
        deps = header_dependencies(plan)
        with writing(plan.build_dir):
            inputs.record(plan.build_dir, deps, [plan.torch.root, *ours], started_ns=started_ns)
    with writing(plan.build_dir):
        up_to_date.record(plan.build_dir, deps or header_dependencies(plan), started_ns=started_ns)


def build(
    specs: Sequence[ExtensionSpec],
    options: BuildOptions,
    *,
    log: Log = _stderr,
    torch: toolchain.TorchInstall | None = None,
    toolkit: Any = None,
) -> BuildResult:
    """Plan and run; ``torch`` and ``toolkit`` as in :func:`prepare`."""
    plan = prepare(specs, options, torch=torch, toolkit=toolkit)
    return BuildResult(plan, run(plan, options, log=log))


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

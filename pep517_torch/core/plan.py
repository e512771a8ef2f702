"""Planning a build: specs + options → tools found, flags, PCHs, one written build.ninja.

Everything that can fail is checked before anything is written; :func:`check` stops there
(doctor). Running the plan is ``build.py``'s.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..atomic import write_if_changed, writing
from ..errors import ConfigError, ToolchainError
from ..project_tree import make_build_dir
from . import flags as flags_mod
from . import compile_record, graph, scan
from .postlink import stable_audit
from .toolchain import jobs
from .pch import plan as pch, cache as pch_cache, health as pch_health, seal as pch_seal
from .postlink import guard_patch, import_guard
from .ninja import compdb
from .toolchain import tools as toolchain
from .unity import groups as unity
from .toolchain import launcher as launchers
from .naming import artifact_name, display_base, object_name
from .spec import BuildOptions, ExtensionSpec, first_duplicate, is_cuda_source

if TYPE_CHECKING:
    from .cuda.toolkit import CudaToolkit
    from .cuda.build_setup import CudaSetup


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
    root: Path | None = None  # the project the build folder belongs to (None: the JIT's)
    # the CUDA major ("13", nvcc's) a torch needs to run these artifacts (postlink/import_guard.py's
    # needs_cuda_torch), or None
    cuda_needed: str | None = None
    facts: dict[str, object] = dataclasses.field(default_factory=dict)  # compile_record.facts
    cuda_version: str | None = None  # the nvcc that compiled CUDA sources ("13.0"), if any
    # what changed since the last build beyond ninja's mtimes (outputs already deleted)
    changes: compile_record.Changes = dataclasses.field(default_factory=compile_record.Changes)
    launcher_use: str = ""  # the summary's words for the launcher (launcher.in_use), if any


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


def _check_standard(
    spec: ExtensionSpec, includes: dict[Path, list[scan.Include]], torch: toolchain.TorchInstall
) -> None:
    """A ``-std`` older than torch's headers accept, for a language whose sources include them,
    fails here rather than in every compile (and is no PCH's fault). Stable-ABI sources
    include only torch's stable headers, which say nothing of the standard."""
    if spec.stable_abi is not None:
        return
    for nvcc in (False, True):
        users = [s for s, found in includes.items()
                 if (spec.uses_cuda and is_cuda_source(s)) == nvcc and scan.uses_torch_headers(found)]
        problem = flags_mod.standard_problem(spec, torch, nvcc=nvcc) if users else None
        if problem is not None:
            raise ConfigError(*problem)


def with_cuda_headers(spec: ExtensionSpec) -> ExtensionSpec:
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
    toolkit: CudaToolkit | None
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
        self.notes.extend(spec.missing_directories(self.options.source_root))
        includes = {s: scan.walk_includes([s], spec.include_dirs) for s in spec.sources}
        _check_torch_cuda_headers(spec, [i for found in includes.values() for i in found], self.tools.torch)
        _check_standard(spec, includes, self.tools.torch)
        arch_flags: tuple[str, ...] = ()
        gpu_targets = 0
        if spec.uses_cuda:
            from .cuda import build_setup as cuda_setup  # CUDA builds only

            arch_flags, gpu_targets = cuda_setup.arch_flags(
                spec, self.options, self.toolkit, self.notes, self.tools.torch
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
        output = self.output_dir / artifact_name(spec)
        guard = import_guard.plan(
            spec, self.tools.torch, self.toolkit.version_str if self.toolkit else None,
            self.build_dir, self.tools.cuda_library_dirs,
        )
        plan = graph.ExtensionPlan(spec, ext_flags, os.path.relpath(output, self.build_dir), guard=guard)
        base = display_base(spec, self.options.source_root)
        for source in spec.sources:
            plan.units.append(graph.CompileUnit(
                source,
                object_name(spec, source, base),
                nvcc=source in nvcc_sources,
                heavy=scan.uses_torch_headers(includes[source]),
                torch_weight=scan.torch_weight(includes[source]),
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
    toolkit: CudaToolkit | None = None,
) -> BuildPlan:
    """Discover tools, compute flags, plan PCHs and write build.ninja (compiles nothing).

    Everything that can fail is checked before the build directory is created or written;
    ``check_only`` stops there (the plan then names no artifacts). ``torch`` and ``toolkit``
    are what the caller found already; None: found here."""
    if not specs:
        raise ConfigError("nothing to build: no extensions")
    specs = [with_cuda_headers(spec) for spec in specs]
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
    stable_audit.check_targets(specs, torch.version, tool_env(options), compiler.command)
    ninja = toolchain.find_ninja(env)
    launcher = launchers.find_launcher(options.compiler_launcher, compiler, env)
    launcher_name = launchers.launcher_name(launcher, compiler)
    environment = tool_env(options)
    distributed = None
    if launcher_name == launchers.DISTCC:
        distributed = launchers.distcc_slots((launcher or compiler.command)[0], environment)
    notes: list[str] = []
    from_env = flags_mod.environment_flags(environment)
    if from_env.note:
        notes.append(from_env.note)
    tools = flags_mod.ResolvedTools(compiler, torch, toolchain.python_include_dir(),
                                    env_flags=from_env)
    cuda: CudaSetup | None = None
    if any(s.uses_cuda for s in specs):
        from .cuda import build_setup as cuda_setup  # CUDA builds only

        cuda = cuda_setup.set_up(specs, options, compiler, torch, notes, toolkit)
        tools = dataclasses.replace(
            tools,
            cuda_include_dirs=cuda.include_dirs,
            cuda_library_dirs=cuda.library_dirs,
            host_compiler_for_nvcc=cuda.host_compiler,
        )
    job_plan = jobs.plan_jobs(options.jobs, distributed)
    use_pch = options.pch and any(spec.pch for spec in specs)
    if use_pch:
        shared = launchers.shares_objects(launcher_name, launcher, environment)
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
    unsupported = import_guard.unsupported()
    if unsupported and any(spec.import_check_torch for spec in specs):
        notes.append(unsupported)
    unity_plan = unity.UnityPlan({}, [], {})
    if options.unity:
        stale = None if check_only else compile_record.stale_outputs(build_dir, options.source_root, environment)
        unity_plan = unity.apply(plans, job_plan.heavy, build_dir, planner.pch_plans.values(), stale)
        notes.extend(unity_plan.notes)
    if cuda is not None:
        from .cuda.build_setup import set_nvcc_threads

        set_nvcc_threads(plans, job_plan, cuda.toolkit, environment)
    if check_only:
        return BuildPlan(build_dir, ninja, build_dir / "build.ninja", {}, {}, job_plan,
                         tuple(notes), compiler, torch, tuple(launcher), {})
    # Every check passed (tools, flags, arch lists nvcc can build): only now write anything.
    make_build_dir(build_dir)
    generated = {**unity_plan.sources, **{p.guard.source: p.guard.text for p in plans if p.guard}}
    with writing(build_dir):
        for path, content in generated.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_if_changed(path, content)
        if options.unity:
            unity.record_groups(build_dir, options.source_root, unity_plan)
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
        guard_patch=[sys.executable, guard_patch.__file__],
        nvcc_heavy_flags=flags_mod.nvcc_heavy_tuning(cuda.host_family) if cuda else (),
    )
    objects = stable_audit.objects(plans, build_dir, options.source_root)
    ninja_file = build_dir / "build.ninja"
    facts = compile_record.facts(cuda.toolkit.nvcc if cuda else None, torch.root, environment)
    with writing(build_dir):  # a full disk: one line naming it, not a traceback
        if write_if_changed(ninja_file, text) or not (build_dir / compdb.NAME).exists():
            compdb.write(ninja, build_dir, {u.object: (u.source, u.members)
                                            for p in plans for u in p.units if u.members})
        # ninja redoes what changed beyond its mtimes: a copied folder, a variable, an edit
        changes = compile_record.discard_changed(build_dir, options.source_root, environment, facts)
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
        root=options.source_root,
        facts=facts,
        launcher_use=launchers.in_use(launcher, compiler, options.compiler_launcher,
                                      options.key_of("compiler_launcher")),
        changes=changes,
        cuda_version=cuda.toolkit.version_str if cuda else None,
        cuda_needed=str(cuda.toolkit.version[0]) if cuda and any(
            import_guard.needs_cuda_torch(spec, torch) for spec in specs) else None,
    )


def _descriptions(plans: Sequence[graph.ExtensionPlan], source_root: Path | None) -> dict[str, str]:
    described = {}
    for plan in plans:
        base = source_root or display_base(plan.spec, None)
        for unit in plan.units:
            described[unit.object] = f"compiling {unit.shown(base)}"
        described[plan.output] = f"linking {plan.spec.name}"
        if plan.dlink_object:
            described[plan.dlink_object] = f"device-linking {plan.spec.name}"
        if plan.guard is not None:
            described[plan.guard.object] = f"compiling the import check of {plan.spec.name}"
    return described


def _pch_dir(options: BuildOptions, build_dir: Path, notes: list[str]) -> tuple[Path, bool]:
    """Where torch headers' PCHs go, and whether that is the machine-wide cache."""
    if options.pch_cache_size > 0:
        machine = options.pch_cache_dir or pch_cache.pch_root(tool_env(options))
        problem = pch_cache.unwritable(machine)
        if problem is None:
            return machine.resolve(), True
        notes.append(f"precompiled headers kept in the build directory: {problem}")
    return build_dir / "pch", False


def tool_env(options: BuildOptions) -> dict[str, str]:
    """The environment the tools run in (DISTCC_HOSTS, CCACHE_*, SCCACHE_* included)."""
    return {**os.environ, **options.env}

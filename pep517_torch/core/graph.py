"""One build.ninja for every extension of a build.

Layout inside the build directory (ninja runs there, so every path we own is relative and
sanitised; only user paths are absolute, escaped for ninja and quoted for the shell)::

    build.ninja  .ninja_log  .ninja_deps
    obj/<extension name>/<source path relative to the project>.o
    pch/<flag-set key>/pch.h(.gch)         (wheels; the JIT shares one cache dir instead)
    <output dir>/<package path>/<module><suffix>
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .flags import ExtensionFlags
from .postlink.import_guard import GUARD_FLAGS, GuardPlan
from .ninja.syntax import NinjaWriter, escape_value, shell_args
from .naming import display_base, display_path
from .pch.plan import PchPlan
from .spec import ExtensionSpec


@dataclass
class CompileUnit:
    source: Path
    object: str  # relative to the build directory
    nvcc: bool
    heavy: bool  # includes torch headers: runs in the memory-bounded pool
    torch_weight: int = 3  # how much of torch it parses (scan.torch_weight): orders the compiles
    pch: PchPlan | None = None
    gpu_targets: int = 0  # nvcc: the GPU architectures (SASS and PTX) it compiles for
    nvcc_threads: int = 1  # nvcc --threads: targets compiled at once (1: no flag; toolchain/jobs.py)
    members: tuple[Path, ...] = ()  # a unity TU's sources (``source`` includes each of them)

    @property
    def estimated_cost(self) -> int:
        """Relative compile time, to start the slowest first: a torch TU's host pass costs what
        the torch it parses weighs (the whole C++ API eight light TUs, torch/library.h three; a
        unity TU's each further member one more), and nvcc adds a device pass per GPU target."""
        host = (self.torch_weight + max(len(self.members) - 1, 0)) if self.heavy else 1
        return host * (1 + self.gpu_targets) if self.nvcc else host

    def shown(self, base: Path | None) -> str:
        """The source as people read it: ``csrc/a.cpp``, ``csrc/a.cpp + csrc/b.cpp`` (unity)."""
        return " + ".join(display_path(source, base) for source in self.members or (self.source,))


@dataclass
class ExtensionPlan:
    spec: ExtensionSpec
    flags: ExtensionFlags
    output: str  # relative to the build directory
    units: list[CompileUnit] = field(default_factory=list)
    guard: GuardPlan | None = None  # the artifact's own import check (postlink/import_guard.py)

    @property
    def dlink_object(self) -> str | None:
        """The device-link object (``nvcc -dlink`` over the CUDA objects), when the spec asks."""
        return f"obj/{self.spec.name}/dlink.o" if self.flags.dlink else None


def _relative_or_absolute(path: Path, build_dir: Path) -> str:
    return path.relative_to(build_dir).as_posix() if path.is_relative_to(build_dir) else str(path)


@dataclass(frozen=True)
class _Edges:
    """What writing every edge of one graph shares."""

    build_dir: Path
    source_root: Path | None
    launcher_name: str | None
    local_pool: str  # torch-heavy work that always runs here (PCH builds, nvcc)
    arguments: Callable[[Sequence[str]], Sequence[str]]
    guard_patch: Sequence[str] = ()  # the post-link step of a guarded artifact
    nvcc_tuned: bool = False  # $nvcc_heavy_tuning is defined

    def path(self, path: Path) -> str:
        return _relative_or_absolute(path, self.build_dir)


def render(
    extensions: Sequence[ExtensionPlan],
    pchs: Sequence[PchPlan],
    *,
    build_dir: Path,
    cxx: Sequence[str],
    nvcc: Sequence[str] | None,
    heavy_depth: int,
    source_root: Path | None,
    launcher_name: str | None = None,
    heavy_flags: Sequence[str] = (),
    nvcc_dlink: Sequence[str] | None = None,
    local_heavy_depth: int | None = None,
    arguments: Callable[[Sequence[str]], Sequence[str]] = list,
    pch_seal: Sequence[str] = (),
    guard_patch: Sequence[str] = (),
    nvcc_heavy_flags: Sequence[str] = (),
) -> str:
    """``heavy_flags`` go to TUs that include torch and to PCH builds (compile-speed tuning),
    ``nvcc_heavy_flags`` to nvcc for .cu files that include torch (its host compiler's);
    ``nvcc_dlink`` is nvcc without a compiler cache in front (caches cannot run -dlink).

    ``local_heavy_depth``: a separate pool for torch-heavy work that always runs on this
    machine (PCH builds, nvcc) when the ``heavy`` pool also counts remote slots (distcc).
    ``arguments`` rewrites compile arguments (path-independent command lines behind a cache).
    ``pch_seal``: the command that seals a shared PCH before it is renamed into place
    (``pch/seal.py``: a cache entry is never visible without the checksum it is verified by).
    ``guard_patch``: the command that rewires a guarded artifact after its link
    (``postlink/guard_patch.py``; needed when an extension plan has a ``guard``).
    """
    w = NinjaWriter()
    dlinking = any(ext.dlink_object for ext in extensions)
    dlink_tool = (nvcc_dlink or nvcc or ["nvcc"]) if dlinking else None
    local_pool = _variables_and_pools(w, cxx, nvcc, dlink_tool, heavy_depth, local_heavy_depth,
                                      heavy_flags, nvcc_heavy_flags)
    guarding = any(ext.guard for ext in extensions)
    _rules(w, pch_seal, dlinking, guard_patch if guarding else ())
    edges = _Edges(build_dir, source_root, launcher_name, local_pool, arguments, guard_patch,
                   bool(nvcc_heavy_flags))
    _pch_edges(w, pchs, edges)
    # Compile edges are written after every extension's variables and links, slowest first:
    # ninja starts ready edges of equal priority in the order the file lists them.
    compiles: list[tuple[int, ExtensionPlan, CompileUnit]] = []
    for index, ext in enumerate(extensions):
        _extension_edges(w, index, ext, edges)
        compiles += [(index, ext, unit) for unit in ext.units]
    w.comment("objects, slowest first")
    for index, ext, unit in sorted(compiles, key=lambda item: -item[2].estimated_cost):
        _compile_edge(w, index, unit, display_base(ext.spec, source_root), edges)
    w.newline()
    w.default([e.output for e in extensions])
    return w.text()


def _variables_and_pools(
    w: NinjaWriter,
    cxx: Sequence[str],
    nvcc: Sequence[str] | None,
    nvcc_dlink: Sequence[str] | None,
    heavy_depth: int,
    local_heavy_depth: int | None,
    heavy_flags: Sequence[str],
    nvcc_heavy_flags: Sequence[str] = (),
) -> str:
    """The tools, the job pools and the heavy TUs' tuning; the pool of heavy work that stays
    on this machine. ``nvcc_dlink``: only when some extension device-links."""
    w.comment("Generated by pep517_torch: edits are overwritten.")
    w.variable("ninja_required_version", "1.10")
    w.variable("cxx", shell_args(cxx))
    if nvcc is not None:
        w.variable("nvcc", shell_args(nvcc))
    if nvcc_dlink is not None:
        w.variable("nvcc_dlink", shell_args(nvcc_dlink))
    w.pool("heavy", heavy_depth)
    local_pool = "heavy"
    if local_heavy_depth is not None and local_heavy_depth != heavy_depth:
        local_pool = "local_heavy"
        w.pool(local_pool, local_heavy_depth)
    w.variable("heavy_tuning", shell_args(heavy_flags))
    if nvcc_heavy_flags:
        w.variable("nvcc_heavy_tuning", shell_args(nvcc_heavy_flags))
    w.newline()
    return local_pool


def _rules(w: NinjaWriter, pch_seal: Sequence[str], dlinking: bool, guard_patch: Sequence[str]) -> None:
    """How each kind of step runs: compile (C++, nvcc), precompile, stub, link, device-link,
    and for guarded artifacts the import check's compile and a link followed by its patch."""
    w.rule(
        "cxx",
        command="$cxx -MMD -MF $out.d $pchflags $cflags $tuning -c $in_q -o $out",
        depfile="$out.d",
        deps="gcc",
        description="compiling $desc",
    )
    w.rule(
        "nvcc",
        command="$nvcc -MMD -MF $out.d $cuflags $tuning $threads -c $in_q -o $out",
        depfile="$out.d",
        deps="gcc",
        description="compiling $desc",
    )
    # Written under a per-process name ($$ is the shell's pid), then renamed: concurrent
    # builders of one shared PCH, or of one build directory whose lock cannot be taken, never
    # read or write half a file. A PCH in the build directory also records its header
    # dependencies (a project pch-header can change); a shared one is keyed by its inputs.
    seal = f" && {shell_args(pch_seal)} $out_q.$$$$.tmp $out_q" if pch_seal else ""
    pch_command = (
        f"$cxx $cflags $tuning -x c++-header $in_q -o $out_q.$$$$.tmp{seal}"
        " && mv -f $out_q.$$$$.tmp $out_q"
    )
    w.rule("pch", command=pch_command, description="precompiling $desc")
    # A stub that only exists is up to date: made here, not beforehand, so that every ninja
    # run (an editable install's rebuild included) re-creates one a cache eviction removed.
    w.rule(
        "pch_stub",
        command="printf '%s\\n' $line > $out_q.$$$$.tmp && mv -f $out_q.$$$$.tmp $out_q",
        description="writing $desc",
        generator="1",
    )
    w.rule(
        "pch_tracked",
        command="$cxx -MMD -MF $out.d $cflags $tuning -x c++-header $in_q -o $out.$$$$.tmp && mv -f $out.$$$$.tmp $out",
        depfile="$out.d",
        deps="gcc",
        description="precompiling $desc",
    )
    w.rule(
        "link",
        command="$cxx $in $ldflags -o $out.$$$$.tmp && mv -f $out.$$$$.tmp $out",
        description="linking $desc",
    )
    if guard_patch:
        w.rule(
            "guard_cc",
            command="$cxx -MMD -MF $out.d $guardflags -c $in_q -o $out",
            depfile="$out.d",
            deps="gcc",
            description="compiling $desc",
        )
        w.variable("guardflags", shell_args(GUARD_FLAGS))
        w.rule(
            "link_guarded",
            command=(f"$cxx $in $ldflags -o $out.$$$$.tmp && {shell_args(guard_patch)} $out.$$$$.tmp"
                     " $patchflags && mv -f $out.$$$$.tmp $out"),
            description="linking $desc",
        )
    if dlinking:
        w.rule(
            "dlink",
            command="$nvcc_dlink $dlinkflags $in -o $out.$$$$.tmp && mv -f $out.$$$$.tmp $out",
            description="device-linking $desc",
        )
    w.newline()


def _pch_edges(w: NinjaWriter, pchs: Sequence[PchPlan], edges: _Edges) -> None:
    """Each PCH's stub, and the edge that precompiles it where this graph builds one."""
    for pch in pchs:
        stub = edges.path(pch.stub)
        w.build([stub], "pch_stub", [], variables={
            "line": shell_args([pch.include_line]),
            "out_q": shell_args([stub]),
            "desc": escape_value(f"the stub of {pch.header}"),
        })
    for pch in (p for p in pchs if p.build):
        output = edges.path(pch.output)
        variables = {
            "in_q": shell_args(edges.arguments([str(pch.stub)])),
            "out_q": shell_args([output]),
            "cflags": shell_args(edges.arguments(pch.flags)),
            "desc": escape_value(pch.include_line.split(None, 1)[1]),
            "pool": edges.local_pool,
            "tuning": "$heavy_tuning",
        }
        if pch.shared:
            variables["generator"] = "1"  # exists = up to date, whichever graph built it
        rule = "pch" if pch.shared else "pch_tracked"
        w.build([output], rule, [edges.path(pch.stub)], variables=variables)
    w.newline()


def _extension_edges(w: NinjaWriter, index: int, ext: ExtensionPlan, edges: _Edges) -> None:
    """One extension's flag variables (``index`` names them), its device link and its link."""
    w.comment(f"extension {ext.spec.name}")
    w.variable(f"cflags_{index}", shell_args(edges.arguments(ext.flags.cxx)))
    if ext.flags.nvcc:
        w.variable(f"cuflags_{index}", shell_args(edges.arguments(ext.flags.nvcc)))
    w.variable(f"ldflags_{index}", shell_args(ext.flags.ld))
    if ext.flags.dlink:
        w.variable(f"dlinkflags_{index}", shell_args(ext.flags.dlink))
    # Order-only: the link never waits in practice (ninja waits for every default target
    # anyway), but it puts the PCH on the critical path, so ninja starts it first.
    pch_outputs = sorted({
        edges.path(u.pch.output)
        for u in ext.units if u.pch is not None and u.pch.build and not u.pch.project_header
    })
    objects = [u.object for u in ext.units]
    if ext.dlink_object:
        w.build(
            [ext.dlink_object],
            "dlink",
            [u.object for u in ext.units if u.nvcc],
            variables={"dlinkflags": f"$dlinkflags_{index}",
                       "desc": escape_value(ext.spec.name)},
        )
        objects.append(ext.dlink_object)
    variables = {"ldflags": f"$ldflags_{index}", "desc": escape_value(ext.spec.name)}
    implicit: list[str] = []
    if ext.guard is not None:
        w.build([ext.guard.object], "guard_cc", [edges.path(ext.guard.source)], variables={
            "in_q": shell_args([edges.path(ext.guard.source)]),
            "desc": escape_value(f"the import check of {ext.spec.name}"),
        })
        objects.append(ext.guard.object)
        variables["patchflags"] = shell_args(ext.guard.patch_arguments)
        implicit = [edges.guard_patch[-1]]  # a new pep517_torch patches again
    w.build(
        [ext.output],
        "link_guarded" if ext.guard is not None else "link",
        objects,
        implicit=implicit,
        order_only=pch_outputs,
        variables=variables,
    )
    w.newline()


def _compile_edge(w: NinjaWriter, index: int, unit: CompileUnit, base: Path, edges: _Edges) -> None:
    """The build edge of one object; ``index`` is its extension's in the flag variables."""
    variables = {
        "in_q": shell_args(edges.arguments([str(unit.source)])),
        "desc": escape_value(unit.shown(edges.source_root or base)),
    }
    implicit: list[str] = []
    order_only: list[str] = []
    if unit.nvcc:
        variables["cuflags"] = f"$cuflags_{index}"
        if unit.nvcc_threads != 1:
            variables["threads"] = shell_args(["--threads", str(unit.nvcc_threads)])
    else:
        variables["cflags"] = f"$cflags_{index}"
        if unit.pch is not None:
            use_flags = unit.pch.use_flags(edges.launcher_name)
            variables["pchflags"] = shell_args(edges.arguments(use_flags))
            order_only.append(edges.path(unit.pch.stub))
            if unit.pch.project_header:
                implicit.append(edges.path(unit.pch.output))
    if unit.heavy:
        variables["pool"] = edges.local_pool if unit.nvcc else "heavy"
        if not unit.nvcc:
            variables["tuning"] = "$heavy_tuning"
        elif edges.nvcc_tuned:
            variables["tuning"] = "$nvcc_heavy_tuning"
    rule = "nvcc" if unit.nvcc else "cxx"
    w.build([unit.object], rule, [str(unit.source)], implicit=implicit, order_only=order_only,
            variables=variables)


def step_details(
    extensions: Sequence[ExtensionPlan],
    pchs: Sequence[PchPlan],
    *,
    build_dir: Path,
    launcher_name: str | None,
    nvcc_launched: bool,
) -> dict[str, dict[str, object]]:
    """What a build's timeline says of each output ninja may build (by its name in
    build.ninja): the kind of step, its source, the CUDA archs it compiles for, the PCH it
    may use and the launcher (ccache, sccache, distcc) in front of its compiler."""
    launched = {"launcher": launcher_name} if launcher_name else {}
    details: dict[str, dict[str, object]] = {}
    for pch in pchs:
        stub = _relative_or_absolute(pch.stub, build_dir)
        details[stub] = {"kind": "pch-stub", "name": f"writing the stub of {pch.header}"}
        details[_relative_or_absolute(pch.output, build_dir)] = {
            "kind": "pch", "name": f"precompiling {pch.header}", "source": str(pch.stub),
            **launched,
        }
    for ext in extensions:
        archs: list[str] = []
        if ext.flags.nvcc:
            from .cuda.arch_flags import archs_named_by  # CUDA builds only

            archs = archs_named_by(ext.flags.nvcc)
        for unit in ext.units:
            entry: dict[str, object] = {"kind": "compile", "source": str(unit.source)}
            if unit.members:
                entry["unity"] = [str(member) for member in unit.members]
            if unit.nvcc:
                entry["archs"] = archs
            if unit.pch is not None:
                entry["pch"] = unit.pch.header
                entry["pch_output"] = _relative_or_absolute(unit.pch.output, build_dir)
            if not unit.nvcc or nvcc_launched:
                entry.update(launched)
            details[unit.object] = entry
        if ext.dlink_object:
            details[ext.dlink_object] = {"kind": "device-link", "archs": archs}
        if ext.guard is not None:
            details[ext.guard.object] = {"kind": "compile", "source": str(ext.guard.source)}
        details[ext.output] = {"kind": "link"}
    return details

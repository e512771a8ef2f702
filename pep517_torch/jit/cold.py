"""The JIT's cold path: lock the build directory, build through the compile core, stamp."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ..core import build as core_build
from ..core import inputs as core_inputs
from ..core.lock import build_lock
from ..core.spec import BuildOptions, ExtensionSpec, Kind
from ..config.settings import environment_layer
from . import stamp
from .api import PCH_DIR_NAME, artifact_path, extensions_root


def _spec(request: Mapping[str, object], target: str) -> ExtensionSpec:
    def paths(key: str) -> tuple[Path, ...]:
        return tuple(Path(p) for p in request[key])  # type: ignore[attr-defined]

    def strings(key: str) -> tuple[str, ...]:
        return tuple(request[key])  # type: ignore[arg-type]

    return ExtensionSpec(
        name=target,
        sources=paths("sources"),
        include_dirs=paths("include_dirs"),
        extra_cflags=strings("cflags"),
        extra_cuda_cflags=strings("cuda_cflags"),
        extra_ldflags=strings("ldflags"),
        with_cuda=request["with_cuda"],  # type: ignore[arg-type]
        kind=Kind(request["kind"]),
        python_abi_suffix=False,
    )


def _count_work(plan: core_build.BuildPlan) -> int:
    """How many files ninja will compile (a dry run: milliseconds)."""
    result = subprocess.run(
        [str(plan.ninja), "-C", str(plan.build_dir), "-n"],
        capture_output=True, text=True, errors="replace", check=False,
        env={**os.environ, "NINJA_STATUS": "[%f/%t] "},
    )
    return sum(" compiling " in line for line in result.stdout.splitlines())


def build(
    request: Mapping[str, object],
    target: str,
    build_dir: Path,
    key: str,
    stamp_file: Path,
    *,
    verbose: bool,
    pch: bool,
    env: Mapping[str, str],
) -> None:
    spec = _spec(request, target)
    # MAX_JOBS and TORCH_CUDA_ARCH_LIST mean here exactly what they mean for wheels.
    from_env = environment_layer(env)
    jobs, arch = from_env.get("jobs"), from_env.get("cuda_arch_list")
    options = BuildOptions(
        build_dir=build_dir,
        verbose=verbose,
        quiet=not verbose,
        env=dict(env),
        jobs=jobs.value if jobs else None,
        cuda_arch_list=(arch.value,) if arch else None,
        cuda_arch_list_key=arch.key if arch else "cuda-arch-list",
        output_dir=build_dir,
        pch=pch,
        pch_cache_dir=extensions_root(env) / PCH_DIR_NAME,
    )
    with build_lock(build_dir, f"'{target}'"):
        if stamp.is_fresh(stamp_file, key, artifact_path(build_dir, target, spec.kind.value)):
            return  # another process built it while we waited
        stamp.invalidate(stamp_file)
        _build(spec, options, key, stamp_file)


def _build(spec: ExtensionSpec, options: BuildOptions, key: str, stamp_file: Path) -> None:
    plan = core_build.prepare([spec], options)
    for note in plan.notes:
        print(f"pep517_torch: {note}", file=sys.stderr)
    files = 0 if options.verbose else _count_work(plan)
    plural = "s" if files != 1 else ""
    notice = (1.0, f"pep517_torch: building extension '{spec.name}' ({files} file{plural})...")
    started = time.perf_counter()
    run = core_build.run(
        plan, options, what=f"Error building extension '{spec.name}'",
        slow_notice=notice if files else None,
    )
    elapsed = time.perf_counter() - started
    recorded = core_inputs.recorded_inputs(plan.build_dir)  # sources and project headers
    mine = (paths for obj, paths in recorded.items() if obj.startswith(f"obj/{spec.name}/"))
    stamp.write(stamp_file, key, [*spec.sources, *(p for paths in mine for p in paths)])
    if elapsed > 1.0 and not options.verbose:
        extra = f", {run.precompiled} header precompiled" if run.precompiled else ""
        print(
            f"pep517_torch: built '{spec.name}' in {elapsed:.1f} s:"
            f" {run.compiled} compiled, {run.linked} linked{extra}",
            file=sys.stderr,
        )

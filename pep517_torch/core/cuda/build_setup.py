"""A build's CUDA set-up: the toolkit checked against torch and the host compiler, each CUDA
extension's arch flags, and nvcc's ``--threads`` within the job budget. Imported only when an
extension uses CUDA."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import ConfigError
from ...shipped_runtime.environment import NVCC_THREADS
from .. import graph
from ..toolchain import jobs, tools as toolchain
from . import arch_flags as arch, toolkit as cuda, checks as cuda_checks
from ..spec import BuildOptions, ExtensionSpec


COMPRESS_MODE_SINCE = (12, 8)  # nvcc --compress-mode


@dataclass(frozen=True)
class CudaSetup:
    toolkit: cuda.CudaToolkit
    host_compiler: str | None  # nvcc's -ccbin
    include_dirs: tuple[Path, ...]
    library_dirs: tuple[Path, ...]
    host_family: str = "gcc"  # of the host compiler nvcc runs: gcc, clang


def set_up(
    specs: Sequence[ExtensionSpec],
    options: BuildOptions,
    compiler: toolchain.Compiler,
    torch: toolchain.TorchInstall,
    notes: list[str],
    found: cuda.CudaToolkit | None = None,
) -> CudaSetup:
    """``found``: the toolkit the caller found already (None: look here)."""
    toolkit = found or cuda.require_cuda(options.env, torch_cuda=torch.cuda)
    if options.cuda_compress_mode is not None and toolkit.version < COMPRESS_MODE_SINCE:
        raise ConfigError(
            f"{options.cuda_compress_mode!r} needs nvcc's --compress-mode, which nvcc"
            f" {toolkit.version_str} ({toolkit.nvcc}) lacks: it came with CUDA 12.8",
            options.key_of("cuda_compress_mode") or "cuda_compress_mode",
        )
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
        host_compiler.family,
    )


def arch_flags(
    spec: ExtensionSpec, options: BuildOptions, toolkit: cuda.CudaToolkit, notes: list[str],
    torch: toolchain.TorchInstall | None = None,
) -> tuple[tuple[str, ...], int]:
    """The arch flags nvcc gets, and how many GPU targets each CUDA object builds."""
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
    compress = (f"--compress-mode={options.cuda_compress_mode}",) if options.cuda_compress_mode else ()
    return (*decision.flags, *compress), max(len(decision.archs), 1)


_THREADS_FLAGS = ("-t", "--threads")


def set_nvcc_threads(
    plans: Sequence[graph.ExtensionPlan], job_plan: jobs.JobPlan, toolkit: cuda.CudaToolkit, env: dict[str, str]
) -> None:
    """nvcc --threads for each .cu with several GPU targets, within the jobs budget (toolchain/jobs.py);
    none where the extension's own flags already say, or nvcc predates the flag (11.2)."""
    if tuple(toolkit.version) < (11, 2):
        return
    units = [unit for plan in plans for unit in plan.units]
    costs = sorted((unit.estimated_cost for unit in units), reverse=True)
    requested = env.get(NVCC_THREADS)
    for plan in plans:
        own = any(
            flag in _THREADS_FLAGS or flag.startswith(("--threads=", "-t="))
            for flag in plan.spec.extra_cuda_cflags
        )
        for unit in plan.units:
            if unit.nvcc and not own and (unit.gpu_targets > 1 or requested):
                longest = unit.estimated_cost == costs[0] and costs[1:2] != costs[:1]
                unit.nvcc_threads = jobs.nvcc_threads(unit.gpu_targets, len(units), job_plan,
                                                      requested, longest=longest)

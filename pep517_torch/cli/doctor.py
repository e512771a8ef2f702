"""``python -m pep517_torch doctor``: one verdict per line about everything a build needs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ..errors import Pep517TorchError
from ..shipped_runtime.user_line import printable

Check = Callable[[], tuple[str, str]]  # -> (verdict, text); verdict: ok | warn | fail | info


def _torch() -> tuple[str, str]:
    from ..core.toolchain.tools import find_torch

    torch = find_torch()
    flavour = f"CUDA {torch.cuda} build" if torch.cuda else "CPU build"
    if torch.cuda and not torch.has_cuda_runtime:
        return "warn", f"torch {torch.version} ({flavour}) but libc10_cuda is missing at {torch.root}"
    return "ok", f"torch {torch.version} ({flavour}) at {torch.root}"


def _compiler() -> tuple[str, str]:
    from ..core.toolchain.tools import find_compiler, minimum_versions_text

    compiler = find_compiler(os.environ)
    via = f" via {compiler.launcher}" if compiler.launcher else ""
    origin = "CXX" if os.environ.get("CXX") else "c++ on PATH"
    text = f"C++ compiler ({origin}): {compiler.path} = {compiler.family} {compiler.version_text}{via}"
    if not compiler.supported:
        return "warn", text + f" (torch extensions need {minimum_versions_text()})"
    return "ok", text


def _launcher_setting(path: Path) -> tuple[str, str]:
    """compiler-launcher as a build of ``path`` would see it, and where it came from."""
    from ..config.layers import environment_layer

    layered = environment_layer(os.environ).get("compiler_launcher")
    if layered:
        return layered.value, layered.key
    if (path / "pyproject.toml").is_file():
        from ..backend import pipeline

        try:
            return pipeline.load(path, None).project.options.compiler_launcher, "pyproject.toml"
        except Pep517TorchError:
            pass  # the project check says what is wrong
    return "auto", "default"


def _find_launcher(path: Path) -> tuple[str, str, list[str], str | None, str]:
    """(setting, origin, launcher, its name, the command that runs it)."""
    from ..core.toolchain import launcher as launchers
    from ..core.toolchain.tools import find_compiler

    setting, origin = _launcher_setting(path)
    compiler = find_compiler(os.environ)
    launcher = launchers.find_launcher(setting, compiler, os.environ)
    name = launchers.launcher_name(launcher, compiler)
    return setting, origin, launcher, name, (launcher or compiler.command)[0]


def _launcher(path: Path) -> Check:
    def check() -> tuple[str, str]:
        from ..core.toolchain import launcher as launchers

        setting, origin, _, name, command = _find_launcher(path)
        where = f'compiler-launcher = "{setting}" ({origin})'
        if name is None:
            return "info", f"compiler launcher: none ({where}; install ccache or sccache to cache objects)"
        text = f"compiler launcher: {name} at {command} ({where})"
        verdict = "ok"
        for endpoint in launchers.endpoints(name, command, os.environ):
            up = endpoint.reachable()
            text += f"; {endpoint.label} {'reachable' if up else 'unreachable'}"
            if not up and endpoint.required:
                verdict = "warn"
            elif not up:
                text += " (it starts with the first compile)"
        return verdict, text

    return check


def _pch_cache() -> tuple[str, str]:
    from ..config.checks import parse_size
    from ..config.layers import environment_layer
    from ..core.pch import cache as pch_cache
    from ..core.spec import DEFAULT_PCH_CACHE_BYTES

    configured = environment_layer(os.environ).get("pch_cache_size")
    limit = parse_size(configured.value) if configured else DEFAULT_PCH_CACHE_BYTES
    root = pch_cache.pch_root(os.environ)
    found = pch_cache.entries(root)
    total = sum(e.size for e in found)
    text = (f"precompiled-header cache (wheels and the JIT): {root}: {pch_cache.count_text(len(found))},"
            f" {pch_cache.format_size(total)} of {pch_cache.format_size(limit)}")
    if limit == 0:
        return "info", text + " (PEP517_TORCH_PCH_CACHE_SIZE=0: PCHs stay in build directories)"
    return ("warn" if total > limit else "info"), text


def _ninja() -> tuple[str, str]:
    from ..core.toolchain.tools import find_ninja

    ninja = find_ninja(os.environ)
    version = subprocess.run([str(ninja), "--version"], capture_output=True, text=True).stdout
    return "ok", f"ninja {version.strip()} at {ninja}"


def _cuda() -> tuple[str, str]:
    from ..core.cuda import toolkit as cuda, checks as cuda_checks
    from ..core.toolchain.tools import find_torch

    toolkit = cuda.find_cuda(os.environ)
    if toolkit is None:
        return "info", "nvcc: not found (only needed for .cu sources; set CUDA_HOME to use one)"
    text = f"nvcc {toolkit.version_str} at {toolkit.root} (found via {toolkit.found_via})"
    try:
        torch = find_torch()
        notes = cuda_checks.check_versions(toolkit, torch.cuda, allow_mismatch=False)
    except Pep517TorchError as exc:
        return "fail", f"{text}: {exc}"
    if torch.cuda is None:
        notes.append("torch is a CPU build: CUDA sources build, torch's CUDA APIs are unavailable")
    return ("warn" if notes else "ok"), text + "".join(f"; {n}" for n in notes)


def _arch() -> tuple[str, str]:
    from ..core.cuda import arch_flags as arch, toolkit as cuda, checks as cuda_checks
    from ..core.toolchain.tools import find_torch

    toolkit = cuda.find_cuda(os.environ)
    if toolkit is None:
        return "info", "CUDA archs: n/a (no nvcc)"
    from ..config.layers import environment_options
    from ..core.cuda.arch_list import parse_arch_list

    options = environment_options(os.environ)
    keys = dict(options["keys"])
    chosen = options.get("cuda_arch_list")
    entries = parse_arch_list(chosen, key=keys["cuda_arch_list"]) if chosen else None
    try:
        torch = find_torch()
        torch_archs = cuda_checks.torch_arch_list(torch.library_dir) if torch.has_cuda_runtime else ()
    except Pep517TorchError:
        torch_archs = ()
    decision = arch.resolve_arch_flags(
        entries, toolkit, user_nvcc_flags=(), env=os.environ, choose=keys["cuda_arch_list"],
        torch_archs=torch_archs,
    )
    return "info", f"CUDA archs: {' '.join(decision.archs)}" + (
        f" ({decision.note})" if decision.note else ""
    )


def _resources(path: Path) -> Check:
    def check() -> tuple[str, str]:
        from ..config.layers import environment_layer
        from ..core.toolchain import launcher as launchers
        from ..core.toolchain.jobs import plan_jobs

        requested = environment_layer(os.environ).get("jobs")
        distributed = None
        _, _, _, name, command = _find_launcher(path)
        if name == launchers.DISTCC:
            distributed = launchers.distcc_slots(command, os.environ)
        plan = plan_jobs(requested.value if requested else None, distributed)
        return ("ok" if plan.heavy >= 1 else "warn"), f"parallel jobs: {plan.reason}"

    return check


def _project(path: Path) -> Check:
    """The project resolved as a build here would (this environment, torch and nvcc), and
    every check the build makes before compiling: what it would fail on, it fails on here."""

    def check() -> tuple[str, str]:
        from ..backend import stages

        loaded = stages.load(path, None)
        resolved = loaded.project
        names = ", ".join(s.name for s in resolved.extensions) or "none"
        skipped = "".join(f"; skipped {n}: {why}" for n, why in resolved.skipped
                          if resolved.extensions)  # else the failure below names each
        text = (
            f"project {loaded.metadata.name} {loaded.metadata.version}: extensions {names};"
            f" build dir {resolved.options.build_dir}{skipped}"
        )
        try:
            stages.check_build(loaded)
        except Pep517TorchError as exc:
            return "fail", f"{text}; a build here fails: {exc}"
        return "ok", text

    return check


def run_checks(path: Path) -> int:
    from .._version import __version__

    print(f"pep517_torch {__version__} on Python {sys.version.split()[0]} ({sys.executable})")
    checks: list[Check] = [
        _torch, _compiler, _launcher(path), _ninja, _cuda, _arch, _resources(path), _pch_cache
    ]
    if (path / "pyproject.toml").is_file():
        checks.append(_project(path))
    failed = False
    said: list[str] = []  # failures printed: a later check that hits one again stays silent
    for check in checks:
        try:
            verdict, text = check()
        except Pep517TorchError as exc:
            verdict, text = "fail", str(exc)
        failed |= verdict == "fail"
        if verdict == "fail":
            if any(text.endswith(earlier) for earlier in said):
                continue
            said.append(text)
        print(f"{verdict:<5} {printable(text)}")  # a tool's own words, sanitised
    return 1 if failed else 0

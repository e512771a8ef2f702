"""The stages every operation shares: load (the config resolved, torch found, the metadata
and its torch pin decided; nothing compiled), compile (the compile core), and the build
directory's lock held around them."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement

from .. import config
from ..core.toolchain import isolation, tools as toolchain
from ..core.spec import ExtensionSpec, Kind
from ..config import ConfigSettings
from .discovery import resolve
from ..distribution import metadata as dist_metadata
from ..errors import ConfigError
from ..shipped_runtime.user_line import log, user_line

if TYPE_CHECKING:
    from ..core.build import BuildResult
    from ..core.plan import BuildPlan
    from ..core.spec import BuildOptions
    from ..distribution import torch_requirement


@dataclass(frozen=True)
class Loaded:
    project: config.ResolvedProject
    torch: toolchain.TorchInstall | None
    metadata: dist_metadata.ProjectMetadata
    env: Mapping[str, str]  # the caller's environment (the build passes only part of it on)
    toolkit: object | None = None  # the CUDA toolkit resolving found, if it looked (core.cuda)
    static_torch: bool = False  # a static torch requirement was kept: the import check guards


def load(
    root: Path,
    config_settings: ConfigSettings,
    env: Mapping[str, str] | None = None,
    *,
    for_build: bool = True,
    document: Mapping[str, object] | None = None,
) -> Loaded:
    """Read and validate everything; compile nothing. Torch must be installed when there are
    extensions to build (``for_build``) or a torch pin to write into the metadata.
    ``document``: a parsed pyproject.toml to load instead of the file (migrate's, unwritten)."""
    # A copy of a mutable mapping (os.environ); a read-only one is kept as given (the
    # ReadEnv of backend/noop_record.py remembers what the resolution reads).
    env = dict(os.environ if env is None else env) if not _read_only(env) else env
    project, found = resolve(root, config_settings, env, document)
    torch = found.torch
    if project.extensions and (for_build or project.torch_requirement != "none"
                               or project.local_version == "torch"):
        if torch is None:
            toolchain.find_torch()  # raises the "torch is not installed" error
        assert torch is not None
    build_torch = torch if project.extensions else None
    pin = _torch_pin(project, build_torch) if build_torch is not None else None
    plan = dependency_plan(project, build_torch.version if build_torch else None, pin)
    metadata = dist_metadata.build_metadata(
        {"project": project.project_table}, project.root,
        version=config.version_string(project, env), dependencies=plan.dependencies,
    )
    if build_torch is not None:
        from ..core.plan import with_cuda_headers  # a .cuh include makes it CUDA, as the build does

        checked = [dataclasses.replace(spec, import_check_torch=import_check_torch(
            project, spec, build_torch, plan.static_torch))
            for spec in map(with_cuda_headers, project.extensions)]
        project = dataclasses.replace(project, extensions=tuple(checked))
    if build_torch is not None and project.local_version == "torch":
        _add_local_label(metadata, build_torch, binaries_cuda(project, build_torch, found))
    return Loaded(project, torch, metadata, env, found.toolkit, plan.static_torch)


def source_metadata(
    root: Path, config_settings: ConfigSettings, env: Mapping[str, str],
    document: Mapping[str, object] | None = None,
) -> tuple[config.ResolvedProject, dist_metadata.ProjectMetadata]:
    """The project resolved and its metadata as an sdist carries it: every check of the
    config and of ``[project]`` (PEP 621, PEP 639) that needs no torch. The sdist cannot know
    which torch its wheel will be built against: no pin in PKG-INFO, and Requires-Dist is
    declared dynamic (PEP 643) for the wheel to add it; nor the local label (local-version
    names the wheel's torch). ``document``: a parsed pyproject.toml instead of the file
    (migrate's output, checked before it is written)."""
    project, _ = resolve(root, config_settings, env, document)
    plan = dependency_plan(project, None)
    metadata = dist_metadata.build_metadata(
        {"project": project.project_table}, project.root,
        version=config.version_string(project, env),
        dynamic_metadata=["Requires-Dist"] if plan.pin_from_build else [],
        dependencies=plan.dependencies,
    )
    return project, metadata


def import_check_torch(
    project: config.ResolvedProject, spec: ExtensionSpec, torch: toolchain.TorchInstall,
    static_torch: bool,
) -> str | None:
    """The torch ``spec``'s artifact checks at import (``torch-import-check``; the check lives
    in the artifact, core/postlink/import_guard.py), or None. true: every module and library; "auto":
    where the wheel's requirement cannot say which torch it needs: a static torch requirement
    kept as written (no pin of the build torch), and an extension that needs a CUDA torch (no
    requirement names torch's CUDA variant)."""
    from ..core.postlink.import_guard import needs_cuda_torch

    if spec.kind is Kind.EXECUTABLE:
        return None
    wanted = project.torch_import_check or (
        project.torch_import_check_auto and (static_torch or needs_cuda_torch(spec, torch))
    )
    return torch.version if wanted else None


def binaries_cuda(project: config.ResolvedProject, torch: toolchain.TorchInstall, found: object) -> str | None:
    """The CUDA major (``"13"``) of the torch the extensions' binaries will need, or None:
    torch's own when it has CUDA, else (stable-ABI CUDA kernels beside a CPU torch) nvcc's."""
    from ..core.postlink.import_guard import needs_cuda_torch

    if not any(needs_cuda_torch(spec, torch) for spec in project.extensions):
        return None
    if torch.cuda:
        return torch.cuda.split(".")[0]
    from ..core.cuda import toolkit as cuda

    toolkit = getattr(found, "toolkit", None) or cuda.find_cuda(getattr(found, "env", os.environ))
    return str(toolkit.version[0]) if toolkit is not None else None


def _read_only(env: Mapping[str, str] | None) -> bool:
    return env is not None and not isinstance(env, MutableMapping)


def dependency_plan(
    project: config.ResolvedProject, torch_version: str | None, pin: Requirement | None = None
) -> torch_requirement.DependencyPlan:
    """What Requires-Dist may hold (PEP 621): the pin only into a dynamic ``dependencies``."""
    from ..distribution import torch_requirement

    return torch_requirement.plan_dependencies(
        project.project_table, project.dependencies, project.torch_requirement,
        torch_version, bool(project.extensions), pin,
    )


def _add_local_label(
    metadata: dist_metadata.ProjectMetadata, torch: toolchain.TorchInstall, cuda: str | None
) -> None:
    """local-version = "torch": the wheel's version names its torch (``+pt213cpu``), and the
    CUDA its binaries need (``+pt213cu13``: CUDA kernels built beside a CPU torch)."""
    from packaging.version import Version

    from ..distribution.torch_requirement import local_label, variant_cuda, with_local_label

    label = local_label(torch.version, variant_cuda(torch.cuda, cuda))
    metadata.standard.version = Version(with_local_label(metadata.version, label))


def _torch_pin(project: config.ResolvedProject, torch: toolchain.TorchInstall) -> Requirement | None:
    """The torch requirement: ``torch>=<target>`` when every extension uses the stable ABI
    (the newest target among them), the pin of the building torch otherwise."""
    targets = [spec.stable_abi for spec in project.extensions]
    if targets and all(targets):
        from ..abi.stable_abi import newest

        target = newest(t for t in targets if t)
        return dist_metadata.stable_torch_pin(target, torch.version, project.torch_requirement)
    return dist_metadata.torch_pin(torch.version, project.torch_requirement)


def compile_extensions(
    loaded: Loaded, *, editable: bool, on_work: Callable[[BuildPlan], None] | None = None,
    missed: str | None = None,
) -> BuildResult | None:
    """Build the loaded project's extensions (None: it has none), with the notes and summary
    a build prints; ``editable``: for an editable install (no unity TUs unless asked);
    ``on_work``: called when ninja is about to run with work (``core.build.run``); ``missed``:
    why the no-op replay before it did not happen, for ``explain``."""
    from ..core import build as core_build

    project = loaded.project
    check_skipped(project)
    for line in skipped_lines(project):
        log(line)
    if not project.extensions:
        return None
    assert loaded.torch is not None
    note = isolation.isolation_note(loaded.torch, loaded.env)
    if note:
        log(user_line(note))
    options = _build_options(project, editable)
    result = core_build.build(
        list(project.extensions), options, log=log, torch=loaded.torch, toolkit=loaded.toolkit,
        by="an editable install" if editable else "a wheel build", on_work=on_work, missed=missed,
    )
    for line in result.summary().splitlines():
        log(user_line(line))
    return result


def check_build(loaded: Loaded, *, editable: bool = False) -> tuple[str, ...]:
    """Every check a build makes between :func:`load` and its first compile, writing nothing:
    an extension set the build refuses (:func:`check_skipped`), then the compile core's own
    (``core.plan.check``: tools, nvcc, flags, arch lists, torch's CUDA headers). Raises what
    the build would raise; returns the notes it would print. ``doctor`` and migrate's check
    run it, so they say what the build will say."""
    from ..core import plan as core_plan

    project = loaded.project
    check_skipped(project)
    if not project.extensions:
        return ()
    return core_plan.check(list(project.extensions), _build_options(project, editable))


def _build_options(project: config.ResolvedProject, editable: bool) -> BuildOptions:
    options = project.options
    if options.unity is None:  # "auto": unity TUs for a wheel, not for an editable install
        options = dataclasses.replace(options, unity=not editable)
    return options


def skipped_lines(project: config.ResolvedProject) -> list[str]:
    return [user_line(f"skipping extension {name}: {reason}") for name, reason in project.skipped]


def check_skipped(project: config.ResolvedProject) -> None:
    """A build that skips every extension would ship a wheel without one (`py3-none-any`,
    whose import fails): an error, unless each skipped extension says it is optional."""
    if project.extensions or not project.required_skipped:
        return
    reasons = "; ".join(f"{name}: {reason}" for name, reason in project.skipped)
    raise ConfigError(
        f"every extension is skipped, so the wheel would hold none ({reasons}); make a build"
        f" here build one, or set {project.required_skipped[0]} = true for each extension the"
        " project works without"
    )


def build_dir_lock(loaded: Loaded, editable: bool) -> contextlib.AbstractContextManager[None]:
    if not loaded.project.extensions:
        return contextlib.nullcontext()
    from ..core.lock import build_lock

    meta = loaded.metadata
    kind = "an editable wheel" if editable else "a wheel"
    return build_lock(loaded.project.options.build_dir, f"{kind} of {meta.name} {meta.version}")

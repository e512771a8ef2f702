"""The glue between the layers: config → compile core → distribution, for the hooks and the CLI.

This is the only module that knows all three layers; each function is one user-visible
operation (metadata, wheel, editable wheel, sdist).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement

from . import config
from .atomic import writing
from .core import isolation, toolchain
from .core.naming import artifact_name
from .core.spec import ExtensionSpec, Kind
from .distribution import metadata as dist_metadata
from .distribution import tags
from .distribution.import_guard import Guard
from .distribution.reproducible import source_date_epoch
from .errors import ConfigError, ToolchainError
from .runtime.user_line import print_line, user_line

if TYPE_CHECKING:
    from .core.build import BuildResult
    from .distribution.editable import RebuildCommand
    from .distribution import torch_requirement
    from .distribution.wheel import WheelWriter

ConfigSettings = Mapping[str, "str | list[str]"] | None


def log(line: str) -> None:
    print_line(line, sys.stdout)


@dataclass(frozen=True)
class Loaded:
    project: config.ResolvedProject
    torch: toolchain.TorchInstall | None
    metadata: dist_metadata.ProjectMetadata
    env: Mapping[str, str]  # the caller's environment (the build passes only part of it on)
    toolkit: object | None = None  # the CUDA toolkit resolving found, if it looked (core.cuda)
    static_torch: bool = False  # a static torch requirement was kept: the import check guards


def _torch_or_none() -> toolchain.TorchInstall | None:
    try:
        return toolchain.find_torch()
    except ToolchainError:
        return None


class Discovery:
    """What a build finds on this machine, each once and only when asked: torch (read from
    its files) at once, the CUDA toolkit (nvcc runs) when a condition or `cuda = "auto"` needs
    it; the core gets both instead of looking again."""

    def __init__(self, env: Mapping[str, str], torch: toolchain.TorchInstall | None) -> None:
        self.env = dict(env)
        self.torch = torch
        self._toolkit: list[object] = []  # [CudaToolkit | None] once looked up

    @property
    def toolkit(self) -> object | None:
        """The toolkit found, if it was looked up (None: not looked up, or none found)."""
        return self._toolkit[0] if self._toolkit else None

    def _nvcc(self) -> tuple[bool, str | None]:
        if not self._toolkit:
            from .core import cuda

            self._toolkit.append(cuda.find_cuda(self.env))
        found = self._toolkit[0]
        return (True, found.version_str) if found is not None else (False, None)  # type: ignore[attr-defined]

    def facts(self) -> config.Facts:
        torch = self.torch
        return config.Facts(
            env=self.env,
            torch_version=torch.version if torch else None,
            torch_cuda=torch.cuda if torch else None,
            nvcc_lookup=self._nvcc,
        )


def machine_facts(env: Mapping[str, str]) -> config.Facts:
    """What a build here evaluates conditions against: this environment, torch and nvcc."""
    return Discovery(env, _torch_or_none()).facts()


def _resolve(
    root: Path, config_settings: ConfigSettings, env: Mapping[str, str]
) -> tuple[config.ResolvedProject, Discovery]:
    return _resolve_with(root, config.read_pyproject(root), env, config_settings)


def resolve_document(
    root: Path,
    pyproject: Mapping[str, object],
    env: Mapping[str, str],
    config_settings: ConfigSettings = None,
) -> tuple[config.ResolvedProject, toolchain.TorchInstall | None]:
    """Resolve a parsed pyproject.toml as a build on this machine would; compiles nothing."""
    project, found = _resolve_with(root, pyproject, env, config_settings)
    return project, found.torch


def _resolve_with(
    root: Path, pyproject: Mapping[str, object], env: Mapping[str, str],
    config_settings: ConfigSettings,
) -> tuple[config.ResolvedProject, Discovery]:
    found = Discovery(env, _torch_or_none())
    build_dir_vars = {
        "wheel_tag": tags.wheel_tag(native_code=True),
        "python_tag": tags.python_tag(),
        "torch_version": _torch_key(found.torch),
    }
    project = config.resolve_project(root, pyproject, config_settings, found.facts(), build_dir_vars)
    return project, found


def _torch_key(torch: toolchain.TorchInstall | None) -> str:
    """``{torch_version}``: an isolated build's throwaway torch never shares the folder (and
    build.ninja) of the torch the user runs with, which editable installs rebuild against."""
    if torch is None:
        return "none"
    return torch.version + (isolation.BUILD_DIR_SUFFIX if isolation.is_isolated(torch) else "")


def load(
    root: Path,
    config_settings: ConfigSettings,
    env: Mapping[str, str] | None = None,
    *,
    for_build: bool = True,
) -> Loaded:
    """Read and validate everything; compile nothing. Torch must be installed when there are
    extensions to build (``for_build``) or a torch pin to write into the metadata."""
    env = dict(os.environ if env is None else env)
    project, found = _resolve(root, config_settings, env)
    torch = found.torch
    if project.extensions and (for_build or project.torch_requirement != "none"
                               or project.local_version == "torch"):
        if torch is None:
            toolchain.find_torch()  # raises the "torch is not installed" error
        assert torch is not None
    build_torch = torch if project.extensions else None
    pin = _torch_pin(project, build_torch) if build_torch is not None else None
    plan = _dependency_plan(project, build_torch.version if build_torch else None, pin)
    metadata = dist_metadata.build_metadata(
        {"project": project.project_table}, project.root,
        version=config.version_string(project, env), dependencies=plan.dependencies,
    )
    if build_torch is not None and project.local_version == "torch":
        _add_local_label(metadata, build_torch)
    return Loaded(project, torch, metadata, env, found.toolkit, plan.static_torch)


def _dependency_plan(
    project: config.ResolvedProject, torch_version: str | None, pin: Requirement | None = None
) -> torch_requirement.DependencyPlan:
    """What Requires-Dist may hold (PEP 621): the pin only into a dynamic ``dependencies``."""
    from .distribution import torch_requirement

    return torch_requirement.plan_dependencies(
        project.project_table, project.dependencies, project.torch_requirement,
        torch_version, bool(project.extensions), pin,
    )


def _add_local_label(metadata: dist_metadata.ProjectMetadata, torch: toolchain.TorchInstall) -> None:
    """local-version = "torch": the wheel's version names its torch (``+pt213cpu``)."""
    from packaging.version import Version

    from .distribution.torch_requirement import local_label, with_local_label

    label = local_label(torch.version, torch.cuda)
    metadata.standard.version = Version(with_local_label(metadata.version, label))


def _torch_pin(project: config.ResolvedProject, torch: toolchain.TorchInstall) -> Requirement | None:
    """The torch requirement: ``torch>=<target>`` when every extension uses the stable ABI
    (the newest target among them), the pin of the building torch otherwise."""
    targets = [spec.stable_abi for spec in project.extensions]
    if targets and all(targets):
        from .stable_abi import newest

        target = newest(t for t in targets if t)
        return dist_metadata.stable_torch_pin(target, torch.version, project.torch_requirement)
    return dist_metadata.torch_pin(torch.version, project.torch_requirement)


def _compile(loaded: Loaded) -> BuildResult | None:
    from .core import build as core_build

    project = loaded.project
    _check_skipped(project)
    for name, reason in project.skipped:
        log(user_line(f"skipping extension {name}: {reason}"))
    if not project.extensions:
        return None
    assert loaded.torch is not None
    note = isolation.isolation_note(loaded.torch, loaded.env)
    if note:
        log(user_line(note))
    result = core_build.build(
        list(project.extensions), project.options, log=log, torch=loaded.torch, toolkit=loaded.toolkit
    )
    for line in result.summary().splitlines():
        log(user_line(line))
    return result


def _check_skipped(project: config.ResolvedProject) -> None:
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


def prepare_metadata(root: Path, metadata_directory: Path, config_settings: ConfigSettings) -> str:
    return load(root, config_settings, for_build=False).metadata.write_dist_info(metadata_directory)


def build_wheel(root: Path, out_dir: Path, config_settings: ConfigSettings, *, editable: bool = False) -> str:
    from .distribution.import_guard import add_artifact
    from .distribution.wheel import WheelWriter

    started = time.perf_counter()
    loaded = load(root, config_settings)
    project, meta = loaded.project, loaded.metadata
    in_tree, files = project.in_tree, project.files
    # Held until the artifacts are packed: no concurrent build relinks them meanwhile.
    with _build_dir_lock(loaded, editable):
        result = _compile(loaded)
        artifacts = result.artifacts if result else {}
        with writing(out_dir):
            out_dir.mkdir(parents=True, exist_ok=True)
        tag = tags.extensions_wheel_tag(
            [spec.py_limited_api for spec in project.extensions],
            None if editable else _platform_tag(project, result),
        )
        with WheelWriter(out_dir, meta.name, meta.version, tag, source_date_epoch=source_date_epoch()) as wheel:
            if editable:
                _add_editable(wheel, loaded, result, in_tree, config_settings)
            else:
                for arcname, path in files:
                    wheel.add_file(arcname, path)
                for spec in project.extensions:
                    guard = _guard_torch(loaded, spec, artifacts[spec.name])
                    add_artifact(wheel, artifact_name(spec), spec.name, artifacts[spec.name], guard,
                                 spec.stable_abi)
                _record_build_torch(loaded)
            wheel.finish(meta)
    ninja = result.run.seconds if result else 0.0
    overhead = time.perf_counter() - started - ninja
    log(user_line(f"wrote {wheel.path} (ninja {ninja:.2f} s, pep517_torch {overhead:.2f} s)"))
    return wheel.filename


def _record_build_torch(loaded: Loaded) -> None:
    """A wheel with binaries names the torch they were built against (``index`` sorts wheels
    into find-links pages by it)."""
    from .distribution.index import BUILD_RECORD, build_record

    if loaded.project.extensions and loaded.torch is not None:
        record = build_record(loaded.torch.version, loaded.torch.cuda)
        loaded.metadata.extra_dist_info[BUILD_RECORD] = record


def _platform_tag(project: config.ResolvedProject, result: BuildResult | None) -> str | None:
    """The platform tag of a wheel holding ``result``'s artifacts and the project's shipped
    files (platform-tag: manylinux by their ELF on Linux); None: the interpreter's."""
    import sys

    from .distribution import manylinux
    from .elf import is_elf

    if not sys.platform.startswith("linux") or (result is None and project.platform_tag == "auto"):
        return None
    binaries = [
        manylinux.Binary(path, spec.name, result.plan.objects.get(spec.name, ()))
        for spec in project.extensions for path in [result.artifacts[spec.name]]
    ] if result else []
    binaries += [manylinux.Binary(path, arcname) for arcname, path in project.files if is_elf(path)]
    if not binaries:
        return None
    shipped = {binary.path.name for binary in binaries}
    decision = manylinux.decide(project.platform_tag, binaries, shipped, tags.platform_tag())
    log(user_line(f"platform tag {decision.note}"))
    return decision.tag


def _build_dir_lock(loaded: Loaded, editable: bool) -> contextlib.AbstractContextManager[None]:
    if not loaded.project.extensions:
        return contextlib.nullcontext()
    from .core.lock import build_lock

    meta = loaded.metadata
    kind = "an editable wheel" if editable else "a wheel"
    return build_lock(loaded.project.options.build_dir, f"{kind} of {meta.name} {meta.version}")


def _guard_torch(loaded: Loaded, spec: ExtensionSpec, built: Path) -> Guard | None:
    """The torch a module's import guard checks (torch-import-check), or None. ``"auto"``
    guards a kept static torch requirement and every module that links torch's CUDA
    libraries or the CUDA runtime: no requirement can name the CUDA variant."""
    from .elf import links_cuda

    project, torch = loaded.project, loaded.torch
    if spec.kind is not Kind.MODULE:
        return None
    assert torch is not None
    # the variant to protect is torch's: against a CPU torch, a module's own CUDA is no torch ABI
    cuda_variant = torch.cuda is not None and links_cuda(built)
    wanted = project.torch_import_check or (
        project.torch_import_check_auto and (loaded.static_torch or cuda_variant)
    )
    if not wanted:
        return None
    return Guard(torch.version, torch.cuda if cuda_variant else None)


def _add_editable(
    wheel: WheelWriter, loaded: Loaded, result: BuildResult | None, in_tree: Mapping[str, Path],
    config_settings: ConfigSettings,
) -> None:
    from .distribution.editable import add_editable

    project = loaded.project
    rebuild = None
    if result is not None:
        if isolation.is_isolated(result.plan.torch):
            log(user_line("editable install from an isolated build environment: extensions"
                          " will not rebuild on import (use pip install -e . --no-build-isolation)"))
        else:
            rebuild = _record_editable(loaded, result, in_tree, config_settings, None)
    add_editable(
        wheel,
        loaded.metadata.name,
        packages=project.layout.packages,
        py_modules=project.layout.py_modules,
        extensions={
            spec.name: (result.artifacts[spec.name], in_tree[spec.name])  # type: ignore[union-attr]
            for spec in project.extensions
        },
        rebuild=rebuild,
        torch_version=loaded.torch.version if (loaded.torch and project.extensions) else None,
        root=project.root,
    )


def _record_editable(
    loaded: Loaded, result: BuildResult, in_tree: Mapping[str, Path],
    config_settings: ConfigSettings, state_file: Path | None,
) -> RebuildCommand:
    """Write the editable install's state (what its import hook re-plans from); the hook's
    rebuild command."""
    import sys

    from .config.layers import resolution_variables
    from .distribution import editable
    from .project_tree import is_build_dir

    project, plan = loaded.project, result.plan
    state_file = state_file or plan.build_dir / editable.EDITABLE_STATE_NAME
    names = {*resolution_variables(), project.version.suffix_env or ""} - {""}
    recorded_env = {name: loaded.env.get(name) for name in sorted(names)}
    install = {"root": str(project.root), "config_settings": dict(config_settings or {}),
               "env": recorded_env}
    rebuild = editable.RebuildCommand(
        plan.ninja, plan.build_dir, tuple(plan.targets.values()),
        editable.Replan(sys.executable, state_file, install),
    )
    sources = [source for spec in project.extensions for source in spec.sources]
    folders = editable.watched_folders(project.root, sources, is_build_dir)
    state = editable.EditableState(
        root=project.root,
        config_settings=dict(config_settings or {}),
        env=recorded_env,
        artifacts=[(result.artifacts[spec.name], in_tree[spec.name]) for spec in project.extensions],
        rebuild=rebuild,
        watched=[project.root / "pyproject.toml", *folders],
    )
    with writing(state_file.parent):  # a full build disk: one line naming it
        editable.write_state(state_file, state)
    return rebuild


def rebuild_editable(
    root: Path, config_settings: ConfigSettings, env: Mapping[str, str], state_file: Path
) -> None:
    """An editable install's import hook re-plans (pyproject.toml or a sources folder
    changed): build as the install did, link the extensions into the tree again, and record
    the new state. A config error leaves the old state, so the next import tries again."""
    from .distribution.editable import link_into_tree

    loaded = load(root, config_settings, env)
    project = loaded.project
    in_tree = project.in_tree
    with _build_dir_lock(loaded, editable=True):
        result = _compile(loaded)
        if result is None:
            raise ConfigError("the project no longer has extensions to build; reinstall:"
                              " pip install -e . --no-build-isolation", "tool.torch-ext.extension")
        for spec in project.extensions:
            link_into_tree(in_tree[spec.name], result.artifacts[spec.name])
        state_file.parent.mkdir(parents=True, exist_ok=True)
        _record_editable(loaded, result, in_tree, config_settings, state_file)


def build_sdist(root: Path, out_dir: Path, config_settings: ConfigSettings) -> str:
    from .distribution.sdist import sdist_files, write_sdist

    project, _ = _resolve(root, config_settings, os.environ)
    # The sdist cannot know which torch its wheel will be built against: no pin in PKG-INFO,
    # and Requires-Dist is declared dynamic (PEP 643) for the wheel to add it. It never
    # carries the local label either (local-version names the wheel's torch).
    plan = _dependency_plan(project, None)
    meta = dist_metadata.build_metadata(
        {"project": project.project_table}, project.root,
        version=config.version_string(project, os.environ),
        dynamic_metadata=["Requires-Dist"] if plan.pin_from_build else [],
        dependencies=plan.dependencies,
    )
    files = sdist_files(
        project.root,
        include=meta.referenced_files,
        include_globs=project.sdist_include,
        exclude_globs=project.sdist_exclude,
        build_dir=project.options.build_dir,
        out_dir=out_dir,
        artifacts=project.in_tree.values(),
    )
    with writing(out_dir):
        out_dir.mkdir(parents=True, exist_ok=True)
    path = write_sdist(out_dir, project.root, meta, files, source_date_epoch=source_date_epoch())
    return path.name


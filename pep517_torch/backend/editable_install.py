"""An editable install's sequencing: the editable wheel's contents (in-tree links, the hook,
the state its rebuilds re-plan from) and the rebuild the hook runs when pyproject.toml or a
sources folder changed (``python -m pep517_torch.backend.editable_rebuild``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..atomic import writing
from ..core.toolchain import isolation
from ..config import ConfigSettings
from ..errors import ConfigError
from ..shipped_runtime.user_line import user_line
from ..shipped_runtime.user_line import log
from .stages import Loaded, build_dir_lock, compile_extensions, load

if TYPE_CHECKING:
    from ..core.build import BuildResult
    from ..distribution.editable import RebuildCommand
    from ..distribution.wheel import WheelWriter


def add_editable_contents(
    wheel: WheelWriter, loaded: Loaded, result: BuildResult | None, in_tree: Mapping[str, Path],
    config_settings: ConfigSettings,
) -> None:
    """What an editable wheel holds: the .pth file and hook, the extensions linked into the
    tree, and (unless torch comes from an isolated build environment) the recorded state its
    import hook rebuilds from."""
    from ..distribution.editable import add_editable

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
    config_settings: ConfigSettings, state_dir: Path | None,
) -> RebuildCommand:
    """Write the editable install's state into the ledger of ``state_dir`` (default: the
    build folder; a re-plan keeps the folder its hook reads, whatever build-dir now says):
    what its import hook re-plans from; the hook's rebuild command."""
    import sys

    from ..config.layers import resolution_variables
    from ..distribution import editable
    from ..project_tree import is_build_dir

    project, plan = loaded.project, result.plan
    state_dir = state_dir or plan.build_dir
    names = {*resolution_variables(), project.version.suffix_env or ""} - {""}
    recorded_env = {name: loaded.env.get(name) for name in sorted(names)}
    install = {"root": str(project.root), "config_settings": dict(config_settings or {}),
               "env": recorded_env}
    rebuild = editable.RebuildCommand(
        plan.ninja, plan.build_dir, tuple(plan.targets.values()),
        editable.Replan(sys.executable, state_dir, install),
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
    with writing(state_dir):  # a full build disk: one line naming it
        state_dir.mkdir(parents=True, exist_ok=True)
        editable.write_state(state_dir, state)
    return rebuild


def rebuild_editable(
    root: Path, config_settings: ConfigSettings, env: Mapping[str, str], state_dir: Path
) -> None:
    """An editable install's import hook re-plans (pyproject.toml or a sources folder
    changed): build as the install did, link the extensions into the tree again, and record
    the new state. A config error leaves the old state, so the next import tries again."""
    from ..distribution.editable import link_into_tree

    loaded = load(root, config_settings, env)
    project = loaded.project
    in_tree = project.in_tree
    with build_dir_lock(loaded, editable=True):
        result = compile_extensions(loaded, editable=True)
        if result is None:
            raise ConfigError("the project no longer has extensions to build; reinstall:"
                              " pip install -e . --no-build-isolation", "tool.torch-ext.extension")
        for spec in project.extensions:
            link_into_tree(in_tree[spec.name], result.artifacts[spec.name])
        _record_editable(loaded, result, in_tree, config_settings, state_dir)

"""Applying `[[tool.torch-ext.overrides]]`, remembering where every value came from.

Errors found later (a glob matching nothing, a path escaping the root) must name the key the
user wrote, which after an override is the override's key, not the extension's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import ConfigError
from .checks import split_list
from .conditions import CudaState, condition_failure, cuda_state
from .extension_model import ExtensionSettings
from .fields import toml_key
from .model import ProjectSettings
from .parse import index_path, key_path
from .resolved import Facts
from .pyproject import TOOL_TABLE

SettingsT = TypeVar("SettingsT", ProjectSettings, ExtensionSettings)


@dataclass
class Origins:
    """Key paths of the values of one settings object; unrecorded ones live under ``base``."""

    base: str
    paths: dict[tuple[str, int | str | None], str] = field(default_factory=dict)

    def of(self, name: str, item: int | str | None = None) -> str:
        """The key path of field ``name`` (or of its entry ``item``)."""
        recorded = self.paths.get((name, item))
        if recorded is not None:
            return recorded
        whole = self.paths.get((name, None)) or key_path(self.base, toml_key(name))
        if item is None:
            return whole
        return index_path(whole, item) if isinstance(item, int) else key_path(whole, item)

    def replaced(self, name: str, path: str) -> None:
        self.paths = {k: v for k, v in self.paths.items() if k[0] != name}
        self.paths[(name, None)] = path

    def appended(self, name: str, start: int, count: int, path: str) -> None:
        for offset in range(count):
            self.paths[(name, start + offset)] = index_path(path, offset)

    def merged(self, name: str, keys: list[str], path: str) -> None:
        for key in keys:
            self.paths[(name, key)] = key_path(path, key)


def replace_values(
    target: SettingsT, patch: Mapping[str, Any], origins: Origins, base: str
) -> SettingsT:
    for name in patch:
        origins.replaced(name, key_path(base, toml_key(name)))
    return dataclasses.replace(target, **patch)


def append_values(
    target: SettingsT, patch: Mapping[str, Any], origins: Origins, base: str
) -> SettingsT:
    changes: dict[str, Any] = {}
    added: Any
    for name, added in patch.items():
        path = key_path(base, toml_key(name))
        current: Any = getattr(target, name)
        if name == "cuda_arch_list":
            current, added = split_list(current), split_list(added)
        if name == "package_dir":
            if isinstance(current, str):
                origins.paths[(name, "")] = origins.of(name)
                current = {"": current}
            if isinstance(added, str):
                origins.paths[(name, "")] = path
                added = {"": added}
        if current is None and name == "packages":
            raise ConfigError(
                "cannot append to 'packages': it is not set (packages are discovered);"
                " set the full list instead",
                path,
            )
        if isinstance(added, list):
            origins.appended(name, len(current or []), len(added), path)
            changes[name] = [*(current or []), *added]
        else:
            origins.merged(name, list(added), path)
            changes[name] = {**(current or {}), **added}
    return dataclasses.replace(target, **changes)


@dataclass
class Applied:
    """Settings after the overrides, with the origins of their values."""

    project: ProjectSettings
    project_origins: Origins
    extensions: list[ExtensionSettings]
    extension_origins: list[Origins]
    applied: list[int]  # indexes of the overrides whose condition held


def apply_overrides(
    settings: ProjectSettings, facts: Facts, forced_cuda: Mapping[str, Any]
) -> Applied:
    """Apply the overrides in order; ``forced_cuda`` holds a -C ``cuda`` value, if any.

    A condition's ``cuda`` sees the value that will win in the end: the -C value when given,
    else the `cuda` key as left by the overrides before it.
    """
    result = Applied(
        project=settings,
        project_origins=Origins(TOOL_TABLE),
        extensions=list(settings.extension),
        extension_origins=[
            Origins(f"{TOOL_TABLE}.extension[{i}]") for i in range(len(settings.extension))
        ],
        applied=[],
    )
    for i, override in enumerate(settings.overrides):
        base = f"{TOOL_TABLE}.overrides[{i}]"
        cuda = current_cuda(result.project, result.project_origins, facts, forced_cuda)
        if condition_failure(override.if_, facts, cuda):
            continue
        result.applied.append(i)
        result.project = replace_values(
            result.project, override.settings, result.project_origins, base
        )
        _patch_extensions(result, override.extension, f"{base}.extension", replace_values)
        if override.append is not None:
            result.project = append_values(
                result.project, override.append.settings, result.project_origins, f"{base}.append"
            )
            _patch_extensions(
                result, override.append.extension, f"{base}.append.extension", append_values
            )
    result.project = dataclasses.replace(result.project, extension=result.extensions)
    return result


def current_cuda(
    project: ProjectSettings, origins: Origins, facts: Facts, forced_cuda: Mapping[str, Any]
) -> CudaState:
    """CUDA as a condition sees it: the -C value in ``forced_cuda`` when given, else the `cuda`
    key of ``project`` (see :func:`apply_overrides`)."""
    if "cuda" in forced_cuda:
        return cuda_state(forced_cuda["cuda"], facts, "-C cuda")
    return cuda_state(project.cuda, facts, origins.of("cuda"))


def _patch_extensions(
    result: Applied, patches: Mapping[str, Mapping[str, Any]], base: str, how: Any
) -> None:
    for selector, patch in patches.items():
        for index, ext in enumerate(result.extensions):
            if selector in ("*", ext.name):
                result.extensions[index] = how(
                    ext, patch, result.extension_origins[index], key_path(base, selector)
                )

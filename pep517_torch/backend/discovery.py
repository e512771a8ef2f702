"""What a build finds on this machine, and the project resolved against it.

Torch is read from its files at once, the CUDA toolkit (nvcc runs) only when a condition or
`cuda = "auto"` needs it; the build-dir placeholders this machine fills come from one function,
which the pyproject face and the setuptools face both call.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from pathlib import Path

from .. import config
from ..config import ConfigSettings
from ..core.toolchain import isolation, tools as toolchain
from ..distribution import tags
from ..errors import ToolchainError



def torch_or_none() -> toolchain.TorchInstall | None:
    try:
        return toolchain.find_torch()
    except ToolchainError:
        return None


class Discovery:
    """What a build finds on this machine, each once and only when asked: torch (read from
    its files) at once, the CUDA toolkit (nvcc runs) when a condition or `cuda = "auto"` needs
    it; the core gets both instead of looking again."""

    def __init__(self, env: Mapping[str, str], torch: toolchain.TorchInstall | None) -> None:
        # a copy of a mutable mapping; a read-only one as given (see stages.load)
        self.env = env if not isinstance(env, MutableMapping) else dict(env)
        self.torch = torch
        self._toolkit: list[object] = []  # [CudaToolkit | None] once looked up

    @property
    def toolkit(self) -> object | None:
        """The toolkit found, if it was looked up (None: not looked up, or none found)."""
        return self._toolkit[0] if self._toolkit else None

    def _nvcc(self) -> tuple[bool, str | None]:
        if not self._toolkit:
            from ..core.cuda import toolkit as cuda

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
    return Discovery(env, torch_or_none()).facts()


def build_dir_values(torch: toolchain.TorchInstall | None) -> dict[str, str]:
    """The build-dir placeholders this machine fills: ``{wheel_tag}``, ``{python_tag}`` and
    ``{torch_version}`` (``{cuda}`` and ``{build_type}`` come from the resolved settings).

    An isolated build's throwaway torch never shares the folder (and build.ninja) of the torch
    the user runs with, which editable installs rebuild against: its ``{torch_version}`` ends
    in ``-isolated``."""
    if torch is None:
        torch_version = "none"
    else:
        suffix = isolation.BUILD_DIR_SUFFIX if isolation.is_isolated(torch) else ""
        torch_version = torch.version + suffix
    return {
        "wheel_tag": tags.wheel_tag(native_code=True),
        "python_tag": tags.python_tag(),
        "torch_version": torch_version,
    }


def resolve(
    root: Path, config_settings: ConfigSettings, env: Mapping[str, str],
    document: Mapping[str, object] | None = None,
) -> tuple[config.ResolvedProject, Discovery]:
    """Resolve the project's pyproject.toml (or ``document``, a parsed one not yet written) as
    a build on this machine would."""
    pyproject = config.read_pyproject(root) if document is None else document
    return _resolve_with(root, pyproject, env, config_settings)


def _resolve_with(
    root: Path, pyproject: Mapping[str, object], env: Mapping[str, str],
    config_settings: ConfigSettings,
) -> tuple[config.ResolvedProject, Discovery]:
    found = Discovery(env, torch_or_none())
    values = build_dir_values(found.torch)
    project = config.resolve_project(root, pyproject, config_settings, found.facts(), values)
    return project, found

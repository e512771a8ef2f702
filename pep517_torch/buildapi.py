"""PEP 517 and PEP 660 hooks: thin calls into :mod:`pep517_torch.project`.

Frontends call these in the project directory. Nothing here, or imported from here at module
level, imports torch: ``get_requires_for_build_*`` runs before torch may even be installed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from .errors import Pep517TorchError

ConfigSettings = Mapping[str, "str | list[str]"] | None
Hook = TypeVar("Hook", bound=Callable[..., object])


def _user_facing(hook: Hook) -> Hook:
    """Our own errors reach the frontend without our internal frames: the message (naming the
    key, file or tool) is what the user needs, not a 20-frame traceback above it."""

    @functools.wraps(hook)
    def wrapper(*args: object, **kwargs: object) -> object:
        try:
            return hook(*args, **kwargs)
        except Pep517TorchError as exc:
            raise exc.with_traceback(None) from None

    return wrapper  # type: ignore[return-value]


def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> list[str]:
    """Nothing beyond [build-system] requires: torch must be listed there (or installed)."""
    return []


def get_requires_for_build_editable(config_settings: ConfigSettings = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> list[str]:
    return []


@_user_facing
def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    """Write ``<name>-<version>.dist-info/METADATA`` exactly as the wheel will; compile nothing."""
    from . import project

    return project.prepare_metadata(Path.cwd(), Path(metadata_directory), config_settings)


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


@_user_facing
def build_wheel(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: str | None = None,
) -> str:
    from . import project

    return project.build_wheel(Path.cwd(), Path(wheel_directory), config_settings)


@_user_facing
def build_editable(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: str | None = None,
) -> str:
    from . import project

    return project.build_wheel(Path.cwd(), Path(wheel_directory), config_settings, editable=True)


@_user_facing
def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    from . import project

    return project.build_sdist(Path.cwd(), Path(sdist_directory), config_settings)

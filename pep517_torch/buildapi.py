"""PEP 517 and PEP 660 hooks: thin calls into :mod:`pep517_torch.backend.pipeline`.

Frontends call these in the project directory. Nothing here, or imported from here at module
level, imports torch: ``get_requires_for_build_*`` runs before torch may even be installed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .errors import Pep517TorchError, print_error

if TYPE_CHECKING:  # the hooks import nothing of the config layer: a no-op replays without it
    from .config import ConfigSettings

Hook = TypeVar("Hook", bound=Callable[..., object])


def _user_facing(hook: Hook) -> Hook:
    """Our own errors reach the user as our message alone, as meson-python's hooks do: printed
    to stderr, then ``SystemExit(1)``. An exception would end in a traceback from the frontend's
    hook runner (pip, build and uv show it all), burying the one line that names the key, file
    or tool. Anything else is a bug and keeps its traceback."""

    @functools.wraps(hook)
    def wrapper(*args: object, **kwargs: object) -> object:
        try:
            return hook(*args, **kwargs)
        except Pep517TorchError as exc:
            print_error(exc)
            raise SystemExit(1) from exc

    return wrapper  # type: ignore[return-value]


def _build_requirements() -> list[str]:
    """setuptools-scm when the project's version comes from it (config/version.py decides);
    nothing else beyond [build-system] requires: torch must be listed there (or installed).
    A pyproject.toml that cannot be read asks for nothing: the build then says what is wrong."""
    from .config import build_requirements

    try:
        return build_requirements(Path.cwd())
    except (Pep517TorchError, OSError, ValueError):
        return []


def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> list[str]:
    """Beyond [build-system] requires (torch must be listed there, or installed):
    setuptools-scm where the version comes from it, and pybind11-stubgen where ``stubs = true``
    (or an override, or ``-Cstubs=true``) asks for stubs: the listing child runs it."""
    from .backend.op_listing import stub_requirements

    return [*_build_requirements(), *stub_requirements(Path.cwd(), config_settings)]


def get_requires_for_build_editable(config_settings: ConfigSettings = None) -> list[str]:
    return _build_requirements()


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> list[str]:
    return _build_requirements()


@_user_facing
def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    """Write ``<name>-<version>.dist-info/METADATA`` exactly as the wheel will; compile nothing.
    When nothing it was made from changed since the last time, that one again (noop_cache.py)."""
    from .backend import noop_cache

    replayed = noop_cache.replay_metadata(os.getcwd(), metadata_directory, config_settings)
    if replayed is not None:
        return replayed
    from .backend import pipeline

    return pipeline.prepare_metadata(Path.cwd(), Path(metadata_directory), config_settings)


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
    """The wheel; when nothing it was made from changed since the last build, that wheel
    again, from a few stats and nothing else imported (noop_cache.py)."""
    from .backend import noop_cache

    replayed = noop_cache.replay_wheel(os.getcwd(), wheel_directory, config_settings)
    if replayed is not None:
        return replayed
    from .backend import pipeline

    return pipeline.build_wheel(Path.cwd(), Path(wheel_directory), config_settings)


@_user_facing
def build_editable(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: str | None = None,
) -> str:
    from .backend import pipeline

    return pipeline.build_wheel(Path.cwd(), Path(wheel_directory), config_settings, editable=True)


@_user_facing
def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    from .backend import pipeline

    return pipeline.build_sdist(Path.cwd(), Path(sdist_directory), config_settings)

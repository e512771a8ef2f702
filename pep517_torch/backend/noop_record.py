"""The record a successful wheel or metadata build leaves for a later no-op to replay
(``noop_cache.py`` reads it; its docstring says what it holds and when it replays).

:func:`recording` wraps a build: it deletes the last record first (a build that fails leaves
none), hands the build an environment that remembers what was read (:class:`ReadEnv`), and
watches what it consults (``input_audit.py``). When the build succeeded, :meth:`Recording.wheel`
or :meth:`Recording.metadata` writes the record, unless the build cannot be described by one:
it read the whole environment, an input changed while it ran (the record would hold the new
state, the result the old), or torch was found elsewhere than where the build found it.
"""

from __future__ import annotations

import binascii
import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..shipped_runtime import input_audit
from . import noop_cache
from ..atomic import temporary_name, write_atomic
from ..shipped_runtime.environment import SOURCE_DATE_EPOCH
from ..shipped_runtime.build_inputs import changed_since, identity

if TYPE_CHECKING:
    from ..config import ConfigSettings
    from .stages import Loaded


class ReadEnv(Mapping[str, str]):
    """A snapshot of the environment that remembers each variable looked up, set or not.
    Iterating it (a copy, ``{**env}``) counts as reading every variable: then no record."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._values = dict(env)
        self.read: dict[str, str | None] = {}
        self.everything = False

    def __getitem__(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        value = self._values.get(name)
        self.read[name] = value
        return default if value is None else value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[str]:
        self.everything = True
        return iter(self._values)

    def __len__(self) -> int:
        self.everything = True
        return len(self._values)

    def __bool__(self) -> bool:  # `env or {}` learns nothing about any one variable
        return bool(self._values)


@dataclass
class Recording:
    hook: str
    root: Path
    config_settings: ConfigSettings
    location: Path
    env: ReadEnv
    started_ns: int
    seen: set[str] = field(default_factory=set)

    def wheel(self, loaded: Loaded, wheel: Path, artifacts: Iterable[Path], notes: list[str],
              platform: str | None) -> None:
        """Record a written (not editable) wheel and keep it: beside the artifacts, or in the
        machine cache for a wheel without extensions. ``notes``: the lines the build printed
        before its summary; ``platform``: what decided the platform tag."""
        with _never_failing(self.location):
            self._wheel(loaded, wheel, list(artifacts), notes, platform)

    def metadata(self, loaded: Loaded, directory: Path, name: str) -> None:
        """Record the ``.dist-info`` folder ``name`` just written into ``directory``."""
        with _never_failing(self.location):
            self._metadata(loaded, directory, name)

    def _wheel(self, loaded: Loaded, wheel: Path, artifacts: list[Path], notes: list[str],
               platform: str | None) -> None:
        project = loaded.project
        build_dir = project.options.build_dir if project.extensions else None
        paths = self._inputs(loaded, [*artifacts, *(s for spec in project.extensions
                                                   for s in (*spec.sources, *spec.include_dirs))])
        facts = self._described(loaded, paths, excluded=[build_dir, wheel])
        if facts is None:
            return
        kept = Path(noop_cache.kept_path(self.location, build_dir))
        try:
            output = {
                "wheel": wheel.name,
                "kept": str(kept),
                "kept_identity": _keep(wheel, kept),
                "extensions": len(project.extensions),
                "platform": platform,
            }
        except OSError:
            return
        self._write(facts, output, notes, build_dir)

    def _metadata(self, loaded: Loaded, directory: Path, name: str) -> None:
        facts = self._described(loaded, self._inputs(loaded, []), excluded=[directory / name])
        if facts is None:
            return
        top = directory / name
        try:
            files = {
                path.relative_to(top).as_posix(): binascii.b2a_base64(path.read_bytes(), newline=False).decode()
                for path in sorted(top.rglob("*")) if path.is_file()
            }
        except OSError:
            return
        self._write(facts, {"dist_info": name, "files": files}, [], None)

    def _inputs(self, loaded: Loaded, more: Iterable[Path]) -> set[str]:
        """What the build consulted, and what the resolved project names as its inputs."""
        project, meta = loaded.project, loaded.metadata
        named: list[Path] = [project.root / "pyproject.toml", *meta.referenced_files, *more]
        named += [path for _, path in project.files]
        named += list(project.layout.packages.values())
        named += [project.version.file] if project.version.file is not None else []
        return self.seen | {os.path.abspath(path) for path in named}

    def _described(
        self, loaded: Loaded, paths: set[str], *, excluded: Iterable[Path | None]
    ) -> dict[str, Any] | None:
        """The record's facts, or None when no record can describe this build. ``excluded``:
        what the build wrote (the build directory, the wheel), whose state is no input."""
        if self.env.everything or loaded.project.version.provider is not None:
            return None  # a version from git changes with every commit, tag and edit
        root = str(self.root)
        outside = [os.path.join(os.path.abspath(p), "") for p in excluded if p is not None]
        if any(os.path.join(root, "").startswith(o) for o in outside):
            return None  # written into a folder holding the project: nothing would be checked
        kept = {p for p in paths if not any(p.startswith(o) or p == o[:-1] for o in outside)}
        for path in list(kept):  # the folders up to the root: a file added or removed
            folder = os.path.dirname(path)
            while folder.startswith(os.path.join(root, "")) and folder not in kept:
                kept.add(folder)
                folder = os.path.dirname(folder)
            if path.startswith(os.path.join(root, "")):
                kept.add(root)
        files = {path: identity(path) for path in sorted(kept)}
        facts = noop_cache.machine_facts(os.environ)
        torch, found = loaded.torch, facts["torch"]
        if torch is not None and (found is None or Path(found[0]).parent != Path(torch.root)):
            return None  # torch found elsewhere than the build found it: no record
        changed = [*files.values(), found[1:] if found and len(found) == 6 else None]
        if any(changed_since(value, self.started_ns) for value in changed):
            return None
        self.env.get(SOURCE_DATE_EPOCH)  # the wheel's timestamps, read or not
        return {"env": dict(sorted(self.env.read.items())), "files": files, "facts": facts}

    def _write(self, facts: dict[str, Any], output: dict[str, Any], notes: list[str],
               build_dir: Path | None) -> None:
        record = {
            "format": noop_cache.FORMAT,
            "key": noop_cache.record_key(self.hook, str(self.root), self.config_settings),
            **facts,
            "build_dir": None if build_dir is None else str(build_dir),
            "output": output,
            "written_ns": time.time_ns(),  # the file's mtime, until a replay moves it (explain)
            "notes": notes,
        }
        try:
            self.location.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.location, json.dumps(record, indent=0, sort_keys=True))
            os.utime(self.location, ns=(record["written_ns"], record["written_ns"]))
        except (OSError, TypeError, ValueError):
            with contextlib.suppress(OSError):
                self.location.unlink()


@contextlib.contextmanager
def _never_failing(location: Path) -> Iterator[None]:
    """A record that cannot be made is no record; the build it describes succeeded."""
    try:
        yield
    except Exception:  # noqa: BLE001 - never a failed build for want of a record
        with contextlib.suppress(OSError):
            location.unlink()


def _keep(wheel: Path, kept: Path) -> list[int]:
    """``wheel`` at ``kept``: a hard link (no copy), else a copy, renamed into place; the
    identity of the file placed (a concurrent build may replace it: then it differs)."""
    temporary = temporary_name(kept)
    try:
        try:
            os.link(wheel, temporary)
        except OSError:
            shutil.copyfile(wheel, temporary)
        placed = noop_cache.kept_identity(os.stat(temporary))
        os.replace(temporary, kept)
    finally:
        temporary.unlink(missing_ok=True)
    return placed


@contextlib.contextmanager
def recording(
    root: Path, hook: str, config_settings: ConfigSettings, *, enabled: bool = True
) -> Iterator[Recording | None]:
    """Around a build of ``hook`` (``"wheel"``, ``"metadata"``): the last record removed, and a
    :class:`Recording` to finish once the build succeeded (None: nothing is recorded)."""
    location = noop_cache.record_file(os.environ, hook, str(root), config_settings) if enabled else None
    if location is None:
        yield None
        return
    with contextlib.suppress(OSError):
        os.unlink(location)  # before anything else: a build that fails leaves no record
    started_ns = time.time_ns()
    current = Recording(hook, root, config_settings, Path(location), ReadEnv(os.environ), started_ns)
    with input_audit.watching(root) as seen:
        current.seen = seen
        yield current

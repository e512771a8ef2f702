"""Core metadata (METADATA / PKG-INFO), entry points, the torch pin and dynamic versions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyproject_metadata
from packaging.requirements import Requirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..atomic import writing
from ..errors import ConfigError, ToolchainError
from ..project_tree import require_inside
from ..shipped_runtime.torch_release import major_minor

TorchPinMode = Literal["minor", "exact", "none"]



@dataclass(frozen=True)
class ProjectMetadata:
    """The validated ``[project]`` table of one build, ready to be written."""

    standard: pyproject_metadata.StandardMetadata
    root: Path
    # more .dist-info members a wheel carries (name -> bytes), e.g. its torch build record
    extra_dist_info: dict[str, bytes] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.standard.name

    @property
    def distribution_name(self) -> str:
        """The name as it appears in wheel and sdist file names: ``my_project``."""
        return canonicalize_name(self.name).replace("-", "_")

    @property
    def version(self) -> str:
        """The normalised version, e.g. ``1.0.0rc1+cu130``."""
        assert self.standard.version is not None, "build_metadata() always sets the version"
        return str(self.standard.version)

    def metadata_bytes(self) -> bytes:
        """The exact text of ``.dist-info/METADATA`` and of the sdist's ``PKG-INFO``."""
        return bytes(self.standard.as_rfc822())

    def entry_points_text(self) -> str | None:
        """The text of ``entry_points.txt``, or None when the project has no entry points."""
        groups: dict[str, Mapping[str, str]] = {
            "console_scripts": self.standard.scripts,
            "gui_scripts": self.standard.gui_scripts,
            **self.standard.entrypoints,
        }
        sections = [
            f"[{group}]\n" + "".join(f"{name} = {entries[name]}\n" for name in sorted(entries))
            for group, entries in sorted(groups.items())
            if entries
        ]
        return "\n".join(sections) or None

    @property
    def license_files(self) -> list[tuple[str, Path]]:
        """(posix path relative to the root, absolute path) of each PEP 639 license file."""
        relative = sorted(set(self.standard.license_files or ()))
        return [(path.as_posix(), self.root / path) for path in relative]

    @property
    def dist_info_name(self) -> str:
        return f"{self.distribution_name}-{self.version}.dist-info"

    def dist_info_files(self) -> list[tuple[str, bytes | Path]]:
        """The ``.dist-info`` members the metadata makes (names relative to it): METADATA,
        entry_points.txt, licenses/...; a wheel adds WHEEL and RECORD."""
        files: list[tuple[str, bytes | Path]] = [("METADATA", self.metadata_bytes())]
        entry_points = self.entry_points_text()
        if entry_points is not None:
            files.append(("entry_points.txt", entry_points.encode()))
        files.extend((f"licenses/{relative}", absolute) for relative, absolute in self.license_files)
        files.extend(sorted(self.extra_dist_info.items()))
        return files

    def write_dist_info(self, directory: Path) -> str:
        """Write the ``.dist-info`` folder into ``directory`` (prepare_metadata_for_build_wheel);
        its name."""
        for name, content in self.dist_info_files():
            target = directory / self.dist_info_name / name
            with writing(target):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content if isinstance(content, bytes) else content.read_bytes())
        return self.dist_info_name

    @property
    def referenced_files(self) -> list[Path]:
        """Absolute paths of the files the metadata reads (readme, licenses): sdists need them."""
        files = [absolute for _, absolute in self.license_files]
        for source in (self.standard.readme, self.standard.license):
            file = getattr(source, "file", None)
            if file is not None:
                files.append(self.root / file)
        return sorted(set(files))


def build_metadata(
    pyproject: Mapping[str, Any],
    root: Path,
    *,
    version: str | None,
    extra_requirements: Sequence[Requirement] = (),
    dynamic_metadata: Sequence[str] = (),
    dependencies: Sequence[Requirement] | None = None,
) -> ProjectMetadata:
    """Validate ``[project]`` (PEP 621, PEP 639) and add what the build decides.

    ``version`` fills ``project.version`` when it is listed in ``project.dynamic``;
    ``dependencies`` fills ``project.dependencies`` (only when it is listed there too);
    ``extra_requirements`` (the torch pin) are merged into the dependencies;
    ``dynamic_metadata`` lists core-metadata fields that may still change between sdist and
    wheel (``Requires-Dist`` when the wheel adds a torch pin the sdist cannot know yet).
    """
    try:
        standard = pyproject_metadata.StandardMetadata.from_pyproject(
            pyproject, root, dynamic_metadata=list(dynamic_metadata)
        )
    except pyproject_metadata.ConfigurationError as error:
        config_error = ConfigError(str(error))
        config_error.key = error.key  # the message already names it
        raise config_error from None
    _check_files_inside(standard, pyproject, root)
    if isinstance(standard.license, str):
        standard.license = _canonical_license(standard.license)
    if "version" in standard.dynamic:
        if version is None:
            message = "is listed in project.dynamic but no version source gave one"
            raise ConfigError(message, "project.version")
        try:
            standard.version = Version(version)
        except InvalidVersion:
            message = f"{version!r} is not a valid PEP 440 version"
            raise ConfigError(message, "project.version") from None
    elif version is not None:
        message = "a dynamic version was computed but 'version' is not listed"
        raise ConfigError(message, "project.dynamic")
    if dependencies is not None:
        if "dependencies" not in standard.dynamic:
            message = "dependencies were computed but 'dependencies' is not listed"
            raise ConfigError(message, "project.dynamic")
        standard.dependencies = list(dependencies)
    standard.dependencies = merge_requirements(standard.dependencies, extra_requirements)
    _add_default_license_files(standard, pyproject["project"], root)
    _require_metadata_version(standard, "2.2")
    return ProjectMetadata(standard, root)


# PEP 639's suggestion, as setuptools and hatchling apply it when license-files is absent.
DEFAULT_LICENSE_GLOBS = ("LICEN[CS]E*", "COPYING*", "NOTICE*", "AUTHORS*")


def default_license_files(root: Path) -> list[Path]:
    """The license files a project ships without ``license-files``: the root's regular files
    matching DEFAULT_LICENSE_GLOBS (relative paths, sorted)."""
    found = {
        path.relative_to(root)
        for pattern in DEFAULT_LICENSE_GLOBS
        for path in root.glob(pattern)
        if path.is_file() and not path.is_symlink()
    }
    return sorted(found)


def _add_default_license_files(
    standard: pyproject_metadata.StandardMetadata, project: Mapping[str, Any], root: Path
) -> None:
    """Explicit ``license-files`` wins (even ``[]``); a legacy ``license = {...}`` table cannot
    be combined with License-File (PEP 639), so it keeps its License: text alone."""
    if "license-files" in project or isinstance(standard.license, pyproject_metadata.License):
        return
    found = default_license_files(root)
    if found:
        standard.license_files = found


def _require_metadata_version(standard: pyproject_metadata.StandardMetadata, floor: str) -> None:
    """Core metadata ``floor`` or newer (2.2: PEP 643's Dynamic field exists, so an sdist's
    unmarked fields are promised to equal its wheels')."""
    if Version(standard.auto_metadata_version) < Version(floor):
        standard.metadata_version = floor


def _check_files_inside(
    standard: pyproject_metadata.StandardMetadata, pyproject: Mapping[str, Any], root: Path
) -> None:
    """The readme, license file and license-files are read into the metadata and shipped:
    each must stay inside the project root, as every other member does."""
    readme_key = "project.readme" if isinstance(pyproject["project"].get("readme"), str) else (
        "project.readme.file"
    )
    referenced = [
        (getattr(standard.readme, "file", None), readme_key, "readme"),
        (getattr(standard.license, "file", None), "project.license.file", "license file"),
        *(
            (root / path, "project.license-files", "license file")
            for path in standard.license_files or ()
        ),
    ]
    for path, key, what in referenced:
        if path is not None:
            require_inside(root, path, key, what)


def _canonical_license(expression: str) -> str:
    try:
        from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
    except ImportError:  # packaging < 24.2 cannot check SPDX expressions
        return expression
    try:
        return str(canonicalize_license_expression(expression))
    except InvalidLicenseExpression as error:
        message = f"{expression!r} is not a valid SPDX license expression: {error}"
        raise ConfigError(message, "project.license") from None


def torch_pin(torch_version: str, mode: TorchPinMode) -> Requirement | None:
    """The requirement a wheel built against ``torch_version`` carries.

    ``minor``: ``2.13.0+cpu`` -> ``torch<2.14,>=2.13``; ``exact``: ``torch==2.13.0``;
    ``none``: None. Local labels (``+cpu``, ``+cu130``) are dropped: PEP 440 matches them anyway.
    """
    if mode == "none":
        return None
    try:
        parsed = Version(torch_version)
    except InvalidVersion:
        message = f"torch reports version {torch_version!r}, which is not PEP 440"
        raise ToolchainError(message) from None
    if mode == "exact":
        return Requirement(f"torch=={parsed.public}")
    if mode != "minor":
        raise ValueError(f"unknown torch pin mode {mode!r}")
    release = major_minor(parsed.public)  # the releases that share its ABI
    if release is None:
        raise ToolchainError(f"torch reports version {torch_version!r}, which has no major.minor")
    major, minor = release
    # A nightly such as 2.14.0.dev20260101 is below 2.14, so the lower bound must admit it.
    lower = f"{major}.{minor}.0.dev0" if parsed.is_prerelease else f"{major}.{minor}"
    return Requirement(f"torch>={lower},<{major}.{minor + 1}")


def stable_torch_pin(target: str, torch_version: str, mode: TorchPinMode) -> Requirement | None:
    """The requirement of a wheel whose artifacts all use torch's stable ABI ``target``
    (``"2.10"``): ``minor`` (the default) becomes ``torch>=2.10``, no upper bound, since such a
    wheel loads under every later torch; ``exact`` and ``none`` mean what they always do."""
    if mode != "minor":
        return torch_pin(torch_version, mode)
    return Requirement(f"torch>={target}")


def merge_requirements(
    dependencies: Iterable[Requirement], extra: Iterable[Requirement]
) -> list[Requirement]:
    """``dependencies`` plus ``extra``; an extra requirement on a project the user already
    depends on is folded into the user's line (specifiers intersected, extras and marker kept)
    instead of adding a second line."""
    merged = [_copy(requirement) for requirement in dependencies]
    for addition in extra:
        name = canonicalize_name(addition.name)
        own = [requirement for requirement in merged if canonicalize_name(requirement.name) == name]
        for requirement in own:
            if requirement.url is None:  # a direct URL already pins one exact build
                requirement.specifier = _tightest(requirement.specifier & addition.specifier)
                requirement.extras |= addition.extras
        if not own:
            merged.append(_copy(addition))
    return merged


def _tightest(specifiers: SpecifierSet) -> SpecifierSet:
    """Drop bounds another bound implies: ``>=2.0,>=2.13,<2.14`` -> ``>=2.13,<2.14``."""
    lower = {">=", ">"}
    upper = {"<=", "<"}
    kept: list[Specifier] = []
    for spec in specifiers:
        if spec.operator in lower | upper:
            rivals = [o for o in specifiers if o.operator in (lower if spec.operator in lower else upper)]
            key = Version(spec.version)
            tighter = [o for o in rivals if o is not spec and (
                (Version(o.version) > key if spec.operator in lower else Version(o.version) < key)
                or (Version(o.version) == key and o.operator in {">", "<"} and spec.operator in {">=", "<="})
            )]
            if tighter:
                continue
        kept.append(spec)
    return SpecifierSet(",".join(str(s) for s in kept))


def _copy(requirement: Requirement) -> Requirement:
    return Requirement(str(requirement))

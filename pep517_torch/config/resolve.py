"""pyproject + -C + environment + Facts -> ResolvedProject: the config layer's one product."""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.ninja.syntax import shown, unnameable_character
from ..core.spec import BuildOptions, BuildType
from ..errors import ConfigError
from .entry_points import check_entry_points
from .extensions import ExtensionContext, resolve_extensions
from .layers import (
    LayerValue,
    config_settings_layer,
    environment_layer,
    option_value,
    passthrough_env,
)
from .fields import toml_key
from .checks import parse_size
from .model import BUILD_DIR_PLACEHOLDERS, ProjectSettings
from .overrides import Origins, apply_overrides, current_cuda
from .paths import contained
from .resolved import ConfigSettings, Facts, ResolvedProject
from .pyproject import parse_settings
from .shipping import check_module_collisions, in_tree_path, package_files, resolve_layout
from .version import resolve_version, write_version_file


def format_build_dir(template: str, values: Mapping[str, str], key: str) -> str:
    """Fill the build-dir placeholders; anything but a known ``{name}`` is a ConfigError."""
    known = ", ".join("{" + p + "}" for p in BUILD_DIR_PLACEHOLDERS)
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigError(
            f"malformed template {template!r} ({exc}); placeholders: {known}", key
        ) from None
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in BUILD_DIR_PLACEHOLDERS or spec or conversion:
            raise ConfigError(
                f"unknown placeholder {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} in {template!r}; placeholders: {known}",
                key,
            )
        if name not in values:
            raise ConfigError(f"placeholder {{{name}}} has no value in this build", key)
    return template.format_map(values)


def resolve_build_dir(
    root: Path,
    project: ProjectSettings,
    origins: Origins,
    values: Mapping[str, str],
) -> Path:
    key = origins.of("build_dir")
    text = format_build_dir(project.build_dir, values, key)
    if not text.strip() or "\0" in text:
        raise ConfigError(f"{project.build_dir!r} gives an empty or invalid path", key)
    path = Path(text)
    path = path if path.is_absolute() else root / path
    path = Path(path.resolve() if ".." in path.parts else path)
    inside = path.relative_to(root) if path.is_relative_to(root) else path  # the root: below
    problem = unnameable_character(str(inside))
    if problem:
        raise ConfigError(
            f"the build directory {shown(str(path))} contains {problem}: choose a name without it", key
        )
    if root.is_relative_to(path):
        raise ConfigError(f"the build directory {path} must not contain the project root", key)
    return path


def _project_options(
    project: ProjectSettings, origins: Origins, arch_layer: LayerValue | None
) -> dict[str, Any]:
    """The BuildOptions fields the project settings give, with the keys that name them. An arch
    list from -C or the environment goes to every extension; pyproject's goes to each spec."""
    options: dict[str, Any] = {}
    keys: dict[str, str] = {}
    shared = {f.name for f in dataclasses.fields(BuildOptions)}
    for fld in dataclasses.fields(ProjectSettings):
        if fld.name == "build_dir":
            continue  # a template, resolved by resolve_build_dir
        if fld.name in shared and fld.name != "cuda_arch_list":
            options[fld.name] = option_value(fld, getattr(project, fld.name))
            keys[fld.name] = origins.of(fld.name)
        elif fld.name == "cuda_arch_list":
            options[fld.name] = option_value(fld, arch_layer.value) if arch_layer else None
            anywhere = f"{toml_key(fld.name)} or {fld.metadata['env']}"
            keys[fld.name] = arch_layer.key if arch_layer else anywhere
    return {**options, "keys": tuple(keys.items())}


def resolve_project(
    root: Path,
    pyproject: Mapping[str, Any],
    config_settings: ConfigSettings,
    facts: Facts,
    build_dir_vars: Mapping[str, str],
) -> ResolvedProject:
    """Parse, apply overrides, then environment, then -C, and resolve every path.

    ``build_dir_vars`` gives the build-dir placeholders; ``build_type`` and ``cuda`` (``cu130``
    or ``cpu``) are filled in from the resolved settings when absent. The environment is
    ``facts.env``; os.environ is never read.
    """
    root = Path(root).resolve()
    settings = parse_settings(pyproject)
    check_entry_points(pyproject)
    command_line = config_settings_layer(config_settings)
    external = {**environment_layer(facts.env), **command_line}
    forced_cuda = {"cuda": command_line["cuda"].value} if "cuda" in command_line else {}
    applied = apply_overrides(settings, facts, forced_cuda)
    project, origins = applied.project, applied.project_origins

    arch_layer = external.pop("cuda_arch_list", None)
    for name, layered in external.items():
        project = dataclasses.replace(project, **{name: layered.value})
        origins.replaced(name, layered.key)

    if project.variant == "torch" and project.local_version == "torch":
        raise ConfigError(
            'with local-version = "torch" too, every variant would be a version of its own and'
            " no installer would choose between them: use one (plain pip skips variant wheels;"
            ' for it, build local-label wheels with -Cvariant=none -Clocal-version=torch)',
            origins.of("variant"),
        )
    cuda = current_cuda(project, origins, facts, forced_cuda)
    cuda_on = cuda.on
    build_type = BuildType(project.build_type)
    cuda_tag = f"cu{facts.torch_cuda.replace('.', '')}" if cuda_on and facts.torch_cuda else "cpu"
    values = {"build_type": build_type.value, "cuda": cuda_tag, **build_dir_vars}
    build_dir = resolve_build_dir(root, project, origins, values)
    options = BuildOptions(
        build_dir=build_dir,
        source_root=root,
        env=passthrough_env(facts.env),
        **_project_options(project, origins, arch_layer),
    )
    layout = resolve_layout(root, project, origins, build_dir)
    for package, directory in layout.packages.items():
        if build_dir.is_relative_to(directory) or directory.is_relative_to(build_dir):
            raise ConfigError(
                f"the build directory {build_dir} and the directory of package {package!r}"
                f" ({directory}) overlap: build output would sit among the files a wheel ships;"
                " choose a build-dir outside the packages",
                origins.of("build_dir"),
            )
    context = ExtensionContext(
        root=root,
        build_dir=build_dir,
        cuda=cuda,
        facts=facts,
        project=project,
        project_origins=origins,
        build_type=build_type,
    )
    problem = unnameable_character(str(root))
    unnameable_root = ConfigError(
        f"the project directory {shown(str(root))} contains {problem}: no compiler command can"
        " name its files; move the project to a directory without one"
    )
    try:
        specs, skipped, required_skipped = resolve_extensions(
            context, applied.extensions, applied.extension_origins
        )
    except ConfigError:
        if problem:  # a source's path names the root: say what to move
            raise unnameable_root from None
        raise
    if problem and specs:
        raise unnameable_root
    import_check = project.torch_import_check
    torch_import_check = (
        project.torch_requirement == "none" if import_check == "auto" else bool(import_check)
    )
    in_tree = {
        spec.name: in_tree_path(root, layout, spec, origins.of("packages")) for spec in specs
    }
    version = resolve_version(root, pyproject, project, origins)
    write_version_file(root, pyproject, version)  # setuptools-scm's, before the files are listed
    files = package_files(
        root, layout.packages, layout.py_modules, layout.package_data,
        exclude=set(in_tree.values()),
    )
    check_module_collisions(specs, files)
    return ResolvedProject(
        root=root,
        project_table=pyproject.get("project", {}),
        extensions=specs,
        skipped=skipped,
        required_skipped=required_skipped,
        options=options,
        layout=layout,
        torch_requirement=project.torch_requirement,
        torch_import_check=torch_import_check,
        torch_import_check_auto=import_check == "auto",
        dependencies=None if project.dependencies is None else tuple(project.dependencies),
        local_version=project.local_version,
        variant=project.variant,
        max_wheel_size=None if project.max_wheel_size is None else parse_size(project.max_wheel_size),
        platform_tag=project.platform_tag,
        ops_check=project.ops_check,
        ops_samples=None if project.ops_samples is None else contained(
            root, project.ops_samples, origins.of("ops_samples"), "ops-samples"),
        stubs=project.stubs,
        cuda_enabled=cuda_on,
        sdist_include=tuple(project.sdist_include),
        sdist_exclude=tuple(project.sdist_exclude),
        version=version,
        in_tree=in_tree,
        files=tuple(files),
    )

"""Extension settings (after overrides) -> ExtensionSpec, or a reason the extension is skipped."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..abi import limited_api
from ..abi import stable_abi as stable
from ..core import flag_syntax
from ..core.ninja.syntax import shown, unnameable_character
from ..core.spec import BuildType, ExtensionSpec, Kind, first_duplicate, is_cuda_source
from ..errors import ConfigError
from .checks import split_list
from .conditions import CudaState, condition_failure
from .extension_model import CudaVariant, ExtensionSettings
from .model import ProjectSettings
from .overrides import Origins
from .parse import index_path, key_path
from .paths import directory, existing_file, expand_glob
from .resolved import Facts


@dataclass(frozen=True)
class ExtensionContext:
    root: Path
    build_dir: Path
    cuda: CudaState
    facts: Facts
    project: ProjectSettings
    project_origins: Origins
    build_type: BuildType


def check_static(extensions: list[ExtensionSettings], origins: list[Origins]) -> None:
    """Checks that do not depend on the machine: unique names (they select extensions in
    overrides, so disabled ones count too), `cuda` table vs with-cuda."""
    duplicate = first_duplicate([ext.name for ext in extensions])
    if duplicate is not None:
        first, second = duplicate
        raise ConfigError(
            f"extension name {extensions[second].name!r} is already used by {origins[first].base}",
            origins[second].of("name"),
        )
    for ext, where in zip(extensions, origins, strict=True):
        if ext.cuda is not None and ext.with_cuda is False:
            raise ConfigError(
                "a `cuda` table is not allowed on an extension with with-cuda = false",
                where.of("cuda"),
            )
        if ext.with_cuda is False and (ext.dlink or ext.dlink_libraries):
            field_name = "dlink" if ext.dlink else "dlink_libraries"
            raise ConfigError(
                "device linking needs CUDA, but with-cuda = false", where.of(field_name)
            )


def _variant(ext: ExtensionSettings, cuda_on: bool) -> CudaVariant | None:
    if ext.cuda is None:
        return None
    if ext.with_cuda is True or (ext.with_cuda == "auto" and cuda_on):
        return ext.cuda
    return None


def _entries(
    ext: ExtensionSettings,
    variant: CudaVariant | None,
    origins: Origins,
    name: str,
) -> list[tuple[str, str]]:
    """(value, key path) for a list field, with the `cuda` table's entries appended."""
    entries = [(value, origins.of(name, i)) for i, value in enumerate(getattr(ext, name))]
    if variant is not None:
        base = key_path(origins.of("cuda"), name.replace("_", "-"))
        entries += [(v, index_path(base, i)) for i, v in enumerate(getattr(variant, name))]
    return entries


def _sources(ctx: ExtensionContext, entries: list[tuple[str, str]]) -> dict[Path, str]:
    """Each matched file and the key of the glob that matched it first."""
    files: dict[Path, str] = {}
    real_files: set[Path] = set()
    for pattern, key in entries:
        for path in _source_glob(ctx, pattern, key):
            real = path.resolve()
            if real in real_files and path not in files:
                continue  # the same file through another directory link compiles once
            real_files.add(real)
            relative = str(path.relative_to(ctx.root))
            problem = unnameable_character(relative)
            if problem:
                raise ConfigError(
                    f"{pattern!r} matches {shown(relative)}, whose name contains {problem}: no"
                    " compiler command can name it; rename the file",
                    key,
                )
            files.setdefault(path, key)
    return files


def _source_glob(ctx: ExtensionContext, pattern: str, key: str) -> list[Path]:
    """The sources a glob matches outside the build directory; a glob that matches only
    files inside it blames the build directory, which was put among the sources."""
    try:
        return expand_glob(ctx.root, pattern, key, "source", skip_dir=ctx.build_dir)
    except ConfigError:
        try:
            inside = expand_glob(ctx.root, pattern, key, "source")
        except ConfigError:
            inside = []
        if inside:
            shown = inside[0].relative_to(ctx.root).as_posix()
            raise ConfigError(
                f"the build directory {ctx.build_dir} holds the sources {pattern!r} matches"
                f" ({shown!r}): build output and sources must not share a directory; choose"
                " another build-dir",
                ctx.project_origins.of("build_dir"),
            ) from None
        raise


def _macros(
    ext: ExtensionSettings, variant: CudaVariant | None
) -> tuple[tuple[str, str | None], ...]:
    merged = {**ext.define_macros, **(variant.define_macros if variant else {})}
    macros: list[tuple[str, str | None]] = []
    for name, value in merged.items():
        if value is True:
            macros.append((name, None))
        elif value is not False:
            macros.append((name, str(value)))
    return tuple(macros)


def _flags(ext: ExtensionSettings, variant: CudaVariant | None, name: str) -> tuple[str, ...]:
    return (*getattr(ext, name), *(getattr(variant, name) if variant else ()))


def _check_limited_api(
    macros: tuple[tuple[str, str | None], ...], cxx: tuple[str, ...], nvcc: tuple[str, ...],
    minimum: str, key: str,
) -> None:
    """A Py_LIMITED_API the user defines must be the one the wheel tag (``cp3X-abi3``) says, and
    none may undefine it (in any spelling :mod:`..core.flag_syntax` reads)."""
    read = [*flag_syntax.macros(cxx).named(limited_api.MACRO),
            *flag_syntax.macros(nvcc, nvcc=True).named(limited_api.MACRO)]
    needs = f"{minimum}-abi3 needs 0x{limited_api.macro_value(minimum):08X}"
    if any(macro.undefine for macro in read):
        raise ConfigError(
            f"the extension undefines Py_LIMITED_API, but {needs}; remove that flag or"
            " py-limited-api", key,
        )
    values = [value for name, value in macros if name == limited_api.MACRO]
    for value in values + [macro.value for macro in read]:
        if value is None or limited_api.target_of_macro(value) != minimum:
            raise ConfigError(
                f"the extension defines Py_LIMITED_API{'=' + value if value else ''}, but"
                f" {needs}; remove that define (it is set for you) or change py-limited-api",
                key,
            )


def _device_link(
    ext: ExtensionSettings, variant: CudaVariant | None, sources: tuple[Path, ...]
) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
    """dlink, dlink-libraries and extra-dlink-flags; none of them when CUDA is off (auto)."""
    if ext.with_cuda == "auto" and not any(map(is_cuda_source, sources)):
        return False, (), ()
    wanted = variant.dlink if variant is not None and variant.dlink is not None else ext.dlink
    libraries = _flags(ext, variant, "dlink_libraries")
    return wanted, libraries, _flags(ext, variant, "extra_dlink_flags")


DLINK_FIELDS = ("dlink", "dlink_libraries", "extra_dlink_flags")


def _dlink_key(variant: CudaVariant | None, origins: Origins, name: str) -> str:
    if variant is not None and (getattr(variant, name) or name == "dlink" and variant.dlink):
        return key_path(origins.of("cuda"), name.replace("_", "-"))
    return origins.of(name)


def build_spec(ctx: ExtensionContext, ext: ExtensionSettings, origins: Origins) -> ExtensionSpec:
    variant = _variant(ext, ctx.cuda.on)
    project = ctx.project

    def dirs(name: str, what: str) -> tuple[Path, ...]:
        return tuple(
            directory(ctx.root, value, key, what)
            for value, key in _entries(ext, variant, origins, name)
        )

    arch_list = split_list(ext.cuda_arch_list) or split_list(project.cuda_arch_list)
    arch_key = (
        origins.of("cuda_arch_list")
        if split_list(ext.cuda_arch_list)
        else ctx.project_origins.of("cuda_arch_list")
    )
    if ext.pch_header is not None:
        header = existing_file(ctx.root, ext.pch_header, origins.of("pch_header"), "pch-header")
    elif project.pch_header is not None:
        header = existing_file(
            ctx.root, project.pch_header, ctx.project_origins.of("pch_header"), "pch-header"
        )
    else:
        header = None
    stable_target, stable_key = _stable_abi(ctx, ext, origins)
    target = limited_api.DEFAULT if ext.py_limited_api is True else ext.py_limited_api or None
    if stable_target is not None and target is None:
        target = limited_api.DEFAULT  # the stable ABI is one abi3 wheel for every CPython too
    if target:
        _check_limited_api(_macros(ext, variant), _flags(ext, variant, "extra_cflags"),
                           _flags(ext, variant, "extra_cuda_cflags"), target,
                           origins.of("py_limited_api"))
    sources = _sources(ctx, _entries(ext, variant, origins, "sources"))
    dlink, dlink_libraries, extra_dlink_flags = _device_link(ext, variant, tuple(sources))
    return ExtensionSpec(
        name=ext.name,
        sources=tuple(sources),
        include_dirs=dirs("include_dirs", "include directory"),
        define_macros=_macros(ext, variant),
        extra_cflags=_flags(ext, variant, "extra_cflags"),
        extra_cuda_cflags=_flags(ext, variant, "extra_cuda_cflags"),
        extra_ldflags=_flags(ext, variant, "extra_ldflags"),
        libraries=_flags(ext, variant, "libraries"),
        library_dirs=dirs("library_dirs", "library directory"),
        runtime_library_dirs=tuple(ext.runtime_library_dirs),
        with_cuda=None if ext.with_cuda == "auto" else bool(ext.with_cuda),
        cuda_arch_list=tuple(arch_list) or None,
        py_limited_api=target,
        stable_abi=stable_target,
        kind=Kind(ext.kind),
        python_abi_suffix=ext.python_abi_suffix,
        openmp=ext.openmp,
        build_type=ctx.build_type,
        strip=project.strip if ext.strip is None else ext.strip,
        pch=project.pch if ext.pch is None else ext.pch,
        pch_header=header,
        unity=ext.unity is not False,
        dlink=dlink,
        dlink_libraries=dlink_libraries,
        extra_dlink_flags=extra_dlink_flags,
        keys=(*_spec_keys(ext, variant, origins, arch_key, sources), ("stable_abi", stable_key)),
    )


def _stable_abi(
    ctx: ExtensionContext, ext: ExtensionSettings, origins: Origins
) -> tuple[str | None, str]:
    """The extension's stable-ABI target (its own, else the project's) and that value's key;
    a target newer than the torch building it is refused here, before anything compiles."""
    if ext.stable_abi is not None:
        target, key = ext.stable_abi, origins.of("stable_abi")
    else:
        target, key = ctx.project.stable_abi, ctx.project_origins.of("stable_abi")
    target = stable.normalised(target) if target is not None else None
    if target is not None and ctx.facts.torch_version is not None:
        problem = stable.torch_problem(target, ctx.facts.torch_version)
        if problem:
            raise ConfigError(problem, key)
    return target, key


def _spec_keys(
    ext: ExtensionSettings,
    variant: CudaVariant | None,
    origins: Origins,
    arch_key: str,
    sources: dict[Path, str],
) -> tuple[tuple[str, str], ...]:
    """The TOML key of each spec field (the table's own, an override's or the `cuda` table's),
    of each source (its glob's) and of each C++ and nvcc flag, for the core's errors."""
    spec_fields = {f.name for f in dataclasses.fields(ExtensionSpec)}
    keys = {f.name: origins.of(f.name) for f in dataclasses.fields(ext) if f.name in spec_fields}
    keys.update((name, _dlink_key(variant, origins, name)) for name in DLINK_FIELDS)
    keys["cuda_arch_list"] = arch_key
    keys.update((f"sources[{i}]", key) for i, key in enumerate(sources.values()))
    for name in ("extra_cflags", "extra_cuda_cflags"):
        flags = _entries(ext, variant, origins, name)
        keys.update((f"{name}[{i}]", key) for i, (_, key) in enumerate(flags))
    return tuple(keys.items())


def resolve_extensions(
    ctx: ExtensionContext, extensions: list[ExtensionSettings], origins: list[Origins]
) -> tuple[tuple[ExtensionSpec, ...], tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The specs to build, the (name, reason) of those turned off or whose `if` fails, and
    the `optional` key of each skipped extension that is not optional."""
    check_static(extensions, origins)
    specs: list[ExtensionSpec] = []
    skipped: list[tuple[str, str]] = []
    required: list[str] = []
    for ext, where in zip(extensions, origins, strict=True):
        reason = skip_reason(ctx, ext, where)
        if reason is not None:
            skipped.append((ext.name, reason))
            if not ext.optional:
                required.append(where.of("optional"))
            continue
        specs.append(build_spec(ctx, ext, where))
    return tuple(specs), tuple(skipped), tuple(required)


def skip_reason(ctx: ExtensionContext, ext: ExtensionSettings, origins: Origins) -> str | None:
    """Why the extension is not built here, naming the key that says so; None: it is built."""
    if not ext.enabled:
        return f"{origins.of('enabled')} = false"
    failure = condition_failure(ext.if_, ctx.facts, ctx.cuda) if ext.if_ else None
    return f"{origins.of('if_')}.{failure}" if failure is not None else None

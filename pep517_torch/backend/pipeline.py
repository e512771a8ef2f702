"""The glue between the layers: config → compile core → distribution, for the hooks and the CLI.

Each function sequences one user-visible operation (metadata, wheel, editable wheel, sdist)
from the stages they share (``stages.py``: load, compile, the build directory's lock); what
an editable wheel holds is ``editable_install.py``'s.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .. import config
from ..atomic import writing
from ..core.naming import artifact_name
from ..config import ConfigSettings
from ..distribution import tags
from ..distribution.reproducible import source_date_epoch
from . import noop_cache
from .editable_install import add_editable_contents
from .noop_record import Recording, recording
from .op_listing import BuiltOps, list_build_ops, listing_child, start_early
from ..shipped_runtime.user_line import log, say, user_line
from .stages import (
    Loaded,
    build_dir_lock,
    compile_extensions,
    load,
    skipped_lines,
    source_metadata,
)

if TYPE_CHECKING:
    from ..core.build import BuildResult
    from ..distribution.platform_decision import PlatformTag
    from ..core.spec import BuildOptions
    from ..distribution.wheel import Budget
    from ..distribution.wheel_variant import Variant


def prepare_metadata(root: Path, metadata_directory: Path, config_settings: ConfigSettings) -> str:
    """The ``.dist-info`` folder; recorded for a later replay (``noop_cache.py``)."""
    with recording(root, "metadata", config_settings) as record:
        loaded = load(root, config_settings, record and record.env, for_build=False)
        name = loaded.metadata.write_dist_info(metadata_directory)
        if record is not None:
            record.metadata(loaded, metadata_directory, name)
    return name


def build_wheel(root: Path, out_dir: Path, config_settings: ConfigSettings, *, editable: bool = False) -> str:
    """A wheel (or an editable one); a wheel is recorded for a later replay (``noop_cache.py``)."""
    with recording(root, "wheel", config_settings, enabled=not editable) as record:
        return _build_wheel(root, out_dir, config_settings, editable, record)


def _build_wheel(
    root: Path, out_dir: Path, config_settings: ConfigSettings, editable: bool, record: Recording | None
) -> str:
    from ..distribution.wheel import WheelWriter

    started = time.perf_counter()
    loaded = load(root, config_settings, record and record.env)
    project, meta = loaded.project, loaded.metadata
    in_tree, files = project.in_tree, project.files
    # Held until the artifacts are packed: no concurrent build relinks them meanwhile.
    with build_dir_lock(loaded, editable):
        # the listing child, started when ninja gets to work (none started is none to end)
        with listing_child(loaded) as child:
            on_work = start_early(loaded, child, editable=editable)
            missed = None if editable else noop_cache.take_missed("wheel", root)
            result = compile_extensions(loaded, editable=editable, on_work=on_work, missed=missed)
            ops = list_build_ops(loaded, result, editable=editable, early=child)
        artifacts = result.artifacts if result else {}
        notes = [*skipped_lines(project), *(user_line(n) for n in (result.plan.notes if result else ())),
                 *(ops.notes if ops else ())]
        with writing(out_dir):
            out_dir.mkdir(parents=True, exist_ok=True)
        platform = None if editable else _platform_tag(project, result)
        tag = _wheel_tag(project, platform and platform.tag)
        epoch = source_date_epoch(loaded.env)
        variant = None if editable else _variant(loaded, result)
        budget = None if editable else _budget(loaded, result)
        with WheelWriter(out_dir, meta.name, meta.version, tag, source_date_epoch=epoch,
                         variant=variant, max_size=budget) as wheel:
            if editable:
                add_editable_contents(wheel, loaded, result, in_tree, config_settings)
            else:
                for arcname, path in files:
                    wheel.add_file(arcname, path)
                for spec in project.extensions:  # each carries its own import check, if any
                    wheel.add_file(artifact_name(spec), artifacts[spec.name])
                for arcname, data in (ops.stub_files.items() if ops else ()):
                    wheel.add_bytes(arcname, data)
                _record_build_torch(loaded, result, ops)
            wheel.finish(meta)
        if record is not None:
            record.wheel(loaded, wheel.path, artifacts.values(), notes, platform and platform.note)
    if result is not None:  # the wheel is written: the PCH its TUs did without, for the next
        _leave_pch_behind(result, project.options)
    ninja = result.run.seconds if result else 0.0
    overhead = time.perf_counter() - started - ninja
    listing = (f", of which listing the operators {ops.seconds:.2f} s"
               if ops is not None and ops.seconds is not None else "")
    log(user_line(f"wrote {wheel.path} (ninja {ninja:.2f} s, pep517_torch {overhead:.2f} s{listing})"))
    return wheel.filename


def predicted_wheel_name(root: Path, config_settings: ConfigSettings) -> str | None:
    """The name :func:`build_wheel` would give its wheel, found without compiling, with ``*``
    for the platform tag (decided from the built binaries); None for a wheel variant, whose
    label is read from them too."""
    from ..distribution.wheel import wheel_filename

    loaded = load(root, config_settings)
    if loaded.project.variant == "torch":
        return None
    tag = _wheel_tag(loaded.project, "*")
    return wheel_filename(loaded.metadata.name, loaded.metadata.version, tag)


def _wheel_tag(project: config.ResolvedProject, platform: str | None) -> str:
    return tags.extensions_wheel_tag([spec.py_limited_api for spec in project.extensions], platform)


def _variant(loaded: Loaded, result: BuildResult | None) -> Variant | None:
    """variant = "torch": the wheel variant this build makes (None: a plain wheel)."""
    from .variant_build import NO_VARIANT_NOTE, build_variant

    variant = build_variant(loaded, result)
    if variant is not None:
        log(user_line(f"wheel variant {variant.label}: {', '.join(variant.lines())}"))
    elif loaded.project.variant == "torch" and result is not None:
        log(user_line(NO_VARIANT_NOTE))
    return variant


def _budget(loaded: Loaded, result: BuildResult | None) -> Budget | None:
    """max-wheel-size, with what each CUDA library holds by arch for its one line."""
    from ..distribution.wheel import Budget
    from .variant_build import device_code_notes

    limit = loaded.project.max_wheel_size
    if limit is None:
        return None
    return Budget(limit, notes=device_code_notes(result))


def _leave_pch_behind(result: BuildResult, options: BuildOptions) -> None:
    from ..core.pch import background as pch_background

    note = pch_background.start(result.plan, options)
    if note is not None:
        log(user_line(note))


def _record_build_torch(loaded: Loaded, result: BuildResult | None, ops: BuiltOps | None) -> None:
    """A wheel with binaries names the torch they were built against and the CUDA major of the
    torch they need, from what was built (``index`` sorts wheels into find-links pages by them),
    and the operators they register (``ops``)."""
    from ..distribution.index import BUILD_RECORD, build_record

    if loaded.project.extensions and loaded.torch is not None:
        needed = result.plan.cuda_needed if result else None
        record = build_record(loaded.torch.version, loaded.torch.cuda, needed,
                              ops=ops.table.as_json() if ops else None)
        loaded.metadata.extra_dist_info[BUILD_RECORD] = record


def _platform_tag(project: config.ResolvedProject, result: BuildResult | None) -> PlatformTag | None:
    """The platform tag of a wheel holding ``result``'s artifacts and the project's shipped
    files (platform-tag: manylinux by their ELF on Linux); None: the interpreter's."""
    import sys

    from ..distribution import platform_decision

    if not sys.platform.startswith("linux") or (result is None and project.platform_tag == "auto"):
        return None
    artifacts = [
        platform_decision.Artifact(result.artifacts[spec.name], spec.name,
                                   result.plan.objects.get(spec.name, ()))
        for spec in project.extensions
    ] if result else []
    decision = platform_decision.decide(
        project.platform_tag, artifacts, project.files, tags.platform_tag(),
        project.options.build_dir if result else None,
    )
    if decision is not None:
        log(user_line(f"platform tag {decision.note}"))
    return decision


def build_sdist(root: Path, out_dir: Path, config_settings: ConfigSettings) -> str:
    from ..distribution.sdist import sdist_files, write_sdist

    project, meta = source_metadata(root, config_settings, os.environ)
    files = sdist_files(
        project.root,
        include=meta.referenced_files,
        include_globs=project.sdist_include,
        exclude_globs=project.sdist_exclude,
        build_dir=project.options.build_dir,
        out_dir=out_dir,
        artifacts=project.in_tree.values(),
        warn=lambda message: say(f"warning: {message}"),
    )
    with writing(out_dir):
        out_dir.mkdir(parents=True, exist_ok=True)
    path = write_sdist(out_dir, project.root, meta, files, source_date_epoch=source_date_epoch())
    return path.name

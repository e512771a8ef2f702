"""Which torch requirement a build may write (PEP 621), when the import check stands in for
the pin it cannot write, and the local label naming its torch.

PEP 621: a backend fills in a field only when ``project.dynamic`` lists it. So the torch pin
goes into ``Requires-Dist`` only with ``dynamic = ["dependencies"]``; the project's own
requirements then live in ``[tool.torch-ext] dependencies``. A static ``dependencies`` is
written as it stands: it must carry a torch requirement the build torch satisfies (the import
check then guards the exact build), or the project says ``torch-requirement = "none"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import ConfigError
from .metadata import TorchPinMode, merge_requirements, torch_pin

TOOL_KEY = "tool.torch-ext.dependencies"
WAYS_OUT = (
    "list it in project.dynamic (dynamic = [\"dependencies\"], with the list moved to"
    ' [tool.torch-ext] dependencies) for the torch pin, or set torch-requirement = "none"'
)


@dataclass(frozen=True)
class DependencyPlan:
    """What ``Requires-Dist`` becomes."""

    dependencies: tuple[Requirement, ...] | None  # None: project.dependencies, as written
    pin_from_build: bool  # it names the build torch: an sdist marks Requires-Dist dynamic
    static_torch: bool  # a static torch requirement kept as written: the import check guards


def plan_dependencies(
    project_table: Mapping[str, object],
    tool_dependencies: Sequence[str] | None,
    mode: TorchPinMode,
    torch_version: str | None,
    has_extensions: bool,
    pin: Requirement | None = None,
) -> DependencyPlan:
    """The dependencies of a build against ``torch_version`` (None: not known, as for an sdist);
    ``pin``: the torch requirement the glue computed (a stable-ABI project's ``torch>=2.10``),
    instead of ``torch_pin(torch_version, mode)``.

    A stable-ABI project (issue 20) writes ``torch>=2.10`` statically: it takes the static
    branch (``_static_torch``), which accepts any requirement the build torch satisfies.
    """
    dynamic = project_table.get("dynamic") or []
    is_dynamic = isinstance(dynamic, list) and "dependencies" in dynamic
    static = project_table.get("dependencies")
    if tool_dependencies is not None and not is_dynamic:
        if static is not None:
            message = ("is set while project.dependencies is static: keep one list (move it"
                       ' here and add "dependencies" to project.dynamic)')
        else:
            message = 'needs "dependencies" in project.dynamic (PEP 621)'
        raise ConfigError(message, TOOL_KEY)
    pins = has_extensions and mode != "none"
    if is_dynamic:
        own = [_requirement(text, TOOL_KEY) for text in tool_dependencies or ()]
        if pin is None and pins and torch_version:
            pin = torch_pin(torch_version, mode)
        pin = pin if pins else None
        return DependencyPlan(tuple(merge_requirements(own, [pin] if pin else [])), pins, False)
    if not pins:
        return DependencyPlan(None, False, False)
    return DependencyPlan(None, False, _static_torch(static, torch_version))


def _static_torch(static: object, torch_version: str | None) -> bool:
    """A static list with a torch requirement the build torch satisfies is kept (True); no
    torch requirement, or one this torch fails, is the error naming both ways out."""
    key = "project.dependencies"
    texts = static if isinstance(static, list) else []
    torch = [
        requirement
        for requirement in (_requirement(str(text), "project.dependencies") for text in texts)
        if canonicalize_name(requirement.name) == "torch"
        and (requirement.marker is None or requirement.marker.evaluate())
    ]
    if not torch:
        what = "is static" if static is not None else "is absent and not in project.dynamic"
        raise ConfigError(f"{what}, so pep517_torch may not add the torch pin (PEP 621):"
                          f" {WAYS_OUT}", key)
    for requirement in torch:
        if torch_version is not None and requirement.url is None and not (
            requirement.specifier.contains(torch_version, prereleases=True)
        ):
            raise ConfigError(
                f"requires {requirement}, but this build's torch is {torch_version}: build"
                f" against a torch it allows, or {WAYS_OUT}", "project.dependencies"
            )
    return True


def _requirement(text: str, key: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as error:
        raise ConfigError(f"{text!r} is not a PEP 508 requirement: {error}", key) from None


def local_label(torch_version: str, torch_cuda: str | None) -> str:
    """``pt213cpu`` for torch 2.13.0+cpu, ``pt214cu130`` for 2.14.1 built with CUDA 13.0 (the
    pyg-lib / torch-scatter spelling; the label is the torch's, not the local part of its
    version, which a source build of torch lacks)."""
    parsed = Version(torch_version)
    variant = f"cu{torch_cuda.replace('.', '')}" if torch_cuda else "cpu"
    return f"pt{parsed.major}{parsed.minor}{variant}"


def variant_cuda(torch_cuda: str | None, binaries_cuda: str | None) -> str | None:
    """The CUDA a wheel's variant names (its local label, its index page): its torch's
    (``13.0``), or, for CUDA kernels built beside a CPU torch, the CUDA major its binaries
    need (``13``): such a wheel is no CPU wheel."""
    return torch_cuda or binaries_cuda


_TORCH_LABEL = re.compile(r"pt\d+(?:cpu|cu\d+)")  # what local_label writes


def torch_label(version: Version) -> str | None:
    """The torch label a version's local part holds (``pt213cpu`` of ``1.0+abc.pt213cpu``)."""
    parts = version.local.split(".") if version.local else []
    return next((part for part in parts if _TORCH_LABEL.fullmatch(part)), None)


def with_local_label(version: str, label: str) -> str:
    """``1.0.0`` -> ``1.0.0+pt213cpu``; ``1.0.0+abc`` -> ``1.0.0+abc.pt213cpu``; a version
    that already holds the label (``1.0.0+pt213cpu``, a CI that stamped it) stays as it is,
    and one that holds another torch's label is refused: the wheel would name two torches."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise ConfigError(f"{version!r} is not a valid PEP 440 version", "project.version") from None
    parts = parsed.local.split(".") if parsed.local else []
    if label in parts:
        return str(parsed)
    other = torch_label(parsed)
    if other is not None:
        raise ConfigError(
            f"{version!r} already names the torch variant {other}, but this build's torch is"
            f" {label} (local-version = \"torch\" adds it): drop {other} from the version",
            "project.version",
        )
    return str(Version(f"{parsed.public}+{'.'.join([*parts, label])}"))

"""``variant = "torch"``: the wheel variant a build makes, derived from what it built.

The properties come from the build, never from the settings: the torch the extensions were
compiled against (``abi_dependency :: torch :: 2.14``; none when every extension uses the
stable ABI, which loads under every torch from its target on), and, for binaries holding
device code, the CUDA release that compiled it (a cubin's ``.note.nv.tkinfo``; the nvcc the
build ran where every cubin is compressed) and the archs their fatbins hold
(``nvidia :: sm_arch :: 90_real`` per cubin, ``90_virtual`` per PTX). A stable-ABI build without
device code is one plain wheel for every variant: no label.

The label is a function of the properties (one label, one property set, as PEP 825 asks):
``pt214cu130``, ``pt213cpu`` (no device code), ``cu130`` (stable ABI).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..distribution.wheel_variant import ABI_DEPENDENCY, NVIDIA, Property, Variant

if TYPE_CHECKING:
    from ..abi.fatbin import DeviceCode
    from ..core.build import BuildResult
    from .stages import Loaded

NO_VARIANT_NOTE = ('variant = "torch": every extension uses the stable ABI and holds no device'
                   " code, so this is one plain wheel for every torch (no variant label)")


def build_variant(loaded: Loaded, result: BuildResult | None) -> Variant | None:
    """The variant of the wheel ``result`` goes into (None: a plain wheel)."""
    project = loaded.project
    if project.variant != "torch" or result is None or loaded.torch is None:
        return None
    properties: list[Property] = []
    label = ""
    if not all(spec.stable_abi for spec in project.extensions):
        release = ".".join(loaded.torch.version.split("+")[0].split(".")[:2])
        properties.append(Property(ABI_DEPENDENCY, "torch", (release,)))
        label = "pt" + release.replace(".", "")
    code = [found for found in result.device_code.values() if found]
    if code:
        cuda = cuda_release(code, result.plan.cuda_version)
        properties.append(Property(NVIDIA, "cuda_version_lower_bound", (cuda,)))
        properties.append(Property(NVIDIA, "sm_arch", sm_arch_values(code)))
        label += "cu" + cuda.replace(".", "")
    elif label:
        label += "cpu"
    if not properties:
        return None
    return Variant(label, tuple(properties))


def cuda_release(code: list[DeviceCode], built_with: str | None) -> str:
    """``13.0``: the newest toolkit release a cubin names, else the nvcc the build ran."""
    found = max((c.release for c in code if c.release), default=None)
    if found is not None:
        return f"{found[0]}.{found[1]}"
    assert built_with is not None, "device code without an nvcc"
    return built_with


def sm_arch_values(code: list[DeviceCode]) -> tuple[str, ...]:
    """``80_real``, ``90_real``, ``90_virtual``: every arch a fatbin holds, cubins and PTX."""
    real = {arch for c in code for arch in c.cubin_archs}
    virtual = {arch for c in code for arch in c.ptx_archs}
    values = [f"{arch}_real" for arch in real] + [f"{arch}_virtual" for arch in virtual]
    return tuple(sorted(values, key=_arch_order))


def _arch_order(value: str) -> tuple[int, str]:
    arch = value.split("_")[0]
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits or 0), value


def device_code_notes(result: BuildResult | None) -> dict[Path, str]:
    """Artifact path -> ``sm_80 1.2 MiB, ...`` (for max-wheel-size's line)."""
    if result is None:
        return {}
    return {result.artifacts[name]: found.describe()
            for name, found in result.device_code.items() if found}

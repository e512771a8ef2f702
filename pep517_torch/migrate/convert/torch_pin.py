"""What migrate decides about the torch requirement of the wheels (`torch-requirement`), and why."""

from __future__ import annotations

import json
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ...config.model import ProjectSettings
from ...config.parse import fields_by_key
from ...errors import Pep517TorchError
from .plan import Plan

KEY = "torch-requirement"


def _torch_lines(dependencies: list[Any]) -> list[Requirement]:
    found = []
    for line in dependencies:
        try:
            requirement = Requirement(str(line))
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == "torch":
            found.append(requirement)
    return found


def decide_torch_requirement(plan: Plan, carried: list[str] | None = None) -> None:
    """Say in the header which torch requirement the wheels will carry here, and why.

    ``carried``: the torch lines of Requires-Dist as a build here computes them (the check's
    load of the tables); None where that load failed: then computed from the pin alone."""
    from ...core.toolchain.tools import find_torch
    from ...distribution.metadata import merge_requirements, torch_pin

    default = fields_by_key(ProjectSettings)[KEY].default
    mode = plan.base.tool.get(KEY, default)
    setting = f"{KEY} = {json.dumps(mode)}{' (the default)' if mode == default else ''}"
    try:
        torch = find_torch()
        pin = torch_pin(torch.version, mode)
    except Pep517TorchError as exc:
        plan.decisions.append(f"torch pin: {setting}; the pin cannot be computed here ({exc})")
        return
    own = _torch_lines([*plan.base.project.get("dependencies", []),
                        *plan.base.tool.get("dependencies", [])])
    if carried is None:
        carried = [str(r) for r in merge_requirements(own, [pin] if pin else [])
                   if canonicalize_name(r.name) == "torch"]
    requires = ", ".join(carried) or "no torch"
    text = f"torch pin: {setting}: built here with torch {torch.version}, the wheel requires" \
        f" {requires}"
    if pin is not None:
        text += "; an extension built against one torch release fails to load under another" \
            " (undefined symbols), so each wheel names the torch it was built with"
    if own:
        listed = ", ".join(map(str, own))
        text += f". The project's own {listed} is {'folded in' if pin is not None else 'kept'}"
        public = torch.version.split("+")[0]
        if any(not r.specifier.contains(public, prereleases=True) for r in own):
            plan.fails_here.append(f"the project requires {listed}, which torch {torch.version}"
                                   " here does not satisfy: the wheel built here cannot be"
                                   " installed")
    plan.decisions.append(f"{text} (set {KEY} = \"exact\" or \"none\" to change it)")

"""The written tables, checked against every run of the setup.py that migrate made.

For each run (its variables and CUDA mode) the tables are resolved by the config layer as a
build with that environment would resolve them, and compared with what that run of the
setup.py asked for: the same extensions, each with the same sources, flags, macros, libraries
and options. Overrides are derived one variable at a time; this says where that falls short.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import Facts, resolve_project
from ..config.pyproject import tomllib
from ..core.spec import ExtensionSpec
from ..errors import Pep517TorchError
from .convert.plan import Observed, Plan
from .convert.render import render_plan

BUILD_DIR_VARIABLES = {"wheel_tag": "verify", "python_tag": "verify", "torch_version": "verify"}
FAKE_TORCH_CUDA = "12.8"


def _facts(env: Mapping[str, str | None], cuda: bool | None, here: Facts) -> Facts:
    merged = dict(here.env)
    for name, value in env.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    if cuda is None:
        return dataclasses.replace(here, env=merged)
    return dataclasses.replace(here, env=merged, torch_cuda=FAKE_TORCH_CUDA if cuda else None,
                               nvcc_available=cuda, nvcc_lookup=None)


def _specs(root: Path, document: Mapping[str, Any], facts: Facts) -> dict[str, Any] | str:
    """Extension name -> its spec (sources in order of name), or why resolving failed."""
    try:
        project = resolve_project(root, document, {}, facts, BUILD_DIR_VARIABLES)
    except Pep517TorchError as exc:
        return str(exc)
    return {spec.name: _comparable(spec) for spec in project.extensions}


def _comparable(spec: ExtensionSpec) -> ExtensionSpec:
    # A `cuda` table appends after the overrides: the order of sources, not the set, may differ.
    return dataclasses.replace(spec, sources=tuple(sorted(spec.sources)))


def _difference(ours: dict[str, Any] | str, theirs: dict[str, Any] | str,
                skipped: frozenset[str]) -> str | None:
    if isinstance(ours, str) or isinstance(theirs, str):
        return None if ours == theirs else f"{ours if isinstance(ours, str) else theirs}"
    theirs = {name: spec for name, spec in theirs.items() if name in ours or name not in skipped}
    if set(ours) != set(theirs):
        extra, missing = sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))
        parts = [f"build {', '.join(extra)} too"] if extra else []
        parts += [f"leave out {', '.join(missing)}"] if missing else []
        return "the tables " + " and ".join(parts)
    for name, spec in ours.items():
        fields = [f.name for f in dataclasses.fields(spec) if f.compare  # not `keys`
                  and getattr(spec, f.name) != getattr(theirs[name], f.name)]
        if fields:
            return f"{name}: the tables give another {', '.join(fields)}"
    return None


def _describe(observed: Observed) -> str:
    parts = [f"${k}={'unset' if v is None else repr(v)}" for k, v in observed.env.items()]
    if observed.cuda is not None:
        parts.append(f"CUDA {'on' if observed.cuda else 'off'}")
    return ", ".join(parts) or "this environment"


def disagreements(text: str, root: Path, observed: list[Observed], here: Facts,
                  skipped: frozenset[str] = frozenset()) -> list[str]:
    """One line per run whose build the tables in ``text`` do not reproduce; ``skipped``
    extensions may be left out on purpose (they need CUDA where setup.py did not ask)."""
    document = tomllib.loads(text)
    found: list[str] = []
    for run in observed:
        facts = _facts(run.env, run.cuda, here)
        alone = tomllib.loads(render_plan(Plan(base=dataclasses.replace(run.converted))))
        difference = _difference(_specs(root, document, facts), _specs(root, alone, facts),
                                 skipped)
        if difference is not None:
            found.append(f"with {_describe(run)}, setup.py builds otherwise: {difference}")
    return found


def facts_here() -> Facts:
    from ..backend.discovery import machine_facts

    return machine_facts(os.environ)

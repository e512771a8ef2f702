"""After linking a stable-ABI artifact: does it need anything of torch's C++ API?

An artifact built for the LibTorch stable ABI may call the C shim (``aoti_torch_*``,
``torch_*``: plain C names) and inline code of ``torch/headeronly`` and ``torch/csrc/stable``
(hidden, never imported). An undefined ``at::``, ``c10::``, ``torch::`` or ``caffe2::`` symbol
binds to one torch release's C++ ABI, which the next one may change: such an artifact loads under
the torch it was built with and fails under another, so the build fails here, naming the
symbol and the object file (and source) that needs it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...abi import elf, stable_abi
from ...errors import BuildError, ConfigError
from .. import flag_syntax, graph, naming
from ..spec import ExtensionSpec

TORCH_NAMESPACES = frozenset({"at", "c10", "torch", "caffe2"})
STABLE_NAMESPACES = frozenset({"stable", "headeronly"})  # torch::stable, torch::headeronly
# _Z, an optional special name (vtable TV, typeinfo TI and its name TS, VTT TT, guard variable
# GV), N, cv/ref qualifiers, then the first source name <length><identifier>.
_NESTED = re.compile(r"_Z(?:T[VITS]|GV)?N[rVKRO]*(\d+)")


def _names(mangled: str) -> tuple[str, str] | None:
    """The first two namespace names of a nested Itanium-mangled name, or None."""
    match = _NESTED.match(mangled)
    if match is None:
        return None
    length, start = int(match.group(1)), match.end()
    first = mangled[start:start + length]
    rest = mangled[start + length:]
    second = re.match(r"(\d+)", rest)
    after = rest[len(second.group(1)):len(second.group(1)) + int(second.group(1))] if second else ""
    return first, after


def is_torch_cxx(mangled: str) -> bool:
    """Whether ``mangled`` is a symbol of torch's C++ API outside the stable parts."""
    names = _names(mangled)
    if names is None or names[0] not in TORCH_NAMESPACES:
        return False
    return not (names[0] == "torch" and names[1] in STABLE_NAMESPACES)


@dataclass(frozen=True)
class StableArtifact:
    """A stable-ABI artifact to audit after its link."""

    name: str  # the extension
    target: str  # its stable-ABI target, "2.10"
    artifact: Path
    objects: tuple[tuple[Path, str], ...]  # each object file and the source it compiles (shown)


def check_targets(
    specs: Sequence[ExtensionSpec], torch_version: str, env: Mapping[str, str] | None = None,
    compiler_command: Sequence[str] = (),
) -> None:
    """Before anything compiles: no spec targets a stable ABI newer than the building torch, and
    none has TORCH_TARGET_VERSION changed behind its back by what the compilers read besides its
    flags (the spec checked those): arguments in CXX or CC, nvcc's NVCC_*_FLAGS."""
    for spec in specs:
        problem = spec.stable_abi and stable_abi.torch_problem(spec.stable_abi, torch_version)
        if problem:
            raise ConfigError(problem, spec.key_of("stable_abi"))
    stable = [spec for spec in specs if spec.stable_abi is not None]
    if not stable:
        return
    sources: list[tuple[str, list[str], bool]] = [("CXX", list(compiler_command[1:]), False)]
    if any(spec.uses_cuda for spec in stable):
        for variable in ("CC", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"):
            try:
                words = shlex.split((env or {}).get(variable, ""))
            except ValueError:
                words = []  # CC is checked where it is used; nvcc reads the others itself
            sources.append((variable, words[1:] if variable == "CC" else words, variable != "CC"))
    for variable, words, nvcc in sources:
        read = flag_syntax.macros(words, nvcc=nvcc)
        changed = read.named(stable_abi.MACRO)
        if changed or read.option_files:
            what = "reads flags from a file" if not changed else (
                "undefines" if changed[0].undefine else "defines") + f" {stable_abi.MACRO}"
            raise ConfigError(
                f"{variable} {what}, which a stable-ABI build sets itself: remove that from"
                f" {variable}", variable,
            )


def objects(
    plans: Sequence[graph.ExtensionPlan], build_dir: Path, source_root: Path | None
) -> dict[str, tuple[tuple[Path, str], ...]]:
    """Each extension's object files with the source each compiles, as messages show it."""
    out = {}
    for plan in plans:
        base = source_root or naming.display_base(plan.spec, None)
        out[plan.spec.name] = tuple(
            (build_dir / unit.object, unit.shown(base)) for unit in plan.units
        )
    return out


def artifacts(
    plans: Sequence[graph.ExtensionPlan], build_dir: Path,
    objects: dict[str, tuple[tuple[Path, str], ...]],
) -> tuple[StableArtifact, ...]:
    """The stable-ABI artifacts of ``plans``, to audit after each run."""
    return tuple(
        StableArtifact(plan.spec.name, plan.spec.stable_abi, (build_dir / plan.output).resolve(),
                       objects[plan.spec.name])
        for plan in plans if plan.spec.stable_abi is not None
    )


def audit_all(artifacts: Sequence[StableArtifact]) -> None:
    for entry in artifacts:
        if entry.artifact.exists():
            audit(entry.name, entry.target, entry.artifact, entry.objects)


def audit(
    name: str,
    target: str,
    artifact: Path,
    objects: Sequence[tuple[Path, str]],
) -> None:
    """Fail when ``artifact`` (extension ``name``, stable ABI ``target``) needs torch's C++ API;
    ``objects`` are its object files with the source each was compiled from (as shown)."""
    info = elf.read_dynamic(artifact, weak=True)  # an import check weakens torch's symbols
    offending = [needed.name for needed in info.undefined if is_torch_cxx(needed.name)]
    if not offending:
        return
    symbol = offending[0]
    users = elf.users(symbol, [path for path, _ in objects])
    shown = dict(objects)
    where = f"{shown[users[0]]} ({users[0].name})" if users else artifact.name
    more = f" and {len(offending) - 1} more such symbol{'s' * (len(offending) > 2)}" if len(offending) > 1 else ""
    artifact.unlink(missing_ok=True)  # nothing imports it; the next build links and audits again
    raise BuildError(
        f"extension {name!r} targets the stable ABI {target}, but {where} needs"
        f" {elf.demangle(symbol)}{more} from torch's C++ API, which changes between torch"
        " releases: use torch/csrc/stable and torch/headeronly only (or drop stable-abi)"
    )


TORCH_STABLE_ERROR = "should not be included when either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION"


def non_stable_include(error: BuildError) -> BuildError | None:
    """A failed stable-ABI compile that stopped on torch's own ``#error`` (a header outside the
    stable ABI): the same error, ending on that ``#error`` line, after the includes that led
    there from the user's file; None for any other failure."""
    lines = error.output.splitlines()
    index = next((i for i, line in enumerate(lines) if TORCH_STABLE_ERROR in line
                  and not line.startswith((" ", "\t"))), None)
    if index is None:
        return None
    chain: list[str] = []
    for line in reversed(lines[:index]):
        if not line.lstrip().startswith(("In file included from", "from ")):
            break
        chain.insert(0, line.strip())
    head = str(error).split(":\n", 1)[0]
    message = (
        f"{head}: a header outside torch's stable ABI is included (stable-abi builds may use"
        " torch/csrc/stable and torch/headeronly only):\n" + "\n".join([*chain, lines[index]])
    )
    return BuildError(message, output=error.output, first_error=lines[index])

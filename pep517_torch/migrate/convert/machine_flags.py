"""GPU architecture flags a setup.py derives from the machine it runs on.

A setup.py that computes ``-gencode`` flags from the local GPU
(``torch.cuda.get_device_capability()``, ``nvidia-smi``, a fixed fallback without one), or from
``$TORCH_CUDA_ARCH_LIST``, would have its flags frozen for the machine migrate ran on: a wheel
without code for the GPUs it meets, whose build ignores ``TORCH_CUDA_ARCH_LIST``. The setup.py
runs again with two GPUs of migrate's choosing and without one (:mod:`..intercept.gpu_probes`), and with
an arch list of its own; an extension whose arch flags change with them loses them all, so
pep517_torch's arch-list policy chooses (``cuda-arch-list``, ``TORCH_CUDA_ARCH_LIST`` at build
time, else torch's own list: docs/cuda.md), and a note names what setup.py chose.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...core.cuda.arch_flags import arch_options, archs_named_by
from .tables import CUDA_SUFFIXES, Converted
from ..intercept.gpu_probes import ABSENT, BY_CUDA, OTHER, REFERENCE, Gpu, chosen, describe
from ..intercept.record import SetupRun
from .settings_keys import backend_variables

ARCH_KEYS = ("extra-cuda-cflags", "extra-cflags")
ARCH_VARIABLE = "TORCH_CUDA_ARCH_LIST"
PROBE_ARCH_LIST = "7.2;8.7"  # Jetson architectures: in no published project's fixed list
PROBE_ARCHS = ("72", "87")
POLICY = ("left out, so pep517_torch's arch-list policy chooses (cuda-arch-list, or"
          " TORCH_CUDA_ARCH_LIST at build time; without either torch's own arch list:"
          " docs/cuda.md)")
Outcome = Converted | str
BACKEND_VARIABLES = backend_variables()  # read by pep517_torch itself: never a setup.py's list
Attempt = Callable[..., Outcome]  # (env=..., cuda=..., gpu=...) -> a conversion, or why not


@dataclass
class MachineFlags:
    """What follows the machine, and what the header and the notes say about it."""

    extensions: dict[str, str] = field(default_factory=dict)  # name -> the note
    arch_list: bool = False  # setup.py's $TORCH_CUDA_ARCH_LIST write follows it too
    # extension -> the arch list setup.py builds when a variable of its own that chooses the
    # archs is unset (its default, kept as the extension's cuda-arch-list)
    arch_lists: dict[str, str] = field(default_factory=dict)
    environment: list[str] = field(default_factory=list)  # header lines
    handled: set[str] = field(default_factory=set)  # variables said here, not varied again

    def strip(self, converted: Converted) -> Converted:
        """``converted`` without the flags (and the arch list) that follow the machine."""
        for extension in converted.extensions:
            if extension["name"] not in self.extensions:
                continue
            for key in ARCH_KEYS:
                if key in extension:
                    extension[key] = without_arch_flags(extension[key])
                    if not extension[key]:
                        del extension[key]
            if extension["name"] in self.arch_lists:
                extension["cuda-arch-list"] = self.arch_lists[extension["name"]]
        if self.arch_list:
            converted.tool.pop("cuda-arch-list", None)
        return converted


def without_arch_flags(flags: list[str]) -> list[str]:
    """``flags`` less every option that chooses GPU architectures (and its separate value)."""
    dropped: set[int] = set()
    for index, _ in arch_options(flags):
        dropped.add(index)
        if "=" not in flags[index]:
            dropped.add(index + 1)
    return [flag for index, flag in enumerate(flags) if index not in dropped]


def _arch_flags(converted: Converted, name: str) -> tuple[str, ...]:
    extension = converted.extension(name) or {}
    return tuple(flag for key in ARCH_KEYS for _, flag in arch_options(extension.get(key, [])))


def _with_cuda(converted: Converted, name: str) -> bool:
    """Whether the run built extension ``name`` with nvcc (CUDA sources or nvcc flags)."""
    extension = converted.extension(name)
    return extension is not None and (
        "extra-cuda-cflags" in extension or extension.get("with-cuda") is True
        or any(str(source).endswith(CUDA_SUFFIXES) for source in extension.get("sources", [])))


def _as_list(flags: tuple[str, ...]) -> str:
    """The arch list the flags build, where it reads as one (``7.5;8.0;8.9+PTX``), else them."""
    if not flags:
        return "none"
    entries: dict[str, str] = {}
    for target in archs_named_by(list(flags)):
        kind, _, digits = target.partition("_")
        if not digits.isdigit() or kind not in ("sm", "compute"):
            return " ".join(flags)
        version = f"{digits[:-1]}.{digits[-1]}"
        entries[version] = entries.get(version, "") + ("+PTX" if kind == "compute" else "")
    return ";".join(v + ("+PTX" if "+PTX" in suffix else "") for v, suffix in entries.items())


def detect(attempt: Attempt, runs: Mapping[bool | None, tuple[SetupRun, Outcome]],
           ) -> MachineFlags:
    """Runs of the setup.py (its CUDA mode -> the run and its conversion) that asked for the
    GPU or read $TORCH_CUDA_ARCH_LIST, tried again to see which arch flags follow them."""
    found = MachineFlags()
    usable = {mode: pair for mode, pair in runs.items() if isinstance(pair[1], Converted)}
    # arch flags are nvcc's: looked at with CUDA on where setup.py has that branch
    for mode in sorted(usable, key=lambda mode: mode is not True)[:1]:
        run, reference = usable[mode]
        assert isinstance(reference, Converted)
        if run.gpu_probes:
            _by_gpu(found, attempt, mode, run, reference)
        if ARCH_VARIABLE in run.env_reads:
            _by_arch_list(found, attempt, mode, reference)
        for name in run.env_reads:
            if name != ARCH_VARIABLE and name not in BACKEND_VARIABLES:
                _by_variable(found, attempt, mode, reference, name)
    return found


def _short(gpu: Gpu | str | None) -> str:
    return f"GPU {gpu.capability}" if isinstance(gpu, Gpu) else describe(gpu)


def _by_gpu(found: MachineFlags, attempt: Attempt, mode: bool | None, run: SetupRun,
            reference: Converted) -> None:
    own = chosen(BY_CUDA, mode)
    gpus: list[Gpu | str | None] = list(dict.fromkeys([own, REFERENCE, OTHER, ABSENT]))
    tried = {gpu: reference if gpu == own else attempt(cuda=mode, gpu=gpu) for gpu in gpus}
    seen = {gpu: c for gpu, c in tried.items() if isinstance(c, Converted)}
    asked = ", ".join(list(run.gpu_probes)[:3]) + (", ..." if len(run.gpu_probes) > 3 else "")
    follow = []
    for name in [e["name"] for e in reference.extensions]:
        # a run that did not build the extension with CUDA (no GPU: its CPU branch) says nothing
        flags = {gpu: _arch_flags(c, name) for gpu, c in seen.items() if _with_cuda(c, name)}
        varies = len(set(flags.values())) > 1
        alone = len(flags) == 1 and isinstance(own, Gpu) and flags.get(own) and all(
            own.arch in target for target in archs_named_by(list(flags[own])))
        if not (varies or alone):
            continue
        follow.append(name)
        chose = ", ".join(f"{_short(gpu)} -> {_as_list(f)}" for gpu, f in flags.items())
        fallback = flags.get(ABSENT)
        hint = (f"; setup.py's choice without a GPU was {_as_list(fallback)}: set cuda-arch-list"
                " to build for it" if fallback else "")
        found.extensions[name] = (
            f"setup.py computes this extension's GPU architectures from the machine it runs on"
            f" ({asked}): {chose}. Those flags are {POLICY}{hint}")
    lists = {c.tool.get("cuda-arch-list") for c in seen.values()}
    if len(lists) > 1:
        found.arch_list = True
        follow.append("the $TORCH_CUDA_ARCH_LIST it sets")
    result = (f"the arch flags of {', '.join(follow)} follow the GPU: {POLICY}" if follow
              else "no difference")
    failures = [f"{describe(gpu)}, setup.py fails: {c}" for gpu, c in tried.items()
                if isinstance(c, str)]
    found.environment.append(
        f"GPU: setup.py asked for the machine's GPU ({asked}); migrate ran it with"
        f" {', '.join(describe(g) for g in gpus)}: {result}"
        + (f" (with {'; with '.join(failures)})" if failures else ""))


def _by_arch_list(found: MachineFlags, attempt: Attempt, mode: bool | None,
                  reference: Converted) -> None:
    probe = attempt(env={ARCH_VARIABLE: PROBE_ARCH_LIST}, cuda=mode)
    if not isinstance(probe, Converted):
        return
    follow = []
    for name in [e["name"] for e in reference.extensions if probe.extension(e["name"])]:
        flags = _arch_flags(probe, name)
        if flags != _arch_flags(reference, name) and any(
                arch in target for target in archs_named_by(list(flags)) for arch in PROBE_ARCHS):
            follow.append(name)
            found.extensions.setdefault(name, (
                f"setup.py turns $TORCH_CUDA_ARCH_LIST into this extension's -gencode flags"
                f" (here: {_as_list(_arch_flags(reference, name))}): they are {POLICY}"))
    if reference.tool.get("cuda-arch-list") != probe.tool.get("cuda-arch-list"):
        found.arch_list = True
        follow.append("the cuda-arch-list it sets")
    if follow:
        found.handled.add(ARCH_VARIABLE)
        found.environment.append(
            f"${ARCH_VARIABLE}: setup.py turns it into the arch flags of {', '.join(follow)}"
            f" (tried {PROBE_ARCH_LIST!r}): {POLICY}; pep517_torch reads ${ARCH_VARIABLE}"
            " itself")


def _spellings(archs: tuple[str, ...]) -> list[str]:
    """An arch list as setup.py files spell one (``8.0;9.0``, ``80,90``, ``8.0 9.0``)."""
    dotted = [f"{arch[:-1]}.{arch[-1]}" for arch in archs]
    return [separator.join(form) for separator in (";", ",", " ") for form in (dotted, archs)]


def _numbers(flags: tuple[str, ...]) -> set[str]:
    """The compute capabilities (``80``) the targets of ``flags`` name."""
    return {target.partition("_")[2].rstrip("af") for target in archs_named_by(list(flags))}


def _by_variable(found: MachineFlags, attempt: Attempt, mode: bool | None,
                 reference: Converted, name: str) -> None:
    """A variable of setup.py's own whose value it turns into arch flags (``CUDA_ARCHITECTURES``
    split into ``-gencode=arch=compute_XX,code=sm_XX``, or a filter over the archs it knows):
    those flags are left to the arch-list policy too, setup.py's default list (the variable
    unset) becomes the extension's cuda-arch-list, and TORCH_CUDA_ARCH_LIST replaces it."""
    own = {e["name"]: _arch_flags(reference, e["name"]) for e in reference.extensions
           if _with_cuda(reference, e["name"])}
    own = {extension: flags for extension, flags in own.items() if flags}
    if not own:
        return
    screen = attempt(env={name: "1"}, cuda=mode)  # an arch list would name arch 1, or none
    if isinstance(screen, Converted) and all(
            _arch_flags(screen, extension) == flags for extension, flags in own.items()):
        return
    known = sorted({n for flags in own.values() for n in _numbers(flags) if n.isdigit()})
    probes = [PROBE_ARCHS, *([(known[0],)] if len(known) > 1 else [])]  # the second: a filter
    for archs, value in ((archs, value) for archs in probes for value in _spellings(archs)):
        probe = attempt(env={name: value}, cuda=mode)
        if not isinstance(probe, Converted):
            continue
        follow = [extension for extension in own if probe.extension(extension)
                  and _arch_flags(probe, extension)
                  and _numbers(_arch_flags(probe, extension)) <= set(archs)]
        if follow:
            _arch_variable(found, attempt, mode, reference, name, value, follow)
            return


def _arch_variable(found: MachineFlags, attempt: Attempt, mode: bool | None,
                   reference: Converted, name: str, value: str, follow: list[str]) -> None:
    unset = reference if os.environ.get(name) is None else attempt(env={name: None}, cuda=mode)
    defaults = []
    for extension in follow:
        default = _arch_flags(unset, extension) if isinstance(unset, Converted) else ()
        listed = _as_list(default) if default else None
        if listed is not None and " " not in listed:  # flags that read as an arch list
            found.arch_lists[extension] = listed
            defaults.append(f"{extension}: {listed}")
            found.extensions.setdefault(extension, (
                f"setup.py turns ${name} into this extension's arch flags; its list without"
                f" ${name} is now cuda-arch-list, which TORCH_CUDA_ARCH_LIST overrides at"
                f" build time: set that where you set ${name}"))
        else:
            found.extensions.setdefault(extension, (
                f"setup.py turns ${name} into this extension's arch flags: they are {POLICY};"
                f" set TORCH_CUDA_ARCH_LIST where you set ${name}"))
    found.handled.add(name)
    kept = f"; its list without it is cuda-arch-list ({', '.join(defaults)})" if defaults else ""
    found.environment.append(
        f"${name}: setup.py turns it into the arch flags of {', '.join(follow)} (tried"
        f" {value!r}): TORCH_CUDA_ARCH_LIST replaces it (e.g. TORCH_CUDA_ARCH_LIST=\"8.0;9.0+PTX\""
        f" where you set ${name}){kept}")

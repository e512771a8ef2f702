"""What torch.compile and export will trip on, read from an operator's registrations alone:
no fake (meta) kernel, a CUDA kernel without a CPU one, autograd for one backend and not
another, no kernel at all. Pure code over the table (no torch): what only running can show
(a schema that lies about mutation or aliasing) is opcheck's (``ops --check``)."""

from __future__ import annotations

from dataclasses import dataclass

from .table import AUTOGRAD_KEYS, BACKEND_KEYS, Op

NO_FAKE = "no-fake"
CUDA_ONLY = "cuda-only"
AUTOGRAD_PARTIAL = "autograd-partial"
NO_KERNEL = "no-kernel"
NO_SCHEMA = "no-schema"


@dataclass(frozen=True)
class Verdict:
    op: str
    code: str  # one of the names above
    message: str  # what is missing and what it costs, one line

    def line(self) -> str:
        return f"{self.op}: {self.message} [{self.code}]"


def judge(op: Op) -> list[Verdict]:
    """The verdicts on one op, in the order a reader fixes them."""
    kernels = set(op.kernels)
    implicit = "CompositeImplicitAutograd" in kernels  # decomposes: needs nothing of its own
    explicit = "CompositeExplicitAutograd" in kernels or \
        "CompositeExplicitAutogradNonFunctional" in kernels
    backends = [key for key in BACKEND_KEYS if key in kernels]
    found: list[Verdict] = []

    def say(code: str, message: str) -> None:
        found.append(Verdict(op.name, code, message))

    if op.schema is None:
        say(NO_SCHEMA, "kernels for an operator no loaded library defines (its TORCH_LIBRARY"
            " is elsewhere: load that library first)")
    if not (backends or implicit or explicit):
        say(NO_KERNEL, "no kernel for any device (CPU, CUDA, a composite): every call fails")
        return found
    if not implicit and not _has_fake(op, kernels, explicit):
        say(NO_FAKE, "no fake (Meta) kernel: torch.compile graph-breaks on it and"
            " torch.export fails; add TORCH_LIBRARY_IMPL(ns, Meta, m) or"
            " torch.library.register_fake")
    if "CUDA" in kernels and "CPU" not in kernels and not (implicit or explicit):
        say(CUDA_ONLY, "a CUDA kernel but no CPU one: a CPU tensor fails with"
            " NotImplementedError (and CPU tests cannot check it)")
    missing = _autograd_missing(kernels, backends)
    if missing:
        have = ", ".join(key.removeprefix("Autograd") for key in AUTOGRAD_KEYS[1:] if key in kernels)
        say(AUTOGRAD_PARTIAL, f"autograd for {have} but not {', '.join(missing)}: backward on"
            f" {' or '.join(missing)} tensors has no derivative (register the Autograd key for"
            " every device, or torch.library.register_autograd)")
    return found


def _has_fake(op: Op, kernels: set[str], explicit: bool) -> bool:
    if op.fake:
        return True
    if op.custom_op:  # torch.library.custom_op registers a Meta kernel that only raises
        return False
    return "Meta" in kernels or explicit


def _autograd_missing(kernels: set[str], backends: list[str]) -> list[str]:
    """The devices with a kernel and no autograd, where another device has one (an op with no
    autograd anywhere is an inference op: no verdict)."""
    if "Autograd" in kernels or "CompositeImplicitAutograd" in kernels:
        return []
    per_device = {key.removeprefix("Autograd") for key in AUTOGRAD_KEYS[1:] if key in kernels}
    if not per_device:
        return []
    return [device for device in backends if device not in per_device]


def judge_all(ops: tuple[Op, ...] | list[Op]) -> list[Verdict]:
    return [verdict for op in ops for verdict in judge(op)]

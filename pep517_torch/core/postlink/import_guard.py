"""The import check an artifact carries inside itself: what the compile core adds to the build
of an extension whose spec names the torch to check (``ExtensionSpec.import_check_torch``).

Three pieces, all in build.ninja: a generated C file (``resources/import_guard.c`` with this
artifact's parameters) compiled into one more object, a link that keeps ``libtorch.so`` among
the NEEDED libraries of a CUDA artifact, and a post-link step (``guard_patch.py``) that makes
the check run before anything else of the library. The artifact keeps its name, its place and
its ``find_spec(...).origin``: the check is part of the library itself, for ``import`` (its
``PyInit_<name>``) and for ``torch.ops.load_library`` (its constructor) alike.
"""

from __future__ import annotations

import functools
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ...abi.elf import needed_libraries
from ..spec import ExtensionSpec, Kind
from ..toolchain.tools import TorchInstall

SOURCE = Path(__file__).resolve().parents[2] / "resources" / "import_guard.c"
OBJECT = "pep517_torch_import_guard.o"  # in obj/<extension>/, beside the sources' (x.cpp.o)
# Always dropped from NEEDED: torch's CUDA libraries and the CUDA runtime (the CUDA torch's own
# libtorch.so needs them; a CPU torch has none of them).
_CUDA_ONLY = re.compile(r"^lib(c10_cuda|torch_cuda(_\w+)?|caffe2_nvrtc|torch_nvshmem|cudart)\.so")
# Also on the machine of a CPU torch: never dropped.
_SYSTEM = re.compile(r"^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[-\w.]*)\.so")
# The guard's own flags: C, position-independent, its symbols hidden.
GUARD_FLAGS = ("-x", "c", "-O2", "-fPIC", "-fvisibility=hidden", "-w")


def unsupported() -> str | None:
    """Why this machine's artifacts cannot carry the check (it patches ELF files for x86_64
    and aarch64, guard_patch.py), or None."""
    machine = platform.machine()
    if not sys.platform.startswith("linux") or machine not in ("x86_64", "aarch64"):
        return f"torch-import-check: {sys.platform} {machine} artifacts carry no import check"
    return None


@dataclass(frozen=True)
class GuardPlan:
    """One artifact's import check: its generated source, object and post-link arguments."""

    source: Path  # the generated C file, in the build directory
    text: str  # its content
    object: str  # relative to the build directory
    patch_arguments: tuple[str, ...]  # guard_patch.py's, after the file


def _c_string(text: str | None) -> str:
    if text is None:
        return "NULL"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cuda_major(cuda_version: str) -> str:
    return cuda_version.split(".")[0]


def needs_cuda_torch(spec: ExtensionSpec, torch: TorchInstall) -> bool:
    """Whether ``spec``'s artifact needs a CUDA build of torch (of its CUDA major) to run: CUDA
    code built against a CUDA torch (it links torch's CUDA libraries or the CUDA runtime such a
    torch brings), or stable-ABI CUDA code (the C shim's CUDA functions live in libtorch_cuda).
    Kernels on raw pointers built beside a CPU torch need a CUDA runtime, not a CUDA torch."""
    return spec.uses_cuda and (torch.has_cuda_runtime or spec.stable_abi is not None)


def built_for(spec: ExtensionSpec, torch: TorchInstall, cuda_version: str | None) -> str:
    """How the one line names what ``spec``'s artifact was built for: ``torch 2.14.1+cu130``,
    ``torch 2.13.0+cpu with CUDA 13``, ``torch>=2.10 with CUDA 13``."""
    needs = cuda_version if needs_cuda_torch(spec, torch) else None
    if spec.stable_abi is not None:
        return f"torch>={spec.stable_abi}" + (f" with CUDA {cuda_major(needs)}" if needs else "")
    if needs is None or (torch.cuda and cuda_major(torch.cuda) == cuda_major(needs)):
        return f"torch {torch.version}"
    return f"torch {torch.version} with CUDA {cuda_major(needs)}"


def cuda_advice(spec: ExtensionSpec, cuda_version: str | None) -> str:
    """What to do under a torch without the CUDA the artifact needs."""
    if spec.stable_abi is not None and cuda_version is not None:
        index = "cu" + "".join(cuda_version.split(".")[:2])
        return (f"install a torch built with CUDA {cuda_major(cuda_version)} (`pip install"
                f" 'torch>={spec.stable_abi}' --index-url"
                f" https://download.pytorch.org/whl/{index}`).")
    return ("install the build of this package made for your torch's CUDA variant (its"
            " find-links page), or build it from source with `--no-build-isolation`.")


@functools.cache
def _cuda_torch_libraries(library_dir: Path) -> frozenset[str]:
    """What a CUDA torch's libtorch_cuda.so needs that its CPU build lacks (the CUDA math
    libraries, NCCL, cuDNN...): a CUDA torch has them loaded once libtorch.so is."""
    names = set(needed_libraries(library_dir / "libtorch_cuda.so"))
    names |= set(needed_libraries(library_dir / "libc10_cuda.so"))
    common = set(needed_libraries(library_dir / "libtorch_cpu.so"))
    common |= {"libc10.so", "libtorch_cpu.so", "libtorch.so", "libtorch_python.so"}
    return frozenset(n for n in names - common if not _SYSTEM.match(n))


def dropped_libraries(torch: TorchInstall, needed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The NEEDED names a guarded artifact loses (a CUDA torch brings them through libtorch.so):
    torch's CUDA libraries, the CUDA runtime, and what a CUDA building torch's libtorch_cuda
    needs. ``needed``: more names to test against the patterns (tests)."""
    known = _cuda_torch_libraries(torch.library_dir) if torch.has_cuda_runtime else frozenset()
    candidates = {"libc10_cuda.so", "libtorch_cuda.so", *known, *needed}
    return tuple(sorted(n for n in candidates if n in known or _CUDA_ONLY.match(n)))


def cuda_runtime_names(library_dirs: tuple[Path, ...]) -> tuple[str, ...]:
    """The sonames of the CUDA runtime a link may record (``libcudart.so.13``)."""
    return tuple(sorted({p.name for d in library_dirs for p in d.glob("libcudart.so.*")
                         if p.name.count(".") == 2}))


def plan(
    spec: ExtensionSpec, torch: TorchInstall, cuda_version: str | None, build_dir: Path,
    cuda_library_dirs: tuple[Path, ...] = (),
) -> GuardPlan | None:
    """The import check of ``spec``'s artifact (None: its spec names no torch to check, or
    this machine's artifacts cannot carry one: :func:`unsupported`)."""
    if spec.import_check_torch is None or spec.kind is Kind.EXECUTABLE or unsupported():
        return None
    needs_cuda = cuda_version if needs_cuda_torch(spec, torch) else None
    defines = {
        "GUARD_MODULE": spec.name,
        "GUARD_TORCH": spec.import_check_torch,
        "GUARD_STABLE": spec.stable_abi,
        "GUARD_CUDA": cuda_major(needs_cuda) if needs_cuda else None,
        "GUARD_BUILT_FOR": built_for(spec, torch, cuda_version),
        "GUARD_CUDA_ADVICE": cuda_advice(spec, needs_cuda),
    }
    text = "/* Generated by pep517_torch: the import check of {}. */\n{}\n{}".format(
        spec.name,
        "".join(f"#define {name} {_c_string(value)}\n" for name, value in defines.items()),
        SOURCE.read_text(encoding="utf-8"),
    )
    arguments: list[str] = []
    for name in dropped_libraries(torch, cuda_runtime_names(cuda_library_dirs)) if needs_cuda else ():
        arguments += ["--drop", name]
    if spec.kind is Kind.MODULE:
        arguments += ["--pyinit", f"PyInit_{spec.name.rpartition('.')[2]}"]
    return GuardPlan(build_dir / "guard" / f"{spec.name}.c", text, f"obj/{spec.name}/{OBJECT}",
                     tuple(arguments))

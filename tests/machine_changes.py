"""A machine a test can change, fact by fact, for the stores that record what a build depended
on (shipped_runtime/build_inputs.py): a C++ compiler on PATH, an nvcc (a wrapper script whose
``--version`` names its toolkit, as tests/cuda_tools.py fakes them), a torch folder, a PATH
folder, the build variables. Each change in :data:`CHANGES` is made for real on files (or on
this interpreter, for Python and ninja); pep517_torch's own version and the libraries that shape
a wheel cannot be changed under a running test, so their records are forged as an older
install would have written them. Every store's test runs the changes that concern it and
checks the reason it gives names the change."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.shipped_runtime import build_inputs, machine_facts
from tests.cuda_tools import make_fake_toolkit, write_script

NVCC_VERSION = """case "$1" in
  --version) echo "Cuda compilation tools, release 13.0, V{version}"; exit 0;;
  -dryrun) echo "#$ TOP=${{0%/*}}/.." >&2; exit 0;;
  --list-gpu-code) echo sm_80; exit 0;;
esac
exit 1
"""


def write_nvcc(path: Path, version: str) -> Path:
    """An nvcc that says ``version`` (``13.0.88``): rewriting it is an nvcc changed in place."""
    return write_script(path, NVCC_VERSION.format(version=version))


@dataclass
class Machine:
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bin = self.root / "bin"
        self.compiler = write_script(self.bin / "c++", "# g++ 12\n")
        self.toolkit = make_fake_toolkit(self.root / "cuda")
        self.nvcc = write_nvcc(self.toolkit / "bin" / "nvcc", "13.0.88")
        self.torch = self.root / "site-packages" / "torch"
        self.torch.mkdir(parents=True)
        (self.torch / "version.py").write_text("__version__ = '2.13.0+cpu'\n")
        self.env.update(PATH=str(self.bin), CXXFLAGS="-DX=1", CPLUS_INCLUDE_PATH="/opt/a")

    def facts(self, names: tuple[str, ...] = build_inputs.COMPILE_FACTS) -> dict[str, Any]:
        return build_inputs.observe(names, self.env, nvcc=self.nvcc, torch_root=self.torch)


def _compiler_swapped(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    write_script(machine.compiler.with_name("c++.new"), "# g++ 13\n").replace(machine.compiler)
    return f"the C++ compiler {machine.compiler} changed"


def _compiler_first_on_path(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    other = write_script(machine.root / "bin2" / "c++", "# clang\n")
    machine.env["PATH"] = f"{other.parent}:{machine.env['PATH']}"
    return f"the C++ compiler is another one: {machine.compiler} -> {other}"


def _nvcc_changed_in_place(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    write_nvcc(machine.nvcc, "13.0.99")
    return f"nvcc {machine.nvcc} changed"


def _torch_reinstalled(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    (machine.torch / "version.py").unlink()
    (machine.torch / "version.py").write_text("__version__ = '2.13.0+cpu'\n")  # same bytes, new file
    return f"torch {machine.torch / 'version.py'} changed"


def _python(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    version = sys.version.split(" ", 1)[0]
    before, after = sys.executable, str(machine.root / "venv" / "bin" / "python")
    monkeypatch.setattr(sys, "executable", after)
    return f"Python changed: {before} {version} -> {after} {version}"


def _ninja(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    before = machine_facts.where("ninja")
    package = machine.root / "other-site" / "ninja"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(package.parent))
    if before is None:
        return f"ninja appeared ({package / '__init__.py'})"
    return f"ninja is another one: {before} -> {package / '__init__.py'}"


def _path_folder(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    write_script(machine.bin / "ninja", "# a tool added\n")
    return f"PATH folder {machine.bin} changed (a tool added, removed or replaced)"


def _build_variable(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    machine.env["CXXFLAGS"] = "-DX=2"
    return "CXXFLAGS changed: '-DX=1' -> '-DX=2'"


def _compile_variable(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    machine.env["CPLUS_INCLUDE_PATH"] = "/opt/b"
    return "CPLUS_INCLUDE_PATH changed: '/opt/a' -> '/opt/b'"


# What changed -> (the fact or variable it is, how to change it: returns the words a reason holds)
CHANGES: dict[str, tuple[str, Callable[[Machine, pytest.MonkeyPatch], str]]] = {
    "compiler swapped": ("compiler", _compiler_swapped),
    "another compiler first on PATH": ("compiler", _compiler_first_on_path),
    "nvcc changed in place": ("nvcc", _nvcc_changed_in_place),
    "torch reinstalled": ("torch", _torch_reinstalled),
    "another Python": ("python", _python),
    "another ninja": ("ninja", _ninja),
    "a tool added to a PATH folder": ("path", _path_folder),
    "a build variable": ("CXXFLAGS", _build_variable),
    "a compile variable": ("CPLUS_INCLUDE_PATH", _compile_variable),
}
# Facts no test can change under a running interpreter: their records, as an older install wrote them
FORGED: dict[str, tuple[Callable[[Any], Any], str]] = {
    "backend": (lambda value: ["0.0.1", value[1]], "pep517_torch changed: 0.0.1 -> "),
    "libraries": (lambda value: {**value, "packaging": ["/old/site-packages/packaging/__init__.py"]},
                  "packaging is another one: /old/site-packages/packaging/__init__.py -> "),
}


def change(case: str, machine: Machine, monkeypatch: pytest.MonkeyPatch) -> str:
    """Make the change ``case``; the words the reason must hold."""
    return CHANGES[case][1](machine, monkeypatch)


def cases(*facts: str) -> list[str]:
    """The changes of ``facts`` (fact or variable names), for parametrize."""
    return [case for case, (name, _) in CHANGES.items() if name in facts]

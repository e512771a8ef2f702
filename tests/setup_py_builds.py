"""fixtures/migrate's setup.py projects built the reference way, shared by the tests that compare.

test_migrate (migrated pyproject.toml vs setup.py) and test_setuptools_face (our BuildExtension
vs torch's) compare against the same wheels: setuptools + torch's BuildExtension, as pip builds a
setup.py project. tests/conftest.py builds them once per session (``torch_built_wheels``).
"""

from __future__ import annotations

import importlib.machinery
import re
import shutil
import sys
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from tests.commands import run

T = TypeVar("T")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "migrate"
GOOD = ["one_ext", "nested", "cuda_choice", "op_library", "limited_api"]
COMPUTE = {
    "one_ext": "import torch, tinyop; assert tinyop.twice(torch.ones(3)).tolist() == [2.0] * 3",
    "nested": "import nestpkg, nest_compat\n"
    "assert nestpkg.add_offset(1.5) == nest_compat.offset(1.5) == 2.5\n"
    "assert nestpkg.times3(2.0) == 6.0 and nestpkg.defaults() == {'scale': 3}",
    "cuda_choice": "import torch, cudachoice\n"
    "assert cudachoice.negate(torch.ones(2)).tolist() == [-1.0] * 2",
    "op_library": "import torch, oplib; assert oplib.triple(torch.ones(2)).tolist() == [3.0, 3.0]",
    "limited_api": "import limitedop; assert limitedop.square(3.0) == 9.0",
}
FIXTURE_VARIABLES = ("FORCE_CUDA", "CUDACHOICE_DEBUG", "DEBUG")  # the setup.py files read these


def wheel_contents(wheel: Path) -> tuple[str, set[str], set[str], set[str]]:
    """(tag, Python modules, native modules, data files), .dist-info left out; a manylinux
    platform tag (pep517_torch computes one, setuptools writes linux_<arch>) reads as linux."""
    suffixes = sorted([*importlib.machinery.EXTENSION_SUFFIXES, ".so"], key=len, reverse=True)
    python, native, data = set(), set(), set()
    for name in zipfile.ZipFile(wheel).namelist():
        if name.split("/")[0].endswith((".dist-info", ".data")):
            continue
        suffix = next((s for s in suffixes if name.endswith(s)), None)
        if name.endswith(".py"):
            python.add(name[:-3].replace("/", "."))
        elif suffix:
            native.add(name[: -len(suffix)].replace("/", "."))
        else:
            data.add(name)
    tag = re.sub(r"manylinux_\d+_\d+_", "linux_", "-".join(wheel.stem.split("-")[2:]))
    return tag, python, native, data


def build_with_torch(source: Path, out: Path) -> Path:
    """As pip builds a setup.py project; CFLAGS=-g0 only drops debug info (faster)."""
    code = f"from setuptools import build_meta as b; print(b.__legacy__.build_wheel({str(out)!r}))"
    output = run(sys.executable, "-c", code, cwd=source, env={"CFLAGS": "-g0"},
                 unset=FIXTURE_VARIABLES).stdout
    return out / output.strip().splitlines()[-1]


def per_shape(build: Callable[[str], T]) -> dict[str, T | BaseException]:
    """``build(shape)`` for every good shape, three at a time (tiny sources: the machine's
    cores stay busy); a failure is kept for the test of that shape to raise."""
    results: dict[str, T | BaseException] = {}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {shape: pool.submit(build, shape) for shape in GOOD}
        for shape, future in futures.items():
            try:
                results[shape] = future.result()
            except Exception as exc:
                results[shape] = exc
    return results


def build_all_with_torch(root: Path) -> dict[str, Path | BaseException]:
    def build(shape: str) -> Path:
        shutil.copytree(FIXTURES / shape, root / shape)
        return build_with_torch(root / shape, root / f"{shape}-out")

    return per_shape(build)

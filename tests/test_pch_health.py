"""A machine-wide PCH cache that heals (issue 24 items 1 and 2).

1. An entry is sealed when it is made and verified before use: a truncated .gch, 16 KB
   overwritten in its middle, or a copy over it are seen (without compiling); `cache` lists
   such an entry as damaged; a build removes it and makes it again, with one line; a compile
   that fails on a PCH the seal cannot fault is retried once without it.
2. A PCH the cache cannot keep is not made: a bound smaller than one
   (PEP517_TORCH_PCH_CACHE_SIZE=1M) or a cache disk too small for one (a tmpfs); the build
   compiles without it and says so in one line.

The real PCH is <torch/library.h>'s (the smallest umbrella), made once per session by a JIT
load of a Python.h module that includes it first; tests copy that entry into their own cache.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pep517_torch.core import pch_cache, pch_health, pch_seal
from pep517_torch.core.plan import prepare
from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.errors import BuildError
from tests.conftest import write
from tests.tiny_project import c_api_module

GCH = pch_cache.GCH
SOURCE = c_api_module(
    "static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(42); }",
    '{"answer", answer, METH_NOARGS, nullptr}', "<torch/library.h>", name=None,
)
JIT_CHILD = """
import sys, pep517_torch
module = pep517_torch.load(sys.argv[1], [sys.argv[2]], build_directory=sys.argv[3], verbose=True)
print("answer", module.answer())
"""


def jit(name: str, tmp: Path, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    source = write(tmp / name / "answer.cpp", SOURCE)
    return subprocess.run(
        [sys.executable, "-c", JIT_CHILD, name, str(source), str(tmp / name / "build")],
        capture_output=True, text=True, timeout=1200,
        env={**os.environ, "PEP517_TORCH_CACHE_DIR": str(cache), **env},
    )


def cache_listing(cache: Path) -> str:
    return subprocess.run([sys.executable, "-m", "pep517_torch", "cache"], capture_output=True,
                          text=True, check=True,
                          env={**os.environ, "PEP517_TORCH_CACHE_DIR": str(cache)}).stdout


# ------------------------------------------------------------------ the seal, nothing compiled


def sealed(path: Path, size: int = 3 << 20) -> Path:
    made = path.with_name(path.name + ".made")
    made.write_bytes(os.urandom(size))
    pch_seal.write_seal(str(made), str(path))
    os.rename(made, path)
    return path


def made_an_hour_ago(gch: Path) -> None:
    """As if the entry had been made (and sealed) an hour ago: what is done to the .gch now
    comes after (the seal's mtime is when it was made)."""
    old = time.time() - 3600
    os.utime(gch.with_name(gch.name + pch_seal.SUFFIX), (old, old))


def test_the_seal_sees_truncation_overwrites_and_copies(tmp_path: Path) -> None:
    for name in "abcd":
        (tmp_path / name).mkdir()
    gch = sealed(tmp_path / "a" / GCH)
    assert pch_seal.damage(str(gch)) is None
    os.utime(gch)  # a touch: identity changed, content the same (a full hash says so)
    made_an_hour_ago(gch)
    assert pch_seal.damage(str(gch)) is None
    assert pch_seal.damage(str(gch)) is None  # sealed anew: cheap again
    with gch.open("r+b") as stream:
        stream.truncate(gch.stat().st_size // 2)
    assert "truncated" in (pch_seal.damage(str(gch)) or "")

    gch = sealed(tmp_path / "b" / GCH)
    stat = gch.stat()
    with gch.open("r+b") as stream:  # 16 KB in the middle, mtime put back: the full hash sees it
        stream.seek(stat.st_size // 2 - 5000)
        stream.write(os.urandom(16 << 10))
    os.utime(gch, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    made_an_hour_ago(gch)
    assert "content changed" in (pch_seal.damage(str(gch)) or "")

    gch = sealed(tmp_path / "c" / GCH)
    other = tmp_path / "other.gch"
    other.write_bytes(os.urandom(gch.stat().st_size))
    subprocess.run(["cp", "-p", str(other), str(gch)], check=True)
    assert pch_seal.damage(str(gch)) is not None
    (tmp_path / "d" / GCH).write_bytes(b"gpch" + os.urandom(1000))  # no seal: an old entry
    assert "no valid checksum" in (pch_seal.damage(str(tmp_path / "d" / GCH)) or "")


def test_cache_lists_a_damaged_entry_as_damaged(tmp_path: Path) -> None:
    for key in ("good", "bad"):
        directory = tmp_path / "pch" / key
        directory.mkdir(parents=True)
        sealed(directory / GCH, 100_000)
        pch_cache.write_info(directory, {"header": "torch/library.h", "torch": "2.13.0"})
    with (tmp_path / "pch" / "bad" / GCH).open("r+b") as stream:
        stream.truncate(50_000)
    lines = {line.split()[0]: line for line in cache_listing(tmp_path).splitlines()[2:]}
    assert "DAMAGED" not in lines["good"]
    assert "DAMAGED: it is 50000 bytes, but was 100000 when made (truncated?)" in lines["bad"]


# ------------------------------------------------- a PCH the cache cannot keep is not made


def test_a_bound_smaller_than_one_pch_makes_none(tmp_path: Path) -> None:
    source = write(tmp_path / "a.cpp", "#include <torch/library.h>\nint a() { return 1; }\n")
    options = BuildOptions(build_dir=tmp_path / "b", pch_cache_dir=tmp_path / "cache",
                           pch_eager=True, pch_cache_size=1 << 20, compiler_launcher="none")
    plan = prepare([ExtensionSpec("m", (source,))], options)
    [note] = [n for n in plan.notes if "not made" in n]
    assert "<torch/library.h> not made: the machine-wide cache's bound (1.0 MiB" in note
    text = plan.ninja_file.read_text()
    assert ": pch " not in text  # nothing precompiles...
    assert "-include" in text  # ...and the TU reads the stub as text: the same object
    roomy = prepare([ExtensionSpec("m", (source,))],
                    dataclasses.replace(options, pch_cache_size=5 << 30))
    assert ": pch " in roomy.ninja_file.read_text()


# ---------------------------------------------------------------- with a real PCH (compiles)


@pytest.fixture(scope="session")
def library_pch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding one sealed <torch/library.h> entry, made by a JIT load."""
    work = tmp_path_factory.mktemp("library-pch")
    result = jit("pch_base", work, work / "cache")
    assert result.returncode == 0 and "answer 42" in result.stdout, result.stderr
    [entry] = pch_cache.entries(work / "cache" / "pch")
    assert pch_cache.damage(entry.directory) is None and (entry.directory / GCH).is_file()
    return work / "cache"


def copy_cache(library_pch: Path, target: Path) -> Path:
    shutil.copytree(library_pch, target, copy_function=shutil.copy2)
    [entry] = pch_cache.entries(target / "pch")
    return entry.directory


@pytest.mark.compile
def test_a_damaged_entry_is_removed_and_made_again(library_pch: Path, tmp_path: Path) -> None:
    directory = copy_cache(library_pch, tmp_path / "cache")
    gch = directory / GCH
    with gch.open("r+b") as stream:  # 16 KB in the middle
        stream.seek(gch.stat().st_size // 2)
        stream.write(os.urandom(16 << 10))
    assert "DAMAGED" in cache_listing(tmp_path / "cache")
    result = jit("pch_after_damage", tmp_path, tmp_path / "cache")
    assert result.returncode == 0 and "answer 42" in result.stdout, result.stderr
    said = [line for line in result.stderr.splitlines() if "was damaged" in line]
    assert len(said) == 1 and str(gch) in said[0], result.stderr
    assert "precompiling" in result.stderr  # made again (the JIT makes its PCHs eagerly)
    assert pch_cache.damage(directory) is None and gch.is_file()
    assert "DAMAGED" not in cache_listing(tmp_path / "cache")


@pytest.mark.compile
def test_a_compile_that_fails_on_a_pch_is_retried_once_without_it(
    library_pch: Path, tmp_path: Path
) -> None:
    """A .gch whose damage the seal cannot see (sealed after it was damaged: a compiler or
    disk fault at the making): the compile fails on it, and the build goes on without."""
    directory = copy_cache(library_pch, tmp_path / "cache")
    gch = directory / GCH
    damaged = directory / "damaged.gch"
    shutil.copy2(gch, damaged)
    with damaged.open("r+b") as stream:  # the same bytes every run: gcc fails the same way
        stream.seek(damaged.stat().st_size // 2)
        stream.write(random.Random(20261202).randbytes(16 << 10))
    pch_seal.write_seal(str(damaged), str(gch))
    os.rename(damaged, gch)
    assert pch_cache.damage(directory) is None
    result = jit("pch_retry", tmp_path, tmp_path / "cache")
    assert result.returncode == 0 and "answer 42" in result.stdout, result.stderr
    retried = [line for line in result.stderr.splitlines()
               if "building again without precompiled headers" in line]
    assert len(retried) == 1, result.stderr


@pytest.mark.compile
def test_a_cache_disk_too_small_for_a_pch_falls_back(
    tmp_path: Path, tmpfs: Callable[..., Path]
) -> None:
    cache = tmpfs("8m")
    started = time.monotonic()
    result = jit("pch_small_disk", tmp_path, cache)
    assert result.returncode == 0 and "answer 42" in result.stdout, result.stderr
    said = [line for line in result.stderr.splitlines() if "not made" in line]
    assert len(said) == 1 and str(cache) in said[0] and "free" in said[0], result.stderr
    assert not list(cache.rglob("*.gch")), time.monotonic() - started


# gcc's words when it read damaged declarations from a .gch: nonsense inside torch's headers,
# reached through the PCH stub (seen in a CI run), against a user's own error in a TU that
# used the same PCH (its command line names the stub too).
DAMAGED_DECLARATIONS = """\
FAILED: [code=1] obj/x/answer.cpp.o
/usr/bin/c++ -include /cache/pch/f113d2f88a24e0f1/pch.h -c /p/answer.cpp -o obj/x/answer.cpp.o
In file included from /torch/include/ATen/core/custom_class.h:9,
                 from /torch/include/torch/library.h:62,
                 from /cache/pch/f113d2f88a24e0f1/pch.h:1:
/torch/include/c10/core/impl/InlineEvent.h:117:5: error: invalid cast to abstract class type
"""
USER_ERROR = """\
FAILED: [code=1] obj/x/answer.cpp.o
/usr/bin/c++ -include /cache/pch/f113d2f88a24e0f1/pch.h -c /p/answer.cpp -o obj/x/answer.cpp.o
/p/answer.cpp:3:12: error: 'undeclared' was not declared in this scope
"""


@pytest.mark.parametrize(("output", "blamed"), [(DAMAGED_DECLARATIONS, True), (USER_ERROR, False)])
def test_which_failures_are_retried_without_the_pch(output: str, blamed: bool) -> None:
    error = BuildError("compile failed", output, output.splitlines()[-1])
    assert (pch_health.pch_failure([], True, error) is not None) is blamed
    assert pch_health.pch_failure([], False, error) is None  # no PCH used: never its fault

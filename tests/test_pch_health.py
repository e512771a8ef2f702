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

from pep517_torch.core.pch import cache as pch_cache, health as pch_health, seal as pch_seal
from pep517_torch.core.plan import prepare
from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.errors import BuildError
from tests.conftest import count, write
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


def sealed_entry(directory: Path, stub: str = "#include <torch/library.h>\n") -> Path:
    """An entry as a build leaves it: stub, flag set, then the .gch with its seal."""
    directory.mkdir(parents=True, mode=0o700)
    (directory / pch_seal.STUB).write_text(stub)
    pch_cache.write_info(directory, {"header": "torch/library.h", "flags": ["-O3"]})
    return sealed(directory / GCH, 100_000)


def test_the_whole_entry_is_sealed_the_stub_and_the_flag_set_too(tmp_path: Path) -> None:
    """A line appended to an entry's pch.h would be precompiled into every project sharing it
    once anything rebuilt its .gch: the seal covers the stub and the flag set, and a build
    compares both with what it would write (issue 35 item 5)."""
    stub = "#include <torch/library.h>\n"
    info = {"header": "torch/library.h", "flags": ["-O3"]}
    tampered = {
        "a line appended to the stub": lambda d: (d / pch_seal.STUB).write_text(stub + "#define EVIL 1\n"),
        "another flag set": lambda d: pch_cache.write_info(d, {**info, "flags": ["-O0"]}),
        "the stub replaced, mtime kept": lambda d: subprocess.run(
            ["cp", "-p", str(d.parent / "other.h"), str(d / pch_seal.STUB)], check=True),
    }
    (tmp_path / "other.h").write_text("#include <evil.h>\n")
    for index, (what, tamper) in enumerate(tampered.items()):
        directory = tmp_path / f"e{index}"
        sealed_entry(directory, stub)
        assert pch_cache.damage(directory, stub, info) is None, what
        tamper(directory)
        assert pch_cache.damage(directory) is not None, what  # the seal alone sees it
        assert pch_cache.damage(directory, stub, info) is not None, what
    count("tampered PCH cache entries", len(tampered))
    unsealed = tmp_path / "not-made-yet"  # a stub changed before any .gch was made from it
    unsealed.mkdir(mode=0o700)
    (unsealed / pch_seal.STUB).write_text(stub + "#define EVIL 1\n")
    assert "not the one this build writes" in (pch_cache.damage(unsealed, stub, info) or "")


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_an_entry_another_user_made_or_may_write_is_not_trusted(tmp_path: Path) -> None:
    for index, change in enumerate((lambda p: os.chown(p, 12345, -1), lambda p: p.chmod(0o777))):
        directory = tmp_path / f"e{index}"
        gch = sealed_entry(directory)
        assert pch_cache.damage(directory) is None
        change(gch if index == 0 else directory)
        assert "is not to be trusted" in (pch_cache.damage(directory) or "")
    assert pch_cache.unwritable(tmp_path / "fresh" / "pch") is None
    assert (tmp_path / "fresh" / "pch").stat().st_mode & 0o777 == 0o700  # private from the start


def test_cache_lists_a_damaged_entry_as_damaged(tmp_path: Path) -> None:
    for key in ("good", "bad"):
        directory = tmp_path / "pch" / key
        directory.mkdir(parents=True)
        pch_cache.write_info(directory, {"header": "torch/library.h", "torch": "2.13.0"})
        sealed(directory / GCH, 100_000)  # after the flag set, as a build seals it
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
def test_a_poisoned_stub_never_reaches_another_build(library_pch: Path, tmp_path: Path) -> None:
    """A line appended to the shared entry's stub (and the .gch rebuilt from it, sealed again,
    as a build would): the next build that shares the entry removes it, makes it again from the
    stub it writes itself, and its TU never sees the line."""
    directory = copy_cache(library_pch, tmp_path / "cache")
    stub = directory / pch_seal.STUB
    stub.write_text(stub.read_text() + '#error "poisoned: this line came from the cache"\n')
    pch_seal.write_seal(str(directory / GCH), str(directory / GCH))  # re-sealed, as if rebuilt
    assert pch_cache.damage(directory) is None  # the seal matches the poisoned entry...
    result = jit("pch_after_poison", tmp_path, tmp_path / "cache")
    assert result.returncode == 0 and "answer 42" in result.stdout, result.stderr  # ...the build does not use it
    assert "is not the one this build writes" in result.stderr
    assert "poisoned" not in stub.read_text()


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

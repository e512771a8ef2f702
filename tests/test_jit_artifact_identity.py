"""A JIT artifact that is not the one we built is never imported as ours (issue 24 item 4).

The stamp records the artifact's identity (size, mtime, ctime, inode) when it is linked: a
truncated .so, or another valid library copied over it with ``cp -p`` (same mtime), rebuilds
on the next load. The warm path stays one stamp read and stats (no subprocess: test_jit.py).
Sources: a Python.h-only module (about a second each).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write
from tests.tiny_project import c_api_module

pytestmark = pytest.mark.compile

SOURCE = c_api_module(
    "static PyObject* value(PyObject*, PyObject*) { return PyLong_FromLong(VALUE); }",
    '{"value", value, METH_NOARGS, nullptr}', name=None,
)
CHILD = """
import sys, pep517_torch
module = pep517_torch.load("ident", [sys.argv[1]], build_directory=sys.argv[2],
                           extra_cflags=sys.argv[3:], verbose=True)
print("value", module.value())
"""


def load(source: Path, build: Path, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, str(source), str(build), *flags],
                          capture_output=True, text=True, timeout=600, env={**os.environ, **env})


def value_of(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[-1]


def test_a_truncated_or_replaced_artifact_rebuilds(tmp_path: Path) -> None:
    source = write(tmp_path / "src" / "ident.cpp", SOURCE)
    build = tmp_path / "build"
    assert value_of(load(source, build, "-DVALUE=42")) == "42"
    [artifact] = build.glob("ident*.so")

    with artifact.open("r+b") as stream:  # truncated (a full disk, a killed copy)
        stream.truncate(artifact.stat().st_size // 2)
    again = load(source, build, "-DVALUE=42")
    assert value_of(again) == "42"
    assert "is not the file this build made: relinking it" in again.stderr

    # Another valid library, with our module's name and a different value, copied over ours
    # with its times kept (cp -p): imported as ours, it would say 7.
    other = tmp_path / "other"
    assert value_of(load(source, other, "-DVALUE=7")) == "7"
    [impostor] = other.glob("ident*.so")
    os.utime(impostor, ns=(artifact.stat().st_atime_ns, artifact.stat().st_mtime_ns))
    subprocess.run(["cp", "-p", str(impostor), str(artifact)], check=True)
    replaced = load(source, build, "-DVALUE=42")
    assert value_of(replaced) == "42", replaced.stderr
    warm = load(source, build, "-DVALUE=42")
    assert value_of(warm) == "42" and "building" not in warm.stderr, warm.stderr


def test_turning_the_pch_off_or_on_rebuilds_nothing(tmp_path: Path) -> None:
    """Objects are the same with and without the precompiled header (test_core_build.py), so
    the PCH choice is not part of the stamp's key: the artifact built with it stays current."""
    source = write(tmp_path / "src" / "ident.cpp", SOURCE)
    build = tmp_path / "build"
    assert value_of(load(source, build, "-DVALUE=5")) == "5"
    [artifact] = build.glob("ident*.so")
    built, stamped = artifact.stat(), (build / "ident.stamp").stat()
    for switch in ("0", "1"):
        result = load(source, build, "-DVALUE=5", PEP517_TORCH_PCH=switch)
        assert value_of(result) == "5" and "building" not in result.stderr, result.stderr
    assert (artifact.stat().st_ino, artifact.stat().st_mtime_ns) == (built.st_ino, built.st_mtime_ns)
    # and the warm path answered: the cold one would have written the stamp again
    assert (build / "ident.stamp").stat().st_ino == stamped.st_ino


@pytest.mark.parametrize("bad", ["a FIFO", "garbage", "a symlink elsewhere"])
def test_a_stamp_that_is_no_stamp_is_named_and_rebuilds(tmp_path: Path, bad: str) -> None:
    """Issue 43 item 5: the stamp is read as untrusted input: a FIFO never hangs load(), and a
    damaged or foreign one is a rebuild, named in one line."""
    source = write(tmp_path / "src" / "ident.cpp", SOURCE)
    build = tmp_path / "build"
    assert value_of(load(source, build, "-DVALUE=42")) == "42"
    [stamp] = build.glob("*.stamp")
    good = stamp.read_bytes()
    stamp.unlink()
    if bad == "a FIFO":
        os.mkfifo(stamp)
    elif bad == "garbage":
        stamp.write_bytes(b"\x00garbage")
    else:
        (tmp_path / "elsewhere.stamp").write_bytes(good)
        stamp.symlink_to(tmp_path / "elsewhere.stamp")
    again = load(source, build, "-DVALUE=42")
    assert value_of(again) == "42"
    named = [line for line in again.stderr.splitlines() if str(stamp) in line]
    assert len(named) == 1 and "ignored; building 'ident' again" in named[0], again.stderr
    assert stamp.is_file() and not stamp.is_symlink()  # written anew
    from tests.conftest import count

    count("issue 43 item 5: a JIT stamp that is no stamp")

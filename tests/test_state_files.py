"""State found on disk is untrusted input (issue 43 items 5, 6): every store against the whole
list of hostile files, and the one sanitiser.

Each store's file is replaced by each bad file a careless or hostile user leaves (garbage,
truncated, empty, a list, a future format, deep nesting, bad UTF-8, a directory, a symlink to a
good file elsewhere, its format key alone, a symlink to /dev/zero, a FIFO, a sparse file past
the bound) and read by the store in a child process bounded in time and memory (on the code
before this work a FIFO hung the reader and /dev/zero took gigabytes): it must come back at
once, treat the file as absent, and, where it says so, name the file and why.
"""

from __future__ import annotations

import json
import marshal
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import count

# -- the bad files ----------------------------------------------------------------------------

Maker = Callable[[Path, "Store"], None]


def _bytes(data: bytes) -> Maker:
    return lambda path, store: path.write_bytes(data)


def _symlink_elsewhere(path: Path, store: Store) -> None:
    elsewhere = path.parent.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    (elsewhere / path.name).write_bytes(store.good)
    path.symlink_to(elsewhere / path.name)


def _fifo(path: Path, store: Store) -> None:
    os.mkfifo(path)


def _sparse(path: Path, store: Store) -> None:
    with open(path, "wb") as file:
        file.truncate(store.limit + 1)


HOSTILE: dict[str, Maker] = {
    "garbage": _bytes(b"garbage \x00\x01 not a state file"),
    "truncated": lambda path, store: path.write_bytes(store.good[: len(store.good) // 2]),
    "empty": _bytes(b""),
    "a list": lambda path, store: path.write_bytes(store.listed),
    "a future format": lambda path, store: path.write_bytes(store.future),
    "deep nesting": _bytes(b"[" * 100_000 + b"]" * 100_000),
    "bad UTF-8": _bytes(b'{"format": 1, "build_dir": "\xff\xfe"}'),
    "a directory": lambda path, store: path.mkdir(),
    "a symlink elsewhere": _symlink_elsewhere,
    "its format alone": lambda path, store: path.write_bytes(store.alone),
    "/dev/zero": lambda path, store: path.symlink_to("/dev/zero"),
    "a FIFO": _fifo,
    "past its bound": _sparse,
}


class Store:
    """A state file: where it lies in a fresh folder, what its reader says in a child process,
    a good file, and its store's own spellings of a list, a future format and a lone format key."""

    def __init__(self, name: str, relative: str, check: str, *, good: dict | bytes, limit: int,
                 future: dict | bytes, alone: dict | bytes, listed: bytes = b"[1, 2, 3]") -> None:
        self.name, self.relative, self.check, self.limit = name, relative, check, limit
        self.good, self.future, self.alone = map(_encoded, (good, future, alone))
        self.listed = listed


def _encoded(value: dict | bytes) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


# Each check runs in the child with ``folder`` (the store's folder) and ``path`` (its file), and
# prints what the store made of it; ``named``: the line it says names the file.
STORES = [
    Store("ledger", "build/.pep517_torch_ledger.json", """
from pep517_torch.shipped_runtime import ledger
from pep517_torch.shipped_runtime.state_file import Unreadable
try:
    ledger.read(folder)
    result["named"] = None
except Unreadable as error:
    result["named"] = str(error)
result["absent"] = ledger.load(folder) == {} and ledger.section(folder, "compile") is None
""", good={"format": 1, "build_dir": "/x", "explain": {"at": "now", "by": "a build",
                                                       "outcome": "built", "everything": None,
                                                       "steps": []}},
          limit=64 << 20, future={"format": 2, "build_dir": "/x"}, alone={"format": 1}),
    Store("no-op record", "cache/last-builds/RECORD", """
from pep517_torch.backend import noop_cache
from pep517_torch.shipped_runtime.state_file import Unreadable
try:
    noop_cache.read_record(path, "wheel")
    result["named"] = None
except Unreadable as error:
    result["named"] = str(error)
result["absent"] = noop_cache.replay_wheel(str(project), str(out), {}) is None
""", good={"format": 3}, limit=64 << 20, future={"format": 4}, alone={"format": 3}),
    Store("probe cache", "cache/probes.json", """
from pep517_torch.core.toolchain import probe_cache
result["absent"] = probe_cache.remembered("kind", [], [], lambda: "probed", env=env) == "probed"
result["named"] = said()
""", good={"version": 2, "entries": {}}, limit=4 << 20, future={"version": 3, "entries": {}},
          alone={"version": 2}),
    Store("PCH seal", "pch/entry/pch.h.gch.seal", """
from pep517_torch.core.pch import seal as pch_seal
why = pch_seal.damage(str(folder / "pch.h.gch"))
result["absent"] = why is not None  # a seal that cannot be read is no seal: the entry is not used
result["named"] = why
""", good={"version": 2}, limit=64 << 10, future={"version": 3}, alone={"version": 2}),
    Store("PCH flag set", "pch/entry/entry.json", """
from pep517_torch.core.pch import cache as pch_cache
result["absent"] = pch_cache._read_info(folder) == {}
result["named"] = pch_cache.damage(folder, expected_info={"header": "torch/extension.h"})
""", good={"header": "torch/extension.h"}, limit=64 << 10, future=b'{"header": {"nested": 1}}',
          alone=b'{"flags": [1, 2]}'),
    Store("JIT stamp", "jit/ext.stamp", """
from pep517_torch.jit import stamp
from pep517_torch.shipped_runtime.state_file import Unreadable
try:
    stamp.load(path)
    result["named"] = None
except Unreadable as error:
    result["named"] = str(error)
result["absent"] = stamp.read(path) is None and not stamp.is_fresh(path, "key", str(path) + ".so", env)
""", good=marshal.dumps({"version": 9, "key": "k"}), limit=16 << 20,
          future=marshal.dumps({"version": 10}), alone=marshal.dumps({"version": 9}),
          listed=marshal.dumps([1, 2, 3])),
    Store("index manifest", "index/.pep517_torch-index.json", """
from pep517_torch.distribution.index.folder import Folder
with Folder.opened(folder, lambda name: True, lambda name: True) as opened:
    result["absent"] = opened.owned == {} and opened.folders == set()
    result["named"] = " ".join(opened.notes) or None
""", good={"generator": "pep517_torch index", "files": {}, "folders": []}, limit=16 << 20,
          future={"generator": "x", "files": {"a": 5}, "folders": []}, alone={"generator": "x"}),
    Store("lock owner", "build/.pep517_torch.lock.owner", """
from pep517_torch.shipped_runtime.lock import BuildDirLock
whom, what = BuildDirLock(folder, "the waiter's own words").owner()
result["absent"] = whom.isprintable() and what.isprintable()
result["named"] = None if whom == "another process" else whom
""", good=b"123 a wheel of demo 1.0\n", limit=4096, future=b"x", alone=b"x", listed=b"x"),
    Store("trace", "build/build-trace.json", """
from pep517_torch.core.ninja import trace_view
try:
    trace_view.read(folder)
    result["named"] = None
except (OSError, ValueError) as error:
    result["named"] = str(error)
result["absent"] = result["named"] is not None
""", good={"traceEvents": []}, limit=256 << 20, future={"traceEvents": 5},
          alone={"displayTimeUnit": "ms"}),
    Store("matrix environment", "cache/matrix-envs/cp311-torch2.13-cpu/.pep517_torch-matrix.json", """
from pep517_torch.cli.matrix.environments import cached_envs
found = [(f, made) for f, made in cached_envs(env) if f.name == "cp311-torch2.13-cpu"]
result["absent"] = [(f.name, sorted(made)) for f, made in found] in ([], [("cp311-torch2.13-cpu", [])], [("cp311-torch2.13-cpu", ["used"])])
result["named"] = None
""", good={"torch": "2.13.0"}, limit=64 << 10, future=b"[]", alone=b"{}"),
    Store("ninja log", "build/.ninja_log", """
from pep517_torch.shipped_runtime import trace
before = trace.mark(folder)
result["absent"] = trace.entries_since(folder, before) == [] and before.last == {}
result["named"] = None
""", good=b"# ninja log v5\n0\t10\t1\tobj/a.o\tabc\n", limit=512 << 20, future=b"# ninja log v99\n",
          alone=b"# ninja log v5\n"),
]
# What a store says of its file names it only where it says anything (the lock's waiter shows
# "another process"; the PCH flag set is compared, never shown).
NAMING = {"ledger", "no-op record", "probe cache", "JIT stamp", "index manifest", "trace"}
# Bad files a store reads as what they are: the lock's owner line is free text, and garbage,
# a truncated line or a list are only an owner it cannot name.
TEXT = ("garbage", "truncated", "empty", "a list", "a future format", "deep nesting", "bad UTF-8",
        "its format alone")
READABLE = {(store, case) for store in ("lock owner", "ninja log") for case in TEXT}

CHILD = """
import json, os, sys
from pathlib import Path
folder, path, project, out = map(Path, sys.argv[1:5])
env = dict(os.environ)
said_lines = []
import pep517_torch.shipped_runtime.user_line as user_line
original = user_line.print_line
def capture(line, file=None):
    said_lines.append(line)
user_line.print_line = capture
def said():
    return " ".join(said_lines) or None
result = {}
%s
result["said"] = said()
print(json.dumps(result))
"""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # /dev/zero read whole: MemoryError


def _read_in_child(store: Store, folder: Path, path: Path, project: Path) -> dict:
    env = {**os.environ, "PEP517_TORCH_CACHE_DIR": str(project.parent / "cache")}
    result = subprocess.run(
        [sys.executable, "-c", CHILD % store.check, folder, path, project, project.parent / "out"],
        capture_output=True, text=True, timeout=60, env=env, preexec_fn=_limited,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _record_location(project: Path, cache: Path) -> Path:
    code = ("import sys; from pep517_torch.backend import noop_cache; "
            "print(noop_cache.record_file({'PEP517_TORCH_CACHE_DIR': sys.argv[1]}, 'wheel', sys.argv[2], {}))")
    found = subprocess.run([sys.executable, "-c", code, cache, project], capture_output=True,
                           text=True, check=True)
    return Path(found.stdout.strip())


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("store", STORES, ids=[s.name for s in STORES])
def test_every_store_treats_a_bad_file_as_absent(tmp_path: Path, store: Store, case: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "1.0"\n')
    path = tmp_path / store.relative
    if store.name == "no-op record":
        path = _record_location(project, tmp_path / "cache")
    path.parent.mkdir(parents=True, exist_ok=True)
    if store.name == "PCH seal":
        (path.parent / "pch.h.gch").write_bytes(b"precompiled" * 100)
    HOSTILE[case](path, store)
    result = _read_in_child(store, path.parent, path, project)
    assert result["absent"], result
    if store.name == "lock owner" and case not in {c for _, c in READABLE}:
        assert result["named"] is None, result  # no owner named from a file that is none
    if store.name in NAMING and (store.name, case) not in READABLE:
        named = result["named"] or result["said"]
        assert named and str(path) in named, result
        why = named.split(str(path), 1)[1]
        assert len(why) > 3 and "\n" not in named, result  # the file, then why: one line
    elif store.name in ("PCH seal", "PCH flag set") and (store.name, case) not in READABLE:
        assert result["named"], result  # the entry is not used, and why
    count("issue 43 item 5: a hostile state file, store by store")


# -- the sanitiser ----------------------------------------------------------------------------

ESCAPES = "\x1b[2J\x1b]0;owned\x07"


def test_one_sanitiser_shows_control_characters_escaped() -> None:
    from pep517_torch.shipped_runtime.user_line import printable, shown, user_line

    assert shown(f"a{ESCAPES}b") == "a\\x1b[2J\\x1b]0;owned\\x07b"
    assert shown("line\nbreak\tand \u202e bidi ü") == "line\\nbreak\\tand \\u202e bidi ü"
    assert printable("two\nlines\tkept\x1b") == "two\nlines\tkept\\x1b"
    assert user_line(f"wrote {ESCAPES}") == "pep517_torch: wrote \\x1b[2J\\x1b]0;owned\\x07"
    count("issue 43 item 6: the sanitiser", 4)


def test_a_lock_owner_line_reaches_the_waiter_escaped(tmp_path: Path) -> None:
    """A waiter's notice shows the owner file's words through the sanitiser."""
    from pep517_torch.shipped_runtime.lock import OWNER_NAME, BuildDirLock

    (tmp_path / OWNER_NAME).write_text(f"123 {ESCAPES}\n")
    holder = BuildDirLock(tmp_path, "the holder")
    holder.lock.acquire()
    said: list[str] = []
    try:
        waiter = BuildDirLock(tmp_path, "the waiter", notice_after=0.0, say=said.append)
        assert not waiter.lock.acquire(wait=0)
        whom, what = waiter.owner()
        line = f"waiting for {whom}, which is building {what}"
    finally:
        holder.release()
    assert "\x1b" not in line and "\x07" not in line and "\\x1b[2J" in line, line
    count("issue 43 item 6: the lock owner's words")


def test_index_says_a_hostile_file_name_escaped(tmp_path: Path) -> None:
    """A file in an index folder is named by whoever put it there: its skip line is one line,
    its control characters escaped."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    (folder / f"evil{ESCAPES}\nfake.whl").write_bytes(b"not a zip")
    done = subprocess.run([sys.executable, "-m", "pep517_torch", "index", str(folder)],
                          capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert "\x1b" not in said and "\x07" not in said, said
    skipped = [line for line in said.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and "evil\\x1b[2J\\x1b]0;owned\\x07\\nfake.whl" in skipped[0], said
    count("issue 43 item 6: index's skip lines")


@pytest.mark.parametrize("wheel", ["lightops-0.3.0+pt213cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                                   "lightops-0.3.0-cp311-cp311-manylinux_2_28_x86_64-pt213cu130.whl",
                                   "light_ops-1.0-1-cp311-abi3-linux_x86_64.whl"])
def test_a_record_as_a_build_writes_it_is_read_back(tmp_path: Path, wheel: str) -> None:
    """The checks refuse what no build writes, never what one does: a local version label, a
    variant label after the tags, a build tag."""
    from pep517_torch.backend import noop_cache

    location = tmp_path / "last-builds" / "wheel-0123.json"
    location.parent.mkdir()
    build_dir = tmp_path / "build"
    record = {"format": noop_cache.FORMAT, "key": ["wheel", "/p", {}, sys.executable], "env": {"A": None},
              "files": {"/p/pyproject.toml": [1, 2, 3, 4, 5], "/p/gone": None}, "facts": {},
              "build_dir": str(build_dir), "written_ns": 1, "notes": ["pep517_torch: a note"],
              "output": {"wheel": wheel, "kept": noop_cache.kept_path(location, build_dir),
                         "kept_identity": [1, 2, 3, 4], "extensions": 1, "platform": "a note"}}
    location.write_text(json.dumps(record))
    assert noop_cache.read_record(str(location), "wheel") == record
    count("issue 43 item 2: what a build writes is read back")

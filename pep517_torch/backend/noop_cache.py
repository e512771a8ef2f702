"""A no-op wheel or metadata hook: the last result again, when nothing it was made from changed.

After a successful ``build_wheel`` or ``prepare_metadata_for_build_wheel``, ``noop_record.py``
writes a record (JSON, in the machine cache: ``<cache>/last-builds/``) keyed by the hook, the
project root, the config settings and the interpreter. It holds what the result was made
from: every environment variable the resolution read (set or not) and SOURCE_DATE_EPOCH; the
record's identity (device, inode, size, mtime, ctime) of every file and folder the build consulted (pyproject.toml,
the files the wheel ships, the folders listed to find them, sources, readme and license files,
a version file, the files a tool probe's answer rests on, where nvcc was looked for); the
machine's facts (``build_inputs.REPLAY_FACTS``: this interpreter, pep517_torch's version and its
own files, the libraries that shape a wheel, torch's version file, ninja, the compiler CXX or
PATH names, every PATH folder); for a wheel with extensions, its build directory, whose ninja
must have nothing to do (``core/compile_record.py``: nvcc among its facts); and the result: the
wheel kept beside the artifacts (a hard link), or the ``.dist-info`` files' bytes. Those three
are a record of ``shipped_runtime/build_inputs.py``, checked by its ``why_stale``.

The hooks call :func:`replay_wheel` and :func:`replay_metadata` first. When every value is
what the record says, the kept wheel is copied to the output directory (or the dist-info
written), the build's notes and a summary are printed, and nothing else is imported: no
config, no packaging, no compile core but ``compile_record``. Anything else (a difference, no
record, an unreadable one, any error) returns None, and the hook builds as always, which
refreshes the record; why it did not replay (:func:`why_not_replayed`) is kept for the build's
explanation (``explain``). A record is read as untrusted input (``shipped_runtime/state_file.py``:
a regular file, bounded, of :data:`SHAPE`), and what it names is checked as strictly as a build
would make it: the wheel's file name, the kept wheel's place (beside the artifacts, or beside
the record, under the one name the writer gives it), the ``.dist-info``'s name and members. A
record that fails is named in one line and the hook builds. Standard library and
``shipped_runtime/`` only; it only reads (the build directory's lock is the real build's).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..shipped_runtime.environment import NO_REPLAY, cache_root
from ..shipped_runtime import build_inputs
from ..shipped_runtime.files import temporary_name
from ..shipped_runtime.state_file import (
    IDENTITY, Exactly, ListOf, Map, Unreadable, ignored, problem, read_json,
)
from ..shipped_runtime.user_line import log, printable, user_line

if TYPE_CHECKING:  # nothing of the config layer at run time: a replay imports none of it
    from ..config import ConfigSettings

FORMAT = 3  # bumped whenever a record's shape changes: an older one is no record
RECORDS = "last-builds"  # the records' folder in the machine cache
LIMIT = 64 << 20  # bytes: a metadata record holds the .dist-info's files
# PEP 427's file names (a build tag, a PEP 825 variant label after the tags) and PEP 376's
# folders, as pep517_torch writes them (normalised names)
_WHEEL = re.compile(r"[A-Za-z0-9_.]+-[A-Za-z0-9_.!+]+(-[0-9][A-Za-z0-9_.]*)?(-[A-Za-z0-9_.]+){3,4}\.whl")
_DIST_INFO = re.compile(r"[A-Za-z0-9_.]+-[A-Za-z0-9_.!+]+\.dist-info")
_MEMBER = re.compile(r"[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*")


def _matches(pattern: re.Pattern[str]) -> Any:
    def check(value: Any) -> str | None:
        ok = isinstance(value, str) and pattern.fullmatch(value) is not None and ".." not in value.split("/")
        return None if ok else "is not a name pep517_torch writes"
    return check


SHAPE = {
    "format": Exactly(FORMAT), "key": ListOf(object, 4), "env": Map((str, None)),
    "files": Map((IDENTITY, None)), "facts": Map(object), "build_dir": (str, None),
    "output": dict, "written_ns": int, "notes": [str],
}
OUTPUTS = {
    "wheel": {"wheel": _matches(_WHEEL), "kept": str, "kept_identity": ListOf(int, 4),
              "extensions": int, "platform": (str, None)},
    "metadata": {"dist_info": _matches(_DIST_INFO), "files": Map(str)},
}


def kept_path(location: str | os.PathLike[str], build_dir: str | os.PathLike[str] | None) -> str:
    """Where the record at ``location`` keeps its wheel: beside the artifacts, or beside the
    record for a wheel without extensions. The one place a record may name."""
    stem = os.path.splitext(os.path.basename(location))[0]
    if build_dir is not None:
        return os.path.join(build_dir, f".pep517_torch-last-{stem}.whl")
    return os.path.splitext(os.fspath(location))[0] + ".whl"


def read_record(location: str, hook: str) -> dict[str, Any] | None:
    """The record at ``location`` (None: there is none); :class:`Unreadable` for one that is
    not a record this hook writes, or names a wheel, place or member no build would."""
    record = read_json(location, LIMIT, SHAPE)
    if record is None:
        return None
    found = problem(record["output"], OUTPUTS[hook], "output")
    if found is None and hook == "wheel" and record["output"]["kept"] != kept_path(location, record["build_dir"]):
        found = "output.kept is not where pep517_torch keeps the wheel"
    if found is None and hook == "metadata":
        bad = [name for name in record["output"]["files"] if _matches(_MEMBER)(name) is not None]
        found = f"output.files names {bad[0]!r}, no member of a .dist-info" if bad else None
    if found is not None:
        raise Unreadable(location, found)
    return record


def kept_identity(st: os.stat_result) -> list[int] | None:
    """The kept wheel's identity: no ctime, which a hard link's count changes (a frontend
    deleting its copy of the wheel) while the bytes stay."""
    return build_inputs.lasting(build_inputs.identity_of(st))


def record_key(hook: str, root: str, config_settings: ConfigSettings) -> list[Any]:
    return [hook, root, config_settings or {}, sys.executable]


def record_file(
    env: Mapping[str, str], hook: str, root: str, config_settings: ConfigSettings
) -> str | None:
    """Where the record of ``hook`` for this project, settings and interpreter lives; None:
    replays are off, or the settings cannot be written as JSON."""
    if env.get(NO_REPLAY):
        return None
    try:
        key = json.dumps(record_key(hook, root, config_settings), sort_keys=True)
    except (TypeError, ValueError):
        return None
    name = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return str(cache_root(env) / RECORDS / f"{hook}-{name}.json")


# -------------------------------------------------------------------------- the machine


def machine_facts(env: Mapping[str, str]) -> dict[str, Any]:
    """What this machine and interpreter bring to a build (``build_inputs.REPLAY_FACTS``)."""
    return build_inputs.observe(build_inputs.REPLAY_FACTS, env)


# -------------------------------------------------------------------------- the replay


def _matching_record(hook: str, root: str, config_settings: ConfigSettings) -> dict[str, Any] | None:
    """The record of ``hook`` when everything it names is as it says, else None (why:
    :func:`take_missed`)."""
    env = os.environ
    location = record_file(env, hook, root, config_settings)
    if location is None:
        return None
    try:
        record = read_record(location, hook)
    except Unreadable as error:
        ignored(error, "building (a replay needs a record pep517_torch wrote)")
        _missed[hook, root] = f"{error.path} could not be read ({error.why})"
        return None
    if record is None:
        return None
    why = why_not_replayed(record, hook, root, config_settings, env)
    if why is not None:
        _missed[hook, root] = why
        return None
    return record


def why_not_replayed(record: Mapping[str, Any], hook: str, root: str,
                     config_settings: ConfigSettings, env: Mapping[str, str]) -> str | None:
    """Why ``record`` cannot be replayed now, in words (None: it can): a variable the build
    read, a machine fact or a file it consulted (``build_inputs.why_stale``), another hook,
    project, settings or interpreter, then ninja's work in the build directory."""
    changed = build_inputs.why_stale(record, env, content=False)
    if changed is not None:
        return changed
    if record.get("key") != json.loads(json.dumps(record_key(hook, root, config_settings))):
        return "its record is for another project, settings or interpreter"
    build_dir = record.get("build_dir")
    if build_dir is not None:
        from ..core import compile_record

        return compile_record.why_not_current(Path(build_dir), Path(root), env)
    return None


_missed: dict[tuple[str, str], str] = {}  # (hook, root) -> why its last replay did not happen


def take_missed(hook: str, root: str | os.PathLike[str]) -> str | None:
    """Why this process's last replay of ``hook`` for the project at ``root`` did not happen
    (None: there was no record to replay, or it did), once: the build that follows keeps it
    for ``explain``."""
    return _missed.pop((hook, os.fspath(root)), None)


def _copy(source: Any, target: str) -> None:
    """``source`` (an open file) to ``target``, whole or not at all."""
    temporary = str(temporary_name(Path(target)))
    try:
        with open(temporary, "xb") as out:
            size, offset = os.fstat(source.fileno()).st_size, 0
            try:
                while offset < size:
                    sent = os.sendfile(out.fileno(), source.fileno(), offset, size - offset)
                    if sent == 0:
                        break
                    offset += sent
            except OSError:
                out.seek(0)
                out.truncate()
                source.seek(0)
                while chunk := source.read(1 << 20):
                    out.write(chunk)
        os.replace(temporary, target)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def _holds_dist_info(fd: int, wheel: str) -> bool:
    """Whether the zip open at ``fd`` lists the ``.dist-info`` folder the file name ``wheel``
    promises (``name-1.0-….whl``: ``name-1.0.dist-info/``), read from its central directory
    alone: a record's name is the kept wheel's, not another's (no zipfile import on a replay)."""
    import struct

    distribution, version = wheel.split("-")[:2]
    size = os.fstat(fd).st_size
    start = max(0, size - (1 << 16) - 22)  # the end record, after at most a 64 KiB comment
    tail = os.pread(fd, size - start, start)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 20:
        return False
    length, offset = struct.unpack("<II", tail[at + 12:at + 20])
    if length > LIMIT or offset + length > size:
        return False  # zip64 (a wheel past 4 GiB) or damaged: build
    return f"{distribution}-{version}.dist-info/".encode() in os.pread(fd, length, offset)


def replay_wheel(root: str, wheel_directory: str, config_settings: ConfigSettings) -> str | None:
    """The last wheel of this project, copied into ``wheel_directory``, when nothing it was
    made from changed; its file name, or None (then build)."""
    started = time.perf_counter()
    try:
        record = _matching_record("wheel", root, config_settings)
        if record is None:
            return None
        output = record["output"]
        name = output["wheel"]
        try:
            kept = open(output["kept"], "rb")
        except OSError:
            _missed["wheel", root] = f"the wheel it keeps, {output['kept']}, is gone"
            return None
        with kept:
            if kept_identity(os.fstat(kept.fileno())) != output["kept_identity"]:
                _missed["wheel", root] = f"the wheel it keeps, {output['kept']}, changed"
                return None  # replaced or changed since the record: build
            if not _holds_dist_info(kept.fileno(), name):
                ignored(Unreadable(record_file(os.environ, "wheel", root, config_settings) or "",
                                   f"it names {name}, not the wheel it keeps"), "building")
                return None
            os.makedirs(wheel_directory, exist_ok=True)
            target = os.path.join(wheel_directory, name)
            _copy(kept, target)
        mark_replayed(root, config_settings)
    except Exception:  # noqa: BLE001 - a replay that cannot happen is a build, never an error
        return None
    for line in record.get("notes", []):
        log(printable(line))  # as the build printed them
    count = output.get("extensions", 0)
    if count:
        log_line(f"{count} extension{'s' * (count != 1)}: 0 compiled, 0 linked in 0.0 s"
            " (nothing changed since the last build)")
    if output.get("platform"):
        log_line(f"platform tag {output['platform']}")
    log_line(f"wrote {target} (nothing changed since the last build: its wheel again,"
        f" pep517_torch {time.perf_counter() - started:.2f} s)")
    return str(name)


def log_line(message: str) -> None:
    log(user_line(message))


def mark_replayed(root: str, config_settings: ConfigSettings) -> None:
    """The record's mtime says when the wheel was last replayed (``explain`` reads it)."""
    location = record_file(os.environ, "wheel", root, config_settings)
    if location is not None:
        try:
            os.utime(location)
        except OSError:
            pass


def replayed_at(root: str, config_settings: ConfigSettings, env: Mapping[str, str]) -> float | None:
    """When the last replay of this project's wheel happened, if its record is there."""
    location = record_file(env, "wheel", root, config_settings)
    try:
        return None if location is None else os.stat(location).st_mtime
    except OSError:
        return None


def last_replay(build_dir: str, root: str, env: Mapping[str, str],
                after_ns: int) -> tuple[int, dict[str, Any]] | None:
    """The latest replay of a wheel kept in ``build_dir`` for the project at ``root`` later
    than ``after_ns`` (when the build folder's last build ran), by any interpreter or settings
    (a frontend's isolated environment is another interpreter): when, and its record. A record
    is written with ``written_ns`` as its mtime, and a replay moves the mtime on. Records that
    cannot be read are passed over."""
    folder = cache_root(env) / RECORDS
    try:
        with os.scandir(folder) as scan:
            candidates = [(entry.stat(follow_symlinks=False).st_mtime_ns, entry.path) for entry in scan
                          if entry.name.startswith("wheel-") and entry.name.endswith(".json")]
    except OSError:
        return None
    for marked, location in sorted(candidates, reverse=True):
        if marked <= after_ns:
            break
        try:
            record = read_record(location, "wheel")
        except Unreadable:
            continue
        if (record is None or record["build_dir"] != build_dir or record["key"][1] != root
                or marked <= record["written_ns"]):  # written with that mtime: no replay since
            continue
        return marked, record
    return None


def replay_metadata(root: str, metadata_directory: str, config_settings: ConfigSettings) -> str | None:
    """The last ``.dist-info`` of this project, written into ``metadata_directory``, when
    nothing it was made from changed; its name, or None (then resolve)."""
    import binascii

    try:
        record = _matching_record("metadata", root, config_settings)
        if record is None:
            return None
        name, files = record["output"]["dist_info"], record["output"]["files"]
        contents = {relative: binascii.a2b_base64(data) for relative, data in files.items()}
        for relative, data in contents.items():
            target = os.path.join(metadata_directory, name, *relative.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as file:
                file.write(data)
    except Exception:  # noqa: BLE001 - as in replay_wheel
        return None
    return str(name)

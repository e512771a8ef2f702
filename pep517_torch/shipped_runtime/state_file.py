"""Reading a state file pep517_torch wrote earlier: untrusted input, read as such.

A build folder, an index folder and the machine cache are the user's folders: what lies in
them may be damaged, truncated, stale, copied from elsewhere or forged. Every store (the ledger,
the no-op records, the probe cache, the PCH cache's entries and seals, the JIT stamps, the index
manifest, the lock's owner line, the timeline, a matrix environment's record) reads its file
here:

- opened without following a symlink (``O_NOFOLLOW``: a link to ``/dev/zero`` or to another
  folder's file is refused, never read), without blocking (``O_NONBLOCK``: a FIFO does not
  hang the reader), and only as a regular file (``fstat``: never a directory, FIFO, socket or
  device);
- read up to a bound its kind never exceeds (never a memory blow-up);
- parsed (UTF-8, then JSON; nesting too deep for the parser is named) and checked against its
  shape (:func:`problem`), so no caller meets a type it did not expect.

A file that fails is :class:`Unreadable`, a one-line reason naming it; its store treats it as
absent (the work it saved is done again) and may say so once (:func:`ignored`). A missing file
is ``None``, never an error. Standard library only: the editable hook ships this file, and the
PCH seal, run as a script, loads the runtime as a package of its own.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from typing import Any

_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
KIB, MIB = 1 << 10, 1 << 20


class Unreadable(ValueError):
    """A state file that is there but is none pep517_torch can use: ``path: why``."""

    def __init__(self, path: str | os.PathLike[str], why: str) -> None:
        super().__init__(f"{os.fspath(path)}: {why}")
        self.path, self.why = os.fspath(path), why


def _kind(mode: int) -> str:
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return "not a regular file"


def _size(count: int) -> str:
    return f"{count / MIB:.0f} MiB" if count >= MIB else f"{count / KIB:.0f} KiB" if count >= KIB else f"{count} B"


def read_bytes(path: str | os.PathLike[str], limit: int, *, dir_fd: int | None = None,
               shown: str | os.PathLike[str] | None = None) -> bytes | None:
    """The bytes of the regular file at ``path`` (None: there is none), at most ``limit``;
    :class:`Unreadable` otherwise. ``dir_fd``: ``path`` is a name in that open folder;
    ``shown``: the path messages name. Four system calls for a small file (open, fstat, one
    read, close): the JIT's warm path reads its stamp here."""
    named = path if shown is None else shown
    try:
        fd = os.open(path, _FLAGS, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise Unreadable(named, "a symlink (a state file is never read through one)") from None
        if error.errno == errno.ENXIO:
            raise Unreadable(named, "a socket or device, not a regular file") from None
        raise Unreadable(named, f"cannot be read ({error.strerror or error})") from None
    except ValueError:  # an embedded NUL: no file of ours
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(named, f"{_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise Unreadable(named, f"{_size(st.st_size)}, more than a file of its kind holds"
                                    f" ({_size(limit)})")
        data = os.read(fd, st.st_size + 1)  # one read, unless it grew since the fstat
        while len(data) > st.st_size and len(data) <= limit:
            more = os.read(fd, limit + 1 - len(data))
            if not more:
                break
            data += more
        if len(data) > limit:
            raise Unreadable(named, f"more than a file of its kind holds ({_size(limit)})")
        return data
    except OSError as error:
        raise Unreadable(named, f"cannot be read ({error.strerror or error})") from None
    finally:
        os.close(fd)


def parse_json(data: bytes, path: str | os.PathLike[str], shape: Any = object) -> Any:
    """``data`` as JSON of ``shape``; :class:`Unreadable` naming ``path`` and why not."""
    import json  # here: the JIT's warm path (marshal) imports this module

    if not data.strip():
        raise Unreadable(path, "empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Unreadable(path, f"not UTF-8 text (byte {error.start})") from None
    try:
        document = json.loads(text)
    except RecursionError:
        raise Unreadable(path, "nested too deeply (not a file pep517_torch writes)") from None
    except ValueError as error:
        at = getattr(error, "pos", None)
        if at is not None and at >= len(text.rstrip()):
            raise Unreadable(path, "truncated (its JSON ends early)") from None
        reason = getattr(error, "msg", None) or str(error)
        raise Unreadable(path, f"not JSON ({reason[:80]})") from None
    found = problem(document, shape)
    if found is not None:
        raise Unreadable(path, found)
    return document


def read_json(path: str | os.PathLike[str], limit: int, shape: Any = object, *,
              dir_fd: int | None = None, shown: str | os.PathLike[str] | None = None) -> Any:
    """The JSON document of ``shape`` in the file at ``path`` (None: there is none);
    :class:`Unreadable` for anything else (see the module's docstring)."""
    data = read_bytes(path, limit, dir_fd=dir_fd, shown=shown)
    return None if data is None else parse_json(data, path if shown is None else shown, shape)


# -- shapes --------------------------------------------------------------------------------------
# A shape is: a type (``str``, ``int`` (never a bool), ``float`` (an int too), ``bool``,
# ``type(None)``, ``object``: anything); a tuple of alternatives; ``[S]``: a list of S; a dict
# ``{"key": S, "optional?": S}``: an object with those keys (others ignored); :class:`Map`;
# :class:`Exactly`; :class:`ListOf` with a length; or a function returning a problem or None.


class Map:
    """An object whose keys are strings and whose values are all ``value``."""

    def __init__(self, value: Any) -> None:
        self.value = value


class ListOf:
    """A list of ``item`` with ``length`` (an int, or a (low, high) pair) elements."""

    def __init__(self, item: Any, length: int | tuple[int, int]) -> None:
        self.item = item
        self.low, self.high = (length, length) if isinstance(length, int) else length


class Exactly:
    def __init__(self, value: Any) -> None:
        self.value = value


def _what(value: Any) -> str:
    if value is None:
        return "null"
    name = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
    return name


def _described(shape: Any) -> str:
    if isinstance(shape, tuple):
        return " or ".join(_described(s) for s in shape)
    if shape is type(None) or shape is None:
        return "null"
    if isinstance(shape, type):
        return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
                list: "a list", dict: "an object"}.get(shape, shape.__name__)
    if isinstance(shape, (list, ListOf)):
        return "a list"
    if isinstance(shape, (dict, Map)):
        return "an object"
    if isinstance(shape, Exactly):
        return repr(shape.value)
    return "what it should be"


def _container(shape: Any) -> type | None:
    """The JSON container a shape is (list, dict), if it is one."""
    if isinstance(shape, (list, ListOf)) or shape is list:
        return list
    if isinstance(shape, (dict, Map)) or shape is dict:
        return dict
    return None


def _name(where: str) -> str:
    return where or "its content"


def problem(value: Any, shape: Any, where: str = "") -> str | None:
    """Why ``value`` is not of ``shape`` (None: it is), naming where in the document. A value
    that fits is checked without a word being made (a ledger of 10,000 files in milliseconds);
    the words are found only for one that does not."""
    return None if _fits(value, shape) else _explained(value, shape, where)


_EXACT = {int: int, str: str, bool: bool, list: list, dict: dict, type(None): type(None)}


def _fits(value: Any, shape: Any) -> bool:
    kind = type(shape)
    if kind is type:
        if shape is object:
            return True
        exact = _EXACT.get(shape)
        if exact is not None:
            return type(value) is exact  # JSON's types: a bool is no int here
        if shape is float:
            return type(value) is float or type(value) is int
        return isinstance(value, shape)
    if shape is None:
        return value is None
    if kind is tuple:
        return any(_fits(value, alternative) for alternative in shape)
    if kind is list or kind is ListOf:
        if type(value) is not list:
            return False
        if kind is ListOf and not shape.low <= len(value) <= shape.high:
            return False
        item = shape[0] if kind is list else shape.item
        exact = _EXACT.get(item) if type(item) is type else None
        if exact is not None:
            return all(type(element) is exact for element in value)
        return all(_fits(element, item) for element in value)
    if kind is Map:
        if type(value) is not dict:
            return False
        item = shape.value
        exact = _EXACT.get(item) if type(item) is type else None
        if exact is not None:
            return all(type(element) is exact for element in value.values())
        return all(_fits(element, item) for element in value.values())
    if kind is dict:
        if type(value) is not dict:
            return False
        for key, wanted in shape.items():
            name = key[:-1] if key.endswith("?") else key
            if name in value:
                if not _fits(value[name], wanted):
                    return False
            elif name == key:
                return False
        return True
    if kind is Exactly:
        return value == shape.value and type(value) is type(shape.value)
    if callable(shape):
        return shape(value) is None
    raise TypeError(f"not a shape: {shape!r}")


def _explained(value: Any, shape: Any, where: str) -> str:
    """The words for a value that does not fit ``shape``: the first part of it that does not."""
    if isinstance(shape, tuple):
        found = [_explained(value, alternative, where) for alternative in shape]
        alike = [why for alternative, why in zip(shape, found) if _container(alternative) is type(value)]
        return alike[0] if len(alike) == 1 else f"{_name(where)} is {_what(value)}, not {_described(shape)}"
    if shape is None or shape is type(None):
        return f"{_name(where)} is {_what(value)}, not null"
    if isinstance(shape, type):
        return f"{_name(where)} is {_what(value)}, not {_described(shape)}"
    if isinstance(shape, Exactly):
        return f"{_name(where)} is {_short(value)}, not {shape.value!r}"
    if isinstance(shape, (list, ListOf)):
        if not isinstance(value, list):
            return f"{_name(where)} is {_what(value)}, not a list"
        if isinstance(shape, ListOf) and not shape.low <= len(value) <= shape.high:
            count = shape.low if shape.low == shape.high else f"{shape.low} to {shape.high}"
            return f"{_name(where)} has {len(value)} items, not {count}"
        item = shape[0] if isinstance(shape, list) else shape.item
        index = next(i for i, element in enumerate(value) if not _fits(element, item))
        return _explained(value[index], item, f"{where}[{index}]")
    if isinstance(shape, (dict, Map)):
        if not isinstance(value, dict):
            return f"{_name(where)} is {_what(value)}, not an object"
        if isinstance(shape, Map):
            key = next(k for k, element in value.items() if not _fits(element, shape.value))
            return _explained(value[key], shape.value, f"{where}[{_short(key)}]")
        for key, wanted in shape.items():
            name = key[:-1] if key.endswith("?") else key
            inner = f"{where}.{name}" if where else name
            if name not in value and name == key:
                return f"{inner} is missing"
            if name in value and not _fits(value[name], wanted):
                return _explained(value[name], wanted, inner)
    found = shape(value) if callable(shape) and not isinstance(shape, (dict, Map)) else None
    return f"{_name(where)} {found}" if found else f"{_name(where)} is not what it should be"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:36] + "...'"


def one_line(value: Any) -> str | None:
    """A shape: a string of one printable line (a name, a note a build prints)."""
    if not isinstance(value, str):
        return f"is {_what(value)}, not a string"
    return None if value.isprintable() and len(value) <= 4096 else "is not one line of printable text"


IDENTITY = ListOf(int, 5)  # build_inputs.py's [device, inode, size, mtime_ns, ctime_ns]


# -- saying it -----------------------------------------------------------------------------------

_said: set[str] = set()


def ignored(error: Unreadable, consequence: str,
            say: Callable[[str], None] | None = None) -> None:
    """Say, once per file in this process, that ``error``'s file is ignored and what that
    costs (``"every step runs again"``)."""
    if error.path in _said:
        return
    _said.add(error.path)
    if say is None:
        from .user_line import say as say_line

        say = say_line
    say(f"{error}: ignored; {consequence}")


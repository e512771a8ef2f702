"""What a build's operators are: the table a listing child answers, checked field by field.

A child's answer is untrusted input (it ran the project's code under the build's torch): it
is read with a bound, parsed as JSON and checked against the shapes below before anything
of it is printed, recorded or judged. ``read_table`` is the one reading, for the child's
answer and for the copy a wheel's build record keeps alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Everything one answer may hold; a real library is far below each bound.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
MAX_OPS = 20_000
MAX_TEXT = 8 * 1024  # a schema, a note, a check's message
MAX_LINES = 200  # problems, notes, check rows per op
MAX_ROWS = 100_000

OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)?")
KEY_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
SOURCE_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,512}")
STUB_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:/[A-Za-z_][A-Za-z0-9_]*)*\.pyi")
# How a wheel's record and `ops --json` name the table's format.
FORMAT = 1
JIT_TABLE = "pep517_torch_ops.json"  # the table a JIT build leaves in its build directory

# The dispatch keys the child asks about, in the order the table shows them. "fake" is no
# dispatch key: a Python fake implementation (torch.library.register_fake).
BACKEND_KEYS = ("CPU", "CUDA", "HIP", "XPU", "MPS", "PrivateUse1")
AUTOGRAD_KEYS = ("Autograd", "AutogradCPU", "AutogradCUDA", "AutogradHIP", "AutogradXPU",
                 "AutogradMPS", "AutogradPrivateUse1")
COMPOSITE_KEYS = ("CompositeImplicitAutograd", "CompositeExplicitAutograd",
                  "CompositeExplicitAutogradNonFunctional")
ASKED_KEYS = (*BACKEND_KEYS, "Meta", *AUTOGRAD_KEYS, *COMPOSITE_KEYS)
SHORT = {"CompositeImplicitAutograd": "CompositeImplicit",
         "CompositeExplicitAutograd": "CompositeExplicit",
         "CompositeExplicitAutogradNonFunctional": "CompositeExplicitNonFunctional"}


class TableError(ValueError):
    """An answer or record that is not an operator table; the message names the field."""


@dataclass(frozen=True)
class Op:
    """One operator overload a build registered."""

    name: str  # "ns::op" or "ns::op.overload"
    schema: str | None  # None: kernels registered for an op no loaded library defines
    kernels: tuple[str, ...]  # dispatch keys with a kernel (ASKED_KEYS' order)
    fake: bool = False  # a Python fake implementation (torch.library.register_fake)
    custom_op: bool = False  # defined by torch.library.custom_op (its Meta kernel is a stub)
    source: str = ""  # what registered it: a module, a library's file, a Python module

    @property
    def mutable(self) -> bool:
        """The schema says it writes an argument (``Tensor(a!)``)."""
        return self.schema is not None and "!" in self.schema.partition("->")[0]

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "schema": self.schema, "kernels": list(self.kernels),
                "fake": self.fake, "custom_op": self.custom_op, "source": self.source}


@dataclass(frozen=True)
class CheckRow:
    """One op × one opcheck test: ``passed``, ``failed`` or ``no sample``."""

    op: str
    test: str
    status: str
    message: str = ""  # a failure's first line, with the sample it failed on

    def as_json(self) -> dict[str, Any]:
        return {"op": self.op, "test": self.test, "status": self.status, "message": self.message}


@dataclass(frozen=True)
class OpsTable:
    """Every operator a build's artifacts (and the Python modules that use torch.library)
    registered under ``torch``; ``problems``: what could not be loaded or imported, so the
    table may miss ops; ``listed``: False when no artifact registers any (nothing was loaded)."""

    torch: str
    ops: tuple[Op, ...] = ()
    problems: tuple[str, ...] = ()
    listed: bool = True
    stubs: Mapping[str, str] = field(default_factory=dict)  # "pkg/_C.pyi" -> its text
    rows: tuple[CheckRow, ...] = ()  # opcheck's, when asked

    def as_json(self) -> dict[str, Any]:
        """What the build record keeps and ``ops --json`` prints (stubs go into the wheel)."""
        answer: dict[str, Any] = {"format": FORMAT, "torch": self.torch, "listed": self.listed,
                                  "ops": [op.as_json() for op in self.ops],
                                  "problems": list(self.problems)}
        if self.rows:
            answer["checks"] = [row.as_json() for row in self.rows]
        return answer


def read_table(data: bytes | Mapping[str, Any]) -> OpsTable:
    """A child's answer (its bytes) or a record's ``ops`` value, checked (TableError names the
    field at fault)."""
    if isinstance(data, bytes | bytearray):
        if len(data) > MAX_ANSWER_BYTES:
            raise TableError(f"larger than {MAX_ANSWER_BYTES} bytes")
        try:
            value = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
            raise TableError(f"not JSON ({str(error)[:200]})") from None
    else:
        value = data
    if not isinstance(value, dict):
        raise TableError(f"not a JSON object but {type(value).__name__}")
    torch = _text(value.get("torch"), "torch", limit=128)
    listed = value.get("listed", True)
    if not isinstance(listed, bool):
        raise TableError(f"'listed' must be true or false, got {listed!r}")
    ops = tuple(_op(item, index) for index, item in enumerate(_list(value.get("ops"), "ops", MAX_OPS)))
    if len({op.name for op in ops}) != len(ops):
        raise TableError("'ops' names an op twice")
    problems = tuple(_text(p, f"problems[{i}]") for i, p in
                     enumerate(_list(value.get("problems", []), "problems", MAX_LINES)))
    stubs = value.get("stubs", {})
    if not isinstance(stubs, dict) or len(stubs) > MAX_LINES:
        raise TableError("'stubs' must be an object of module name -> stub text")
    checked_stubs = {}
    for path, text in stubs.items():
        if not STUB_PATH.fullmatch(path):
            raise TableError(f"'stubs' names no stub file of a module: {path!r}")
        if not isinstance(text, str) or len(text) > MAX_ANSWER_BYTES // 4:
            raise TableError(f"'stubs.{path}' must be the stub's text")
        checked_stubs[path] = text
    rows = tuple(_row(item, index) for index, item in
                 enumerate(_list(value.get("checks", []), "checks", MAX_ROWS)))
    return OpsTable(torch, ops, problems, listed, checked_stubs, rows)


def _list(value: object, where: str, limit: int) -> Sequence[Any]:
    if not isinstance(value, list):
        raise TableError(f"'{where}' must be a list, got {type(value).__name__}")
    if len(value) > limit:
        raise TableError(f"'{where}' holds {len(value)} entries, more than {limit}")
    return value


def _text(value: object, where: str, *, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise TableError(f"'{where}' must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise TableError(f"'{where}' is longer than {limit} characters")
    return value


def _op(item: object, index: int) -> Op:
    where = f"ops[{index}]"
    if not isinstance(item, dict):
        raise TableError(f"'{where}' must be an object")
    name = _text(item.get("name"), f"{where}.name", limit=512)
    if not OP_NAME.fullmatch(name):
        raise TableError(f"'{where}.name' is not an operator name (ns::op[.overload]): {name!r}")
    schema = item.get("schema")
    if schema is not None:
        schema = _text(schema, f"{where}.schema")
        if "\n" in schema or "\r" in schema:
            raise TableError(f"'{where}.schema' holds a line break")
    kernels = _list(item.get("kernels"), f"{where}.kernels", 64)
    for key in kernels:
        if not isinstance(key, str) or not KEY_NAME.fullmatch(key):
            raise TableError(f"'{where}.kernels' holds {key!r}, not a dispatch key's name")
    flags = {}
    for flag in ("fake", "custom_op"):
        flags[flag] = item.get(flag, False)
        if not isinstance(flags[flag], bool):
            raise TableError(f"'{where}.{flag}' must be true or false")
    source = _text(item.get("source", ""), f"{where}.source", limit=512)
    if source and not SOURCE_NAME.fullmatch(source):
        raise TableError(f"'{where}.source' holds a control character")
    return Op(name, schema, tuple(dict.fromkeys(kernels)), flags["fake"], flags["custom_op"], source)


def _row(item: object, index: int) -> CheckRow:
    where = f"checks[{index}]"
    if not isinstance(item, dict):
        raise TableError(f"'{where}' must be an object")
    op = _text(item.get("op"), f"{where}.op", limit=512)
    if not OP_NAME.fullmatch(op):
        raise TableError(f"'{where}.op' is not an operator name: {op!r}")
    test = _text(item.get("test"), f"{where}.test", limit=64)
    if not KEY_NAME.fullmatch(test):
        raise TableError(f"'{where}.test' is not a test's name: {test!r}")
    status = item.get("status")
    if status not in ("passed", "failed", "no sample"):
        raise TableError(f"'{where}.status' must be passed, failed or no sample, got {status!r}")
    return CheckRow(op, test, status, _text(item.get("message", ""), f"{where}.message"))


@dataclass(frozen=True)
class Answer:
    """A listing child's whole answer: the table and what went wrong beside it."""

    table: OpsTable
    error: str | None = None  # torch itself could not be imported: nothing was listed
    stub_error: str | None = None  # stubs were asked for and could not be written
    samples_error: str | None = None  # the samples file could not be used
    seconds: float = 0.0  # the child's own time, torch's import included
    seconds_torch: float = 0.0  # torch's import alone
    early: bool = False  # the child started during the compile answered (set by the parent)


def read_answer(data: bytes) -> Answer:
    """A child's answer file, checked (TableError names the field at fault)."""
    if len(data) > MAX_ANSWER_BYTES:
        raise TableError(f"larger than {MAX_ANSWER_BYTES} bytes")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise TableError(f"not JSON ({str(error)[:200]})") from None
    if not isinstance(value, dict):
        raise TableError(f"not a JSON object but {type(value).__name__}")
    texts = {}
    for key in ("error", "stub_error", "samples_error"):
        texts[key] = None if value.get(key) is None else _text(value[key], key)
    seconds = {}
    for key in ("seconds", "seconds_torch"):
        number = value.get(key, 0.0)
        if isinstance(number, bool) or not isinstance(number, int | float) or not 0 <= number < 1e6:
            raise TableError(f"'{key}' must be a number of seconds, got {number!r}")
        seconds[key] = float(number)
    return Answer(read_table(value), texts["error"], texts["stub_error"], texts["samples_error"],
                  seconds["seconds"], seconds["seconds_torch"])

"""How an operator table reads on a terminal: the build's one line per op, the ``ops``
table, opcheck's rows. Everything a child said is shown through :func:`printable`."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from .table import ASKED_KEYS, SHORT, CheckRow, Op, OpsTable
from .verdicts import Verdict


def printable(text: str) -> str:
    """``text`` with every control, format and unassigned character escaped (``\\x1b``,
    ``\\u202e``): what a child prints can move no cursor and reorder no line."""
    out = []
    for char in text:
        if char == " " or unicodedata.category(char)[0] not in "CZ":
            out.append(char)
        elif ord(char) < 0x100:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return "".join(out)


def kernels_text(op: Op) -> str:
    """``CPU, CUDA, Meta, Autograd, fake``: the keys with a kernel, in the table's order."""
    keys = [SHORT.get(key, key) for key in ASKED_KEYS if key in op.kernels]
    keys += [SHORT.get(key, key) for key in op.kernels if key not in ASKED_KEYS]
    if op.fake:
        keys.append("fake")
    return ", ".join(keys) or "none"


def summary_lines(table: OpsTable, verdicts: Sequence[Verdict]) -> list[str]:
    """What a build prints: one line per op (its schema, its kernels), then each verdict."""
    lines = [f"op {printable(op.schema or op.name)}: {printable(kernels_text(op))}"
             for op in table.ops]
    lines += [f"op {printable(verdict.line())}" for verdict in verdicts]
    lines += [f"ops: {printable(problem)}" for problem in table.problems]
    return lines


def table_text(table: OpsTable, verdicts: Sequence[Verdict]) -> str:
    """The ``ops`` command's table: op, kernels, where it came from, its schema; verdicts
    below it."""
    head = f"operators registered under torch {printable(table.torch)}"
    if not table.listed:
        return head + ": none (no artifact calls torch's registration API)"
    if not table.ops:
        return head + ": none"
    rows = [("op", "kernels", "registered by", "schema")]
    rows += [(printable(op.name), printable(kernels_text(op)), printable(op.source),
              printable(op.schema or "(no schema: defined elsewhere)")) for op in table.ops]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [head + ":"]
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3])
    if verdicts:
        lines.append("")
        lines += [printable(verdict.line()) for verdict in verdicts]
    lines += [f"problem: {printable(problem)}" for problem in table.problems]
    return "\n".join(line.rstrip() for line in lines)


def rows_text(rows: Sequence[CheckRow]) -> str:
    """opcheck's table: one row per op and test, a failure's first line beside it."""
    if not rows:
        return "no samples: nothing was checked"
    cells = [("op", "test", "result")] + [
        (printable(row.op), printable(row.test), printable(row.status)) for row in rows]
    widths = [max(len(cell[i]) for cell in cells) for i in range(3)]
    lines = []
    for cell, row in zip(cells, [None, *rows]):
        line = "  ".join(value.ljust(widths[i]) for i, value in enumerate(cell))
        if row is not None and row.message:
            line += "  " + printable(row.message)
        lines.append(line.rstrip())
    failed = sum(row.status == "failed" for row in rows)
    passed = sum(row.status == "passed" for row in rows)
    lines.append(f"{passed} passed, {failed} failed")
    return "\n".join(lines)

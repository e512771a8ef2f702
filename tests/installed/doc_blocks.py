"""What of a doc the installed tier runs (``make test-installed``), and how it compares output.

The conventions, for README.md, docs/quickstart.md, docs/publishing.md and docs/cli.md:

- ``<!-- runnable -->``, alone on the line right before a ```` ```sh ```` block, marks it: the
  tier runs it as printed (``bash -euo pipefail``) in an environment with torch 2.13.0 and
  pep517_torch's wheel installed (not editable), activated (``python``, ``pip``).
  ``<!-- runnable torch=2.14.1 -->`` runs it in the environment with torch 2.14.1 (the CUDA 13.0
  build; no GPU) instead. ``$CPU_PYTHON`` and ``$CUDA_PYTHON`` name the two environments'
  interpreters in every block.
- The blocks of one doc run in order in one working folder of their own, outside the checkout;
  each starts in the folder the previous one ended in (``cd myops`` ... ``cd ..``); variables
  do not carry over.
- A fenced block whose ``title="PATH"`` is a relative path (letters, digits, ``._+-/``) is written
  to PATH in the working folder when the run reaches it; a title with other words ("... (the
  parts that matter)") is a caption, not a file.
- ``<!-- files: SRC -> DEST -->`` on a line of its own copies SRC of this repository (a folder or
  file; ``.`` is the checkout's own files, as a clone has them) to DEST in the working folder:
  for files a doc names but does not print (``fixtures/stable``'s sources, the checkout the
  quickstart installs from).
- A ```` ```text ```` block right after a runnable block (blank lines only between) is what the
  block printed: its lines are the last lines of the output (stdout and stderr together),
  trailing spaces ignored, where ``…`` stands for any text within a line (a time, a date, a
  temporary path), a run of spaces for any run of spaces (a table's alignment), and a line of
  dashes for any line of dashes (a table's rule).

Blocks that need a GPU or a download (a torch from PyPI) are not marked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

TORCHES = ("2.13.0", "2.14.1")
_FENCE = re.compile(r"^```(\w*)(.*)$")
_TITLE = re.compile(r'title="([^"]*)"')
_PATH = re.compile(r"[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*")
_RUNNABLE = re.compile(r"<!--\s*runnable(?:\s+torch=(\S+))?\s*-->")
_FILES = re.compile(r"<!--\s*files:\s*(\S+)\s*->\s*(\S+)\s*-->")


class DocError(ValueError):
    pass


@dataclass(frozen=True)
class Files:
    source: str  # relative to the repository
    destination: str  # relative to the working folder


@dataclass(frozen=True)
class Write:
    path: str
    text: str


@dataclass(frozen=True)
class Run:
    line: int  # where the block starts, for messages
    torch: str
    script: str
    expected: tuple[str, ...] | None  # the text block after it


Step = Files | Write | Run


def _relative(path: str, where: str) -> str:
    if not _PATH.fullmatch(path) or ".." in path.split("/"):
        raise DocError(f"{where}: {path!r} is not a relative path")
    return path


def steps(doc: Path) -> list[Step]:
    """The doc's files and runnable blocks, in order (DocError: a marker that marks nothing)."""
    lines = doc.read_text().splitlines()
    found: list[Step] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        where = f"{doc.name}:{index + 1}"
        files = _FILES.fullmatch(line.strip())
        runnable = _RUNNABLE.fullmatch(line.strip())
        if files:
            source, destination = files.groups()
            found.append(Files(source if source == "." else _relative(source, where),
                               destination if destination == "." else _relative(destination, where)))
        elif runnable or line.strip().startswith("<!-- runnable"):
            if not runnable or (runnable.group(1) or TORCHES[0]) not in TORCHES:
                raise DocError(f"{where}: a runnable marker is <!-- runnable --> or <!-- runnable"
                               f" torch=VERSION --> with VERSION one of {', '.join(TORCHES)}")
            fence = _FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
            if not fence or fence.group(1) != "sh":
                raise DocError(f"{where}: <!-- runnable --> must stand right before a ```sh block")
            body, index = _block(lines, index + 1, doc)
            expected, index = _text_after(lines, index, doc)
            found.append(Run(int(where.rsplit(":", 1)[1]) + 1, runnable.group(1) or TORCHES[0],
                             body, expected))
            continue
        elif _FENCE.match(line):
            fence = _FENCE.match(line)
            assert fence is not None
            title = _TITLE.search(fence.group(2))
            body, index = _block(lines, index, doc)
            if title and _PATH.fullmatch(title.group(1)):
                found.append(Write(_relative(title.group(1), where), body))
            continue
        index += 1
    return found


def _block(lines: list[str], start: int, doc: Path) -> tuple[str, int]:
    """The text of the fenced block opening at ``start``, and the line after its end."""
    for end in range(start + 1, len(lines)):
        if lines[end].strip() == "```":
            return "".join(f"{line}\n" for line in lines[start + 1:end]), end + 1
    raise DocError(f"{doc.name}:{start + 1}: a block that never ends")


def _text_after(lines: list[str], index: int, doc: Path) -> tuple[tuple[str, ...] | None, int]:
    after = index
    while after < len(lines) and not lines[after].strip():
        after += 1
    if after < len(lines) and lines[after].strip() == "```text":
        body, end = _block(lines, after, doc)
        return tuple(body.splitlines()), end
    return None, index


def line_matches(expected: str, printed: str) -> bool:
    expected, printed = expected.rstrip(), printed.rstrip()
    if expected and set(expected) <= {"-", " "}:
        return bool(printed) and set(printed) <= {"-", " "}
    pattern = ".*".join(r"\s+".join(re.escape(word) for word in re.split(r" +", part))
                        for part in expected.split("…"))
    return re.fullmatch(pattern, printed) is not None


def mismatch(expected: tuple[str, ...], output: str) -> str | None:
    """None when ``expected`` is the tail of ``output``; else what differs, in words."""
    printed = output.rstrip().splitlines()
    wanted = list(expected)
    while wanted and not wanted[-1].strip():
        wanted.pop()
    tail = printed[-len(wanted):] if wanted else []
    if len(tail) == len(wanted) and all(map(line_matches, wanted, tail)):
        return None
    shown = "\n".join(f"  {line}" for line in printed[-max(len(wanted), 1) - 20:])
    return ("the doc shows:\n" + "\n".join(f"  {line}" for line in wanted)
            + "\nthe block printed (its last lines):\n" + shown)

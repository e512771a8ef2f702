"""A listing child started while the build compiles, so that its ``import torch`` (1.5-3 s)
overlaps the compiler instead of following the link.

It runs ``child.py -``: it imports torch, then waits on its stdin for the path of the request
``listing.list_ops`` writes once the artifacts are linked; its answer is read like any child's
(bounded, checked). A child that is never asked (the build failed, was interrupted, or its
artifacts register nothing after all) is killed, with its process group, when the ``with``
block ends; were the build's process itself killed, the child reads the end of its stdin once
torch is imported and exits.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from .listing import CHILD, end


class EarlyChild:
    """At most one listing child, started by :meth:`start`, handed to the listing by
    :meth:`take`, ended by :meth:`close` (the ``with`` block's end) on every path."""

    def __init__(self, python: str, *, env: Mapping[str, str] | None = None,
                 scratch: Path | None = None) -> None:
        self.python, self.env, self.scratch = python, env, scratch
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None  # time.time() at its start, for the tests
        self.work: Path | None = None
        self.log: Path | None = None
        self.taken: subprocess.Popen[bytes] | None = None  # handed to the listing

    def start(self) -> None:
        """Start the child (once; later calls do nothing). A child that cannot start is no
        error here: the listing starts its own after the link and says why that failed."""
        if self.process is not None or self.work is not None:
            return
        try:
            if self.scratch is not None:
                self.scratch.mkdir(parents=True, exist_ok=True)
            self.work = Path(tempfile.mkdtemp(prefix=".pep517_torch-ops-early-", dir=self.scratch))
            self.log = self.work / "child.log"
            with self.log.open("wb") as output:
                self.process = subprocess.Popen(
                    [self.python, str(CHILD), "-"], stdin=subprocess.PIPE, stdout=output,
                    stderr=output, cwd=self.work, env=None if self.env is None else dict(self.env),
                    start_new_session=True,  # its own group: killed whole, spared the build's ^C
                )
            self.started_at = time.time()
        except OSError:
            self.process = None

    def take(self) -> tuple[subprocess.Popen[bytes], Path] | None:
        """The running child and its log, for one listing (None: none was started, or it is no
        longer running: the listing starts a child of its own)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            if process is not None:
                end(process)
            return None
        assert self.log is not None
        self.taken = process
        return process, self.log

    def close(self) -> None:
        """Kill the child if it still runs (its whole process group), reap it, and remove its
        scratch folder."""
        for process in (self.process, self.taken):
            if process is not None:
                end(process)
        self.process = self.taken = None
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
            self.work = None

    def __enter__(self) -> EarlyChild:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

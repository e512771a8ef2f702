"""The operators a JIT build registered, listed in the JIT's own process as it loads them.

The JIT's process has torch imported and loads the artifact it built anyway: asking torch's
dispatcher before and after that load (``child.Dispatcher``, the child's own questions) costs
milliseconds, where a child would import torch again. The backend never comes here: its
process never imports torch. The answer is read as a child's is (``table.read_table``: bounded,
every field checked) before anything of it is printed or kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ..errors import OpsError
from .table import OpsTable, TableError, read_table

T = TypeVar("T")


class Loading(Generic[T]):
    """``load()`` run between two looks at the dispatcher: :attr:`result` is what it returned,
    :attr:`table` what it registered (or :attr:`error`, why that could not be said)."""

    def __init__(self, load: Callable[[], T], source: str) -> None:
        import torch

        from .child import Dispatcher

        self.table: OpsTable | None = None
        self.error: OpsError | None = None
        try:
            dispatcher = Dispatcher(torch)
            before = dispatcher.snapshot()
        except Exception as problem:  # a torch whose private dispatcher calls differ
            self.error = OpsError(f"torch's dispatcher cannot be asked: {problem}")
            self.result = load()
            return
        self.result = load()  # its own error is the caller's, as without a listing
        try:
            changed = dispatcher.changed(before, dispatcher.snapshot())
            ops = [dispatcher.describe(op, source) for op in sorted(changed)]
            self.table = read_table({"torch": str(torch.__version__), "ops": ops, "problems": []})
        except TableError as problem:
            self.error = OpsError(f"what torch's dispatcher said is not an operator table: {problem}")
        except Exception as problem:
            self.error = OpsError(f"torch's dispatcher cannot be asked: {problem}")

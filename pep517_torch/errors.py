"""The exceptions pep517_torch raises on purpose.

Every failure a user can cause ends in one of these, with a message that names the offending
key, file, flag or tool, so frontends and the JIT API can print it without a traceback.
"""

from __future__ import annotations

from .shipped_runtime.user_line import error_line, print_line


class Pep517TorchError(Exception):
    """Base class: an error whose message is meant for the user, not a bug."""


class ConfigError(Pep517TorchError, ValueError):
    """Invalid configuration; ``key`` is the dotted path of the offending key when known."""

    def __init__(self, message: str, key: str | None = None) -> None:
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class ToolchainError(Pep517TorchError, RuntimeError):
    """A compiler, nvcc, ninja or torch is missing, unusable or mismatched."""


class BuildError(Pep517TorchError, RuntimeError):
    """Compiling or linking failed; ``output`` holds the tools' own diagnostics."""

    def __init__(self, message: str, output: str = "", first_error: str | None = None) -> None:
        self.output = output
        self.first_error = first_error
        super().__init__(message)


class MigrateError(Pep517TorchError):
    """Bad input for ``migrate`` (a setup.py that cannot be converted); one line naming the file.

    ``run`` is what a setup.py that failed had recorded by then (a ``migrate`` SetupRun: its CUDA
    probes, say), or None.
    """

    def __init__(self, message: str, run: object | None = None) -> None:
        super().__init__(message)
        self.run = run


class OutputError(Pep517TorchError, RuntimeError):
    """A wheel, sdist or metadata file cannot be written (read-only or full output directory)."""


def print_error(exc: Pep517TorchError) -> None:
    """How every face shows our errors: the message alone on stderr (the first compiler error
    of a failed build stays the last lines printed), never a traceback."""
    print_line(error_line(str(exc)))


class OpsError(Pep517TorchError, RuntimeError):
    """A build's operators could not be listed, checked or stubbed (the child's interpreter, a
    crash, a timeout, an answer that is not one), or a strict check found a problem."""

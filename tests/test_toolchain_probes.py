"""Asking a compiler or nvcc who it is: a tool that hangs or answers nonsense is named, with
what was wrong, before anything is built."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.cuda import toolkit as cuda
from pep517_torch.errors import ToolchainError
from tests.cuda_tools import write_script

SYSTEM_PATH = "/usr/bin:/bin"
DRYRUN = '[ "$1" = -dryrun ] && echo "#$ TOP=${0%/*}/.." >&2 && exit 0\n'


def compiler_error(cxx: str) -> str:
    """The message of the compiler check, which names the variable the compiler came from."""
    with pytest.raises(ToolchainError, match="^CXX=") as error:
        toolchain.find_compiler({"CXX": cxx, "PATH": SYSTEM_PATH})
    return str(error.value)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.parametrize("program", ["/bin/true", "/bin/echo"])
def test_a_program_that_is_not_a_compiler_is_named(program: str) -> None:
    # coreutils answer --version with a version; true compiled nothing ("mv" failed later)
    assert compiler_error(program) == f"CXX={program} printed no version: not a C/C++ compiler"


def test_a_compiler_that_prints_no_version_is_named(tmp_path: Path) -> None:
    script = write_script(tmp_path / "silent-cxx", "exit 0\n")
    assert compiler_error(str(script)) == f"CXX={script} printed no version: not a C/C++ compiler"


def test_a_failing_version_query_names_the_compiler_and_what_it_said(tmp_path: Path) -> None:
    script = write_script(tmp_path / "broken cxx", "echo 'license expired' >&2; exit 3\n")
    assert compiler_error(f"'{script}'") == (
        f"CXX='{script}': `--version` failed (exit 3; it said 'license expired'): not a working"
        " C/C++ compiler"
    )
    # its error line, not a closing credit (`false --version` ends "Written by Jim Meyering.")
    script = write_script(tmp_path / "cxx2", "echo 'cxx2 (Tools) 1.0'; echo 'cxx2: fatal error:"
                          " no licence'; echo 'Written by someone.'; exit 1\n")
    assert "it said 'cxx2: fatal error: no licence'" in compiler_error(str(script))


def test_a_hanging_compiler_is_named_and_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "pid"
    # The hang is a child of the script: the whole process group must go, not only the shell.
    script = write_script(tmp_path / "hung-cxx", f"sleep 300 &\necho $! > {pid_file}\nwait\n")
    monkeypatch.setattr(toolchain, "PROBE_TIMEOUT_S", 0.5)
    assert compiler_error(str(script)) == f"CXX={script} did not answer `--version` within 0.5 s"
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 30  # SIGKILL is immediate; this only bounds the wait
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_the_real_compiler_still_passes() -> None:
    compiler = toolchain.find_compiler({"CXX": "g++", "PATH": SYSTEM_PATH})
    assert compiler.family == "gcc" and compiler.version >= (9,)


def test_nvcc_host_compiler_errors_name_cc(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"^CC=/bin/true printed no version: not a C/C\+\+"):
        toolchain.find_compiler({"CC": "/bin/true", "PATH": SYSTEM_PATH}, "CC")


def nvcc_error(tmp_path: Path, body: str) -> str:
    write_script(tmp_path / "cuda" / "bin" / "nvcc", DRYRUN + body)
    with pytest.raises(ToolchainError, match=r"^no usable CUDA toolkit \(nvcc\) found\.") as error:
        cuda.require_cuda({"PATH": "", "CUDA_HOME": str(tmp_path / "cuda")},
                          search_paths=[], nvidia_dirs=[])
    return str(error.value)


def test_a_hanging_nvcc_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda, "_NVCC_TIMEOUT_S", 0.5)
    message = nvcc_error(tmp_path, "exec sleep 300\n")
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    assert f"CUDA_HOME={tmp_path / 'cuda'}: {nvcc} did not answer `--version` within 0.5 s" in message


def test_an_nvcc_printing_garbage_is_named(tmp_path: Path) -> None:
    message = nvcc_error(tmp_path, "echo 'hello from a fake'\n")
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    assert (
        f"{nvcc} --version printed no CUDA version ('release X.Y'): not an nvcc"
        " (hello from a fake)" in message
    )
    assert nvcc_error(tmp_path, "exit 0\n").count("not an nvcc (no output)") == 1


def test_probe_runs_with_the_given_environment() -> None:
    result = toolchain.run_probe(["/bin/sh", "-c", "echo $PROBE_VALUE"], timeout=60,
                                 env={**os.environ, "PROBE_VALUE": "42"})
    assert (result.returncode, result.stdout) == (0, "42\n")


def test_compiler_version_parsing() -> None:
    parse = toolchain.parse_compiler_version
    assert parse("g++ (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright") == ("gcc", (12, 2, 0))
    assert parse("Debian clang version 14.0.6\nTarget: x86_64") == ("clang", (14, 0, 6))
    assert parse("Apple clang version 15.0.0 (clang-1500.1.0.2.5)") == ("clang", (15, 0, 0))


@pytest.mark.parametrize(
    ("family", "version", "supported"),
    [
        ("gcc", (8, 5), False),
        ("gcc", (9,), True),
        ("clang", (9, 0, 1), False),
        ("clang", (10, 0, 0), True),
        ("unknown", (99,), False),
    ],
)
def test_one_compiler_minimum_table(
    family: toolchain.CompilerFamily, version: tuple[int, ...], supported: bool
) -> None:
    compiler = toolchain.Compiler(("c++",), Path("/usr/bin/c++"), family, version, None)
    assert compiler.supported is supported
    assert toolchain.minimum_versions_text() == "gcc >= 9 or clang >= 10"

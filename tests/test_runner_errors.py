"""The first error a failed build reports is the cause: a full disk, an out-of-memory kill or a
crashed compiler, not the "ld returned 1 exit status" it provoked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pep517_torch.core.build import build
from pep517_torch.shipped_runtime.ninja import first_error
from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind
from pep517_torch.errors import BuildError

COMMAND = "/usr/bin/c++ -MMD -MF obj/x.o.d -DMSG='Permission denied' -Wno-error=foo -c /p/x.cpp -o obj/x.o"

# Outputs captured from gcc 12, binutils 2.40, dash and nvcc 13.0 on Debian 12, as ninja shows them.
CAPTURED = {
    "link on a full disk": (
        "FAILED: [code=1] out/ops.so\n"
        "/usr/bin/c++ obj/ops/ops.cpp.o -shared -o out/ops.so.tmp && mv -f out/ops.so.tmp out/ops.so\n"
        "/usr/bin/ld: final link failed: No space left on device\n"
        "collect2: error: ld returned 1 exit status\n"
        "ninja: build stopped: subcommand failed.",
        "/usr/bin/ld: final link failed: No space left on device",
    ),
    "assembler on a full disk": (
        f"FAILED: [code=1] obj/x.o\n{COMMAND}\n"
        "/tmp/ccUtiH49.s: Assembler messages:\n"
        "/tmp/ccUtiH49.s: Fatal error: can't fill 256 bytes in section .data of obj/x.o:"
        " 'No space left on device'\n",
        "/tmp/ccUtiH49.s: Fatal error: can't fill 256 bytes in section .data of obj/x.o:"
        " 'No space left on device'",
    ),
    "compiler killed for memory": (
        f"FAILED: [code=1] obj/x.o\n{COMMAND}\n"
        "In file included from /p/x.cpp:1:\n"
        "/p/x.h:3:10: warning: unused variable 'error' [-Wunused-variable]\n"
        "g++: fatal error: Killed signal terminated program cc1plus\n"
        "compilation terminated.\n",
        "g++: fatal error: Killed signal terminated program cc1plus",
    ),
    "shell reports a kill": (
        f"FAILED: [code=137] obj/x.o\n{COMMAND}\nKilled\nninja: build stopped: subcommand failed.",
        "Killed",
    ),
    "internal compiler error": (
        f"FAILED: [code=4] obj/x.o\n{COMMAND}\n"
        "/p/x.cpp: In function 'int f()':\n"
        "/p/x.cpp:9:1: internal compiler error: Segmentation fault\n"
        "    9 | }\n"
        "      | ^\n"
        "Please submit a full bug report, with preprocessed source (by using -freport-bug).\n",
        "/p/x.cpp:9:1: internal compiler error: Segmentation fault\n    9 | }\n      | ^",
    ),
    "nvcc's cicc killed": (
        "FAILED: [code=2] obj/k.cu.o\n/usr/local/cuda/bin/nvcc -c /p/k.cu -o obj/k.cu.o\n"
        "nvcc error   : 'cicc' died due to signal 9 (Kill signal)\n",
        "nvcc error   : 'cicc' died due to signal 9 (Kill signal)",
    ),
    "output not writable": (
        "FAILED: [code=1] out/ops.so\n/usr/bin/c++ obj/o.o -shared -o out/ops.so.tmp\n"
        "/usr/bin/ld: cannot open output file out/ops.so.tmp: Permission denied\n"
        "collect2: error: ld returned 1 exit status\n",
        "/usr/bin/ld: cannot open output file out/ops.so.tmp: Permission denied",
    ),
    # The code and the echoed command may hold the same words: the real error still wins.
    "a plain compile error": (
        f"FAILED: [code=1] obj/x.o\n{COMMAND}\n"
        "/p/x.cpp: In function 'int f()':\n"
        "/p/x.cpp:2:10: error: 'undeclared' was not declared in this scope\n"
        '    2 |   return undeclared; // "No space left on device", out of memory, Killed\n'
        "      |          ^~~~~~~~~~\n",
        "/p/x.cpp:2:10: error: 'undeclared' was not declared in this scope\n"
        '    2 |   return undeclared; // "No space left on device", out of memory, Killed\n'
        "      |          ^~~~~~~~~~",
    ),
    "a link error": (
        "FAILED: [code=1] out/ops.so\n/usr/bin/c++ obj/o.o -shared -o out/ops.so.tmp\n"
        "/usr/bin/ld: obj/o.o: in function `f()':\n"
        "x.cpp:(.text+0x5): undefined reference to `g()'\n"
        "collect2: error: ld returned 1 exit status\n",
        "x.cpp:(.text+0x5): undefined reference to `g()'",
    ),
}


@pytest.mark.parametrize("case", sorted(CAPTURED))
def test_first_error_prefers_the_cause(case: str) -> None:
    output, expected = CAPTURED[case]
    assert first_error(output) == expected


@pytest.mark.compile
def test_link_into_a_full_build_dir_reports_the_full_disk(tmp_path: Path, tmpfs) -> None:  # type: ignore[no-untyped-def]
    """A real build into a 512 KiB tmpfs: the 300 KB object fits, the library linked from it
    does not."""
    source = tmp_path / "big.cpp"
    source.write_text('extern "C" { char big_table[300000] = {1}; }\n')
    spec = ExtensionSpec("big", (source,), kind=Kind.LIBRARY, python_abi_suffix=False, pch=False)
    options = BuildOptions(build_dir=tmpfs("512k"), env=dict(os.environ), compiler_launcher="none")
    with pytest.raises(BuildError, match="^build: linking big failed") as failure:
        build([spec], options, log=lambda line: None)
    assert failure.value.first_error is not None
    assert "No space left on device" in failure.value.first_error
    first_line = str(failure.value).splitlines()[0]  # the log is named; a full disk may cut it
    assert first_line == f"build: linking big failed (full log: {options.build_dir / 'build.log'}):"
    assert str(failure.value).splitlines()[-1] == failure.value.first_error.splitlines()[-1]
    assert "ld returned 1" not in str(failure.value)

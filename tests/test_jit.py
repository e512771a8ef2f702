"""The JIT face: load()/load_inline() build real extensions that compute real tensors.

Sources here are tiny (<torch/library.h> ops, pybind11 alone) so each build takes seconds.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import pep517_torch
from pep517_torch.core.pch import cache as pch_cache
from pep517_torch.errors import BuildError, ConfigError
from pep517_torch.shipped_runtime import build_inputs
from tests.commands import run_python
from tests.conftest import HOSTILE_NAME

pytestmark = pytest.mark.compile

OP_SOURCE = textwrap.dedent(
    """
    #include <torch/library.h>
    #include <ATen/core/Tensor.h>
    #include "scale.h"
    at::Tensor affine(const at::Tensor& x, const at::Tensor& y) {
      return x.mul(SCALE).add(y);
    }
    TORCH_LIBRARY(TORCH_EXTENSION_NAME, m) { m.def("affine(Tensor x, Tensor y) -> Tensor", affine); }
    """
)

PYBIND_SOURCE = textwrap.dedent(
    """
    #include <pybind11/pybind11.h>
    int add(int a, int b) { return a + b; }
    int mul(int a, int b) { return a * b; }
    """
)


def write_op_project(directory: Path, scale: int = 3) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scale.h").write_text(f"#pragma once\n#define SCALE {scale}\n")
    source = directory / "ops.cpp"
    source.write_text(OP_SOURCE)
    return source


def load_ops(name: str, source: Path, build_dir: Path, **kwargs):
    return pep517_torch.load(
        name, [str(source)], build_directory=str(build_dir), is_python_module=False, **kwargs
    )


def test_same_source_as_torch_load_gives_identical_tensors(tmp_path: Path) -> None:
    from torch.utils import cpp_extension

    source = write_op_project(tmp_path / "src")
    load_ops("ours_affine", source, tmp_path / "ours")
    (tmp_path / "theirs").mkdir()
    cpp_extension.load(
        "theirs_affine", [str(source)], build_directory=str(tmp_path / "theirs"),
        is_python_module=False,
    )
    x, y = torch.randn(64, 8), torch.randn(64, 8)
    ours = torch.ops.ours_affine.affine(x, y)
    theirs = torch.ops.theirs_affine.affine(x, y)
    assert torch.equal(ours, theirs)
    assert torch.equal(ours, x * 3 + y)


def test_load_inline_functions_list_and_dict(tmp_path: Path) -> None:
    listed = pep517_torch.load_inline(
        "inline_list", ["#include <pybind11/pybind11.h>", PYBIND_SOURCE], functions=["add", "mul"],
        no_implicit_headers=True, with_pytorch_error_handling=False,
        build_directory=str(tmp_path / "a"),
    )
    assert (listed.add(2, 3), listed.mul(2, 3)) == (5, 6)
    described = pep517_torch.load_inline(
        "inline_dict", "#include <pybind11/pybind11.h>\n" + PYBIND_SOURCE,
        functions={"add": "Adds two \"ints\"."}, no_implicit_headers=True,
        with_pytorch_error_handling=False, build_directory=str(tmp_path / "b"),
    )
    assert described.add(20, 22) == 42
    assert 'Adds two "ints".' in described.add.__doc__
    with pytest.raises(ConfigError, match="functions"):
        pep517_torch.load_inline("bad_functions", "", functions=42, no_implicit_headers=True,
                                 build_directory=str(tmp_path / "c"))


def test_op_library_registers_into_torch_ops(tmp_path: Path) -> None:
    source = write_op_project(tmp_path / "src", scale=5)
    path = load_ops("ops_lib", source, tmp_path / "build")
    assert Path(path).name == "ops_lib.so" and Path(path).is_file()
    x = torch.arange(4.0)
    assert torch.equal(torch.ops.ops_lib.affine(x, x), x * 6)


def test_standalone_executable_runs(tmp_path: Path) -> None:
    source = tmp_path / "main.cpp"
    source.write_text(
        "#include <c10/util/irange.h>\n#include <iostream>\n"
        "int main() { int s = 0; for (auto i : c10::irange(5)) s += i; std::cout << s << '\\n'; }\n"
    )
    exe = pep517_torch.load("standalone", [str(source)], build_directory=str(tmp_path / "b"),
                            is_python_module=False, is_standalone=True)
    assert subprocess.run([exe], capture_output=True, text=True, check=True).stdout == "10\n"


WARM_CHILD = """
import os, sys, time, subprocess, torch
def refuse(*args, **kwargs):
    raise AssertionError("a warm load() started a subprocess")
subprocess.Popen.__init__ = refuse
os.posix_spawn = os.fork = refuse
start = time.perf_counter()
import pep517_torch
pep517_torch.load("{name}", [{source!r}], build_directory={build!r}, is_python_module=False)
print("ms", (time.perf_counter() - start) * 1000)
print(torch.ops.{name}.affine(torch.ones(2), torch.ones(2)).tolist())
"""


def test_warm_load_in_new_process_runs_no_subprocess_and_headers_rebuild(tmp_path: Path) -> None:
    source = write_op_project(tmp_path / "src", scale=2)
    build = tmp_path / "build"
    child = WARM_CHILD.format(name="warm_ops", source=str(source), build=str(build))
    first = run_python(child.replace("subprocess.Popen.__init__ = refuse", "pass")
                            .replace("os.posix_spawn = os.fork = refuse", "pass"))
    assert "[3.0, 3.0]" in first.stdout
    warm = run_python(child)  # fails if any subprocess is started
    assert "[3.0, 3.0]" in warm.stdout
    # An edited header (not a source) must rebuild: the stamp tracks ninja's depfile entries.
    time.sleep(0.01)
    (tmp_path / "src" / "scale.h").write_text("#pragma once\n#define SCALE 10\n")
    rebuilt = run_python(child, check=False)
    assert rebuilt.returncode != 0 and "started a subprocess" in rebuilt.stderr
    again = run_python(child.replace("subprocess.Popen.__init__ = refuse", "pass")
                            .replace("os.posix_spawn = os.fork = refuse", "pass"))
    assert "[11.0, 11.0]" in again.stdout


def test_changed_source_in_same_process_loads_fresh_module(tmp_path: Path) -> None:
    source = tmp_path / "m.cpp"
    source.write_text("#include <pybind11/pybind11.h>\n"
                      "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"v\", [] { return 1; }); }\n")
    build = str(tmp_path / "b")
    first = pep517_torch.load("versioned", [str(source)], build_directory=build)
    assert first.v() == 1 and first.__name__ == "versioned"
    assert pep517_torch.load("versioned", [str(source)], build_directory=build) is first
    source.write_text(source.read_text().replace("return 1", "return 2"))
    second = pep517_torch.load("versioned", [str(source)], build_directory=build)
    assert second.v() == 2 and second.__name__ == "versioned_v1"
    flagged = pep517_torch.load("versioned", [str(source)], build_directory=build,
                                extra_cflags=["-DUNUSED=1"])
    assert flagged.__name__ == "versioned_v2"


def test_failed_build_reports_compiler_error_and_retry_succeeds(tmp_path: Path) -> None:
    source = tmp_path / "broken.cpp"
    source.write_text("#include <pybind11/pybind11.h>\nint f() { return undeclared_thing; }\n"
                      "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"f\", &f); }\n")
    build = str(tmp_path / "b")
    with pytest.raises(BuildError, match=re.escape(f"{source}:2:")) as failure:
        pep517_torch.load("retry_me", [str(source)], build_directory=build)
    assert "undeclared_thing" in str(failure.value)
    source.write_text(source.read_text().replace("undeclared_thing", "7"))
    assert pep517_torch.load("retry_me", [str(source)], build_directory=build).f() == 7


def test_link_error_names_the_undefined_symbol(tmp_path: Path) -> None:
    source = tmp_path / "undefined.cpp"
    source.write_text("int missing_function();\nint main() { return missing_function(); }\n")
    with pytest.raises(BuildError, match="missing_function"):
        pep517_torch.load("linkfail", [str(source)], build_directory=str(tmp_path / "b"),
                          is_python_module=False, is_standalone=True)


CONCURRENT_CHILD = """
import sys, torch, pep517_torch
pep517_torch.load("crowd", [sys.argv[1]], build_directory=sys.argv[2], is_python_module=False)
print(torch.ops.crowd.affine(torch.ones(1), torch.zeros(1)).item())
"""


def test_concurrent_loads_compile_once_and_all_succeed(tmp_path: Path) -> None:
    source = write_op_project(tmp_path / "src", scale=4)
    build = tmp_path / "build"
    verbose = CONCURRENT_CHILD.replace("is_python_module=False)", "is_python_module=False, verbose=True)")
    children = [  # verbose: a JIT waiting on another builder says so only when asked to talk
        subprocess.Popen([sys.executable, "-c", verbose, str(source), str(build)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = [child.communicate(timeout=300) for child in children]
    assert [c.returncode for c in children] == [0] * 4, outputs
    assert all(out.strip() == "4.0" for out, _ in outputs)
    compiles = [l for l in (build / ".ninja_log").read_text().splitlines() if "obj/crowd/" in l]
    assert len(compiles) == 1
    assert any("waiting for" in err for _, err in outputs)


def test_sigkilled_builder_never_blocks_the_next_load(tmp_path: Path) -> None:
    source = write_op_project(tmp_path / "src", scale=6)
    build = tmp_path / "build"
    victim = subprocess.Popen([sys.executable, "-c", CONCURRENT_CHILD.replace("crowd", "killed"),
                               str(source), str(build)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list((build / "obj").glob("**/*")) and time.monotonic() < deadline:
        time.sleep(0.05)  # wait until the compile has started
    time.sleep(0.5)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    survivor = run_python(CONCURRENT_CHILD.replace("crowd", "killed").replace(
        "sys.argv[1]", repr(str(source))).replace("sys.argv[2]", repr(str(build))), timeout=180)
    assert survivor.stdout.strip() == "6.0"


@pytest.mark.parametrize("where", ["source", "build"])
def test_hostile_paths(tmp_path: Path, where: str) -> None:
    hostile = tmp_path / HOSTILE_NAME
    source = write_op_project(hostile if where == "source" else tmp_path / "plain", scale=7)
    build = (hostile if where == "build" else tmp_path) / "build dir"
    name = f"hostile_{where}"
    load_ops(name, source, build, extra_include_paths=[str(source.parent)])
    x = torch.ones(3)
    assert torch.equal(getattr(torch.ops, name).affine(x, x), x * 8)


def test_max_jobs_does_not_touch_a_warm_load(tmp_path: Path) -> None:
    """MAX_JOBS says how many compilers run at once: a warm load neither checks it nor
    rebuilds when it changes (issue #15 item 7)."""
    source = write_op_project(tmp_path / "src", scale=2)
    build = tmp_path / "build"
    child = WARM_CHILD.format(name="jobs_ops", source=str(source), build=str(build))
    cold = run_python(child.replace("subprocess.Popen.__init__ = refuse", "pass")
                           .replace("os.posix_spawn = os.fork = refuse", "pass"),
                      env={"MAX_JOBS": "2"})
    assert "[3.0, 3.0]" in cold.stdout
    for value in ("1", "many", ""):  # another value, an invalid one, none: no subprocess at all
        warm = run_python(child, env={"MAX_JOBS": value})
        assert "[3.0, 3.0]" in warm.stdout


INLINE_SOURCE = """
torch::Tensor gelu_like(const torch::Tensor& x) {{ return x * torch::sigmoid({k} * x); }}
"""


@pytest.mark.torch_ext
def test_load_inline_with_torch_extension_h_shares_one_pch(
    tmp_path: Path, jit_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two torch/extension.h builds: A makes the shared PCH, B reuses it.

    The PCH goes to the machine-wide cache, not to ``build_directory`` (issue #15 item 9)."""
    machine = tmp_path / "machine-cache"
    monkeypatch.setenv("PEP517_TORCH_CACHE_DIR", str(machine))
    first = pep517_torch.load_inline("pch_first", INLINE_SOURCE.format(k=1.0), functions="gelu_like",
                                     build_directory=str(tmp_path / "a"))
    [entry] = pch_cache.entries(machine / "pch")
    assert entry.info["header"] == "torch/extension.h"
    assert (entry.directory / "pch.h.gch").stat().st_size > 100_000_000
    assert not list((tmp_path / "a").rglob("*.gch"))
    with_pch = pep517_torch.load_inline("pch_second", INLINE_SOURCE.format(k=1.702),
                                        functions={"gelu_like": "x * sigmoid(1.702 x)"},
                                        build_directory=str(tmp_path / "b"))
    assert [e.key for e in pch_cache.entries(machine / "pch")] == [entry.key]  # B reused it
    x = torch.randn(100)
    assert torch.allclose(with_pch.gelu_like(x), x * torch.sigmoid(1.702 * x))
    assert torch.equal(first.gelu_like(x), x * torch.sigmoid(x))
    assert "x * sigmoid(1.702 x)" in with_pch.gelu_like.__doc__


@pytest.mark.torch_ext
@pytest.mark.slow  # make test proves PCH objects identical in test_project_pch_header_gives_identical_objects
def test_a_jit_extension_is_the_same_with_and_without_the_shared_pch(tmp_path: Path, jit_env: Path) -> None:
    """The same load_inline() with the PCH another extension made, and without it (use_pch=False):
    identical objects, identical results."""
    built = {}
    for name, use_pch in (("pch_maker", True), ("pch_same", True), ("pch_same", False)):
        build_dir = tmp_path / f"{name}-{use_pch}"
        out = run_python(
            "import torch, pep517_torch; torch.manual_seed(0); x = torch.randn(100);"
            f"m = pep517_torch.load_inline({name!r}, {INLINE_SOURCE.format(k=1.702)!r},"
            " functions={'gelu_like': 'x * sigmoid(1.702 x)'},"
            f" build_directory={str(build_dir)!r}, use_pch={use_pch});"
            "print(m.gelu_like(x).tolist())",
            env={"TORCH_EXTENSIONS_DIR": str(jit_env), "PEP517_TORCH_CACHE_DIR": str(tmp_path / "machine")},
        )
        built[name, use_pch] = (eval(out.stdout), next((build_dir / "obj").rglob("main.cpp.o")).read_bytes())
    assert built["pch_same", True] == built["pch_same", False]
    assert len(pch_cache.entries(tmp_path / "machine" / "pch")) == 1


def test_headers_among_sources_are_accepted_like_torch(tmp_path: Path) -> None:
    source = write_op_project(tmp_path / "src", scale=9)
    loaded = pep517_torch.load("with_header", [str(source), str(tmp_path / "src" / "scale.h")],
                               build_directory=str(tmp_path / "b"), is_python_module=False)
    x = torch.ones(2)
    assert torch.equal(torch.ops.with_header.affine(x, x), x * 10)
    assert Path(loaded).is_file()
    with pytest.raises(ConfigError, match="only headers"):
        pep517_torch.load("only_headers", [str(tmp_path / "src" / "scale.h")])


TALK_CHILD = """
import sys, pep517_torch
module = pep517_torch.load(sys.argv[1], [sys.argv[2]], build_directory=sys.argv[3], verbose=sys.argv[4] == "1")
print(module.answer())
"""


def _load_in_child(name: str, tmp_path: Path, *, verbose: bool, tty: bool) -> tuple[str, str, Path]:
    """A cold load() in a fresh process; (stdout, stderr, build directory). ``tty``: stderr is
    a terminal (a pseudo-terminal here), as for someone watching."""
    import os
    import pty

    from tests.tiny_project import NAMED_MODULE

    source = tmp_path / f"{name}.cpp"
    source.write_text(NAMED_MODULE)
    build = tmp_path / f"build-{name}"
    master, slave = pty.openpty() if tty else (None, None)
    child = subprocess.Popen(
        [sys.executable, "-c", TALK_CHILD, name, str(source), str(build), "1" if verbose else "0"],
        stdout=subprocess.PIPE, stderr=slave if tty else subprocess.PIPE, text=True,
    )
    stdout, stderr = child.communicate(timeout=600)
    if tty:
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        os.close(master)
        stderr = b"".join(chunks).decode().replace("\r\n", "\n")
    assert child.returncode == 0, stderr
    return stdout, stderr, build


def test_a_quiet_load_says_nothing_but_keeps_a_log(tmp_path: Path) -> None:
    """verbose=False and stderr not a terminal: silent, as torch's load() (issue #15 item 8)."""
    stdout, stderr, build = _load_in_child("quiet_mod", tmp_path, verbose=False, tty=False)
    assert (stdout, stderr) == ("42\n", "")
    log = (build / "build.log").read_text()
    assert "[1/2] compiling quiet_mod.cpp..." in log and "linking quiet_mod: done in" in log


@pytest.mark.parametrize(("verbose", "tty"), [(True, False), (False, True)])
def test_a_watched_load_shows_its_steps(tmp_path: Path, verbose: bool, tty: bool) -> None:
    name = "verbose_mod" if verbose else "tty_mod"
    stdout, stderr, build = _load_in_child(name, tmp_path, verbose=verbose, tty=tty)
    assert stdout == "42\n"
    lines = stderr.splitlines()
    assert lines[0] == f"pep517_torch: building extension '{name}'..."
    assert lines[1] == f"[1/2] compiling {name}.cpp..."
    assert f"[2/2] linking {name}..." in lines
    assert any(line.startswith(f"[1/2] compiling {name}.cpp: done in ") for line in lines)
    assert lines[-3].startswith(f"pep517_torch: built '{name}' in ")
    assert lines[-3].endswith(f"1 compiled, 1 linked (log: {build / 'build.log'})")
    assert lines[-2].startswith("pep517_torch: slowest: compiling ")  # then the timeline's lines
    assert lines[-1].startswith("pep517_torch: idle job slots: ")
    commands = [line for line in lines if line.startswith("  $ ")]
    assert len(commands) == (2 if verbose else 0)  # verbose: each command under its step


def test_a_verbose_load_says_why_it_builds_again(tmp_path: Path) -> None:
    """load(..., verbose=True) names what changed since the build its stamp records (the one
    why_stale of shipped_runtime/build_inputs.py): a flags variable here; tests/test_jit_request.py
    has every fact, tests/test_cuda_build.py nvcc changed in place."""
    from tests.tiny_project import NAMED_MODULE

    source = tmp_path / "why_mod.cpp"
    source.write_text(NAMED_MODULE)
    code = ("import pep517_torch\nprint(pep517_torch.load('why_mod', [" + repr(str(source)) + "],"
            f" build_directory={str(tmp_path / 'b')!r}, verbose=True).answer())")
    first = run_python(code, env={"CXXFLAGS": "-DX=1"})
    assert first.stdout == "42\n" and "out of date" not in first.stderr, first.stderr
    warm = run_python(code, env={"CXXFLAGS": "-DX=1"})
    assert (warm.stdout, warm.stderr) == ("42\n", "")
    changed = run_python(code, env={"CXXFLAGS": "-DX=2"})
    assert changed.stdout == "42\n"
    lines = changed.stderr.splitlines()
    assert lines[:2] == ["pep517_torch: 'why_mod' is out of date: CXXFLAGS changed: '-DX=1' -> '-DX=2'",
                         "pep517_torch: building extension 'why_mod'..."], changed.stderr


def test_a_torch_reinstalled_at_the_same_version_builds_again(tmp_path: Path) -> None:
    """The stamp holds torch's version.py as the compile record does (the same fact of
    shipped_runtime/build_inputs.py): torch reinstalled (another file there, the same version)
    builds again, and says so. The reinstall is the stamp's record of an older file."""
    import marshal

    from pep517_torch.jit import stamp
    from tests.tiny_project import NAMED_MODULE

    source = tmp_path / "torch_mod.cpp"
    source.write_text(NAMED_MODULE)
    build = tmp_path / "b"
    code = ("import pep517_torch\nprint(pep517_torch.load('torch_mod', [" + repr(str(source)) + "],"
            f" build_directory={str(build)!r}, verbose=True).answer())")
    assert run_python(code).stdout == "42\n"
    path = Path(stamp.stamp_path(build, "torch_mod"))
    data = stamp.load(path)
    version_py = Path(torch.__file__).parent / "version.py"
    assert data["facts"]["torch"] == [str(version_py), *build_inputs.identity(version_py)]
    assert set(data["facts"]) == {"compiler", "torch"}  # nvcc: only for a build that compiled CUDA
    data["facts"]["torch"][2] += 1  # another inode: what a reinstall leaves
    path.write_bytes(marshal.dumps(data))
    again = run_python(code)
    assert again.stdout == "42\n"
    assert f"pep517_torch: 'torch_mod' is out of date: torch {version_py} changed" in again.stderr, again.stderr

"""The import check inside the library (core/postlink/import_guard.py, core/postlink/guard_patch.py,
resources/import_guard.c), on tiny C libraries and stand-ins for torch: no torch TU compiles.

A stand-in torch is a package with ``__version__`` and ``version.cuda``; its libraries are tiny
shared objects with torch's names: ``libtorch.so`` of a "CUDA torch" NEEDs ``libc10_cuda.so``,
which NEEDs a ``libcudart.so.13`` with versioned symbols, as the real ones do, and the "CPU
torch" has no such files. A guarded library keeps its name, its place and its constructor; the
tests read what Python prints.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from pep517_torch.core.postlink import guard_patch, import_guard
from pep517_torch.core.spec import ExtensionSpec, Kind
from pep517_torch.core.toolchain.tools import TorchInstall, find_torch
from tests.commands import run, run_python
from tests.conftest import write_tree
from tests.tiny_project import c_api_module, pyproject

TORCH = find_torch()
INCLUDE = Path(sysconfig.get_paths()["include"])
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
pytestmark = [
    pytest.mark.skipif(
        shutil.which("gcc") is None or not (INCLUDE / "Python.h").is_file()
        or sys.platform != "linux", reason="needs gcc and Python.h on Linux"),
    pytest.mark.compile,
]

# The extension: a constructor that says it ran (the library's own, e.g. its op registrations),
# calls into "torch" (and, built with CUDA, into torch's CUDA library and the CUDA runtime).
EXTENSION = r"""
#include <stdio.h>
extern int fake_torch_answer(void);
#ifdef WITH_CUDA
extern int fake_cuda_devices(void);
extern int fake_cuda_runtime(void);
#define CUDA_PART (fake_cuda_devices() + fake_cuda_runtime())
#else
#define CUDA_PART 0
#endif
#ifdef WITH_MISSING
extern int fake_symbol_of_another_release(void);
#define MISSING_PART fake_symbol_of_another_release()
#else
#define MISSING_PART 0
#endif
__attribute__((constructor)) static void registrations(void) { fputs("library constructor ran\n", stderr); }
int guarded_answer(void) { return fake_torch_answer() + CUDA_PART + MISSING_PART; }
#ifndef NO_PYTHON
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *unused) { return PyLong_FromLong(guarded_answer()); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef definition = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&definition); }
#endif
"""
LIBTORCH = "int fake_torch_answer(void) { return 42; }\n"
C10_CUDA = "extern int fake_cuda_runtime(void);\nint fake_cuda_devices(void) { return 100 + 0 * fake_cuda_runtime(); }\n"
CUDART = "int fake_cuda_runtime(void) { return 1000; }\n"
CUDART_VERSIONS = "libcudart.so.13 { global: fake_cuda_runtime; local: *; };\n"


def gcc(*args: str | Path) -> None:
    run("gcc", *args)


@pytest.fixture(scope="module")
def torches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Library folders of a stand-in CPU torch and CUDA torch (what LD_LIBRARY_PATH names)."""
    base = tmp_path_factory.mktemp("torches")
    cpu, cuda = base / "cpu", base / "cuda"
    cpu.mkdir(), cuda.mkdir()
    for name, text in (("torch.c", LIBTORCH), ("c10_cuda.c", C10_CUDA), ("cudart.c", CUDART)):
        (base / name).write_text(text)
    (base / "cudart.map").write_text(CUDART_VERSIONS)
    gcc("-shared", "-fPIC", base / "cudart.c", f"-Wl,--version-script={base / 'cudart.map'}",
        "-Wl,-soname,libcudart.so.13", "-o", cuda / "libcudart.so.13")
    gcc("-shared", "-fPIC", base / "c10_cuda.c", "-Wl,--no-as-needed", cuda / "libcudart.so.13",
        "-Wl,-soname,libc10_cuda.so", "-o", cuda / "libc10_cuda.so")
    gcc("-shared", "-fPIC", base / "torch.c", "-Wl,-soname,libtorch.so", "-o", cpu / "libtorch.so")
    gcc("-shared", "-fPIC", base / "torch.c", "-Wl,--no-as-needed", f"-L{cuda}", "-lc10_cuda",
        "-Wl,-soname,libtorch.so", "-o", cuda / "libtorch.so")
    return {"cpu": cpu, "cuda": cuda}


def stand_in(base: Path, version: str, cuda: str | None) -> Path:
    """A ``torch`` package saying ``version`` and ``version.cuda``; the folder to put on sys.path."""
    package = base / f"torch-{version}" / "torch"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(f"__version__ = {version!r}\nfrom . import version\n")
    (package / "version.py").write_text(f"cuda = {cuda!r}\n")
    return package.parent


def build(base: Path, torches: dict[str, Path], *, kind: Kind = Kind.MODULE, built_torch: str = "2.13.0+cpu",
          built_cuda: str | None = None, cuda: bool = False, stable: str | None = None,
          missing: bool = False, patch: bool = True, python: bool = True,
          link_flags: tuple[str, ...] = ()) -> Path:
    """``pkg/_C<suffix>`` in ``base/site``, linked against the stand-in torch (the CUDA one when
    ``cuda``) with its import check for ``built_torch``; ``patch``: the post-link step too."""
    base.mkdir(parents=True, exist_ok=True)
    root = base / "torch-root"  # what TorchInstall reads: a CUDA torch has libc10_cuda
    (root / "lib").mkdir(parents=True, exist_ok=True)
    if built_cuda:
        (root / "include" / "c10" / "cuda" / "impl").mkdir(parents=True, exist_ok=True)
        (root / "include" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text("")
        shutil.copy(torches["cuda"] / "libc10_cuda.so", root / "lib")
    torch = TorchInstall(root, built_torch, built_cuda, None)
    spec = ExtensionSpec("pkg._C", (base / "ext.c.cpp",), kind=kind, import_check_torch=built_torch,
                         with_cuda=cuda or None, stable_abi=stable, py_limited_api="cp310" if stable else None)
    plan = import_guard.plan(spec, torch, "13.0" if cuda else None, base, (torches["cuda"],))
    assert plan is not None
    plan.source.parent.mkdir(parents=True, exist_ok=True)
    plan.source.write_text(plan.text)
    (base / "ext.c").write_text(EXTENSION)
    guard_object, ext_object = base / "guard.o", base / "ext.o"
    run("gcc", *import_guard.GUARD_FLAGS, "-c", plan.source, "-o", guard_object)
    defines = [*(["-DWITH_CUDA"] if cuda else []), *(["-DWITH_MISSING"] if missing else []),
               *([] if python else ["-DNO_PYTHON"])]
    gcc("-fPIC", f"-I{INCLUDE}", *defines, "-c", base / "ext.c", "-o", ext_object)
    libraries = torches["cuda" if cuda else "cpu"]
    cuda_links = [f"-L{libraries}", "-lc10_cuda", "-l:libcudart.so.13"] if cuda else []
    output = base / "site" / "pkg" / f"_C{SUFFIX}"
    output.parent.mkdir(parents=True, exist_ok=True)
    (output.parent / "__init__.py").write_text("")
    gcc("-shared", *link_flags, ext_object, guard_object, "-Wl,--no-as-needed", *cuda_links,
        f"-L{libraries}", "-ltorch", "-o", output)
    if patch:
        assert guard_patch.main([str(output), *plan.patch_arguments]) == 0
    return output


def load(site: Path, torch: Path | None, libraries: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter that sees ``site``, the stand-in ``torch`` (imported
    first, as torch extensions expect) and the stand-in's libraries."""
    paths = [str(site), *([str(torch)] if torch else [])]
    prelude = f"import sys\nsys.path[:0] = {paths!r}\n" + ("import torch\n" if torch else "")
    return run_python(prelude + code, options=["-S"], check=False, timeout=120,
                      env={"LD_LIBRARY_PATH": str(libraries)})


def exception_lines(stderr: str) -> list[str]:
    """The lines of a traceback that are not frames: each exception and the chaining notes."""
    return [line for line in stderr.splitlines()
            if line and not line.startswith((" ", "Traceback"))]


def test_the_torch_it_was_built_for_imports_it_unchanged(tmp_path: Path, torches: dict[str, Path]) -> None:
    built = build(tmp_path, torches)
    torch = stand_in(tmp_path, "2.13.1+cpu", None)
    result = load(built.parents[1], torch, torches["cpu"], (
        "import importlib.machinery, pkg, pkg._C as c\n"
        "spec = importlib.machinery.PathFinder().find_spec('_C', pkg.__path__)\n"
        "print(c.answer(), spec.origin == c.__file__, type(c.__loader__).__name__)\n"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["42", "True", "ExtensionFileLoader"]
    assert result.stderr == "library constructor ran\n"  # once, after the check passed
    assert {p.name for p in built.parent.iterdir()} - {"__pycache__"} == {"__init__.py", built.name}


def test_another_torch_gets_one_line_and_nothing_of_the_library_runs(
    tmp_path: Path, torches: dict[str, Path]
) -> None:
    built = build(tmp_path, torches)
    torch = stand_in(tmp_path, "2.14.0+cpu", None)
    result = load(built.parents[1], torch, torches["cpu"], "import pkg._C")
    assert result.returncode == 1
    assert exception_lines(result.stderr) == [
        "ImportError: pkg._C was built against torch 2.13.0+cpu, but torch 2.14.0+cpu is installed."
        " Install a build of this package made for your torch (or build it from source with"
        " `--no-build-isolation`), or install the torch it was built for: `pip install torch==2.13.0`."
    ]
    assert "library constructor ran" not in result.stderr
    again = load(built.parents[1], torch, torches["cpu"], (
        "for _ in range(2):\n    try:\n        import pkg._C\n    except ImportError as e:\n"
        "        print(str(e)[:40])\n"))
    assert again.stdout.splitlines() == ["pkg._C was built against torch 2.13.0+cp"] * 2


def test_load_library_of_a_refused_library_says_why(tmp_path: Path, torches: dict[str, Path]) -> None:
    """ctypes (torch.ops.load_library) never calls PyInit: the constructor refuses, with the
    GIL held, so ctypes raises (CPython wraps it in a SystemError: the C call succeeded)."""
    built = build(tmp_path, torches, kind=Kind.LIBRARY)
    torch = stand_in(tmp_path, "2.14.0+cpu", None)
    result = load(built.parents[1], torch, torches["cpu"], f"import ctypes\nctypes.CDLL({str(built)!r})")
    assert result.returncode == 1
    lines = exception_lines(result.stderr)
    assert lines[0].startswith("ImportError: pkg._C was built against torch 2.13.0+cpu, but torch"
                               " 2.14.0+cpu is installed.")
    assert lines[-1] == "SystemError: <built-in function dlopen> returned a result with an exception set"
    assert "library constructor ran" not in result.stderr


def test_a_cuda_build_under_a_cpu_torch_never_says_cannot_open(tmp_path: Path, torches: dict[str, Path]) -> None:
    built = build(tmp_path / "guarded", torches, built_torch="2.14.1+cu130", built_cuda="13.0", cuda=True)
    plain = build(tmp_path / "plain", torches, built_torch="2.14.1+cu130", built_cuda="13.0", cuda=True,
                  patch=False)
    needed = subprocess.run(["readelf", "-dW", built], capture_output=True, text=True).stdout
    assert "libtorch.so" in needed and "libc10_cuda" not in needed and "libcudart" not in needed
    cuda_torch = stand_in(tmp_path, "2.14.1+cu130", "13.0")
    cpu_torch = stand_in(tmp_path, "2.14.1+cpu", None)
    # Under the CUDA torch the dropped libraries come with its libtorch.so: everything resolves.
    ran = load(built.parents[1], cuda_torch, torches["cuda"], "import pkg._C as c; print(c.answer())")
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "1142\n", "library constructor ran\n")
    for library, torch in ((built, cpu_torch), (plain, cpu_torch)):
        result = load(library.parents[1], torch, torches["cpu"], "import pkg._C")
        assert result.returncode == 1
        said = exception_lines(result.stderr)
        if library is plain:  # what the check prevents: the load fails before any code runs
            assert "libc10_cuda.so: cannot open shared object file" in said[-1]
            continue
        assert said == ["ImportError: pkg._C was built for torch 2.14.1+cu130, this is torch 2.14.1+cpu:"
                        " install the build of this package made for your torch's CUDA variant (its"
                        " find-links page), or build it from source with `--no-build-isolation`."]


@pytest.fixture(scope="module")
def cuda_module(tmp_path_factory: pytest.TempPathFactory, torches: dict[str, Path]) -> Path:
    return build(tmp_path_factory.mktemp("cuda-module"), torches, built_torch="2.14.1+cu130",
                 built_cuda="13.0", cuda=True)


@pytest.mark.parametrize(("running", "cuda", "expected"), [
    ("2.14.1+cpu", None, "this is torch 2.14.1+cpu"),
    ("2.14.1+cu126", "12.6", "this is torch 2.14.1+cu126"),
    ("2.14.1", None, "this is torch 2.14.1+cpu"),  # a source build: named from its CUDA
    ("2.14.1+cu130", "13.0", None),
    ("2.14.0+cu132", "13.2", None),  # the same CUDA major
])
def test_the_cuda_variant(tmp_path: Path, torches: dict[str, Path], cuda_module: Path,
                          running: str, cuda: str | None, expected: str | None) -> None:
    result = load(cuda_module.parents[1], stand_in(tmp_path, running, cuda), torches["cuda"],
                  "import pkg._C as c; print(c.answer())")
    if expected is None:
        assert result.stdout == "1142\n", result.stderr
    else:
        (said,) = exception_lines(result.stderr)
        assert said.startswith(f"ImportError: pkg._C was built for torch 2.14.1+cu130, {expected}:"), said


def test_a_module_without_cuda_runs_under_every_variant(tmp_path: Path, torches: dict[str, Path]) -> None:
    built = build(tmp_path, torches, built_torch="2.14.1+cu130", built_cuda="13.0")
    for running, cuda, libraries in (("2.14.1+cpu", None, "cpu"), ("2.14.1+cu130", "13.0", "cuda")):
        result = load(built.parents[1], stand_in(tmp_path, running, cuda), torches[libraries],
                      "import pkg._C as c; print(c.answer())")
        assert result.stdout == "42\n", result.stderr


def test_a_symbol_the_running_torch_lacks_is_named(tmp_path: Path, torches: dict[str, Path]) -> None:
    built = build(tmp_path, torches, missing=True)
    torch = stand_in(tmp_path, "2.13.0+cpu", None)
    result = load(built.parents[1], torch, torches["cpu"], "import pkg._C")
    assert exception_lines(result.stderr) == [
        "ImportError: pkg._C was built for torch 2.13.0+cpu and needs fake_symbol_of_another_release,"
        " which this torch (2.13.0+cpu) does not provide: rebuild it against this torch (from source,"
        " with `--no-build-isolation`)."
    ]
    assert "undefined symbol" not in result.stderr and "library constructor ran" not in result.stderr


@pytest.mark.parametrize(("running", "passes"), [("2.10.0", True), ("2.14.1+cu130", True), ("3.0.0", True), ("2.9.1", False)])
def test_a_stable_abi_library_passes_every_torch_from_its_target(
    tmp_path: Path, torches: dict[str, Path], running: str, passes: bool
) -> None:
    built = build(tmp_path, torches, stable="2.10", kind=Kind.LIBRARY)
    torch = stand_in(tmp_path, running, None)
    result = load(built.parents[1], torch, torches["cpu"], f"import ctypes\nctypes.CDLL({str(built)!r})")
    assert (result.returncode == 0) == passes, result.stderr
    if not passes:
        assert exception_lines(result.stderr)[0] == (
            "ImportError: pkg._C uses torch's stable ABI 2.10: it needs torch>=2.10, but torch 2.9.1"
            " is installed, which is older. Install a newer torch: `pip install 'torch>=2.10'`.")


def test_a_stable_cuda_library_under_a_cpu_torch_names_the_cuda_it_needs(
    tmp_path: Path, torches: dict[str, Path]
) -> None:
    built = build(tmp_path, torches, stable="2.10", kind=Kind.LIBRARY, cuda=True)
    torch = stand_in(tmp_path, "2.13.0+cpu", None)
    result = load(built.parents[1], torch, torches["cpu"], f"import ctypes\nctypes.CDLL({str(built)!r})")
    assert exception_lines(result.stderr)[0] == (
        "ImportError: pkg._C was built for torch>=2.10 with CUDA 13, this is torch 2.13.0+cpu:"
        " install a torch built with CUDA 13 (`pip install 'torch>=2.10' --index-url"
        " https://download.pytorch.org/whl/cu130`).")
    assert "undefined symbol" not in result.stderr and "cannot open" not in result.stderr


LINKERS = {
    "gold": ("-fuse-ld=gold",),
    "bfd with packed relative relocations": ("-Wl,-z,pack-relative-relocs",),
    "bfd with -z now and gc-sections": ("-Wl,-z,now", "-Wl,--gc-sections"),
}


@pytest.mark.parametrize("linker", LINKERS)
def test_what_other_links_produce_is_patched_alike(tmp_path: Path, torches: dict[str, Path], linker: str) -> None:
    flags = LINKERS[linker]
    if "gold" in linker and shutil.which("ld.gold") is None:
        pytest.skip("needs ld.gold")
    built = build(tmp_path, torches, built_torch="2.14.1+cu130", built_cuda="13.0", cuda=True, link_flags=flags)
    ran = load(built.parents[1], stand_in(tmp_path, "2.14.1+cu130", "13.0"), torches["cuda"],
               "import pkg._C as c; print(c.answer())")
    assert (ran.stdout, ran.stderr) == ("1142\n", "library constructor ran\n")
    refused = load(built.parents[1], stand_in(tmp_path, "2.14.1+cpu", None), torches["cpu"], "import pkg._C")
    (said,) = exception_lines(refused.stderr)
    assert said.startswith("ImportError: pkg._C was built for torch 2.14.1+cu130, this is torch 2.14.1+cpu:")


HOST = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *handle = dlopen(argv[1], RTLD_NOW);
    printf("%s\n", handle ? "loaded" : dlerror());
    return 0;
}
"""


def test_a_program_without_python_gets_the_line_on_stderr(tmp_path: Path, torches: dict[str, Path]) -> None:
    """A C++ program loading the library (no Python, no torch module to ask): the symbol check
    still speaks, in one line, and nothing of the library runs."""
    built = build(tmp_path, torches, missing=True, kind=Kind.LIBRARY, python=False)
    (tmp_path / "host.c").write_text(HOST)
    gcc(tmp_path / "host.c", "-o", tmp_path / "host", "-ldl")
    result = run(tmp_path / "host", built, env={"LD_LIBRARY_PATH": str(torches["cpu"])}, check=False)
    assert result.stdout == "loaded\n"
    assert result.stderr == (
        "pep517_torch: pkg._C was built for torch 2.13.0+cpu and needs fake_symbol_of_another_release,"
        " which nothing loaded in this process provides: import torch first (the torch it was built for).\n")


def test_unpatched_the_check_is_inert_and_patched_twice_refused(tmp_path: Path, torches: dict[str, Path]) -> None:
    built = build(tmp_path, torches, patch=False)
    result = load(built.parents[1], stand_in(tmp_path, "2.99.0", None), torches["cpu"],
                  "import pkg._C as c; print(c.answer())")
    assert (result.stdout, result.stderr) == ("42\n", "library constructor ran\n")
    guard_patch.patch_file(str(built), [], "PyInit__C")
    with pytest.raises(guard_patch.PatchError, match="patched already"):
        guard_patch.patch_file(str(built), [], "PyInit__C")
    (tmp_path / "plain.c").write_text("int f(void) { return 1; }\n")
    gcc("-shared", "-fPIC", tmp_path / "plain.c", "-o", tmp_path / "plain.so")
    with pytest.raises(guard_patch.PatchError, match="block is missing"):
        guard_patch.patch_file(str(tmp_path / "plain.so"), [], None)


def test_the_script_fails_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "x.so").write_bytes(b"not an ELF file")
    result = run(sys.executable, guard_patch.__file__, tmp_path / "x.so", "--drop", "libc10_cuda.so", check=False)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "not a 64-bit little-endian ELF file" in result.stderr


def test_block_layout_agrees_with_the_c_source(tmp_path: Path) -> None:
    source = tmp_path / "layout.c"
    source.write_text(
        '#define GUARD_MODULE "m"\n#define GUARD_TORCH "2.13"\n#define GUARD_STABLE NULL\n'
        '#define GUARD_CUDA NULL\n#define GUARD_BUILT_FOR "x"\n#define GUARD_CUDA_ADVICE "y"\n'
        f'#include "{import_guard.SOURCE}"\n#include <stdio.h>\n'
        "int main(void) { printf(\"%zu %zu\\n\", offsetof(struct guard_block, functions),"
        " sizeof(struct guard_block)); return 0; }\n")
    gcc("-x", "c", source, "-o", tmp_path / "layout")
    assert run(tmp_path / "layout").stdout.split() == [str(guard_patch.FUNCTIONS_AT), str(guard_patch.BLOCK_SIZE)]


def test_what_a_cuda_torch_brings_leaves_needed(tmp_path: Path) -> None:
    torch = TorchInstall(tmp_path, "2.13.0+cpu", None, None)
    assert import_guard.dropped_libraries(torch, ("libcudart.so.13", "libcublas.so.13")) == (
        "libc10_cuda.so", "libcudart.so.13", "libtorch_cuda.so")


# -- through the backend, against the torch of this environment ----------------------------

GUARDED_PYPROJECT = pyproject("guarded", 'name = "gpkg._C"\nsources = ["csrc/c.cpp"]', packages=["gpkg"],
                              tool='torch-requirement = "none"', torch=True)
GUARDED_SOURCE = c_api_module(
    "static PyObject *twice(PyObject *, PyObject *arg) { return PyLong_FromLong(2 * PyLong_AsLong(arg)); }",
    '{"twice", twice, METH_O, nullptr}',
)


def guarded_project(root: Path) -> Path:
    files = {"gpkg/__init__.py": "", "csrc/c.cpp": GUARDED_SOURCE, "pyproject.toml": GUARDED_PYPROJECT}
    return write_tree(root, files)


@pytest.fixture(scope="module")
def guarded_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(project, wheel) of a torch-requirement = "none" project: its module carries the check."""
    base = tmp_path_factory.mktemp("guarded")
    root = guarded_project(base / "proj")
    built = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", root, "-o", base / "out"],
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    return root, next((base / "out").glob("*.whl"))


def test_a_guarded_wheel_ships_the_module_alone_and_computes(
    guarded_wheel: tuple[Path, Path], tmp_path: Path
) -> None:
    _, wheel = guarded_wheel
    with zipfile.ZipFile(wheel) as archive:
        assert [n for n in archive.namelist() if n.startswith("gpkg/")] == [f"gpkg/_C{SUFFIX}", "gpkg/__init__.py"]
        archive.extractall(tmp_path / "site")
    checked = subprocess.run([Path(sys.executable).parent / "check-wheel-contents", wheel],
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    code = ("import gpkg._C as c, sys;"
            "print(c.twice(21), type(c.__loader__).__name__, sys.modules['gpkg._C'] is c)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(tmp_path / "site")}, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["42", "ExtensionFileLoader", "True"]
    other = subprocess.run([sys.executable, "-c", "import torch; torch.__version__ = '2.12.0+cpu'; import gpkg._C"],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(tmp_path / "site")}, cwd=tmp_path)
    assert exception_lines(other.stderr) == [
        f"ImportError: gpkg._C was built against torch {TORCH.version}, but torch 2.12.0+cpu is installed."
        " Install a build of this package made for your torch (or build it from source with"
        f" `--no-build-isolation`), or install the torch it was built for: `pip install torch=={TORCH.version.split('+')[0]}`."]


WITHOUT_TORCH = """
import importlib.machinery, importlib.util, sys

class NoTorch(importlib.machinery.PathFinder):  # as if torch were not installed
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            return None
        return super().find_spec(name, path, target)

sys.meta_path[sys.meta_path.index(importlib.machinery.PathFinder)] = NoTorch
assert importlib.util.find_spec("torch") is None
import pep517_torch
try:
    print(pep517_torch.prepare_metadata_for_build_wheel(sys.argv[1], {"torch-requirement": sys.argv[2]}))
finally:
    assert "torch" not in sys.modules
"""


def test_metadata_without_torch_installed_equals_the_wheels(
    guarded_wheel: tuple[Path, Path], tmp_path: Path
) -> None:
    root, wheel = guarded_wheel

    def prepare(requirement: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, tmp_path / "md", requirement],
                              cwd=root, capture_output=True, text=True, timeout=300)

    ran = prepare("none")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    dist_info = ran.stdout.strip()
    assert dist_info == "guarded-1.0.dist-info"
    pinned = prepare("minor")  # a pin needs torch's version: still refused, in one line
    assert pinned.returncode == 1 and "torch is not installed" in pinned.stderr, pinned.stderr
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = archive.read(f"{dist_info}/METADATA")
    assert in_wheel == (tmp_path / "md" / dist_info / "METADATA").read_bytes()


# -- which artifacts carry the check (backend/stages.py: import_check_torch) -----------------

POLICY_EXTENSIONS = (
    'name = "ppkg._cpu"\nsources = ["csrc/cpu.cpp"]',
    'name = "ppkg._kernels"\nsources = ["csrc/k.cu"]',
    'name = "ppkg._headers"\nsources = ["csrc/uses_cuh.cpp"]',
    'name = "ppkg._ops"\nsources = ["csrc/cpu.cpp"]\nkind = "library"',
    'name = "ppkg._stable"\nsources = ["csrc/cpu.cpp", "csrc/k.cu"]\nkind = "library"\nstable-abi = "2.10"',
)
EVERY = {"_cpu", "_kernels", "_headers", "_ops", "_stable"}


@pytest.mark.parametrize(("dependencies", "settings", "checked"), [
    # beside this CPU torch only the stable-ABI CUDA library needs a CUDA torch (the C shim's
    # CUDA functions live in libtorch_cuda); kernels on raw pointers need a CUDA runtime alone,
    # and the pin says the rest
    ('dynamic = ["dependencies"]', "", {"_stable"}),
    ('dynamic = ["dependencies"]', 'torch-requirement = "none"', EVERY),
    ('dependencies = ["torch>=2.0"]', "", EVERY),  # a static requirement: no pin of this torch
    ('dynamic = ["dependencies"]', "torch-import-check = true", EVERY),
    ('dynamic = ["dependencies"]', "torch-import-check = false", set()),
])
def test_which_artifacts_carry_the_check(tmp_path: Path, dependencies: str, settings: str,
                                         checked: set[str]) -> None:
    from pep517_torch.backend import stages

    root = write_tree(tmp_path / "p", {
        "pyproject.toml": pyproject("policy", *POLICY_EXTENSIONS, dynamic=False, project=dependencies,
                                    packages=["ppkg"], tool=settings, torch=True),
        "ppkg/__init__.py": "", "csrc/cpu.cpp": "int f() { return 1; }\n",
        "csrc/k.cu": "__global__ void k() {}\n", "csrc/kernels.cuh": "#pragma once\n",
        "csrc/uses_cuh.cpp": '#include "kernels.cuh"\nint g() { return 2; }\n',
    })
    loaded = stages.load(root, {"cuda": "true"})
    carried = {spec.name.split(".")[1]: spec.import_check_torch for spec in loaded.project.extensions}
    assert {name for name, torch in carried.items() if torch} == checked
    assert set(carried.values()) <= {TORCH.version, None}
    # a .cuh include makes an extension CUDA (as the build would): under a CUDA torch it needs
    # that torch's CUDA, and "auto" checks it
    assert {s.name for s in loaded.project.extensions if s.uses_cuda} == {
        "ppkg._kernels", "ppkg._headers", "ppkg._stable"}
    if settings == "":
        cuda_root = tmp_path / "cuda-torch"
        (cuda_root / "include" / "c10" / "cuda" / "impl").mkdir(parents=True)
        (cuda_root / "include" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text("")
        (cuda_root / "lib").mkdir()
        (cuda_root / "lib" / "libc10_cuda.so").write_bytes(b"")
        cuda_torch = TorchInstall(cuda_root, "2.14.1+cu130", "13.0", None)
        under_cuda = {spec.name.split(".")[1] for spec in loaded.project.extensions
                      if stages.import_check_torch(loaded.project, spec, cuda_torch, False)}
        assert under_cuda == {"_kernels", "_headers", "_stable"}


def test_where_no_elf_patch_exists_no_check_is_planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ExtensionSpec("pkg._C", (tmp_path / "c.cpp",), import_check_torch="2.13.0+cpu")
    torch = TorchInstall(tmp_path, "2.13.0+cpu", None, None)
    assert import_guard.plan(spec, torch, None, tmp_path) is not None
    monkeypatch.setattr(import_guard.platform, "machine", lambda: "ppc64le")
    assert import_guard.plan(spec, torch, None, tmp_path) is None
    assert import_guard.unsupported() == "torch-import-check: linux ppc64le artifacts carry no import check"

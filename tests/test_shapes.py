"""The config shapes published torch extensions need (issue #7), each from pyproject.toml alone.

Every fixture under fixtures/shapes (and fixtures/abi3) is built once per module by the CLI
(`python -m pep517_torch wheel`), and what it built is checked where it matters: the module
imports from the unpacked wheel and answers, the op library computes through torch.ops, the ELF
file has (or lacks) the sections and DT_NEEDED entries the setting promises, build.ninja holds
the flags. Sources are tiny (bare C modules, <torch/library.h> ops): a few seconds per build.
Bad input is checked through `project.load`, which compiles nothing.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version

from pep517_torch.backend import pipeline as glue
from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.cuda import toolkit as cuda
from pep517_torch.core import flags as flags_mod
from pep517_torch.errors import ConfigError
from tests.commands import run_python
from tests.conftest import FIXTURES, ROOT

pytestmark = pytest.mark.compile

SHAPES = FIXTURES / "shapes"
TORCH = toolchain.find_torch()
TOOLKIT = cuda.find_cuda(os.environ)
EXT_SUFFIX = toolchain.ext_suffix()
# Variables the fixtures' overrides and versions look at: never inherited from the caller.
FIXTURE_VARIABLES = ("DEBUG", "FORCE_CUDA", "OVR_FLAVOUR", "OVR_CUDA_SUFFIX",
                     "SRCPKG_VERSION_SUFFIX", "TORCH_CUDA_ARCH_LIST")
ARCH_FLAGS = ("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code")
needs_nvcc = pytest.mark.skipif(TOOLKIT is None, reason="needs nvcc (CUDA_HOME or nvcc on PATH)")


# --------------------------------------------------------------------------- helpers


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FIXTURE_VARIABLES}
    return {**env, "CUDA_VISIBLE_DEVICES": "", **extra}


def copy_project(name: str, target: Path) -> Path:
    """A fixture copied with its symlinks (fixtures/shapes/srclayout has one)."""
    destination = target / Path(name).name
    shutil.copytree(FIXTURES / name, destination, symlinks=True,
                    ignore=shutil.ignore_patterns("build", "dist"))
    return destination


@dataclass
class Built:
    project: Path
    wheel: Path
    site: Path  # the wheel unpacked, as an install would lay it out
    log: str
    ninja: str  # build.ninja as this build left it

    def members(self) -> set[str]:
        with zipfile.ZipFile(self.wheel) as zf:
            return set(zf.namelist())

    def python(self, code: str, **env: str) -> str:
        return run_python(code, env={"PYTHONPATH": str(self.site), **env},
                          cwd=self.site).stdout.strip()


def only(paths) -> Path:  # type: ignore[no-untyped-def]
    found = sorted(paths)
    assert len(found) == 1, found
    return found[0]


def cli_wheel(project: Path, out: Path, *settings: str, **env: str) -> Built:
    result = subprocess.run(
        [sys.executable, "-m", "pep517_torch", "wheel", project, "-o", out, *settings],
        capture_output=True, text=True, env=clean_env(**env), timeout=600,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    wheel = only(out.glob("*.whl"))
    site = out / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    ninja = only(project.glob("build/*/build.ninja")).read_text()
    return Built(project, wheel, site, log, ninja)


def readelf(*args: str | Path) -> str:
    tool = shutil.which("readelf")
    if tool is None:
        pytest.skip("needs readelf (binutils)")
    return subprocess.run([tool, *map(str, args)], capture_output=True, text=True,
                          check=True).stdout


def sections(path: Path) -> set[str]:
    return set(re.findall(r"\]\s+(\.\S+)", readelf("-S", "-W", path)))


def needed(path: Path) -> list[str]:
    return re.findall(r"\(NEEDED\).*\[(.+)\]", readelf("-d", path))


def dynamic_symbols(path: Path) -> set[str]:
    lines = readelf("--dyn-syms", "-W", path).splitlines()
    return {line.split()[7].split("@")[0] for line in lines
            if len(line.split()) >= 8 and line.split()[6] != "UND"}


def extension_flags(ninja: str, extension: str, kind: str) -> list[str]:
    """``kind`` (cflags, cuflags, ldflags) of the extension named in the `# extension` comment."""
    blocks = ninja.split("# extension ")
    block = only(b for b in blocks[1:] if b.split("\n", 1)[0] == extension)
    line = only(l for l in block.splitlines() if l.startswith(f"{kind}_"))
    return line.split(" = ", 1)[1].split()


def version_of(project: Path, env: dict[str, str] | None = None, **settings: str) -> str:
    """The version the metadata would carry: read and resolved, nothing compiled."""
    return glue.load(project, settings or None, env=clean_env(**(env or {}))).metadata.version


# --------------------------------------------------------------------------- 1. layouts


@pytest.fixture(scope="module")
def pkgdir(tmp_path_factory: pytest.TempPathFactory) -> Built:
    tmp = tmp_path_factory.mktemp("pkgdir")
    return cli_wheel(copy_project("shapes/pkgdir", tmp), tmp / "out")


def test_package_dir_nested_packages_and_top_level_modules(pkgdir: Built) -> None:
    assert re.fullmatch(r"shapes_pkgdir-2\.4\.1-cp311-cp311-manylinux_2_\d+_x86_64\.whl", pkgdir.wheel.name)
    assert {
        f"deep/_core{EXT_SUFFIX}", f"deep/sub/mod_cpu{EXT_SUFFIX}", f"_deep_top{EXT_SUFFIX}",
        "deep/__init__.py", "deep/sub/__init__.py", "deep_compat.py",
    } <= pkgdir.members()
    assert not any(m.startswith(("python_src/", "native/")) for m in pkgdir.members())
    # one source, three modules: each its own PyInit_ and define; _deep_top links extra.cpp too
    assert pkgdir.python("import deep_compat; print(deep_compat.answers())") == "[1, 2, 307]"
    assert "3 extensions: 4 compiled, 3 linked" in pkgdir.log


@pytest.fixture(scope="module")
def srclayout(tmp_path_factory: pytest.TempPathFactory) -> Built:
    tmp = tmp_path_factory.mktemp("srclayout")
    project = copy_project("shapes/srclayout", tmp)
    assert (project / "csrc/include/vendor").is_symlink()
    return cli_wheel(project, tmp / "out", SRCPKG_VERSION_SUFFIX="+cu130")


def test_src_layout_with_package_data(srclayout: Built) -> None:
    members = srclayout.members()
    assert {f"srcpkg/_C{EXT_SUFFIX}", "srcpkg/_version.py", "srcpkg/data/settings.json"} <= members
    assert not any(m.startswith(("src/", "third_party/", "csrc/")) for m in members)
    result = srclayout.python("import srcpkg; print(srcpkg.answer(), srcpkg.settings())")
    assert result == "42 {'answer_source': 'vendor', 'expected': 42}"


def test_flat_layout_discovers_packages_and_leaves_benchmarks_out(oplib: Built) -> None:
    members = oplib.members()
    assert "oplibpkg/__init__.py" in members and "oplibpkg/legacy/__init__.py" in members
    assert not any(m.startswith("benchmarks/") for m in members)


# --------------------------------------------------------------------------- 2. op libraries


@pytest.fixture(scope="module")
def oplib(tmp_path_factory: pytest.TempPathFactory) -> Built:
    tmp = tmp_path_factory.mktemp("oplib")
    return cli_wheel(copy_project("shapes/oplib", tmp), tmp / "out")


def test_op_libraries_have_no_abi_suffix_and_no_pyinit(oplib: Built) -> None:
    members = oplib.members()
    libraries = {"oplibpkg/_ops.so", "oplibpkg/legacy/legacy_ops.so"}
    assert libraries | {f"oplibpkg/_info{EXT_SUFFIX}"} <= members
    for library in ("oplibpkg/_ops.so", "oplibpkg/legacy/legacy_ops.so"):
        symbols = dynamic_symbols(oplib.site / library)
        assert symbols and not any(s.startswith("PyInit_") for s in symbols), library
    assert "PyInit__info" in dynamic_symbols(oplib.site / f"oplibpkg/_info{EXT_SUFFIX}")


def test_op_libraries_load_with_torch_ops_load_library_and_compute(oplib: Built) -> None:
    result = oplib.python(
        "import torch, oplibpkg, oplibpkg._info as info;"
        "print(oplibpkg.scale(torch.arange(3.0), 2.0).tolist(),"
        " oplibpkg.twice(torch.tensor([1.5, -2.0])).tolist(), info.libraries())"
    )
    assert result == "[0.0, 2.0, 4.0] [3.0, -4.0] 2"


def test_op_libraries_carry_the_import_check_too(oplib: Built, tmp_path: Path) -> None:
    """With the import check on, every artifact carries it inside (its constructor, for
    torch.ops.load_library): the same files, the same names, no .py beside them."""
    guarded = cli_wheel(oplib.project, tmp_path / "out", "-Ctorch-import-check=true")
    assert "3 compiled" in guarded.log  # the checks only: the sources' objects are reused
    assert guarded.members() == oplib.members()
    result = guarded.python(
        "import torch, oplibpkg, oplibpkg._info as info;"
        "print(oplibpkg.scale(torch.ones(2), 3.0).tolist(), info.libraries())"
    )
    assert result == "[3.0, 3.0] 2"
    refused = run_python("import torch; torch.__version__ = '2.12.0+cpu'; import oplibpkg",
                         env={"PYTHONPATH": str(guarded.site)}, cwd=guarded.site, check=False)
    assert refused.returncode == 1
    assert ("ImportError: oplibpkg._ops was built against torch 2.13.0+cpu, but torch 2.12.0+cpu is"
            " installed.") in refused.stderr
    assert "undefined symbol" not in refused.stderr


# --------------------------------------------------------------------------- 3. CUDA variants


@pytest.fixture(scope="module")
def cudavariant(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """The same table built twice: cuda = "auto" (off with this CPU torch), then -Ccuda=true."""
    tmp = tmp_path_factory.mktemp("cudavariant")
    project = copy_project("shapes/cudavariant", tmp)
    builds = {"auto": cli_wheel(project, tmp / "auto")}
    if TOOLKIT is not None:
        builds["cuda"] = cli_wheel(project, tmp / "cuda", "-Ccuda=true")
    return builds


def test_cpu_variant_without_cuda(cudavariant: dict[str, Built]) -> None:
    if TORCH.cuda is not None and TOOLKIT is not None:
        pytest.skip("a CUDA torch with nvcc: cuda = 'auto' is on here")
    built = cudavariant["auto"]
    nvcc = f"although nvcc {TOOLKIT.version_str} was found" if TOOLKIT else "and no nvcc was found"
    skip = (
        "skipping extension cv._x_cuda: tool.torch-ext.extension[2].if.cuda = true does not hold"
        f" (torch {TORCH.version} is a CPU build"
    )
    assert skip in built.log, built.log
    assert nvcc in built.log and "so CUDA is off" in built.log
    assert f"cv/_x_cuda{EXT_SUFFIX}" not in built.members()
    ninja = built.ninja
    assert not re.search(r"\.cu\b", ninja), "a .cu source in a CPU build"
    assert "cuflags_" not in ninja and "CV_WITH_CUDA" not in ninja and "cudart" not in ninja
    result = built.python("import cv; print(cv.variants())")
    assert result == "{'backend': ('cpu', 0), 'x_cpu': 'cpu', 'x_cuda': None}"


@needs_nvcc
def test_cuda_variant_with_cuda_on(cudavariant: dict[str, Built]) -> None:
    built = cudavariant["cuda"]
    assert "skipping" not in built.log
    assert f"cv/_x_cuda{EXT_SUFFIX}" in built.members()
    assert "cudart" in " ".join(needed(built.site / f"cv/_C{EXT_SUFFIX}"))
    ninja = built.ninja
    assert "-DCV_WITH_CUDA" in extension_flags(ninja, "cv._C", "cflags")
    # cv._C: the user's -gencode replaces the arch list; cv._x_cuda: cuda-arch-list = ["8.0"]
    for extension in ("cv._C", "cv._x_cuda"):
        cuflags = extension_flags(ninja, extension, "cuflags")
        arch = [f for f in cuflags if f.startswith(ARCH_FLAGS)]
        assert arch == ["-gencode=arch=compute_80,code=sm_80"], (extension, arch)
    major = TOOLKIT.version[0]  # type: ignore[union-attr]
    result = built.python(
        "import cv; v = cv.variants(); print(v['backend'][0], v['backend'][1] // 1000,"
        " v['x_cpu'], v['x_cuda'][0], v['x_cuda'][1] // 1000)"
    )
    assert result == f"cuda {major} cpu cuda {major}"  # cudart answers without a GPU


def test_cuda_sources_use_no_torch_headers() -> None:
    for source in (SHAPES / "cudavariant/csrc/cuda").glob("*.cu"):
        includes = re.findall(r"#include\s*[<\"]([^>\"]+)", source.read_text())
        assert includes == ["cuda_runtime.h"], source


# --------------------------------------------------------------------------- 4. overrides


OVERRIDE_CASES = {  # name: (environment, what ovr._C reports, version)
    "plain": ({}, {"mode": "default", "cuda": 0, "cpu_only": 1, "debug": 0, "optimized": 1},
              "1.2.0"),
    "debug+flavour": ({"DEBUG": "1", "OVR_FLAVOUR": "fast"},
                      {"mode": "fast", "cuda": 0, "cpu_only": 1, "debug": 1, "optimized": 0},
                      "1.2.0"),
    "force_cuda": ({"FORCE_CUDA": "1", "OVR_CUDA_SUFFIX": "+cu130"},
                   {"mode": "default", "cuda": 1, "cpu_only": 0, "debug": 0, "optimized": 1},
                   "1.2.0+cu130"),
}


@pytest.fixture(scope="module")
def overrides_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_project("shapes/overrides", tmp_path_factory.mktemp("overrides"))


@pytest.mark.parametrize("case", list(OVERRIDE_CASES))
def test_overrides_environment_cuda_platform_torch(overrides_project: Path, tmp_path: Path,
                                                   case: str) -> None:
    if TORCH.cuda is not None and TOOLKIT is not None and case != "force_cuda":
        pytest.skip("CUDA is on by default with a CUDA torch and nvcc")
    env, expected, version = OVERRIDE_CASES[case]
    built = cli_wheel(overrides_project, tmp_path / "out", **env)
    assert built.wheel.name.startswith(f"shapes_overrides-{version}-")
    info = ast.literal_eval(built.python("import ovr; print(ovr.info())"))
    # platform = "linux" and torch >= 2.10 hold here; win32 and torch < 2.0 (csrc/never.cpp) do not
    assert info == {**expected, "linux": int(sys.platform == "linux"), "torch_2_10": 1}
    library = built.site / f"ovr/_C{EXT_SUFFIX}"
    cflags = extension_flags(built.ninja, "ovr._C", "cflags")
    if expected["debug"]:
        assert ".debug_info" in sections(library)
        assert {"-O0", "-g"} <= set(cflags) and not {"-O3", "-DNDEBUG"} & set(cflags)
    else:
        assert ".debug_info" not in sections(library)
        assert "-O3" in cflags and "-g" not in cflags


def test_overrides_resolve_without_compiling(overrides_project: Path) -> None:
    # the suffix override needs CUDA on: the variable alone changes nothing
    assert version_of(overrides_project, {"OVR_CUDA_SUFFIX": "+cu130"}) == "1.2.0"
    forced = {"FORCE_CUDA": "1", "OVR_CUDA_SUFFIX": "+cu130"}
    assert version_of(overrides_project, forced) == "1.2.0+cu130"
    assert version_of(overrides_project, forced, cuda="false") == "1.2.0"  # -C wins
    # an empty DEBUG is unset: no debug build
    loaded = glue.load(overrides_project, None, env=clean_env(DEBUG=""))
    assert loaded.project.extensions[0].build_type.value == "release"
    loaded = glue.load(overrides_project, None, env=clean_env(DEBUG="yes"))
    assert loaded.project.extensions[0].build_type.value == "debug"


# --------------------------------------------------------------------------- 5 + 6. flags


@pytest.fixture(scope="module")
def flags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    tmp = tmp_path_factory.mktemp("flags")
    project = copy_project("shapes/flags", tmp)
    release = cli_wheel(project, tmp / "release")
    debug = cli_wheel(project, tmp / "debug", "-Cbuild-type=debug")
    return {"release": release, "debug": debug}


def test_user_std_replaces_the_default(flags: dict[str, Built]) -> None:
    built = flags["release"]
    result = built.python("import flg._std17 as a, flg._stddefault as b;"
                          " print(a.cplusplus(), b.cplusplus())")
    default = 202002 if Version(TORCH.version).release >= (2, 10) else 201703
    assert result == f"201703 {default}"
    ninja = built.ninja
    std17 = [f for f in extension_flags(ninja, "flg._std17", "cflags") if f.startswith("-std=")]
    assert std17 == ["-std=c++17"]
    default_std = [f for f in extension_flags(ninja, "flg._stddefault", "cflags")
                   if f.startswith("-std=")]
    assert default_std == [f"-std=c++{str(default)[2:4]}"]


def test_openmp_compiles_links_and_runs_in_parallel(flags: dict[str, Built]) -> None:
    built = flags["release"]
    library = built.site / f"flg/_omp{EXT_SUFFIX}"
    assert any(n.startswith("libgomp") for n in needed(library))
    ninja = built.ninja
    assert "-fopenmp" in extension_flags(ninja, "flg._omp", "cflags")
    assert "-fopenmp" in extension_flags(ninja, "flg._omp", "ldflags")
    assert "-fopenmp" not in extension_flags(ninja, "flg._plain", "cflags")
    # torch first (its OpenMP runtime), then ours: one runtime, threads > 0, a parallel loop
    result = built.python(
        "import torch, flg._omp as o;"
        "print(o.at_parallel_openmp(), o.max_threads(), o.parallel_sum(100000))",
        OMP_NUM_THREADS="2",
    )
    assert result == f"{int(TORCH.openmp)} 2 (4999950000, 2)"
    assert built.python("import flg._omp as o; print(o.max_threads() > 0)") == "True"


def test_strip_removes_the_symbol_table(flags: dict[str, Built]) -> None:
    built = flags["release"]
    assert ".symtab" not in sections(built.site / f"flg/_stripped{EXT_SUFFIX}")
    assert ".symtab" in sections(built.site / f"flg/_plain{EXT_SUFFIX}")
    ninja = built.ninja
    assert "-s" in extension_flags(ninja, "flg._stripped", "ldflags")
    assert "-s" not in extension_flags(ninja, "flg._plain", "ldflags")
    assert built.python("import flg._stripped as s; print(s.ping())") == "pong"


def test_debug_build_from_one_setting(flags: dict[str, Built]) -> None:
    release, debug = flags["release"], flags["debug"]
    plain = f"flg/_plain{EXT_SUFFIX}"
    assert ".debug_info" not in sections(release.site / plain)
    assert ".debug_info" in sections(debug.site / plain)
    cflags = extension_flags(debug.ninja, "flg._plain", "cflags")
    assert {"-O0", "-g"} <= set(cflags) and not {"-O3", "-DNDEBUG"} & set(cflags)
    assert "5 extensions: 5 compiled" in debug.log  # every object depends on the -O level
    assert debug.python("import flg._plain as p; print(p.ping())") == "pong"


# --------------------------------------------------------------------------- 7. stable ABI


@pytest.fixture(scope="module")
def abi3(tmp_path_factory: pytest.TempPathFactory) -> Built:
    tmp = tmp_path_factory.mktemp("abi3")
    return cli_wheel(copy_project("abi3", tmp), tmp / "out")


def test_limited_api_wheel(abi3: Built, tmp_path: Path) -> None:
    assert re.fullmatch(r"abi3ops-1\.0\.0-cp310-abi3-manylinux_2_\d+_x86_64\.whl", abi3.wheel.name)
    assert "abi3ops/_C.abi3.so" in abi3.members()
    ninja = abi3.ninja
    cflags = extension_flags(ninja, "abi3ops._C", "cflags")
    assert [f for f in cflags if "Py_LIMITED_API" in f] == ["-DPy_LIMITED_API=0x030A0000"]
    assert ninja.count("Py_LIMITED_API") == 1
    assert not any("torch_python" in f for f in extension_flags(ninja, "abi3ops._C", "ldflags"))
    assert not any("torch_python" in n for n in needed(abi3.site / "abi3ops/_C.abi3.so"))
    site = tmp_path / "site"  # installed by pip this time
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
                    site, abi3.wheel], check=True, capture_output=True)
    result = run_python(
        "import torch, abi3ops;"
        "print(abi3ops.add_one(torch.zeros(2)).tolist(), hex(abi3ops._C.limited_api()))",
        env={"PYTHONPATH": str(site)}, cwd=site,
    )
    assert result.stdout.strip() == "[1.0, 1.0] 0x30a0000"


# --------------------------------------------------------------------------- 8. versions


def test_versions_static_ast_regex_and_suffix(tmp_path: Path) -> None:
    assert version_of(SHAPES / "oplib") == "1.0.0"  # static
    assert version_of(SHAPES / "pkgdir") == "2.4.1"  # __version__ read by AST, never imported
    srclayout = SHAPES / "srclayout"
    assert version_of(srclayout) == "0.9.2"  # regex on a file
    assert version_of(srclayout, {"SRCPKG_VERSION_SUFFIX": "+cu130"}) == "0.9.2+cu130"
    assert version_of(srclayout, {"SRCPKG_VERSION_SUFFIX": ""}) == "0.9.2"
    said = re.escape("plus suffix 'cu130' is '0.9.2cu130', which is not a valid PEP 440 version")
    with pytest.raises(ConfigError, match=said) as caught:
        version_of(srclayout, {"SRCPKG_VERSION_SUFFIX": "cu130"})  # not a local label
    assert caught.value.key == "tool.torch-ext.version.suffix-env"


def test_srclayout_wheel_carries_the_suffixed_version(srclayout: Built) -> None:
    assert re.fullmatch(r"shapes_srclayout-0\.9\.2\+cu130-cp311-cp311-manylinux_2_\d+_x86_64\.whl", srclayout.wheel.name)


# --------------------------------------------------------------------------- 9. sdist files


def sdist_of(project: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pep517_torch", "sdist", project, "-o", out],
                   check=True, capture_output=True, env=clean_env())
    return only(out.glob("*.tar.gz"))


def test_sdist_ships_headers_through_a_linked_directory(srclayout: Built, tmp_path: Path) -> None:
    assert (srclayout.project / "csrc/include/vendor").is_symlink()
    sdist = sdist_of(srclayout.project, tmp_path / "sdist")
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
        tf.extractall(tmp_path / "unpacked", filter="data")
    assert "csrc/include/vendor/vendor_answer.h" in names  # through the symlinked directory
    assert not any(n.startswith("build/") for n in names)
    unpacked = only((tmp_path / "unpacked").iterdir())
    assert not (unpacked / "csrc/include/vendor").is_symlink()  # stored as regular files
    rebuilt = cli_wheel(unpacked, tmp_path / "out")
    assert rebuilt.python("import srcpkg; print(srcpkg.answer())") == "42"


# --------------------------------------------------------------------------- bad input


def write_project(root: Path, tool: str, files: tuple[str, ...] = ("csrc/a.cpp",)) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "bad"
        version = "1.0"
        dynamic = ["dependencies"]
        """) + textwrap.dedent(tool))
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("int f() { return 0; }\n" if name.endswith(".cpp") else "")
    return root


BAD_INPUT = {
    "override condition names an unknown field": (
        """
        [[tool.torch-ext.extension]]
        name = "_a"
        sources = ["csrc/a.cpp"]
        [[tool.torch-ext.overrides]]
        if.gpu = true
        build-type = "debug"
        """, "tool.torch-ext.overrides[0].if.gpu", "unknown key 'gpu'"),
    "extension condition names an unknown field": (
        """
        [[tool.torch-ext.extension]]
        name = "_a"
        sources = ["csrc/a.cpp"]
        if.cuda_version = ">=12"
        """, "tool.torch-ext.extension[0].if.cuda_version", "unknown key 'cuda_version'"),
    "cuda table with with-cuda = false": (
        """
        [[tool.torch-ext.extension]]
        name = "_a"
        sources = ["csrc/a.cpp"]
        with-cuda = false
        cuda = { define-macros = { WITH_CUDA = true } }
        """, "tool.torch-ext.extension[0].cuda",
        "not allowed on an extension with with-cuda = false"),
    "two extensions producing the same file": (
        """
        [[tool.torch-ext.extension]]
        name = "_a"
        sources = ["csrc/a.cpp"]
        if.cuda = true
        [[tool.torch-ext.extension]]
        name = "_a"
        sources = ["csrc/a.cpp"]
        if.cuda = false
        """, "tool.torch-ext.extension[1].name", "already used by tool.torch-ext.extension[0]"),
    "Py_LIMITED_API disagreeing with py-limited-api": (
        """
        [[tool.torch-ext.extension]]
        name = "_a"
        sources = ["csrc/a.cpp"]
        py-limited-api = "cp310"
        define-macros = { Py_LIMITED_API = "0x030B0000" }
        """, "tool.torch-ext.extension[0].py-limited-api", "needs 0x030A0000"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_a_clear_error(tmp_path: Path, case: str) -> None:
    tool, key, message = BAD_INPUT[case]
    project = write_project(tmp_path / "bad", tool)
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        glue.load(project, None, env=clean_env())
    assert caught.value.key == key
    assert str(caught.value).startswith(f"{key}: ")


def test_an_agreeing_py_limited_api_define_is_not_doubled(tmp_path: Path) -> None:
    project = write_project(tmp_path / "ok", """
        [[tool.torch-ext.extension]]
        name = "_a"
        sources = ["csrc/a.cpp"]
        py-limited-api = "cp310"
        extra-cflags = ["-DPy_LIMITED_API=0x030A0000"]
        """)
    (spec,) = glue.load(project, None, env=clean_env()).project.extensions
    tools = flags_mod.ResolvedTools(toolchain.find_compiler(os.environ), TORCH,
                                toolchain.python_include_dir())
    cxx = flags_mod.compute(spec, tools, source_root=project).cxx
    assert [f for f in cxx if "Py_LIMITED_API" in f] == ["-DPy_LIMITED_API=0x030A0000"]


def test_extension_and_python_module_of_the_same_name_fail_before_compiling(tmp_path: Path) -> None:
    project = write_project(tmp_path / "bad", """
        [[tool.torch-ext.extension]]
        name = "pkg._C"
        sources = ["csrc/a.cpp"]
        """, files=("csrc/a.cpp", "pkg/__init__.py", "pkg/_C.py"))
    with pytest.raises(ConfigError, match=re.escape("pkg/_C.py")) as caught:
        glue.build_wheel(project, tmp_path / "out", None)
    assert caught.value.key == "tool.torch-ext.extension[0].name"
    assert not (project / "build").exists() and not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- the docs


def test_every_shape_has_a_docs_example() -> None:
    text = (ROOT / "docs/configuration.md").read_text().split("<!-- BEGIN GENERATED")[0]
    examples = "\n".join(re.findall(r"```toml\n(.*?)```", text, re.S))
    for needle in (
        'package-dir = { "" = "src"', "py-modules", 'name = "_vision_fast"',  # 1
        'kind = "library"', "python-abi-suffix = false",  # 2
        "[tool.torch-ext.extension.cuda]", "if.cuda = true",  # 3
        'if.env.FORCE_CUDA = "1"', "if.env.DEBUG = true", 'build-type = "debug"',  # 4
        "suffix-env", 'if.torch = "<2.10"', 'platform = "linux"',
        "openmp = true",  # 5
        '"-std=gnu++20"', "-gencode=arch=", "strip = true",  # 6
        'py-limited-api = "cp310"',  # 7
        'dynamic = ["version", "dependencies"]', "pattern = ",  # 8
        "sdist-include", "[tool.torch-ext.package-data]",  # 9
    ):
        assert needle in examples, needle
    assert "-Cbuild-type=debug" in text

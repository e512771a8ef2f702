"""User `-arch`/`-gencode`/`-code` flags are checked against this nvcc before anything compiles,
and objects start slowest first (#14 item 7)."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from pep517_torch.core.cuda.arch_flags import archs_named_by, check_user_arch_flags, resolve_arch_flags
from pep517_torch.errors import ConfigError
from tests.cuda_tools import REAL_ROOT, real_toolkit_available
from tests.test_arch import NO_GPU_ENV, NVCC_12_8, NVCC_13_0, fake_cuda_project


def key(index: int) -> str:
    return f"flags[{index}]"


@pytest.mark.parametrize(
    ("flags", "index", "named"),
    [
        (["-arch=compute_60"], 0, "compute_60"),
        (["-O3", "-arch", "sm_60"], 1, "sm_60"),
        (["--gpu-architecture=sm_52"], 0, "sm_52"),
        (["-gencode=arch=compute_60,code=sm_60"], 0, "sm_60"),
        (["-gencode", "arch=compute_80,code=[sm_80,sm_70]"], 0, "sm_70"),
        (["--generate-code=arch=compute_70,code=sm_80"], 0, "compute_70"),
        (['-gencode=arch=compute_80,code="sm_80,compute_61"'], 0, "compute_61"),
        (["-arch=compute_80", "-code=sm_80,sm_61"], 1, "sm_61"),
        (["-arch=sm_80", "--gpu-code", "lto_72"], 1, "lto_72"),
        (["-arch=sm_89a"], 0, "sm_89a"),  # arch-specific needs 9.0 or newer
        (["-arch=sm_90f"], 0, "sm_90f"),  # family-specific needs 10.0 or newer
    ],
)
def test_arch_nvcc_13_cannot_build_is_refused(flags: list[str], index: int, named: str) -> None:
    said = re.escape(f"names {named}, which nvcc 13.0 (/cuda/bin/nvcc) cannot build")
    with pytest.raises(ConfigError, match=said) as info:
        check_user_arch_flags(flags, NVCC_13_0, key)
    assert info.value.key == f"flags[{index}]"
    message = str(info.value)
    assert "it can build sm_75, sm_80" in message and "sm_100f" in message


def test_renamed_arch_says_so() -> None:
    with pytest.raises(ConfigError, match=r"cannot build \(CUDA 13 renamed 10\.1 to 11\.0\)"):
        check_user_arch_flags(["-arch=sm_101"], NVCC_13_0, key)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["-arch=sm_80"], ["sm_80"]),
        (["-arch", "sm_90a"], ["sm_90a"]),
        (["-arch=sm_100f"], ["sm_100f"]),
        (["-arch=compute_120"], ["compute_120"]),
        (["-gencode=arch=compute_90a,code=[sm_90a,compute_90a]"], ["sm_90a", "compute_90a"]),
        (["-arch=native"], ["native"]),
        (["-arch=all"], ["all"]),
        (["--gpu-architecture=all-major"], ["all-major"]),
        (["-arch=lto_89", "-code=lto_89"], ["lto_89"]),
        (["-arch=something_nvcc_judges"], ["something_nvcc_judges"]),
        (["-Xcompiler", "-arch=sm_35"], []),  # the host compiler's option, not nvcc's
        (["-DSM=sm_35"], []),
    ],
)
def test_buildable_or_unknown_archs_pass(flags: list[str], named: list[str]) -> None:
    """These flags name ``named`` (the last two name nothing: they are no nvcc arch options),
    and nvcc 13.0 builds each, or judges it itself (native, all, a name the check does not
    know): the check lets them through."""
    assert archs_named_by(flags) == named
    check_user_arch_flags(flags, NVCC_13_0, key)


def test_older_nvcc_builds_older_archs() -> None:
    check_user_arch_flags(["-arch=sm_60", "-code=sm_60,compute_60"], NVCC_12_8, key)
    with pytest.raises(ConfigError, match="sm_100f, which nvcc 12.8"):
        check_user_arch_flags(["-arch=sm_100f"], NVCC_12_8, key)  # family-specific: 12.9+


def test_resolve_arch_flags_checks_them_and_names_the_key() -> None:
    said = re.escape("'-arch=compute_60' names compute_60, which nvcc 13.0 (/cuda/bin/nvcc)")
    with pytest.raises(ConfigError, match=said) as info:
        resolve_arch_flags(None, NVCC_13_0, user_nvcc_flags=["-O2", "-arch=compute_60"],
                           env=NO_GPU_ENV)
    assert info.value.key == "extra_cuda_cflags[1]"  # the core names its field


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('extra-cuda-cflags = ["-O2", "-arch=compute_60"]\n', "tool.torch-ext.extension[0].extra-cuda-cflags[1]"),
        ('[tool.torch-ext.extension.cuda]\nextra-cuda-cflags = ["-gencode", "arch=compute_60,code=sm_60"]\n',
         "tool.torch-ext.extension[0].cuda.extra-cuda-cflags[0]"),
        ('[[tool.torch-ext.overrides]]\nif = {}\nappend.extension."kern._C".extra-cuda-cflags = ["-arch=sm_61"]\n',
         'tool.torch-ext.overrides[0].append.extension."kern._C".extra-cuda-cflags[0]'),
    ],
)
def test_a_toml_arch_flag_nvcc_cannot_build_fails_before_the_build_dir_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, key: str
) -> None:
    from pep517_torch.backend import pipeline

    root, env = fake_cuda_project(tmp_path / "p")  # a fake nvcc 13.0: nothing compiles
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + toml)
    monkeypatch.setattr(os, "environ", {**os.environ, **env})
    with pytest.raises(ConfigError, match=r"which nvcc 13\.0 \(.*\) cannot build;") as error:
        pipeline.build_wheel(root, tmp_path / "dist", None)
    assert error.value.key == key
    # the build directory holds at most the build lock: nothing planned or compiled
    assert not list(root.glob("build/**/build.ninja")) and not list(root.glob("build/**/*.o"))
    assert not (tmp_path / "dist").exists()


def test_an_extension_arch_list_error_names_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pep517_torch.backend import pipeline

    root, env = fake_cuda_project(tmp_path / "p")
    text = (root / "pyproject.toml").read_text() + 'cuda-arch-list = "8.0;3.5"\n'
    (root / "pyproject.toml").write_text(text)
    monkeypatch.setattr(os, "environ", {**os.environ, **env})
    with pytest.raises(ConfigError, match=re.escape("cannot build for 3.5;")) as error:
        pipeline.build_wheel(root, tmp_path / "dist", None)
    assert error.value.key == "tool.torch-ext.extension[0].cuda-arch-list"


def test_the_jit_names_its_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pep517_torch

    root, env = fake_cuda_project(tmp_path / "p")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    said = r"'-arch=compute_60' names compute_60, which nvcc 13\.0 \(.*\) cannot build"
    with pytest.raises(ConfigError, match=said) as error:
        pep517_torch.load("kern", [str(root / "k.cu")], extra_cuda_cflags=["-arch=compute_60"],
                          build_directory=str(tmp_path / "b"), is_python_module=False)
    assert error.value.key == "extra_cuda_cflags"
    assert not (tmp_path / "b" / "build.ninja").exists()


# ------------------------------------------------------------------------ slowest objects first


def ninjas() -> list[str]:
    from pep517_torch.core.toolchain.tools import find_ninja

    found = {str(find_ninja(os.environ))}  # PyPI's when installed (1.13), else PATH's
    system = shutil.which("ninja", path="/usr/bin:/usr/local/bin:/bin")
    return sorted(found | ({system} if system else set()))


@pytest.mark.compile
@pytest.mark.cuda
@pytest.mark.skipif(not real_toolkit_available(), reason="needs a real nvcc")
@pytest.mark.parametrize("ninja", ninjas())
def test_slowest_objects_start_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ninja: str
) -> None:
    """With one job, ninja's log lists objects in the order they ran: nvcc objects by the number
    of GPU targets, then the torch TU, then light C++, whatever order the sources are listed."""
    from pep517_torch.core.toolchain import tools as toolchain
    from pep517_torch.core.build import build
    from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind

    monkeypatch.setattr(toolchain, "find_ninja", lambda env: Path(ninja))
    csrc = tmp_path / "csrc"
    csrc.mkdir()
    kernel = "__global__ void {0}(float* x) {{ x[threadIdx.x] += 1.0f; }}\n"
    (csrc / "light_a.cpp").write_text("int light_a() { return 1; }\n")
    (csrc / "light_b.cpp").write_text("int light_b() { return 2; }\n")
    (csrc / "one_arch.cu").write_text(kernel.format("one_arch"))
    (csrc / "three_targets.cu").write_text(kernel.format("three_targets"))
    (csrc / "torch_tu.cpp").write_text(textwrap.dedent("""\
        #include <torch/library.h>
        TORCH_LIBRARY(order_ops, m) { m.def("noop(Tensor x) -> Tensor"); }
        """))
    common = dict(kind=Kind.LIBRARY, python_abi_suffix=False, pch=False, with_cuda=True)
    specs = [
        ExtensionSpec("first", (csrc / "light_a.cpp", csrc / "one_arch.cu", csrc / "torch_tu.cpp"),
                      cuda_arch_list=("8.0",), **common),  # type: ignore[arg-type]
        ExtensionSpec("second", (csrc / "light_b.cpp", csrc / "three_targets.cu"),
                      cuda_arch_list=("8.0", "9.0+PTX"), **common),  # type: ignore[arg-type]
    ]
    env = {**os.environ, "CUDA_HOME": str(REAL_ROOT)}
    options = BuildOptions(build_dir=tmp_path / "b", jobs=1, env=env, source_root=tmp_path)
    build(specs, options, log=lambda _: None)
    log = (tmp_path / "b" / ".ninja_log").read_text().splitlines()[1:]
    ran = [line.split("\t")[3] for line in log if line.split("\t")[3].endswith(".o")]
    assert ran == [
        "obj/second/csrc/three_targets.cu.o",  # 1 host pass + 3 GPU targets
        "obj/first/csrc/torch_tu.cpp.o",  # a torch TU: 3
        "obj/first/csrc/one_arch.cu.o",  # 1 + 1
        "obj/first/csrc/light_a.cpp.o",
        "obj/second/csrc/light_b.cpp.o",
    ]

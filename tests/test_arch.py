"""CUDA arch lists: parsing, user arch flags, defaults, and what nvcc really puts in an object."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from pep517_torch.core.cuda.arch_flags import default_arch_entries, resolve_arch_flags, user_arch_flags
from pep517_torch.core.cuda.arch_list import NAMED_ARCHES, ArchEntry, format_arch_list, parse_arch_list
from pep517_torch.core.cuda.toolkit import CudaToolkit, require_cuda
from pep517_torch.errors import ConfigError
from tests.cuda_tools import (
    NVCC_13_0_CODES,
    REAL_ROOT,
    SYSTEM_PATH,
    fatbin_contents,
    find_cuobjdump,
    make_fake_toolkit,
    real_toolkit_available,
    write_fake_nvidia_smi,
)

KEY = "tool.torch-ext.cuda-arch-list"


def toolkit(
    version: tuple[int, int] = (13, 0), codes: Sequence[str] = NVCC_13_0_CODES
) -> CudaToolkit:
    archs = sorted((int(c[3:-1]), int(c[-1])) for c in codes)
    return CudaToolkit(
        root=Path("/cuda"),
        nvcc=Path("/cuda/bin/nvcc"),
        version=version,
        include_dirs=(),
        library_dirs=(),
        found_via="CUDA_HOME",
        supported_archs=tuple(f"{a}.{b}" for a, b in archs),
    )


NVCC_13_0 = toolkit()
NVCC_12_8 = toolkit(
    (12, 8),
    [f"sm_{n}" for n in (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 120)],
)
NVCC_11_8 = toolkit(
    (11, 8), [f"sm_{n}" for n in (35, 37, 50, 52, 60, 61, 70, 75, 80, 86, 87, 89, 90)]
)
NO_GPU_ENV = {"PATH": "/nonexistent"}  # no nvidia-smi: no GPU visible


def flags_for(
    text: str, tk: CudaToolkit = NVCC_13_0, env: dict[str, str] | None = None
) -> list[str]:
    entries = parse_arch_list(text, key=KEY)
    return resolve_arch_flags(entries, tk, user_nvcc_flags=[], env=env or NO_GPU_ENV).flags


def gencode(number: str, *, ptx: bool = False) -> list[str]:
    sass = [f"-gencode=arch=compute_{number},code=sm_{number}"]
    return [*sass, f"-gencode=arch=compute_{number},code=compute_{number}"] if ptx else sass


# ---------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8.0", [ArchEntry(8, 0)]),
        ("9.0+PTX", [ArchEntry(9, 0, ptx=True)]),
        ("9.0+ptx", [ArchEntry(9, 0, ptx=True)]),
        ("9.0a", [ArchEntry(9, 0, "a")]),
        ("10.0a", [ArchEntry(10, 0, "a")]),
        ("12.0a+PTX", [ArchEntry(12, 0, "a", ptx=True)]),
        ("10.0f", [ArchEntry(10, 0, "f")]),
        ("12.0f+PTX", [ArchEntry(12, 0, "f", ptx=True)]),
        ("native", [ArchEntry(0, 0, native=True)]),
        ("NATIVE", [ArchEntry(0, 0, native=True)]),
    ],
)
def test_entry_forms(text: str, expected: list[ArchEntry]) -> None:
    assert parse_arch_list(text, key=KEY) == expected
    assert format_arch_list(expected) in (text, text.replace("ptx", "PTX"), text.lower())


@pytest.mark.parametrize(
    "value",
    ["8.0;9.0+PTX", "8.0 9.0+PTX", "8.0,9.0+PTX", " 8.0 ;, 9.0+PTX ;", ["8.0", "9.0+PTX"],
     ["8.0;9.0+PTX"], ("8.0", " 9.0+PTX ")],
)
def test_separators_and_lists(value: str | list[str]) -> None:
    assert parse_arch_list(value, key=KEY) == [ArchEntry(8, 0), ArchEntry(9, 0, ptx=True)]


@pytest.mark.parametrize("value", ["", "  ", ";;", []])
def test_empty(value: str | list[str]) -> None:
    assert parse_arch_list(value, key=KEY) == []


def test_named_arches_match_torch_2_13() -> None:
    torch_table = {
        "Kepler+Tesla": "3.7", "Kepler": "3.5+PTX", "Maxwell+Tegra": "5.3",
        "Maxwell": "5.0;5.2+PTX", "Pascal": "6.0;6.1+PTX", "Volta+Tegra": "7.2",
        "Volta": "7.0+PTX", "Turing": "7.5+PTX", "Ampere+Tegra": "8.7",
        "Ampere": "8.0;8.6+PTX", "Ada": "8.9+PTX", "Hopper": "9.0+PTX",
        "Blackwell+Tegra": "11.0", "Blackwell": "10.0;10.3;12.0;12.1+PTX",
    }
    assert {name.lower(): value for name, value in torch_table.items()} == NAMED_ARCHES
    for name, value in torch_table.items():
        entries = parse_arch_list(name, key=KEY)
        assert format_arch_list(entries) == value
        assert all(entry.origin == name for entry in entries)
    assert parse_arch_list("ampere", key=KEY) == parse_arch_list("8.0;8.6+PTX", key=KEY)


def test_names_mix_with_numbers() -> None:
    entries = parse_arch_list("Ampere;9.0a, Blackwell+Tegra", key=KEY)
    assert format_arch_list(entries) == "8.0;8.6+PTX;9.0a;11.0"


@pytest.mark.parametrize(
    ("bad", "hint"),
    [
        ("sm_90", "did you mean 9.0?"),
        ("compute_90a", "did you mean 9.0a?"),
        ("All", "list the architectures instead"),
        ("90", ""),
        ("9", ""),
        ("9.0b", ""),
        ("9.10", ""),
        ("9.0+PTX+PTX", ""),
        ("Ampere+PTX", ""),
        ("Hoper", ""),
        ("9.0;nope", ""),
    ],
)
def test_bad_entries(bad: str, hint: str) -> None:
    entry = bad.split(";")[-1]
    said = f"^{re.escape(KEY)}: unknown CUDA architecture {re.escape(repr(entry))}"
    with pytest.raises(ConfigError, match=said) as error:
        parse_arch_list(bad, key=KEY)
    assert type(error.value) is ConfigError and error.value.key == KEY
    message = str(error.value)
    assert hint in message
    assert "X.Y, X.Y+PTX, X.Ya or X.Yf" in message and "native" in message and "Ampere" in message


# --------------------------------------------------------------------- explicit lists → flags


def test_flags_for_an_explicit_list() -> None:
    decision = resolve_arch_flags(
        parse_arch_list("8.0;9.0+PTX", key=KEY), NVCC_13_0, user_nvcc_flags=[], env=NO_GPU_ENV
    )
    assert decision.flags == gencode("80") + gencode("90", ptx=True)
    assert decision.archs == ["sm_80", "sm_90", "compute_90"]
    assert decision.note is None


def test_arch_and_family_specific_flags() -> None:
    assert flags_for("9.0a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert flags_for("12.0a+PTX") == gencode("120a", ptx=True)
    assert flags_for("10.0f;12.0f+PTX") == gencode("100f") + gencode("120f", ptx=True)


def test_flags_are_sorted_numerically_and_deduplicated() -> None:
    assert flags_for("12.0;9.0a;8.0;9.0;9.0+PTX;Ampere;10.0f") == (
        gencode("80") + gencode("86", ptx=True) + gencode("90", ptx=True) + gencode("90a")
        + gencode("100f") + gencode("120")
    )


def test_named_arches_resolve() -> None:
    assert flags_for("Hopper") == gencode("90", ptx=True)
    assert flags_for("Blackwell") == gencode("100") + gencode("103") + gencode("120") + gencode(
        "121", ptx=True
    )


@pytest.mark.parametrize(
    ("text", "tk", "shown"),
    [
        ("3.5", NVCC_13_0, "3.5"),
        ("5.0", NVCC_13_0, "5.0"),
        ("Maxwell", NVCC_13_0, "5.0 (from 'Maxwell')"),
        ("10.1", NVCC_13_0, "10.1 (CUDA 13 renamed 10.1 to 11.0)"),
        ("8.6a", NVCC_13_0, "8.6a"),
        ("9.0f", NVCC_13_0, "9.0f"),
        ("13.0", NVCC_13_0, "13.0"),
        ("10.0f", NVCC_12_8, "10.0f"),  # family-specific needs nvcc 12.9+
        ("9.0a", NVCC_11_8, "9.0a"),  # arch-specific needs nvcc 12.0+
        ("12.0", NVCC_11_8, "12.0"),
    ],
)
def test_entries_this_nvcc_cannot_build(text: str, tk: CudaToolkit, shown: str) -> None:
    said = re.escape(f"nvcc {tk.version_str} (/cuda/bin/nvcc) cannot build for {shown};")
    with pytest.raises(ConfigError, match=said) as error:
        flags_for(text, tk)
    message = str(error.value)
    assert error.value.key == KEY
    assert f"it can build {', '.join(tk.supported_archs)}" in message


def test_buildable_list_names_specific_variants() -> None:
    said = re.escape("arch-specific 9.0a, 10.0a, 10.3a, 11.0a, 12.0a, 12.1a")
    with pytest.raises(ConfigError, match=said) as error:
        flags_for("3.5")
    assert "family-specific 10.0f, 10.3f, 11.0f, 12.0f, 12.1f" in str(error.value)
    said = re.escape("nvcc 11.8 (/cuda/bin/nvcc) cannot build for 3.0;")
    with pytest.raises(ConfigError, match=said) as error:
        flags_for("3.0", NVCC_11_8)
    assert "arch-specific" not in str(error.value) and "family-specific" not in str(error.value)


def test_nvcc_that_lists_nothing_is_not_second_guessed() -> None:
    assert flags_for("9.0", toolkit(codes=[])) == gencode("90")


# ------------------------------------------------------------------------- user's own flags


@pytest.mark.parametrize(
    ("flags", "found"),
    [
        (["-gencode=arch=compute_80,code=sm_80"], ["-gencode=arch=compute_80,code=sm_80"]),
        (["-O3", "-gencode", "arch=compute_80,code=sm_80"],
         ["-gencode=arch=compute_80,code=sm_80"]),
        (["--generate-code=arch=compute_90,code=[sm_90,compute_90]"],
         ["--generate-code=arch=compute_90,code=[sm_90,compute_90]"]),
        (["--generate-code", "arch=compute_90,code=sm_90"],
         ["--generate-code=arch=compute_90,code=sm_90"]),
        (["-arch=sm_90"], ["-arch=sm_90"]),
        (["-arch", "sm_90"], ["-arch=sm_90"]),
        (["-arch=native"], ["-arch=native"]),
        (["--gpu-architecture=sm_90a"], ["--gpu-architecture=sm_90a"]),
        (["--gpu-architecture", "all"], ["--gpu-architecture=all"]),
        (["-arch=compute_80", "-code=sm_80,sm_86"], ["-arch=compute_80", "-code=sm_80,sm_86"]),
        (["--gpu-code", "sm_80"], ["--gpu-code=sm_80"]),
    ],
)
def test_user_arch_flags_found(flags: list[str], found: list[str]) -> None:
    assert user_arch_flags(flags) == found


@pytest.mark.parametrize(
    "flags",
    [
        ["-DMY_ARCH_FLAG"],
        ["-DARCH=sm_90", "-UARCH"],
        ["-Xarchive", "-foo"],
        ["-Xarchive"],
        ["-Xcompiler", "-march=native"],
        ["-Xcompiler=-march=native"],
        ["-Xcompiler", "-arch"],  # a value of -Xcompiler, not an nvcc option
        ["-march=native", "--expt-relaxed-constexpr", "-Iarch", "-I", "-arch"],
        ["--archive-options=-x", "-architecture", "-gencodes"],
        [],
    ],
)
def test_user_arch_flags_negative(flags: list[str]) -> None:
    assert user_arch_flags(flags) == []


def test_user_arch_flags_win() -> None:
    decision = resolve_arch_flags(
        parse_arch_list("8.0;9.0", key=KEY),
        NVCC_13_0,
        user_nvcc_flags=["-O3", "-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]"],
        env=NO_GPU_ENV,
    )
    assert decision.flags == []
    assert decision.archs == ["sm_90a", "compute_90a"]
    assert decision.note is not None
    assert "-gencode=arch=compute_90a,code=[sm_90a,compute_90a]" in decision.note
    assert "adding no arch flags" in decision.note and "(8.0;9.0) ignored" in decision.note


def test_user_arch_flag_without_a_list() -> None:
    decision = resolve_arch_flags(
        None, NVCC_13_0, user_nvcc_flags=["-arch", "sm_89"], env=NO_GPU_ENV
    )
    assert decision.flags == [] and decision.archs == ["sm_89"]
    assert decision.note is not None and "ignored" not in decision.note


def test_flags_that_merely_mention_arch_do_not_count() -> None:
    decision = resolve_arch_flags(
        parse_arch_list("9.0", key=KEY),
        NVCC_13_0,
        user_nvcc_flags=["-DMY_ARCH_FLAG", "-Xarchive", "-v"],
        env=NO_GPU_ENV,
    )
    assert decision.flags == gencode("90")


# ------------------------------------------------------------------- defaults and native

DEFAULT_13_0 = gencode("80") + gencode("90") + gencode("100") + gencode("110") + gencode(
    "120", ptx=True
)
DEFAULT_NOTE_13_0 = (
    "no GPU visible and no architectures chosen: building for 8.0;9.0;10.0;11.0;12.0+PTX (the "
    "default for nvcc 13.0); set cuda_arch_list to choose"
)


@pytest.mark.parametrize("entries", [None, []])
def test_default_without_gpu(entries: list[ArchEntry] | None) -> None:
    decision = resolve_arch_flags(entries, NVCC_13_0, user_nvcc_flags=[], env=NO_GPU_ENV)
    assert decision.flags == DEFAULT_13_0
    assert decision.archs == ["sm_80", "sm_90", "sm_100", "sm_110", "sm_120", "compute_120"]
    assert decision.note == DEFAULT_NOTE_13_0


def test_default_entries_per_nvcc() -> None:
    assert format_arch_list(default_arch_entries(NVCC_13_0)) == "8.0;9.0;10.0;11.0;12.0+PTX"
    assert format_arch_list(default_arch_entries(NVCC_12_8)) == "8.0;9.0;10.0;12.0+PTX"
    assert format_arch_list(default_arch_entries(NVCC_11_8)) == "8.0;9.0+PTX"
    old = toolkit((10, 2), ["sm_30", "sm_35", "sm_50", "sm_60", "sm_70", "sm_75"])
    assert format_arch_list(default_arch_entries(old)) == "7.5+PTX"
    assert default_arch_entries(toolkit(codes=[])) == []


def test_default_when_nvcc_lists_nothing() -> None:
    decision = resolve_arch_flags(None, toolkit(codes=[]), user_nvcc_flags=[], env=NO_GPU_ENV)
    assert decision.flags == [] and decision.note is not None
    assert "nvcc's own default" in decision.note


TORCH_2_14_CU130_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


def test_a_cuda_torch_without_gpu_defaults_to_torchs_own_arch_list() -> None:
    decision = resolve_arch_flags(
        None, NVCC_13_0, user_nvcc_flags=[], env=NO_GPU_ENV, torch_archs=TORCH_2_14_CU130_ARCHS
    )
    assert decision.archs == [*TORCH_2_14_CU130_ARCHS, "compute_120"]
    assert decision.flags == [
        *gencode("75"), *gencode("80"), *gencode("86"), *gencode("90"), *gencode("100"),
        *gencode("120", ptx=True),
    ]
    assert decision.note == (
        "no GPU visible and no architectures chosen: building for 7.5;8.0;8.6;9.0;10.0;12.0+PTX"
        " (torch's own arch list sm_75 sm_80 sm_86 sm_90 sm_100 sm_120; PTX for the newest);"
        " set cuda_arch_list to choose"
    )
    # torch's archs this nvcc cannot build are left out, and the note says so.
    decision = resolve_arch_flags(
        None, NVCC_12_8, user_nvcc_flags=[], env=NO_GPU_ENV,
        torch_archs=("sm_80", "sm_90", "sm_110", "compute_90"),
    )
    assert decision.archs == ["sm_80", "sm_90", "compute_90"]
    assert "left out sm_110: nvcc 12.8 cannot build them" in (decision.note or "")
    # None buildable (or a CPU torch: no list): the documented default.
    for archs in [("sm_35",), ()]:
        decision = resolve_arch_flags(
            None, NVCC_13_0, user_nvcc_flags=[], env=NO_GPU_ENV, torch_archs=archs
        )
        assert decision.flags == DEFAULT_13_0 and decision.note == DEFAULT_NOTE_13_0


def test_visible_gpus_and_explicit_lists_win_over_torchs_arch_list(tmp_path: Path) -> None:
    write_fake_nvidia_smi(tmp_path, ["0, GPU-a, 8.6"])
    decision = resolve_arch_flags(
        None, NVCC_13_0, user_nvcc_flags=[], env={"PATH": str(tmp_path)},
        torch_archs=TORCH_2_14_CU130_ARCHS,
    )
    assert decision.archs == ["sm_86", "compute_86"]
    assert flags_for("9.0") == gencode("90")


def test_torch_arch_list_is_read_from_libtorch_python(tmp_path: Path) -> None:
    """torch.cuda.get_arch_list() without importing torch: the C string in libtorch_python."""
    from pep517_torch.core.cuda.checks import torch_arch_list

    lib = tmp_path / "lib"
    lib.mkdir()
    assert torch_arch_list(lib) == ()  # a CPU torch has no such library string
    (lib / "libtorch_python.so").write_bytes(
        b"\x7fELF\x00sm_90 is not\x00x\x00sm_75 sm_80 sm_120 compute_120\x00\x00sm_86\x00"
    )
    assert torch_arch_list(lib) == ("sm_75", "sm_80", "sm_120", "compute_120")
    (lib / "libtorch_python.so").write_bytes(b"")
    assert torch_arch_list(lib) == ()


def test_native_without_gpu() -> None:
    decision = resolve_arch_flags(
        parse_arch_list("native", key=KEY), NVCC_13_0, user_nvcc_flags=[], env=NO_GPU_ENV
    )
    assert decision.flags == DEFAULT_13_0
    assert decision.note == DEFAULT_NOTE_13_0.replace(
        "no architectures chosen", f"{KEY} has native"
    )


def test_cuda_visible_devices_empty_hides_gpus(tmp_path: Path) -> None:
    write_fake_nvidia_smi(tmp_path, ["0, GPU-a, 8.6"])
    env = {"PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    assert resolve_arch_flags(None, NVCC_13_0, user_nvcc_flags=[], env=env).flags == DEFAULT_13_0


def test_the_environment_list_reaches_the_core_through_build_options(tmp_path: Path) -> None:
    """The core reads no TORCH_CUDA_ARCH_LIST itself: the faces put it into BuildOptions, with
    the variable as the name their errors give it."""
    from pep517_torch.config.layers import environment_options
    from pep517_torch.core.cuda.build_setup import arch_flags
    from pep517_torch.core.spec import BuildOptions, ExtensionSpec

    env = {**NO_GPU_ENV, "TORCH_CUDA_ARCH_LIST": "Ampere"}
    decision = resolve_arch_flags(None, NVCC_13_0, user_nvcc_flags=[], env=env)
    assert decision.flags == DEFAULT_13_0  # ignored by the core
    spec = ExtensionSpec("m", (tmp_path / "k.cu",), cuda_arch_list=("9.0",))
    options = BuildOptions(build_dir=tmp_path, env=env, **environment_options(env))
    notes: list[str] = []
    flags, _ = arch_flags(spec, options, NVCC_13_0, notes)
    assert list(flags) == gencode("80") + gencode("86", ptx=True) and notes == []
    env = {**NO_GPU_ENV, "TORCH_CUDA_ARCH_LIST": "sm_80"}
    said = re.escape("unknown CUDA architecture 'sm_80' (did you mean 8.0?)")
    with pytest.raises(ConfigError, match=said) as error:
        options = BuildOptions(build_dir=tmp_path, env=env, **environment_options(env))
        arch_flags(spec, options, NVCC_13_0, notes)
    assert error.value.key == "TORCH_CUDA_ARCH_LIST"


@pytest.mark.parametrize(
    ("gpus", "expected", "in_note"),
    [
        (["0, GPU-a, 8.6"], gencode("86", ptx=True), "visible GPUs (8.6): 8.6+PTX"),
        (["0, GPU-a, 9.0", "1, GPU-b, 8.6"], gencode("86") + gencode("90", ptx=True), "(8.6, 9.0)"),
        (["0, GPU-a, 10.1"], gencode("100", ptx=True), "(10.1): 10.0+PTX"),  # same major, lower
        (["0, GPU-a, 13.0"], gencode("121", ptx=True), "(13.0): 12.1+PTX"),  # newer than nvcc
    ],
)
def test_visible_gpus_are_the_default(
    tmp_path: Path, gpus: list[str], expected: list[str], in_note: str
) -> None:
    write_fake_nvidia_smi(tmp_path, gpus)
    decision = resolve_arch_flags(None, NVCC_13_0, user_nvcc_flags=[], env={"PATH": str(tmp_path)})
    assert decision.flags == expected
    assert decision.note is not None and in_note in decision.note
    assert decision.note.startswith("no architectures chosen: building for the visible GPUs")


def test_gpu_too_old_for_nvcc_falls_back_to_the_default(tmp_path: Path) -> None:
    write_fake_nvidia_smi(tmp_path, ["0, GPU-a, 6.1"])
    decision = resolve_arch_flags(None, NVCC_13_0, user_nvcc_flags=[], env={"PATH": str(tmp_path)})
    assert decision.flags == DEFAULT_13_0
    assert decision.note is not None
    assert decision.note.startswith(
        "no usable GPU visible (GPU 6.1: nvcc 13.0 cannot build for it) and no architectures chosen"
    )


def test_native_with_gpu_merges_with_explicit_entries(tmp_path: Path) -> None:
    write_fake_nvidia_smi(tmp_path, ["0, GPU-a, 8.9"])
    decision = resolve_arch_flags(
        parse_arch_list("native;9.0a", key=KEY), NVCC_13_0, user_nvcc_flags=[],
        env={"PATH": str(tmp_path)},
    )
    assert decision.flags == gencode("89", ptx=True) + gencode("90a")
    assert decision.note is not None and f"{KEY} has native" in decision.note


# --------------------------------------------- proof: what nvcc puts in the object file

CUOBJDUMP = find_cuobjdump()


@pytest.fixture(scope="module")
def real_toolkit() -> CudaToolkit:
    if not real_toolkit_available():
        pytest.skip("needs the real nvcc 13.0 at /usr/local/cuda-13.0 and gcc")
    if CUOBJDUMP is None:
        pytest.skip("needs cuobjdump: pip install 'nvidia-cuda-cuobjdump==13.2.*'")
    return require_cuda({"PATH": SYSTEM_PATH, "CUDA_HOME": str(REAL_ROOT)}, search_paths=[])


@pytest.mark.cuda
@pytest.mark.compile
@pytest.mark.parametrize(
    ("arch_list", "elf", "ptx"),
    [
        ("8.0;9.0+PTX", {"sm_80", "sm_90"}, {"compute_90"}),
        ("9.0a", {"sm_90a"}, set()),
        (None, {"sm_80", "sm_90", "sm_100", "sm_110", "sm_120"}, {"compute_120"}),
    ],
)
def test_object_holds_exactly_the_requested_code(
    real_toolkit: CudaToolkit, tmp_path: Path, arch_list: str | None, elf: set[str], ptx: set[str]
) -> None:
    entries = parse_arch_list(arch_list, key=KEY) if arch_list else None
    decision = resolve_arch_flags(entries, real_toolkit, user_nvcc_flags=[], env=NO_GPU_ENV)
    source = tmp_path / "k.cu"
    source.write_text("__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    obj = tmp_path / "k.o"
    subprocess.run(
        [str(real_toolkit.nvcc), "-c", str(source), "-o", str(obj), *decision.flags],
        check=True, env={"PATH": SYSTEM_PATH}, capture_output=True,
    )
    assert CUOBJDUMP is not None
    assert fatbin_contents(CUOBJDUMP, obj) == (elf, ptx)


# ------------------------------------------------------------ checked before anything is written

CUDA_PYPROJECT = """\
[project]
name = "kern"
version = "1.0"
dynamic = ["dependencies"]

[tool.torch-ext]
packages = ["kern"]

[[tool.torch-ext.extension]]
name = "kern._C"
sources = ["k.cu"]
with-cuda = true
kind = "library"
"""


def fake_cuda_project(root: Path) -> tuple[Path, dict[str, str]]:
    (root / "kern").mkdir(parents=True)
    (root / "kern" / "__init__.py").write_text("")
    (root / "k.cu").write_text("__global__ void k() {}\n")
    (root / "pyproject.toml").write_text(CUDA_PYPROJECT)
    cuda_home = make_fake_toolkit(root.parent / "cuda")
    return root, {"PATH": SYSTEM_PATH, "CUDA_HOME": str(cuda_home)}


@pytest.mark.parametrize(
    ("layer", "key"),
    [("env", "TORCH_CUDA_ARCH_LIST"), ("-C", "cuda-arch-list"),
     ("toml", "tool.torch-ext.extension[0].cuda-arch-list")],
)
def test_a_bad_arch_list_is_refused_before_the_build_dir_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layer: str, key: str
) -> None:
    from pep517_torch.backend import pipeline

    root, env = fake_cuda_project(tmp_path / "p")
    monkeypatch.setattr(os, "environ", {**os.environ, **env})
    settings = None
    if layer == "env":
        monkeypatch.setitem(os.environ, "TORCH_CUDA_ARCH_LIST", "8.0;sm_90")
    elif layer == "-C":
        settings = {"cuda-arch-list": "8.0;sm_90"}
    else:
        pyproject = root / "pyproject.toml"
        pyproject.write_text(pyproject.read_text() + 'cuda-arch-list = "8.0;sm_90"\n')
    said = "^" + re.escape(f"{key}: unknown CUDA architecture 'sm_90' (did you mean 9.0?)")
    with pytest.raises(ConfigError, match=said) as error:
        pipeline.build_wheel(root, tmp_path / "dist", settings)
    assert error.value.key == key
    assert not (root / "build").exists() and not (tmp_path / "dist").exists()


def test_an_arch_this_nvcc_cannot_build_is_refused_before_the_build_dir_exists(
    tmp_path: Path,
) -> None:
    from pep517_torch.core import plan as core_plan
    from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind

    root, env = fake_cuda_project(tmp_path / "p")
    spec = ExtensionSpec("kern", (root / "k.cu",), kind=Kind.LIBRARY, cuda_arch_list=("3.5",))
    with pytest.raises(ConfigError, match=r"^cuda_arch_list: nvcc 13\.0 .* cannot build for 3\.5"):
        core_plan.prepare([spec], BuildOptions(build_dir=tmp_path / "b", env=env))
    assert not (tmp_path / "b").exists()

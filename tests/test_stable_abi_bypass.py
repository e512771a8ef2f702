"""No flag moves a stable-ABI build off its target (issue 35 item 4).

Every spelling that defines or undefines TORCH_TARGET_VERSION (one or two arguments, gcc's
``-Wp,`` and ``-Xpreprocessor``, nvcc's ``-Xcompiler``/``--compiler-options`` and comma lists,
``--define-macro``) in an extension's flags, a flag that reads more flags from a file, and the
same in what the compilers read besides the flags (arguments in CXX or CC, NVCC_*_FLAGS) is
refused before anything compiles, naming where it was given. The same for Py_LIMITED_API
under `py-limited-api`. Nothing here compiles.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.core import flags, plan
from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.errors import ConfigError
from tests.conftest import count, write
from tests.test_core_flags import tools_for
from tests.test_stable_abi import FIXTURE, TORCH, stable_project

M = "TORCH_TARGET_VERSION"
# (flags, index of the offending argument) for a C++ compiler's list...
CXX_BYPASSES = [
    (["-D", f"{M}=0x0209000000000000"], 0),
    (["-O2", "-D", M], 1),
    ([f"-U{M}"], 0),
    (["-U", M], 0),
    ([f"-D{M}=0x020a000000000000", f"-U{M}"], 1),  # an agreeing define, then gone
    ([f"-Wp,-U{M}"], 0),
    ([f"-Wp,-D{M}=0x0209000000000000"], 0),
    ([f"-Wp,-U,{M}"], 0),
    (["-Wp,-MD,deps.d", f"-Wp,-D{M}"], 1),
    (["-Xpreprocessor", f"-U{M}"], 0),
    (["-Xpreprocessor", "-D", "-Xpreprocessor", f"{M}=1"], 0),
    (["-Xclang", f"-U{M}"], 0),
    (["--define-macro", f"{M}=0x0209000000000000"], 0),
    ([f"--define-macro={M}"], 0),
    (["--undefine-macro", M], 0),
    ([f"--undefine-macro={M}"], 0),
    (["-O2", "@more-flags.rsp"], 1),
]
# ...and for nvcc's (its own options, and the host compiler's through -Xcompiler).
NVCC_BYPASSES = [
    (["-Xcompiler", f"-U{M}"], 0),
    ([f"-Xcompiler=-U{M}"], 0),
    (["-O3", "-Xcompiler", f"-fPIC,-U{M}"], 1),
    (["-Xcompiler", f"-fPIC -U{M}"], 0),
    (["-Xcompiler", "-U", "-Xcompiler", M], 0),
    (["--compiler-options", f"-U{M}"], 0),
    ([f"--compiler-options=-D{M}=0"], 0),
    (["-Xcompiler", f"-Wp,-U{M}"], 0),
    (["-Xcompiler=-Xpreprocessor", "-Xcompiler", f"-U{M}"], 0),
    (["--define-macro", f"FOO,{M}=0x0209000000000000"], 0),
    ([f"-DFOO=1,{M}"], 0),
    ([f"-UFOO,{M}"], 0),
    ([f"-U={M}"], 0),
    ([f"-D={M}=0"], 0),
    (["--options-file", "flags.txt"], 0),
    (["-optf=flags.txt"], 0),
    (["-Xcompiler", "@flags.rsp"], 0),
]
# Flags that look alike and change nothing of the target: accepted.
HARMLESS = [
    ["-UNDEBUG"], ["-D", "MY_TORCH_TARGET_VERSION=1"], ["-Wp,-DOTHER"], [f"-DX={M}"],
    ["-Xpreprocessor", "-DOTHER"], [f"-D{M}=0x020a000000000000"], ["-D", f"{M}=0x020a000000000000"],
    ["-include", f"-U{M}"],  # the value of -include is a file name, not an option
]
HARMLESS_NVCC = [["-Xcompiler", "-UNDEBUG,-fPIC"], ["--define-macro", f"A,{M}=0x020a000000000000"]]


def toml_list(values: list[str]) -> str:
    return json.dumps(values)


@pytest.mark.parametrize(("cxx", "index"), CXX_BYPASSES)
def test_every_cxx_spelling_is_refused_naming_the_flag(tmp_path: Path, cxx: list[str], index: int) -> None:
    root = stable_project(tmp_path, extension_keys=f"extra-cflags = {toml_list(cxx)}")
    with pytest.raises(ConfigError) as caught:
        pipeline.load(root, None)
    count("item 4: stable-ABI bypasses refused (TOML extra-cflags)")
    message = str(caught.value)
    assert caught.value.key == f"tool.torch-ext.extension[0].extra-cflags[{index}]", message
    assert ("file" in message) if "rsp" in cxx[-1] else (M in message and "stable" in message)
    assert "\n" not in message and not (root / "build").exists()


@pytest.mark.parametrize(("nvcc", "index"), NVCC_BYPASSES)
def test_every_nvcc_spelling_is_refused_naming_the_flag(tmp_path: Path, nvcc: list[str], index: int) -> None:
    root = stable_project(tmp_path, extension_keys=f"extra-cuda-cflags = {toml_list(nvcc)}")
    with pytest.raises(ConfigError) as caught:
        pipeline.load(root, None)
    count("item 4: stable-ABI bypasses refused (TOML extra-cuda-cflags)")
    assert caught.value.key == f"tool.torch-ext.extension[0].extra-cuda-cflags[{index}]", str(caught.value)
    assert not (root / "build").exists()


def test_an_override_or_a_cuda_table_is_named_too(tmp_path: Path) -> None:
    override = f"""
[[tool.torch-ext.overrides]]
if.platform = "*"
append.extension."*" = {{ extra-cflags = ["-U", "{M}"] }}
"""
    root = stable_project(tmp_path / "a")
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + override)
    with pytest.raises(ConfigError, match=f"undefines {M}") as caught:
        pipeline.load(root, None)
    assert "overrides[0]" in (caught.value.key or "")
    root = stable_project(tmp_path / "b", extension_keys=f'cuda = {{ extra-cuda-cflags = ["-Xcompiler", "-U{M}"] }}')
    write(root / "csrc" / "k.cu", "__global__ void k() {}\n")
    text = (root / "pyproject.toml").read_text().replace('"csrc/*.cpp"]', '"csrc/*.cpp", "csrc/*.cu"]')
    (root / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError, match=f"undefines {M}") as caught:
        pipeline.load(root, {"cuda": "true"})
    assert (caught.value.key or "").endswith("cuda.extra-cuda-cflags[0]"), caught.value.key
    count("item 4: stable-ABI bypasses refused (overrides, cuda table)", 2)


@pytest.mark.parametrize("spelling", [" ".join(f) for f, _ in CXX_BYPASSES])
def test_the_jit_refuses_them_naming_the_argument(jit_env: Path, tmp_path: Path, spelling: str) -> None:
    from pep517_torch import load

    source = write(tmp_path / "ops.cpp", (FIXTURE / "csrc" / "ops.cpp").read_text())
    build = tmp_path / "build"
    with pytest.raises(ConfigError) as caught:
        load("jit_stable_bypass", [str(source)], extra_cflags=[spelling], is_python_module=False,
             stable_abi="2.10", build_directory=str(build))
    count("item 4: stable-ABI bypasses refused (JIT extra_cflags)")
    assert caught.value.key == "extra_cflags" and "\n" not in str(caught.value)
    assert not build.exists()


@pytest.mark.parametrize(("variable", "value"), [
    ("CXX", f"g++ -U{M}"), ("CXX", f"g++ -Wp,-D{M}=1"), ("NVCC_APPEND_FLAGS", f"-Xcompiler -U{M}"),
    ("NVCC_PREPEND_FLAGS", f"-D{M}=0"), ("NVCC_APPEND_FLAGS", "--options-file x"), ("CC", f"gcc -U{M}"),
])
def test_what_the_compilers_read_besides_the_flags_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    source = write(tmp_path / "k.cu", "__global__ void k() {}\n")
    spec = ExtensionSpec("m", (source,), stable_abi="2.10", py_limited_api="cp310")
    monkeypatch.setenv(variable, value)  # nvcc reads NVCC_*_FLAGS from the environment it runs in
    options = BuildOptions(build_dir=tmp_path / "b", env={variable: value}, compiler_launcher="none")
    with pytest.raises(ConfigError) as caught:
        plan.check([spec], options)
    count("item 4: stable-ABI bypasses refused (CXX, CC, NVCC_*_FLAGS)")
    assert caught.value.key == variable and "\n" not in str(caught.value)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("cxx", HARMLESS)
def test_look_alikes_are_accepted_and_the_target_is_defined_once(tmp_path: Path, cxx: list[str]) -> None:
    source = write(tmp_path / "a.cpp", "int f() { return 0; }\n")
    spec = ExtensionSpec("m", (source,), stable_abi="2.10", py_limited_api="cp310", extra_cflags=tuple(cxx))
    computed = flags.compute(spec, tools_for(TORCH), source_root=tmp_path).cxx
    defines = [f for f in computed if f.startswith(f"-D{M}")] + [
        computed[i + 1] for i, f in enumerate(computed) if f == "-D" and computed[i + 1].startswith(M)]
    assert len(defines) == 1 and defines[0].endswith("=0x020a000000000000"), computed
    count("item 4: look-alike flags accepted")


@pytest.mark.parametrize("nvcc", HARMLESS_NVCC)
def test_nvcc_look_alikes_are_accepted(tmp_path: Path, nvcc: list[str]) -> None:
    source = write(tmp_path / "a.cpp", "int f() { return 0; }\n")
    ExtensionSpec("m", (source,), stable_abi="2.10", py_limited_api="cp310", extra_cuda_cflags=tuple(nvcc))
    count("item 4: look-alike flags accepted")


def test_without_the_stable_abi_the_flags_are_the_users_business(tmp_path: Path) -> None:
    source = write(tmp_path / "a.cpp", "int f() { return 0; }\n")
    for cxx, _ in CXX_BYPASSES:
        ExtensionSpec("m", (source,), extra_cflags=tuple(cxx))
    count("item 4: the same flags accepted without stable-abi", len(CXX_BYPASSES))


@pytest.mark.parametrize(("cxx", "words"), [
    (["-UPy_LIMITED_API"], "undefines Py_LIMITED_API"),
    (["-D", "Py_LIMITED_API=0x03090000"], "defines Py_LIMITED_API=0x03090000"),
    (["-Wp,-UPy_LIMITED_API"], "undefines Py_LIMITED_API"),
])
def test_py_limited_api_cannot_be_bypassed_either(tmp_path: Path, cxx: list[str], words: str) -> None:
    root = stable_project(tmp_path, project_keys="", extension_keys=f'py-limited-api = "cp310"\nextra-cflags = {toml_list(cxx)}')
    with pytest.raises(ConfigError, match=re.escape(words)) as caught:
        pipeline.load(root, None)
    assert (caught.value.key or "").endswith("py-limited-api")
    count("item 4: Py_LIMITED_API bypasses refused")


def test_one_reader_serves_the_arch_options_too() -> None:
    """The arch-option reading is the same reader: a value of -Xcompiler is no option."""
    from pep517_torch.core import flag_syntax

    assert [o.name for o in flag_syntax.options(["-Xcompiler", "-arch", "-arch", "sm_80"])] == ["-Xcompiler", "-arch"]
    read = flag_syntax.macros(["-Xcompiler", "-DA=1 -UB", "-DC=1,D"], nvcc=True)
    assert [(m.name, m.value, m.undefine) for m in read.macros] == [
        ("C", "1", False), ("D", None, False), ("A", "1", False), ("B", None, True)]

"""resolve_project: globs, paths, containment, specs, conditions, layout, build options."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config import Facts
from pep517_torch.core.spec import BuildType, Kind
from tests.config_helpers import LINUX_CPU, LINUX_CUDA, resolve, resolve_error

ROOT_FILES = dict.fromkeys(
    [
        "demo/__init__.py",
        "demo/sub/__init__.py",
        "demo/data/config.json",
        "demo/data/more/extra.json",
        "demo/native/__init__.py",
        "tests/__init__.py",
        "docs/__init__.py",
        "notapkg/readme.txt",
        "single.py",
        "csrc/a.cpp",
        "csrc/b.cpp",
        "csrc/nested/c.cc",
        "csrc/kernels/k.cu",
        "csrc/h.h",
        "include/pch.h",
    ],
    "// x\n",
)
EXT = {"name": "demo._C", "sources": ["csrc/*.cpp"]}


def test_minimal_extension(root: Path) -> None:
    resolved = resolve(root, {"extension": [EXT]}, facts=LINUX_CPU)
    (spec,) = resolved.extensions
    assert spec.name == "demo._C"
    assert spec.sources == (root / "csrc/a.cpp", root / "csrc/b.cpp")
    assert spec.build_type is BuildType.RELEASE and spec.kind is Kind.MODULE
    assert spec.with_cuda is None and spec.cuda_arch_list is None and spec.py_limited_api is None
    assert (spec.pch, spec.strip, spec.pch_header) == (True, False, None)
    assert resolved.root == root.resolve()
    assert resolved.skipped == ()
    assert resolved.options.build_dir == root / "build/cp311-cp311-linux_x86_64-torch2.13.0"
    assert resolved.options.source_root == root
    assert (resolved.torch_requirement, resolved.torch_import_check) == ("minor", False)
    assert resolved.cuda_enabled is False


def test_every_extension_key_reaches_the_spec(root: Path) -> None:
    ext = {
        "name": "demo.native._ops",
        "sources": ["csrc/**/*.cc", "csrc/b.cpp", "csrc/*.cpp"],
        "include-dirs": ["include", "/usr/include/x"],
        "define-macros": {"A": "x", "B": 1, "C": True, "D": False},
        "extra-cflags": ["-Wall", "-O1 -g"],
        "extra-cuda-cflags": ["--use_fast_math"],
        "extra-ldflags": ["-Wl,-z,now"],
        "libraries": ["m"],
        "library-dirs": ["/opt/lib", "include"],
        "runtime-library-dirs": ["$ORIGIN/lib"],
        "with-cuda": False,
        "py-limited-api": True,
        "cuda-arch-list": "8.0, 9.0+PTX",
        "kind": "library",
        "python-abi-suffix": False,
        "openmp": True,
        "strip": True,
        "pch": False,
        "pch-header": "include/pch.h",
    }
    (spec,) = resolve(root, {"extension": [ext], "build-type": "debug"}, facts=LINUX_CPU).extensions
    # glob order kept, each glob sorted, duplicates dropped
    assert spec.sources == (root / "csrc/nested/c.cc", root / "csrc/b.cpp", root / "csrc/a.cpp")
    assert spec.include_dirs == (root / "include", Path("/usr/include/x"))
    assert spec.define_macros == (("A", "x"), ("B", "1"), ("C", None))
    assert spec.extra_cflags == ("-Wall", "-O1 -g")
    assert spec.extra_cuda_cflags == ("--use_fast_math",)
    assert spec.extra_ldflags == ("-Wl,-z,now",)
    assert spec.libraries == ("m",)
    assert spec.library_dirs == (Path("/opt/lib"), root / "include")
    assert spec.runtime_library_dirs == ("$ORIGIN/lib",)
    assert spec.with_cuda is False
    assert spec.py_limited_api == "cp310"
    assert spec.cuda_arch_list == ("8.0", "9.0+PTX")
    assert spec.kind is Kind.LIBRARY and spec.python_abi_suffix is False and spec.openmp
    assert spec.build_type is BuildType.DEBUG
    assert (spec.strip, spec.pch, spec.pch_header) == (True, False, root / "include/pch.h")


def test_project_values_are_extension_defaults(root: Path) -> None:
    tool = {
        "strip": True,
        "pch": False,
        "pch-header": "include/pch.h",
        "cuda-arch-list": ["7.5"],
        "extension": [
            EXT,
            {**EXT, "name": "demo._D", "strip": False, "pch": True, "cuda-arch-list": "9.0"},
        ],
    }
    first, second = resolve(root, tool, facts=LINUX_CPU).extensions
    assert (first.strip, first.pch, first.pch_header, first.cuda_arch_list) == (
        True, False, root / "include/pch.h", ("7.5",)
    )
    assert (second.strip, second.pch, second.cuda_arch_list) == (False, True, ("9.0",))


@pytest.mark.parametrize(
    ("value", "expected"), [(False, None), (True, "cp310"), ("cp38", "cp38"), ("cp312", "cp312")]
)
def test_py_limited_api(root: Path, value: Any, expected: str | None) -> None:
    (spec,) = resolve(root, {"extension": [{**EXT, "py-limited-api": value}]},
                      facts=LINUX_CPU).extensions
    assert spec.py_limited_api == expected


@pytest.mark.parametrize(("value", "expected"), [("auto", None), (True, True), (False, False)])
def test_with_cuda(root: Path, value: Any, expected: bool | None) -> None:
    (spec,) = resolve(root, {"extension": [{**EXT, "with-cuda": value}]},
                      facts=LINUX_CPU).extensions
    assert spec.with_cuda is expected


def test_cuda_table_merged_only_with_cuda(root: Path) -> None:
    ext = {
        **EXT,
        "define-macros": {"A": 1, "WITH_CUDA": False},
        "cuda": {
            "sources": ["csrc/kernels/*.cu"],
            "include-dirs": ["include"],
            "define-macros": {"WITH_CUDA": True},
            "extra-cflags": ["-DC"],
            "extra-cuda-cflags": ["-lineinfo"],
            "extra-ldflags": ["-lcudart"],
            "libraries": ["cublas"],
            "library-dirs": ["/usr/local/cuda/lib64"],
        },
    }
    (cpu,) = resolve(root, {"extension": [ext]}, facts=LINUX_CPU).extensions
    assert cpu.sources == (root / "csrc/a.cpp", root / "csrc/b.cpp")
    assert cpu.define_macros == (("A", "1"),)
    assert cpu.libraries == () and cpu.include_dirs == ()
    for facts, settings in ((LINUX_CUDA, None), (LINUX_CPU, {"cuda": "true"})):
        resolved = resolve(root, {"extension": [ext]}, settings, facts=facts)
        assert resolved.cuda_enabled
        (gpu,) = resolved.extensions
        assert gpu.sources[-1] == root / "csrc/kernels/k.cu"
        assert gpu.define_macros == (("A", "1"), ("WITH_CUDA", None))
        assert gpu.include_dirs == (root / "include",)
        assert (gpu.extra_cflags, gpu.extra_cuda_cflags) == (("-DC",), ("-lineinfo",))
        assert (gpu.extra_ldflags, gpu.libraries) == (("-lcudart",), ("cublas",))
        assert gpu.library_dirs == (Path("/usr/local/cuda/lib64"),)
    (forced,) = resolve(root, {"extension": [{**ext, "with-cuda": True}]},
                        facts=LINUX_CPU).extensions
    assert forced.sources[-1] == root / "csrc/kernels/k.cu"
    no_nvcc = Facts(torch_cuda="13.0", nvcc_available=False, torch_version="2.13.0")
    assert resolve(root, {"extension": [ext]}, facts=no_nvcc).cuda_enabled is False


def test_cuda_table_with_with_cuda_false(root: Path) -> None:
    ext = {**EXT, "with-cuda": False, "cuda": {"sources": ["csrc/kernels/*.cu"]}}
    error = resolve_error(root, {"extension": [ext]}, match="with-cuda = false", facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.extension[0].cuda"


def test_cuda_sources_with_with_cuda_false(root: Path) -> None:
    ext = {**EXT, "with-cuda": False, "sources": ["csrc/kernels/k.cu"]}
    said = "extension 'demo._C' has CUDA sources, but CUDA is off for it"
    error = resolve_error(root, {"extension": [ext]}, match=re.escape(said), facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.extension[0].with-cuda"


def test_extension_if(root: Path) -> None:
    tool = {
        "extension": [
            {**EXT, "name": "demo._x_cpu", "if": {"cuda": False}},
            {**EXT, "name": "demo._x_cuda", "if": {"cuda": True}, "sources": ["csrc/kernels/*.cu"]},
            {**EXT, "name": "demo._win", "if": {"platform": "win*"}},
            {**EXT, "name": "demo._new", "if": {"torch": ">=2.14"}},
            {**EXT, "name": "demo._env", "if": {"env": {"WITH_ENV": True}}},
        ]
    }
    resolved = resolve(root, tool, facts=LINUX_CPU)
    assert [s.name for s in resolved.extensions] == ["demo._x_cpu"]
    reasons = dict(resolved.skipped)
    ext = "tool.torch-ext.extension"
    assert reasons["demo._x_cuda"] == (
        f"{ext}[1].if.cuda = true does not hold (torch 2.13.0+cpu is a CPU build and no nvcc"
        " was found, so CUDA is off)"
    )
    assert reasons["demo._win"] == f"{ext}[2].if.platform = \"win*\" does not match 'linux'"
    assert reasons["demo._new"] == f'{ext}[3].if.torch = ">=2.14" does not hold (torch 2.13.0)'
    assert reasons["demo._env"] == (
        f"{ext}[4].if.env.WITH_ENV = true does not hold (WITH_ENV is unset or empty)"
    )
    resolved = resolve(root, tool, facts=LINUX_CUDA, env={"WITH_ENV": "1"}, platform="win32")
    assert [s.name for s in resolved.extensions] == ["demo._x_cuda", "demo._win", "demo._env"]


@pytest.mark.parametrize(
    ("condition", "holds"),
    [
        ({}, True),
        ({"env": {"A": True}}, True),
        ({"env": {"A": False}}, False),
        ({"env": {"EMPTY": False, "UNSET": False}}, True),
        ({"env": {"EMPTY": True}}, False),
        ({"env": {"A": "1"}}, True),
        ({"env": {"A": "2"}}, False),
        ({"env": {"UNSET": ""}}, False),
        ({"env": {"A": {"not": "0"}}}, True),
        ({"env": {"A": {"not": "1"}}}, False),
        ({"env": {"A": {"not": ["0", "1"]}}}, False),
        ({"env": {"UNSET": {"not": "0"}}}, True),  # os.environ.get("UNSET") != "0"
        ({"env": {"EMPTY": {"not": ""}}}, False),
        ({"env": {"UNSET": {"not": "0", "unset": False}}}, False),
        ({"env": {"A": {"not": "0", "unset": False}}}, True),
        ({"env": {"UNSET": {"unset": True}}}, True),
        ({"env": {"EMPTY": {"unset": True}}}, False),  # empty is set
        ({"env": {"EMPTY": {"unset": False}}}, True),
        ({"env": {"A": {"unset": True}}}, False),
        ({"torch-cuda": False}, True),
        ({"torch-cuda": True}, False),
        ({"torch-cuda": ">=12"}, False),
        ({"platform": "linux"}, True),
        ({"platform": "lin*"}, True),
        ({"platform": "darwin"}, False),
        ({"platform-machine": "x86_*"}, True),
        ({"platform-machine": "aarch64"}, False),
        ({"torch": ">=2.13"}, True),
        ({"torch": "==2.13.0"}, True),  # the local label (+cpu) is dropped
        ({"torch": "<2.13"}, False),
        ({"python": ">=3.11,<3.12"}, True),
        ({"python": ">=3.12"}, False),
        ({"cuda": False, "platform": "linux", "python": ">=3.10"}, True),
        ({"cuda": False, "platform": "darwin"}, False),
    ],
)
def test_conditions(root: Path, condition: dict[str, Any], holds: bool) -> None:
    tool = {"extension": [{**EXT, "if": condition}]}
    resolved = resolve(root, tool, facts=LINUX_CPU, env={"A": "1", "EMPTY": ""})
    assert bool(resolved.extensions) is holds, resolved.skipped


def test_torch_condition_without_torch_and_with_prerelease(root: Path) -> None:
    tool = {"extension": [{**EXT, "if": {"torch": ">=2.0"}}]}
    resolved = resolve(root, tool, facts=Facts(torch_version=None))
    assert resolved.skipped == (
        ("demo._C", 'tool.torch-ext.extension[0].if.torch = ">=2.0" does not hold (torch not found)'),
    )
    tool = {"extension": [{**EXT, "if": {"torch": ">=2.13"}}]}
    assert resolve(root, tool, facts=Facts(torch_version="2.14.0.dev20250101+cu130")).extensions


@pytest.mark.parametrize(
    ("ext", "key", "fragment"),
    [
        ({"sources": ["csrc/a.cpp", "csrc/*.cxx"]}, "extension[0].sources[1]", "matches no file"),
        ({"sources": ["csrc"]}, "extension[0].sources[0]", "matches no file"),
        ({"sources": ["csrc/*"]}, "extension[0].sources[0]", "is a header"),
        ({"sources": ["../outside/*.cpp"]}, "extension[0].sources[0]", "outside the project"),
        ({"include-dirs": ["include", "../include"]}, "extension[0].include-dirs[1]", "outside"),
        ({"library-dirs": ["../lib"]}, "extension[0].library-dirs[0]", "outside"),
        ({"pch-header": "../outside/h.h"}, "extension[0].pch-header", "outside"),
        ({"pch-header": "include/missing.h"}, "extension[0].pch-header", "does not exist"),
        ({"cuda": {"sources": ["*.cu"]}, "with-cuda": True}, "extension[0].cuda.sources[0]", "no"),
    ],
)
def test_bad_paths(root: Path, ext: dict[str, Any], key: str, fragment: str) -> None:
    (root.parent / "outside").mkdir()
    (root.parent / "outside/x.cpp").write_text("")
    (root.parent / "outside/h.h").write_text("")
    error = resolve_error(root, {"extension": [{**EXT, **ext}]}, match=re.escape(fragment),
                          facts=LINUX_CPU)
    assert error.key == f"tool.torch-ext.{key}", str(error)


def test_symlink_escape_refused(root: Path) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "evil.cpp").write_text("")
    (root / "csrc/link").symlink_to(outside, target_is_directory=True)
    (root / "csrc/evil.cpp").symlink_to(outside / "evil.cpp")
    outside_the_root = r"is outside the project root .* \(through '\.\.', an absolute path or a symlink"
    tool = {"extension": [{**EXT, "sources": ["csrc/*.cpp"]}]}
    error = resolve_error(root, tool, match=re.escape("source 'csrc/evil.cpp' ") + outside_the_root,
                          facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.extension[0].sources[0]"
    (root / "csrc/evil.cpp").unlink()
    tool = {"extension": [{**EXT, "include-dirs": ["csrc/link"]}]}
    error = resolve_error(root, tool, match="include directory 'csrc/link' " + outside_the_root,
                          facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.extension[0].include-dirs[0]"
    tool = {"packages": ["demo"], "package-dir": {"demo": "csrc/link"}}
    error = resolve_error(root, tool, match="package directory 'csrc/link' " + outside_the_root,
                          facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.package-dir.demo"
    (root / "demo/data/leak.json").symlink_to(outside / "evil.cpp")
    tool = {"package-data": {"demo": ["data/*.json"]}}
    said = re.escape("package data 'data/leak.json' ") + outside_the_root
    error = resolve_error(root, tool, match=said, facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.package-data.demo[0]"
    # an absolute include dir outside the root is a system directory, and allowed
    (spec,) = resolve(
        root, {"extension": [{**EXT, "sources": ["csrc/a.cpp"], "include-dirs": [str(outside)]}]},
        facts=LINUX_CPU,
    ).extensions
    assert spec.include_dirs == (outside,)


def test_dotdot_that_stays_inside_is_fine(root: Path) -> None:
    ext = {**EXT, "sources": ["csrc/../csrc/a.cpp"], "include-dirs": ["csrc/.."]}
    (spec,) = resolve(root, {"extension": [ext]}, facts=LINUX_CPU).extensions
    assert spec.sources == (root / "csrc/a.cpp",) and spec.include_dirs == (root,)


def test_build_dir_is_not_globbed(root: Path) -> None:
    (root / "out/gen").mkdir(parents=True)
    (root / "out/gen/generated.cpp").write_text("")
    tool = {"build-dir": "out", "extension": [{**EXT, "sources": ["**/*.cpp"]}]}
    (spec,) = resolve(root, tool, facts=LINUX_CPU).extensions
    assert spec.sources == (root / "csrc/a.cpp", root / "csrc/b.cpp")


def test_duplicate_extension_names(root: Path) -> None:
    already_used = re.escape("'demo._C' is already used by tool.torch-ext.extension[0]")
    error = resolve_error(root, {"extension": [EXT, {**EXT, "kind": "library"}]},
                          match=already_used, facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.extension[1].name"
    tool = {"extension": [EXT, {**EXT, "python-abi-suffix": False, "if": {"cuda": True}}]}
    error = resolve_error(root, tool, match=already_used, facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.extension[1].name"


def test_build_dir(root: Path, tmp_path: Path) -> None:
    tool = {"build-dir": "out/{python_tag}-{cuda}-{build_type}-{wheel_tag}-{torch_version}"}
    assert resolve(root, tool, facts=LINUX_CPU).options.build_dir == root / (
        "out/cp311-cpu-release-cp311-cp311-linux_x86_64-2.13.0"
    )
    assert resolve(root, tool, facts=LINUX_CUDA).options.build_dir.name.startswith("cp311-cu130")
    absolute = str(tmp_path / "elsewhere" / "{python_tag}")
    assert resolve(root, {"build-dir": absolute},
                   facts=LINUX_CPU).options.build_dir == tmp_path / "elsewhere/cp311"
    for bad in ("out/{platform}", "out/{python_tag!r}", "out/{python_tag:>9}", "out/{", "out/{}"):
        error = resolve_error(root, {"build-dir": bad}, match="placeholder", facts=LINUX_CPU)
        assert error.key == "tool.torch-ext.build-dir", bad
    error = resolve_error(root, {"build-dir": "."}, facts=LINUX_CPU,
                          match="the build directory .* must not contain the project root")
    assert error.key == "tool.torch-ext.build-dir"
    error = resolve_error(root, {}, {"build-dir": "x/{nope}"}, facts=LINUX_CPU,
                          match=re.escape("unknown placeholder {nope} in 'x/{nope}'"))
    assert error.key == "build-dir"


def test_discovered_flat_layout(root: Path) -> None:
    layout = resolve(root, {}, facts=LINUX_CPU).layout
    assert layout.packages == {
        "demo": root / "demo",
        "demo.native": root / "demo/native",
        "demo.sub": root / "demo/sub",
    }
    assert layout.py_modules == {} and layout.package_data == {}


def test_discovered_src_layout(root: Path) -> None:
    (root / "src/srcpkg/inner").mkdir(parents=True)
    (root / "src/srcpkg/__init__.py").write_text("")
    (root / "src/srcpkg/inner/__init__.py").write_text("")
    (root / "src/tests").mkdir()
    (root / "src/tests/__init__.py").write_text("")
    assert set(resolve(root, {},
                       facts=LINUX_CPU).layout.packages) == {"srcpkg", "srcpkg.inner", "tests"}
    layout = resolve(root, {"package-dir": "."}, facts=LINUX_CPU).layout
    assert "demo" in layout.packages and "srcpkg" not in layout.packages


def test_package_dir_mapping(root: Path) -> None:
    (root / "lib/other_impl").mkdir(parents=True)
    (root / "lib/other_impl/__init__.py").write_text("")
    (root / "lib/other_impl/deep").mkdir()
    (root / "lib/other_impl/deep/__init__.py").write_text("")
    tool = {"packages": ["other"], "package-dir": {"other": "lib/other_impl"}}
    assert resolve(root, tool, facts=LINUX_CPU).layout.packages == {
        "other": root / "lib/other_impl",
        "other.deep": root / "lib/other_impl/deep",
    }
    (root / "src/pkg").mkdir(parents=True)
    tool = {"packages": ["pkg"], "package-dir": "src", "py-modules": []}
    packages = resolve(root, tool, facts=LINUX_CPU).layout.packages
    assert packages == {"pkg": root / "src/pkg"}  # namespace: listed


def test_listed_packages_modules_and_data(root: Path) -> None:
    tool = {
        "packages": ["demo"],
        "py-modules": ["single"],
        "package-data": {"demo": ["data/*.json", "data/**/*.json", "data/config.json"]},
    }
    layout = resolve(root, tool, facts=LINUX_CPU).layout
    assert set(layout.packages) == {"demo", "demo.sub", "demo.native"}
    assert layout.py_modules == {"single": root / "single.py"}
    assert layout.package_data == {
        "demo": (root / "demo/data/config.json", root / "demo/data/more/extra.json")
    }


@pytest.mark.parametrize(
    ("tool", "key", "fragment"),
    [
        ({"packages": ["demo", "missing"]}, "packages[1]", "does not exist"),
        ({"py-modules": ["nothere"]}, "py-modules[0]", "does not exist"),
        ({"package-dir": "nothere"}, "package-dir", "does not exist"),
        ({"package-dir": ".."}, "package-dir", "outside"),
        ({"package-dir": {"bad name": "demo"}}, 'package-dir."bad name"', "not a package name"),
        ({"package-data": {"notshipped": ["*"]}}, "package-data.notshipped", "not shipped"),
        ({"package-data": {"demo": ["*.xyz"]}}, "package-data.demo[0]", "matches no file"),
        ({"package-data": {"demo": ["../single.py"]}}, "package-data.demo[0]", "outside"),
    ],
)
def test_bad_layout(root: Path, tool: dict[str, Any], key: str, fragment: str) -> None:
    error = resolve_error(root, tool, match=re.escape(fragment), facts=LINUX_CPU)
    assert error.key == f"tool.torch-ext.{key}", str(error)


def test_version_source(root: Path) -> None:
    dynamic = {"name": "demo", "dynamic": ["version"]}
    assert resolve(root, {}, project=dynamic, facts=LINUX_CPU).version.file is None
    tool = {"version": {"file": "demo/__init__.py", "pattern": "v = '(.*)'", "suffix-env": "S"}}
    version = resolve(root, tool, project=dynamic, facts=LINUX_CPU).version
    assert (version.file, version.pattern, version.suffix_env) == (
        root / "demo/__init__.py", "v = '(.*)'", "S"
    )
    error = resolve_error(root, {"version": {"file": "../x.py"}}, project=dynamic, facts=LINUX_CPU,
                          match=re.escape("version file '../x.py' is outside the project root"))
    assert error.key == "tool.torch-ext.version.file"
    error = resolve_error(root, {"version": {"suffix-env": "S"}}, match="static", facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.version"


def test_version_base(root: Path) -> None:
    dynamic = {"name": "demo", "dynamic": ["version"]}
    version = resolve(root, {"version": {"base": "1.2", "suffix-env": "S"}}, project=dynamic,
                      facts=LINUX_CPU).version
    assert (version.base, version.suffix_env, version.file) == ("1.2", "S", None)
    for table in ({"base": "1.2", "file": "demo/__init__.py"}, {"base": "1.2", "pattern": "(.*)"}):
        error = resolve_error(root, {"version": table}, project=dynamic, match="not both",
                              facts=LINUX_CPU)
        assert error.key == "tool.torch-ext.version.base"
    error = resolve_error(root, {"version": {"base": "one.two"}}, project=dynamic,
                          match="PEP 440", facts=LINUX_CPU)
    assert error.key == "tool.torch-ext.version.base"


def test_project_level_options(root: Path) -> None:
    tool = {
        "torch-requirement": "none",
        "jobs": 3,
        "verbose": True,
        "compiler-launcher": "sccache",
        "allow-cuda-version-mismatch": True,
        "pch": False,
        "sdist-include": ["x/**"],
        "sdist-exclude": ["y/**"],
    }
    facts = Facts(env={"CXX": "g++-13", "PATH": "/usr/bin", "HOME": "/root", "CUDA_HOME": "/cuda"})
    resolved = resolve(root, tool, facts=facts)
    options = resolved.options
    assert (options.jobs, options.verbose, options.compiler_launcher) == (3, True, "sccache")
    assert options.allow_cuda_version_mismatch and not options.pch
    assert options.env == {"CXX": "g++-13", "CUDA_HOME": "/cuda", "PATH": "/usr/bin"}
    assert (resolved.torch_requirement, resolved.torch_import_check) == ("none", True)
    assert (resolved.sdist_include, resolved.sdist_exclude) == (("x/**",), ("y/**",))
    assert (
        resolve(root, {"torch-import-check": False, "torch-requirement": "none"},
                facts=LINUX_CPU).torch_import_check
        is False
    )
    assert resolve(root, {"torch-import-check": True}, facts=LINUX_CPU).torch_import_check is True


def test_root_given_through_a_symlink(root: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(root, target_is_directory=True)
    (spec,) = resolve(link, {"extension": [EXT]}, facts=LINUX_CPU).extensions
    assert spec.sources[0] == root / "csrc/a.cpp"
    assert os.path.isabs(spec.sources[0])

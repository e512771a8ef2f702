"""The setuptools face: ``from pep517_torch.setuptools import BuildExtension, CppExtension, ...``.

Nothing-compiled tests check the Extension arguments against torch's own functions, the
translation into specs (every argument honoured or refused by name), options, the torch pin
and that the backend and the JIT never import setuptools. The builds (fixtures/migrate's
setup.py files with the import swapped, compared with torch's BuildExtension's wheels from the
session-shared ``torch_built_wheels``; a mixed .cpp/.cu project; device linking; in-place and
editable rebuilds) compile pybind11-free, torch/extension.h-free sources only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import setuptools
from setuptools.dist import Distribution

from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.cuda import toolkit as cuda
from pep517_torch.core.spec import BuildType, ExtensionSpec
from pep517_torch.distribution.metadata import torch_pin
from pep517_torch.errors import ConfigError
from pep517_torch.setuptools import BuildExtension, CppExtension, CUDAExtension
from pep517_torch.setuptools.pin import APPLIED
from pep517_torch.setuptools.translate import CommandOptions, extension_spec
from tests.commands import run
from tests.conftest import ROOT
from tests.setup_py_builds import COMPUTE, FIXTURE_VARIABLES, GOOD, per_shape
from tests.setup_py_builds import FIXTURES as MIGRATE_FIXTURES
from tests.cuda_tools import fatbin_contents, find_cuobjdump

TORCH = toolchain.find_torch()
PIN = str(torch_pin(TORCH.version, "minor"))
TOOLKIT = cuda.find_cuda(os.environ)
CUOBJDUMP = find_cuobjdump()
needs_nvcc = pytest.mark.skipif(TOOLKIT is None, reason="needs nvcc (CUDA_HOME or nvcc on PATH)")
needs_cuobjdump = pytest.mark.skipif(CUOBJDUMP is None, reason="needs cuobjdump")


def spec_of(extension: setuptools.Extension, root: Path, **command: Any) -> ExtensionSpec:
    return extension_spec(
        extension, extension.name, root=root, command=CommandOptions(**command), torch=TORCH
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("a.cpp", "b.cu", "inc/a.h", "lib/libx.a"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("// x\n")
    return tmp_path


# --------------------------------------------------------------- Extension arguments


def test_cpp_extension_is_torchs(project: Path) -> None:
    from torch.utils import cpp_extension

    def arguments() -> dict[str, Any]:  # fresh lists: torch's appends to the caller's
        return {"include_dirs": ["inc"], "libraries": ["m"], "define_macros": [("A", "1")],
                "extra_compile_args": {"cxx": ["-O2"]}, "extra_link_args": ["-Wl,-z,now"]}

    for limited in (False, True):
        ours = CppExtension("pkg._C", ["a.cpp"], py_limited_api=limited, **arguments())
        theirs = cpp_extension.CppExtension("pkg._C", ["a.cpp"], py_limited_api=limited, **arguments())
        assert type(ours) is type(theirs) is setuptools.Extension
        for name in ("name", "sources", "include_dirs", "library_dirs", "define_macros",
                     "extra_compile_args", "extra_link_args", "language", "py_limited_api"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert sorted(ours.libraries) == sorted(theirs.libraries)
        assert ("torch_python" in ours.libraries) is not limited


def test_cuda_extension_libraries_and_device_link_arguments(project: Path) -> None:
    extension = CUDAExtension("pkg._C", ["a.cpp", "b.cu"], dlink_libraries=["nvshmem"])
    assert [str(p) for p in TORCH.include_dirs] == extension.include_dirs[:2]
    assert extension.libraries[:5] == ["c10", "torch", "torch_cpu", "torch_python", "cudart"]
    # c10_cuda and torch_cuda exist only in a CUDA build of torch: linking them to a CPU torch
    # cannot work (torch's CUDAExtension adds them anyway).
    assert ("c10_cuda" in extension.libraries) is TORCH.has_cuda_runtime
    assert extension.dlink is True and extension.dlink_libraries == ["nvshmem"]
    plain = CUDAExtension("pkg._C", ["b.cu"])
    assert plain.dlink is False and plain.dlink_libraries == []


# ---------------------------------------------------------------------- translation


def test_translation_drops_what_the_core_adds_and_keeps_the_rest(project: Path) -> None:
    from torch.utils import cpp_extension

    arguments: dict[str, Any] = dict(
        include_dirs=["inc"], libraries=["m", "torch_python"], library_dirs=["lib"],
        define_macros=[("A", "1"), ("B", None)], undef_macros=["C"],
        extra_compile_args=["-O2"], extra_link_args=["-Wl,-z,now"],
        extra_objects=["lib/libx.a"], runtime_library_dirs=["$ORIGIN"],
    )
    ours = spec_of(CppExtension("pkg._C", ["a.cpp"], **arguments), project)
    theirs = spec_of(cpp_extension.CppExtension("pkg._C", ["a.cpp"], **arguments), project)
    plain = spec_of(setuptools.Extension("pkg._C", ["a.cpp"], **arguments), project)
    assert ours == theirs == plain  # torch's directories and libraries are the core's to add
    assert ours.include_dirs == (project / "inc",) and ours.library_dirs == (project / "lib",)
    assert ours.libraries == ("m",)  # torch_python: the core links it (not limited API)
    assert ours.define_macros == (("A", "1"), ("B", None))
    assert ours.extra_cflags == ours.extra_cuda_cflags == ("-UC", "-O2")  # a list: both compilers
    assert ours.extra_ldflags == (str(project / "lib" / "libx.a"), "-Wl,-z,now")
    assert ours.runtime_library_dirs == ("$ORIGIN",)
    # As distutils reads them: Path objects, numbers as macro values, (name,) undefines.
    loose = spec_of(setuptools.Extension("pkg._C", ["a.cpp"], include_dirs=[project / "inc"],
                                         define_macros=[("N", 2), ("D",)]), project)
    assert loose.include_dirs == (project / "inc",) and loose.define_macros == (("N", "2"),)
    assert loose.extra_cflags == ("-UD",)
    assert ours.build_type is BuildType.RELEASE and ours.py_limited_api is None
    limited = spec_of(CppExtension("pkg._C", ["a.cpp"], py_limited_api=True), project)
    assert limited.py_limited_api == "cp310"  # torch's min_supported_cpython, 0x030A0000
    # build_ext's own -I/-D/-l and --debug apply to every extension.
    command = spec_of(CppExtension("pkg._C", ["a.cpp"]), project, include_dirs=("inc",),
                      define=(("X", "1"),), libraries=("z",), build_type=BuildType.DEBUG)
    assert command.include_dirs == (project / "inc",) and ("X", "1") in command.define_macros
    assert command.libraries == ("z",) and command.build_type is BuildType.DEBUG


def test_translation_of_per_compiler_flags_and_device_linking(project: Path) -> None:
    args = {"cxx": ["-O1"], "nvcc": ["--use_fast_math"], "nvcc_dlink": ["-dlink", "-dlto"]}
    spec = spec_of(CUDAExtension("pkg._C", ["a.cpp", "b.cu"], extra_compile_args=args), project)
    assert spec.extra_cflags == ("-O1",) and spec.extra_cuda_cflags == ("--use_fast_math",)
    assert spec.device_link and spec.extra_dlink_flags == ("-dlto",)  # the core adds -dlink
    assert "cudart" not in spec.libraries and spec.include_dirs == ()
    ours = spec_of(CUDAExtension("pkg._C", ["b.cu"], dlink=True, dlink_libraries=["nvshmem"]),
                   project)
    assert ours.dlink and ours.dlink_libraries == ("nvshmem",) and ours.extra_dlink_flags == ()
    # torch's BuildExtension fills in an empty "sycl" list itself: harmless.
    empty = spec_of(setuptools.Extension("pkg._C", ["a.cpp"], extra_compile_args={"sycl": []}),
                    project)
    assert empty.extra_cflags == () and empty.extra_cuda_cflags == ()


@pytest.mark.parametrize(
    ("arguments", "argument", "message"),
    [
        ({"extra_compile_args": {"sycl": ["-fsycl"]}}, "extra_compile_args['sycl']", "SYCL"),
        ({"extra_compile_args": {"hip": []}}, "extra_compile_args['hip']",
         "unknown compiler 'hip' (expected 'cxx', 'nvcc', 'nvcc_dlink')"),
        ({"extra_compile_args": "-O2"}, "extra_compile_args", "must be a list of strings, not str"),
        ({"extra_compile_args": {"cxx": "-O2"}}, "extra_compile_args['cxx']", "not str"),
        ({"extra_link_args": [1]}, "extra_link_args", "holds 1, which is not a string"),
        ({"define_macros": [("A", "1", "2")]}, "define_macros", "(name, value or None) tuple"),
        ({"define_macros": [["A", "1"]]}, "define_macros", "(name, value or None) tuple"),
        ({"swig_opts": ["-c++"]}, "swig_opts", "SWIG is not supported"),
        ({"optional": True}, "optional", "optional extensions are not supported"),
        ({"language": "objc"}, "language", "'objc' is not supported"),
        ({"sources": ["inc/a.h"]}, "sources",
         "a header: headers are found through Extension 'pkg._C' include_dirs"),
        ({"sources": ["a.pyx"]}, "sources", "not a C++ or CUDA source"),
        ({"extra_compile_args": {"nvcc_dlink": []}}, "dlink", "no .cu source to device-link"),
    ],
)
def test_bad_arguments_name_the_argument(
    project: Path, arguments: dict[str, Any], argument: str, message: str
) -> None:
    sources = arguments.pop("sources", ["a.cpp"])
    extension = setuptools.Extension("pkg._C", sources, **arguments)
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        spec_of(extension, project)
    assert caught.value.key == f"Extension 'pkg._C' {argument}"
    assert "\n" not in str(caught.value)


def test_a_missing_source_is_named_by_its_argument_before_anything_compiles(
    project: Path,
) -> None:
    """The compile core checks that sources exist (one check for every face) and names the
    setuptools argument, not its own field."""
    from pep517_torch.core import plan as core_plan
    from pep517_torch.core.spec import BuildOptions

    spec = spec_of(setuptools.Extension("pkg._C", ["a.cpp", "missing.cpp"]), project)
    options = BuildOptions(build_dir=project / "build", env=dict(os.environ))
    with pytest.raises(ConfigError, match=re.escape("missing.cpp does not exist")) as caught:
        core_plan.prepare([spec], options)
    assert caught.value.key == "Extension 'pkg._C' sources"
    assert not list(project.glob("build/**/*.o"))


def test_setuptools_library_is_refused(project: Path) -> None:
    from setuptools.extension import Library

    with pytest.raises(ConfigError, match="^Extension 'pkg._C' Library: setuptools Library"):
        spec_of(Library("pkg._C", ["a.cpp"]), project)


def test_with_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    extension = setuptools.Extension("pkg._C", ["a.cpp"])

    def filename(command_class: type[BuildExtension]) -> str:
        command = command_class(Distribution({"name": "x", "ext_modules": [extension]}))
        command.ensure_finalized()
        return command.get_ext_filename("pkg._C")

    assert filename(BuildExtension).startswith("pkg/_C.cpython-")
    no_suffix = BuildExtension.with_options(no_python_abi_suffix=True)
    assert filename(no_suffix) == "pkg/_C.so"
    both = no_suffix.with_options(torch_requirement="exact")
    assert both.torch_ext_options == {"no_python_abi_suffix": True, "torch_requirement": "exact"}
    assert issubclass(both, BuildExtension) and both.__name__ == "BuildExtension"
    with pytest.raises(ConfigError, match=r"^BuildExtension: unknown option 'no_abi_suffix' \(known"):
        BuildExtension.with_options(no_abi_suffix=True)
    with pytest.raises(ConfigError, match="torch_requirement='always' is not one of"):
        BuildExtension.with_options(torch_requirement="always")


def test_build_ext_options_map_onto_the_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pep517_torch.setuptools.options import build_options, persistent_build_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MAX_JOBS", "3")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")

    def command(**options: Any) -> BuildExtension:
        dist = Distribution({"name": "x", "ext_modules": [setuptools.Extension("p._C", ["a.cpp"])]})
        made = BuildExtension(dist)
        for name, value in options.items():
            setattr(made, name, value)
        made.ensure_finalized()
        return made

    plain = command()
    build_dir = persistent_build_dir(plain, TORCH)
    assert build_dir.parent == (tmp_path / plain.build_temp / "pep517_torch")
    assert build_dir.name.endswith(f"-torch{TORCH.version}")  # the pyproject face's naming
    options = build_options(plain, build_dir, tmp_path)
    assert options.jobs == 3 and options.cuda_arch_list == ("8.0", "9.0")
    assert options.source_root == tmp_path and "MAX_JOBS" not in options.env
    assert build_options(command(parallel="5"), build_dir, tmp_path).jobs == 5  # -j 5 wins
    # An editable install's build_temp is a throwaway directory: the regular one is used.
    editable = command(editable_mode=True, build_temp=str(tmp_path / "throwaway"))
    assert persistent_build_dir(editable, TORCH) == build_dir


# ------------------------------------------------------------------------ torch pin


def distribution(build_ext: type | None, **attributes: Any) -> Distribution:
    cmdclass = {"build_ext": build_ext} if build_ext else {}
    return Distribution({"name": "demo", "version": "1.0", "cmdclass": cmdclass, **attributes})


def test_torch_pin_joins_install_requires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    pinned = distribution(BuildExtension, install_requires=["numpy", "torch>=2.0"])
    assert pinned.install_requires == ["numpy", PIN]  # folded into the project's own line
    assert getattr(pinned, APPLIED) == f"the wheel requires {PIN}"
    assert distribution(BuildExtension).install_requires == [PIN]
    exact = distribution(BuildExtension.with_options(torch_requirement="exact"))
    assert exact.install_requires == [f"torch=={TORCH.version.split('+')[0]}"]
    assert distribution(BuildExtension.with_options(torch_requirement="none")).install_requires == []
    # Another project's build_ext (or none): the hook changes nothing.
    from setuptools.command.build_ext import build_ext

    assert distribution(build_ext, install_requires=["numpy"]).install_requires == ["numpy"]
    assert not hasattr(distribution(None), APPLIED)


@pytest.mark.parametrize(
    ("pyproject", "pinned"),
    [
        ('[build-system]\nrequires = ["setuptools"]\n', True),
        ('[project]\nname = "demo"\nversion = "1.0"\ndynamic = ["dependencies"]\n', True),
        ('[project]\nname = "demo"\nversion = "1.0"\ndependencies = ["numpy"]\n', False),
        ('[project]\nname = "demo"\nversion = "1.0"\ndynamic = ["dependencies"]\n'
         '[tool.setuptools.dynamic]\ndependencies = {file = ["requirements.txt"]}\n', False),
    ],
)
def test_static_dependencies_get_no_pin_and_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pyproject: str, pinned: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(pyproject)
    dist = distribution(BuildExtension, install_requires=["numpy"])
    assert (PIN in dist.install_requires) is pinned
    if not pinned:
        assert "list \"dependencies\" in [project] dynamic" in getattr(dist, APPLIED)


def test_backend_and_jit_never_import_setuptools(tmp_path: Path) -> None:
    code = f"""
import sys
from pathlib import Path
import pep517_torch, pep517_torch.buildapi as hooks, pep517_torch.cli, pep517_torch.jit
from pep517_torch import include_paths, is_ninja_available, load, load_inline
import pep517_torch.config, pep517_torch.core.build, pep517_torch.distribution.wheel
include_paths("cpu"); is_ninja_available()
hooks.prepare_metadata_for_build_wheel({str(tmp_path)!r})
hooks.build_sdist({str(tmp_path)!r})
found = sorted(m for m in sys.modules if m.split(".")[0] in ("setuptools", "pkg_resources"))
print(found)
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "fixtures" / "minimal",
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr
    assert os.listdir(tmp_path)  # the hooks ran


# ------------------------------------------------------------- errors through setup.py

BAD_SETUP_PY = """
from setuptools import setup
from pep517_torch.setuptools import BuildExtension, CppExtension
setup(name="bad", version="1.0",
      ext_modules=[CppExtension("bad._C", ["bad.cpp"], extra_compile_args={ARGS})],
      cmdclass={"build_ext": BuildExtension})
"""


def setup_py(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "setup.py", *args], cwd=project, capture_output=True,
                          text=True, timeout=900, env={**os.environ, **(env or {})})


def test_errors_reach_the_user_as_one_line(project: Path) -> None:
    (project / "bad.cpp").write_text("int f() { return 0; }\n")
    (project / "setup.py").write_text(BAD_SETUP_PY.replace("ARGS", '"sycl": ["-fsycl"]'))
    result = setup_py(project, "build_ext")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: Extension 'bad._C' extra_compile_args['sycl']: SYCL is not supported by pep517_torch"
    )
    assert not (project / "build").exists() or not list((project / "build").rglob("*.o"))


@pytest.mark.compile
def test_a_compile_error_shows_the_compilers_first_error(project: Path) -> None:
    (project / "bad.cpp").write_text("int f() { return undefined_name; }\n")
    (project / "setup.py").write_text(BAD_SETUP_PY.replace("ARGS", ""))
    result = setup_py(project, "build_ext", "--inplace")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    message = result.stderr[result.stderr.index("error: build: compiling bad.cpp failed"):]
    assert "bad.cpp:1:" in message and "undefined_name" in message, result.stderr
    assert not list(project.glob("bad/_C*.so"))


# ---------------------------------------- fixtures/migrate's setup.py files, import swapped

SWAP = ("from torch.utils.cpp_extension import", "from pep517_torch.setuptools import")
SETUPTOOLS_PYPROJECT = """\
[build-system]
requires = ["setuptools>=70", "torch", "pep517_torch"]
build-backend = "setuptools.build_meta"
"""


def swapped(shape: str, target: Path) -> Path:
    """A copy of fixtures/migrate/<shape> whose setup.py imports ours instead of torch's."""
    shutil.copytree(MIGRATE_FIXTURES / shape, target)
    setup = target / "setup.py"
    text = setup.read_text()
    assert SWAP[0] in text
    setup.write_text(text.replace(*SWAP))
    return target


def build_log(args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """What a build that must succeed printed, stdout then stderr."""
    result = run(*args, cwd=cwd, env=env, unset=FIXTURE_VARIABLES)
    return result.stdout + result.stderr


def pip_wheel(project: Path, out: Path, env: dict[str, str] | None = None) -> tuple[Path, str]:
    log = build_log([sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation",
                     "--no-deps", "--no-cache-dir", "-w", str(out), str(project)], env=env)
    (wheel,) = out.glob("*.whl")
    return wheel, log


def members(wheel: Path) -> tuple[str, list[str]]:
    """(tag, every file outside .dist-info): same modules at the same paths, suffixes included."""
    names = zipfile.ZipFile(wheel).namelist()
    return "-".join(wheel.stem.split("-")[2:]), sorted(n for n in names if ".dist-info/" not in n)


def requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(name).decode()
    return [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Requires-Dist:")]


def computes(shape: str, wheel: Path, work: Path) -> None:
    site = work / f"site-{wheel.stem}"
    build_log([sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "-q",
               "--target", str(site), str(wheel)])
    out = build_log([sys.executable, "-c", COMPUTE[shape] + "\nprint('ok')"], cwd=work,
                    env={"PYTHONPATH": str(site)})
    assert out.strip().splitlines()[-1] == "ok"


@pytest.fixture(scope="module")
def our_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str] | BaseException]:
    """Every good shape with the import swapped, through ``pip wheel --no-build-isolation``."""
    root = tmp_path_factory.mktemp("ours")

    def build(shape: str) -> tuple[Path, str]:
        return pip_wheel(swapped(shape, root / shape), root / f"{shape}-out")

    return per_shape(build)


@pytest.mark.compile
@pytest.mark.parametrize("shape", GOOD)
def test_swapped_import_builds_torchs_wheel(
    shape: str,
    our_wheels: dict[str, tuple[Path, str] | BaseException],
    torch_built_wheels: dict[str, Path | BaseException],
    tmp_path: Path,
) -> None:
    ours, theirs = our_wheels[shape], torch_built_wheels[shape]
    for built in (ours, theirs):
        if isinstance(built, BaseException):
            raise built
    assert not isinstance(ours, BaseException) and not isinstance(theirs, BaseException)
    wheel, log = ours
    assert members(wheel) == members(theirs)
    assert " compiled" in log and "pep517_torch: the wheel requires" in log  # our core built it
    torch_lines = [r for r in requirements(wheel) if r.startswith("torch")]
    assert torch_lines == [PIN]  # one_ext's own "torch>=2.0" folded into the pin
    for built in (wheel, theirs):  # the same results from both
        computes(shape, built, tmp_path)


@pytest.mark.compile
def test_python_m_build_no_isolation(
    tmp_path: Path, torch_built_wheels: dict[str, Path | BaseException]
) -> None:
    """sdist, then the wheel from it (so a cold build dir), through pypa/build."""
    for shape in ("limited_api", "nested"):
        project = swapped(shape, tmp_path / shape)
        # nested names a source by absolute path and includes a header: the sdist needs both.
        (project / "MANIFEST.in").write_text("recursive-include csrc *.cpp *.h\n")
        out = tmp_path / f"{shape}-dist"
        build_log([sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(project)])
        (wheel,) = out.glob("*.whl")
        theirs = torch_built_wheels[shape]
        if isinstance(theirs, BaseException):
            raise theirs
        assert members(wheel) == members(theirs)
        assert PIN in requirements(wheel)
        computes(shape, wheel, tmp_path)


# ------------------------------------------------ in place, editable, incremental, --debug


def summary(log: str) -> str:
    """``2 extensions: 1 compiled, 1 linked`` from the build's summary line."""
    (found,) = re.findall(r"pep517_torch: (\d+ extensions?: .*) in [\d.]+ s", log)
    return re.sub(r" \(\d+ from cache\)", "", found)  # with ccache installed


@pytest.mark.compile
def test_inplace_editable_and_incremental_rebuilds(tmp_path: Path) -> None:
    project = swapped("nested", tmp_path / "nested")
    (project / "pyproject.toml").write_text(SETUPTOOLS_PYPROJECT)  # pip's PEP 660 path
    check = "import nestpkg; print(nestpkg.times3(2.0), nestpkg.add_offset(1.5))"
    log = build_log([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=project)
    assert summary(log) == "2 extensions: 3 compiled, 2 linked"
    assert sorted(p.name.split(".")[0] for p in project.glob("src/nestpkg/**/*.so")) == [
        "_core", "_kernels"
    ]
    out = build_log([sys.executable, "-c", check], cwd=project / "src")
    assert out.split() == ["6.0", "2.5"]
    build_dirs = list(project.glob("build/temp.*/pep517_torch/*-torch*"))
    assert len(build_dirs) == 1 and (build_dirs[0] / "build.ninja").is_file()
    log = build_log([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=project)
    assert summary(log) == "2 extensions: 0 compiled, 0 linked"
    # pip install -e (setuptools' own editable mode) reuses the same build directory.
    prefix = tmp_path / "prefix"
    editable = [sys.executable, "-m", "pip", "install", "-v", "-e", str(project),
                "--no-build-isolation", "--no-deps", "--prefix", str(prefix)]
    assert summary(build_log(editable)) == "2 extensions: 0 compiled, 0 linked"
    times3 = project / "csrc" / "ops" / "times3.cpp"
    times3.write_text(times3.read_text().replace("3 * x", "5 * x"))
    assert summary(build_log(editable)) == "2 extensions: 1 compiled, 1 linked"
    (site,) = prefix.glob("lib/python*/site-packages")
    out = build_log([sys.executable, "-c", f"import site; site.addsitedir({str(site)!r}); {check}"],
                    cwd=tmp_path)
    assert out.split() == ["10.0", "2.5"]
    # --debug is the debug build type: every object rebuilds with -O0 -g.
    log = build_log([sys.executable, "setup.py", "build_ext", "--inplace", "--debug"], cwd=project)
    assert summary(log) == "2 extensions: 3 compiled, 2 linked"
    flags = (build_dirs[0] / "build.ninja").read_text()
    assert " -O0 -g" in flags and "-O3" not in flags


# ----------------------------------------------------- CUDA: mixed project, device link

MIXED_SETUP_PY = """
from setuptools import setup
from pep517_torch.setuptools import BuildExtension, CUDAExtension
setup(
    name="cudaops", version="0.1.0", packages=["cudaops"],
    ext_modules=[CUDAExtension(
        "cudaops._C", ["csrc/module.cpp", "csrc/axpy.cu", "csrc/sum_of_squares.cu"],
        include_dirs=["csrc/include"],
        extra_compile_args={"cxx": ["-DCUDAOPS_CXX_ONLY=1"],
                            "nvcc": ["-DCUDAOPS_NVCC_ONLY=1", "-lineinfo"]},
    )],
    cmdclass={"build_ext": BuildExtension},
)
"""
CUDA_ENV = {"TORCH_CUDA_ARCH_LIST": "8.0;9.0", "CUDA_VISIBLE_DEVICES": ""}


def cuda_project(tmp_path: Path, fixture: str, setup_text: str | None) -> Path:
    project = tmp_path / fixture
    shutil.copytree(ROOT / "fixtures" / fixture, project)
    (project / "pyproject.toml").write_text(SETUPTOOLS_PYPROJECT)
    if setup_text is not None:
        (project / "setup.py").write_text(setup_text)
    return project


@needs_nvcc
@pytest.mark.cuda
@pytest.mark.compile
def test_mixed_cpp_and_cu_project_builds_and_links(tmp_path: Path) -> None:
    project = cuda_project(tmp_path, "cuda", MIXED_SETUP_PY)
    wheel, log = pip_wheel(project, tmp_path / "dist", env=CUDA_ENV)
    assert summary(log) == "1 extension: 3 compiled, 1 linked"
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    (so,) = (site / "cudaops").glob("_C.cpython-*.so")
    needed = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True,
                            check=True).stdout
    assert "libcudart.so" in needed
    if not TORCH.has_cuda_runtime:  # a CPU torch has no c10_cuda: CUDAExtension did not add it
        assert "libc10_cuda" not in needed and "is a CPU build" in log
    out = build_log([sys.executable, "-c", "import cudaops; print(cudaops._C.ceil_div(7, 2),"
                     " cudaops.cudart_version() // 1000)"], cwd=tmp_path,
                    env={"PYTHONPATH": str(site)})
    assert TOOLKIT is not None and out.split() == ["4", str(TOOLKIT.version[0])]


@needs_nvcc
@needs_cuobjdump
@pytest.mark.cuda
@pytest.mark.compile
def test_device_link_through_setup_py(tmp_path: Path) -> None:
    project = cuda_project(tmp_path, "dlink", None)  # fixtures/dlink/setup.py: dlink=True
    wheel, log = pip_wheel(project, tmp_path / "dist", env=CUDA_ENV)
    assert "device-linking dlinkops._C" in log
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    (so,) = (site / "dlinkops").glob("_C.*.so")
    assert CUOBJDUMP is not None and fatbin_contents(CUOBJDUMP, so) == ({"sm_80", "sm_90"}, set())
    out = build_log([sys.executable, "-c", "import dlinkops; print(dlinkops.scale(3.0, 2.0))"],
                    cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert out.split() == ["7.0"] and PIN in requirements(wheel)


@pytest.mark.compile
def test_builds_take_the_build_directory_lock(project: Path) -> None:
    """Like every face: a second builder of the same build directory waits, saying for whom."""
    from pep517_torch.core.lock import build_lock

    (project / "bad.cpp").write_text("int f() { return 1; }\n")
    (project / "setup.py").write_text(BAD_SETUP_PY.replace("ARGS", ""))
    assert setup_py(project, "build_ext").returncode == 0
    (build_dir,) = project.glob("build/temp.*/pep517_torch/*-torch*")
    with build_lock(build_dir, "a test holding the lock"):
        waiting = subprocess.Popen([sys.executable, "setup.py", "build_ext"], cwd=project,
                                   stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert waiting.stderr is not None
        line = waiting.stderr.readline()  # blocks until the child reports that it waits
        assert "pep517_torch: waiting for process" in line and "a test holding the lock" in line
    out, _ = waiting.communicate(timeout=600)
    assert waiting.returncode == 0 and summary(out) == "1 extension: 0 compiled, 0 linked"

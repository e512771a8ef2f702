"""Device linking (relocatable device code): spec, flags, the ninja graph, TOML keys, real builds.

fixtures/dlink: csrc/scale.cu's kernel calls ``dlinkops_scale_by``, a __device__ function
defined only in csrc/scale_by.cu. Without -rdc=true ptxas cannot compile scale.cu; with it and
one ``nvcc -dlink`` over both objects, the module links, imports and computes (no GPU needed:
the host side computes, a launch returns cudart's error code). Sources have no torch headers.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.core import flags
from pep517_torch.core.toolchain import tools as toolchain
from pep517_torch.core.cuda import arch_flags as arch, toolkit as cuda
from pep517_torch.core import build as core_build
from pep517_torch.core import plan as core_plan
from pep517_torch.core.spec import BuildOptions, ExtensionSpec
from pep517_torch.errors import BuildError, ConfigError
from tests.commands import run_python
from tests.config_helpers import LINUX_CPU, resolve
from tests.conftest import FIXTURES
from tests.cuda_tools import fatbin_contents, find_cuobjdump

FIXTURE = FIXTURES / "dlink"
TOOLKIT = cuda.find_cuda(os.environ)
CUOBJDUMP = find_cuobjdump()
ARCH_80 = "-gencode=arch=compute_80,code=sm_80"
ARCH_90 = "-gencode=arch=compute_90,code=sm_90"

needs_nvcc = pytest.mark.skipif(TOOLKIT is None, reason="needs nvcc (CUDA_HOME or nvcc on PATH)")
needs_cuobjdump = pytest.mark.skipif(
    CUOBJDUMP is None, reason="needs cuobjdump: pip install 'nvidia-cuda-cuobjdump==13.*'"
)


def build_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    return {**env, "CUDA_VISIBLE_DEVICES": ""}


def dlink_spec(root: Path = FIXTURE, **changes: Any) -> ExtensionSpec:
    csrc = root / "csrc"
    arguments: dict[str, Any] = {
        "name": "dlinkops._C",
        "sources": (csrc / "module.cpp", csrc / "scale.cu", csrc / "scale_by.cu"),
        "dlink": True,
    }
    arguments.update(changes)
    return ExtensionSpec(**arguments)


def tools(torch_root: Path) -> flags.ResolvedTools:
    compiler = toolchain.Compiler(("/usr/bin/c++",), Path("/usr/bin/g++"), "gcc", (12, 2, 0), None)
    return flags.ResolvedTools(
        compiler=compiler,
        torch=toolchain.TorchInstall(torch_root, "2.13.0+cpu", None, None),
        python_include=Path("/py/include"),
        cuda_include_dirs=(Path("/cuda/include"),),
        cuda_library_dirs=(Path("/cuda/lib64"),),
        host_compiler_for_nvcc="/opt/gcc-12/bin/gcc",
    )


# ------------------------------------------------------------------------ spec and flags


def test_device_link_flags_match_the_compile(tmp_path: Path) -> None:
    arch_flags = (ARCH_80, ARCH_90)
    spec = dlink_spec(
        library_dirs=(Path("/opt/nvshmem/lib"),),
        dlink_libraries=("nvshmem",),
        extra_dlink_flags=("-dlto", "-Xnvlink=--verbose"),
        extra_cuda_cflags=("--generate-code", "arch=compute_100,code=sm_100"),
    )
    out = flags.compute(spec, tools(tmp_path), source_root=None, arch_flags=arch_flags)
    assert out.nvcc.count("-rdc=true") == 1
    assert out.nvcc.index("-rdc=true") < out.nvcc.index("--generate-code")  # user flags last
    assert "-rdc=true" not in out.cxx
    dlink = list(out.dlink)
    assert dlink[:3] == ["-dlink", "-ccbin", "/opt/gcc-12/bin/gcc"]
    # The very architectures the objects were compiled for, the user's own included.
    assert [f for f in dlink if "arch=" in f] == [
        ARCH_80, ARCH_90, "--generate-code=arch=compute_100,code=sm_100"
    ]
    assert "-Xcompiler=-fPIC" in dlink  # the device-link object goes into a shared library
    assert "-L/opt/nvshmem/lib" in dlink and "-L/cuda/lib64" in dlink
    assert dlink[-3:] == ["-lnvshmem", "-dlto", "-Xnvlink=--verbose"]
    # The user's own -rdc choice is kept (NVSHMEM-style: device link without rdc objects).
    own = flags.compute(
        dlink_spec(extra_cuda_cflags=("-rdc=false",)), tools(tmp_path), source_root=None
    )
    assert "-rdc=true" not in own.nvcc and own.nvcc[-1] == "-rdc=false" and own.dlink
    plain = flags.compute(dlink_spec(dlink=False), tools(tmp_path), source_root=None)
    assert "-rdc=true" not in plain.nvcc and plain.dlink == ()


def test_spec_checks_device_link() -> None:
    csrc = FIXTURE / "csrc"
    assert dlink_spec(dlink=False, dlink_libraries=("nvshmem",)).device_link
    with pytest.raises(ConfigError, match="^dlink: .*CUDA is off"):
        dlink_spec(sources=(csrc / "module.cpp",), with_cuda=False)
    with pytest.raises(ConfigError, match="^dlink: .*no .cu source"):
        dlink_spec(sources=(csrc / "module.cpp",), with_cuda=True)
    with pytest.raises(ConfigError, match="^extra_dlink_flags: .*no device link"):
        dlink_spec(dlink=False, extra_dlink_flags=("-dlto",))


@needs_nvcc
def test_graph_device_links_the_cuda_objects_only(tmp_path: Path) -> None:
    build_dir = tmp_path / "build"
    options = BuildOptions(
        build_dir=build_dir, env=build_env(), cuda_arch_list=("8.0", "9.0"),
        compiler_launcher="/usr/bin/env",  # a launcher in front of c++/nvcc, never -dlink
    )
    plan = core_plan.prepare([dlink_spec(), dlink_spec(name="plain", dlink=False)], options)
    text = plan.ninja_file.read_text()
    assert text.count("rule dlink") == 1 and text.count(": dlink ") == 1
    edge = next(line for line in text.splitlines() if ": dlink " in line)
    assert edge == (
        "build obj/dlinkops._C/dlink.o: dlink obj/dlinkops._C/scale.cu.o"
        " obj/dlinkops._C/scale_by.cu.o"
    )
    link = next(line for line in text.splitlines() if line.startswith("build out/dlinkops/"))
    assert link.endswith("obj/dlinkops._C/scale_by.cu.o obj/dlinkops._C/dlink.o")
    nvcc_line = next(line for line in text.splitlines() if line.startswith("nvcc = "))
    dlink_line = next(line for line in text.splitlines() if line.startswith("nvcc_dlink = "))
    assert nvcc_line.startswith("nvcc = /usr/bin/env ") and dlink_line == f"nvcc_dlink = {TOOLKIT.nvcc}"
    dlink_flags = next(line for line in text.splitlines() if line.startswith("dlinkflags_0 = "))
    assert ARCH_80 in dlink_flags and ARCH_90 in dlink_flags
    assert "dlinkflags_1" not in text and text.count("-rdc=true") == 1  # plain: no rdc
    dry = subprocess.run(
        [str(plan.ninja), "-C", str(build_dir), "-n"], capture_output=True, text=True
    )
    assert dry.returncode == 0 and "device-linking dlinkops._C" in dry.stdout, dry.stdout


FAKE_NVCC = """#!/bin/sh
out= previous=
for argument in "$@"; do [ "$previous" = -o ] && out=$argument; previous=$argument; done
echo "$out" >> "$RECORD" && touch "$out"
"""


@needs_nvcc
def test_device_link_writes_a_per_process_temporary(tmp_path: Path) -> None:
    """Two builders of one output (one build directory, its lock not taken) never write the
    same temporary: ``nvcc -dlink`` writes <out>.<shell pid>.tmp and renames it into place, as
    every other rule does. The command is ninja's own, run with a stand-in nvcc."""
    build_dir = tmp_path / "build"
    options = BuildOptions(build_dir=build_dir, env=build_env(), cuda_arch_list=("8.0",))
    plan = core_plan.prepare([dlink_spec()], options)
    output = "obj/dlinkops._C/dlink.o"
    commands = subprocess.run(
        [str(plan.ninja), "-C", str(build_dir), "-t", "commands", output],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    assert TOOLKIT is not None and commands[-1].startswith(f"{TOOLKIT.nvcc} -dlink ")
    fake = tmp_path / "nvcc"
    fake.write_text(FAKE_NVCC)
    fake.chmod(0o755)
    command = str(fake) + commands[-1][len(str(TOOLKIT.nvcc)):]
    record = tmp_path / "record"
    (build_dir / output).parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        env = {**os.environ, "RECORD": str(record)}
        subprocess.run(["/bin/sh", "-c", command], cwd=build_dir, env=env, check=True)
    first, second = record.read_text().split()
    assert first != second, "both builders wrote the same temporary"
    assert re.fullmatch(re.escape(output) + r"\.\d+\.tmp", first), first
    assert (build_dir / output).is_file() and not list((build_dir / output).parent.glob("*.tmp"))


# --------------------------------------------------------------------- TOML keys


def resolved_spec(extension: dict[str, Any], **project_keys: Any) -> ExtensionSpec:
    """The spec of dlinkops._C with these extension keys (and these project-wide ones)."""
    tool = {"extension": [{"name": "dlinkops._C", **extension}], **project_keys}
    project = {"name": "dlinkops", "version": "1"}
    (spec,) = resolve(FIXTURE, tool, project=project, facts=LINUX_CPU).extensions
    return spec


def test_toml_keys_in_the_extension_and_cuda_tables() -> None:
    cuda_table = {"sources": ["csrc/*.cu"], "dlink": True, "dlink-libraries": ["nvshmem"],
                  "extra-dlink-flags": ["-dlto"]}
    spec = resolved_spec({"sources": ["csrc/module.cpp"], "with-cuda": True, "cuda": cuda_table})
    assert spec.device_link and spec.dlink_libraries == ("nvshmem",)
    assert spec.extra_dlink_flags == ("-dlto",)
    top = resolved_spec({"sources": ["csrc/*.cpp", "csrc/*.cu"], "dlink": True,
                         "extra-dlink-flags": ["-dlto"]})
    assert top.dlink and top.extra_dlink_flags == ("-dlto",)
    # The cuda table's dlink replaces the extension's; with CUDA off (auto) there is nothing
    # to device-link, and dlink is moot rather than an error.
    off = resolved_spec({"sources": ["csrc/*.cpp", "csrc/*.cu"], "dlink": True,
                         "cuda": {"dlink": False}}, cuda=True)
    assert not off.device_link
    auto = resolved_spec({"sources": ["csrc/module.cpp"], "dlink": True, "cuda": cuda_table})
    assert not auto.device_link and auto.extra_dlink_flags == ()


@pytest.mark.parametrize(
    ("extension", "key", "message"),
    [
        ({"sources": ["csrc/module.cpp"], "with-cuda": False, "dlink": True},
         "tool.torch-ext.extension[0].dlink", "with-cuda = false"),
        ({"sources": ["csrc/*.cpp", "csrc/*.cu"], "extra-dlink-flags": ["-dlto"]},
         "tool.torch-ext.extension[0].extra-dlink-flags", "no device link"),
        ({"sources": ["csrc/module.cpp"], "with-cuda": True, "cuda": {"dlink": True}},
         "tool.torch-ext.extension[0].cuda.dlink", "no .cu source"),
        ({"sources": ["csrc/*.cu"], "dlink": "yes"},
         "tool.torch-ext.extension[0].dlink", "boolean"),
    ],
)
def test_toml_errors_name_the_key(extension: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        resolved_spec(extension)
    assert caught.value.key == key
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------- real builds (nvcc)


def fatbin(path: Path) -> tuple[set[str], set[str]]:
    assert CUOBJDUMP is not None
    return fatbin_contents(CUOBJDUMP, path)


COMPUTE_CHILD = """
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.ExtensionFileLoader("_C", sys.argv[1])
module = importlib.util.module_from_spec(importlib.util.spec_from_loader("_C", loader))
loader.exec_module(module)
print(module.scale(3.0, 2.0), module.launch_status())
"""


@needs_nvcc
@needs_cuobjdump
@pytest.mark.cuda
@pytest.mark.compile
def test_device_link_is_what_lets_it_link(tmp_path: Path) -> None:
    options = BuildOptions(
        build_dir=tmp_path / "build", env=build_env(), cuda_arch_list=("8.0", "9.0"),
        compiler_launcher="none",
    )
    # Without relocatable device code the kernel's call cannot be resolved.
    no_rdc = dataclasses.replace(options, build_dir=tmp_path / "no-rdc")
    with pytest.raises(BuildError, match="Unresolved extern function"):
        core_build.build([dlink_spec(dlink=False)], no_rdc, log=lambda line: None)
    # With it: links, imports, computes, and holds device code for each requested arch.
    result = core_build.build([dlink_spec()], options, log=lambda line: None)
    artifact = result.artifacts["dlinkops._C"]
    assert result.run.compiled == 3 and "device-linking dlinkops._C" in result.run.steps
    child = subprocess.run([sys.executable, "-c", COMPUTE_CHILD, str(artifact)],
                           capture_output=True, text=True, check=True)
    value, status = child.stdout.split()
    assert float(value) == 7.0 and int(status) != 0  # no GPU here: cudart's error code
    assert fatbin(artifact) == ({"sm_80", "sm_90"}, set())
    # extra_dlink_flags reach nvcc -dlink: only that step reruns, and its failure is named.
    bogus = dlink_spec(extra_dlink_flags=("--no-such-dlink-flag",))
    with pytest.raises(BuildError, match=re.escape("device-linking dlinkops._C failed")) as caught:
        core_build.build([bogus], options, log=lambda line: None)
    assert "--no-such-dlink-flag" in caught.value.output
    assert "compiling" not in caught.value.output  # the objects were up to date


@needs_nvcc
@needs_cuobjdump
@pytest.mark.cuda
@pytest.mark.compile
def test_toml_face_wheel_with_a_cuda_table_dlink(tmp_path: Path) -> None:
    project = tmp_path / "dlink"
    shutil.copytree(FIXTURE, project)
    (project / "setup.py").unlink()
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-build-isolation", "--no-deps",
         "-w", str(tmp_path / "dist"), "-Ccuda-arch-list=8.0;9.0", str(project)],
        capture_output=True, text=True, env=build_env(), timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "device-linking dlinkops._C" in result.stdout + result.stderr
    (wheel,) = (tmp_path / "dist").glob("dlinkops-0.1.0-*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    (so,) = (site / "dlinkops").glob("_C.*.so")
    assert fatbin(so) == ({"sm_80", "sm_90"}, set())
    child = run_python("import dlinkops; print(dlinkops.scale(3.0, 2.0))",
                       env={"PYTHONPATH": str(site)}, cwd=tmp_path)
    assert child.stdout.strip() == "7.0"

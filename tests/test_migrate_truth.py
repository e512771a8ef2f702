"""What migrate and doctor say about published projects (#35 items 14, 15, 16): what the build
will say, what the wheel will carry, flags that depend on the machine migrate ran on. Nothing
is compiled: each build here stops before its first compile, or prepares metadata only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.migrate_helpers import migrate_main as main
from tests.conftest import count
from tests.cuda_tools import SYSTEM_PATH, make_fake_toolkit
from tests.migrate_helpers import clean_env, project_with, unset_fixture_variables  # noqa: F401

# -- 14. a CUDA-only project against a CPU torch -----------------------------------------------

# flash-attention / apex-style: CUDAExtensions built unconditionally, kernels that use torch's
# CUDA API (no `torch.cuda.is_available()` branch, so migrate sees one shape).
CUDA_ONLY = """
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
setup(name="p", version="1.0", packages=["p"],
      ext_modules=[CUDAExtension("p._C", ["api.cpp", "k.cu"], extra_compile_args={
                       "cxx": ["-O3"], "nvcc": ["-O3", "--use_fast_math"]}),
                   CUDAExtension("p._fused", ["fused.cu"])],
      cmdclass={"build_ext": BuildExtension})
"""
CUDA_ONLY_FILES = {
    "api.cpp": "#include <torch/extension.h>\n",
    "k.cu": "#include <ATen/cuda/CUDAContext.h>\n__global__ void k(float* x) { x[0] = 1; }\n",
    "fused.cu": "#include <c10/cuda/CUDAStream.h>\n__global__ void f(float* x) { x[0] = 2; }\n",
}
SKIPPED = "every extension is skipped, so the wheel would hold none"


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pep517_torch", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("nvcc", ["fake nvcc 13.0", "no nvcc"])
def test_a_cuda_only_project_on_a_cpu_torch_is_said_by_migrate_doctor_and_the_build(
    tmp_path: Path, nvcc: str
) -> None:
    """Before: `migrate --write` exited 0 and doctor printed `ok`; the build then failed with
    "every extension is skipped". Now all three say the build's one line (exit 1)."""
    (tmp_path / "p").mkdir()
    project = project_with(tmp_path / "p", CUDA_ONLY, CUDA_ONLY_FILES)
    bin_dir = Path(sys.executable).parent
    env = clean_env(PATH=f"{bin_dir}:{SYSTEM_PATH}")
    env.pop("CUDA_HOME", None)
    if nvcc != "no nvcc":
        env["CUDA_HOME"] = str(make_fake_toolkit(tmp_path / "cuda"))
    migrated = _cli(["migrate", "--write"], project, env)
    assert migrated.returncode == 1, migrated.stderr
    [warning] = [line for line in migrated.stderr.splitlines() if line.startswith("warning:")]
    assert SKIPPED in warning
    header = "".join(line.removeprefix("#").replace(" ", "") for line in
                     (project / "pyproject.toml").read_text().splitlines() if line.startswith("#"))
    assert warning.split("fails: ", 1)[1].replace(" ", "") in header

    doctor = _cli(["doctor", str(project)], tmp_path, env)
    [line] = [line for line in doctor.stdout.splitlines() if " project p 1.0" in line]
    assert doctor.returncode == 1 and line.startswith("fail "), doctor.stdout
    build = _cli(["wheel", str(project), "-o", str(tmp_path / "dist")], tmp_path, env)
    assert build.returncode != 0 and not (tmp_path / "dist").exists()
    [error] = [line for line in build.stderr.splitlines() if SKIPPED in line]
    # the same words everywhere: the build's error, from the same function
    said = error.removeprefix("pep517_torch: error: ")
    assert warning.endswith(said), (warning, said)
    assert line.endswith(f"a build here fails: {said}"), line
    assert not (project / "build").exists()  # nothing compiled, no build folder
    count("CUDA-only setup.py files migrated and doctored against a CPU torch")


# -- 16. what the wheel carries: the torch requirement, the license ----------------------------

def _metadata(project: Path) -> tuple[str, list[str]]:
    """METADATA as a build prepares it (the wheel's), and the warnings the build printed."""
    import warnings

    from pep517_torch.backend import pipeline

    out = project.parent / f"meta-{project.name}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        name = pipeline.prepare_metadata(project, out, None)
    return (out / name / "METADATA").read_text(), [str(w.message) for w in caught]


def _header_requires(text: str) -> str:
    header = " ".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    return header.split("the wheel requires ", 1)[1].split("; an extension", 1)[0]


STATIC = """
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
setup(name="p", version="1.0", packages=["p"], install_requires=["numpy"],
      ext_modules=[CppExtension("p._C", ["a.cpp"])], cmdclass={"build_ext": BuildExtension})
"""


@pytest.mark.parametrize("dependencies", [
    ["torch>=2.0.0", "numpy"],  # a torch line the pin narrows
    ["numpy>=1.20"],  # none: kept static, the build refused to write any
    ["torch>=2.0.0; python_version >= '3.8'", "typing-extensions"],  # a marker
])
def test_the_header_says_the_torch_requirement_the_wheel_carries(
    tmp_path: Path, dependencies: list[str]
) -> None:
    """Before: an existing static `dependencies` stayed static, the header promised
    `torch<2.14,>=2.13` and the wheel carried `torch>=2.0.0` (or the build failed: a static
    list without torch). Now the list moves to `[tool.torch-ext] dependencies` (dynamic), the
    build adds the pin, and the header names what METADATA says."""
    import json

    project = project_with(tmp_path, STATIC)
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "1.0"\ndependencies = {json.dumps(dependencies)}\n'
        '\n[tool.black]\nline-length = 100\n')
    assert main([str(project), "--write"]) == 0
    text = (project / "pyproject.toml").read_text()
    metadata, _ = _metadata(project)
    requires = [line.split(": ", 1)[1] for line in metadata.splitlines()
                if line.startswith("Requires-Dist: torch")]
    assert requires and all("<2.14" in r for r in requires), metadata
    assert _header_requires(text) == ", ".join(requires), text
    assert "static dependencies moved to [tool.torch-ext] dependencies" in text
    assert "[tool.black]\nline-length = 100" in text  # the file's other tables stay
    others = {line.split(": ", 1)[1].split(";")[0].split(">")[0] for line in metadata.splitlines()
              if line.startswith("Requires-Dist:") and "torch" not in line}
    assert others == {d.split(";")[0].split(">")[0] for d in dependencies if "torch" not in d}
    count("static dependencies lists migrated, the header checked against METADATA")


APACHE_2 = ("\n                                 Apache License\n                           Version 2.0,"
            " January 2004\n                        http://www.apache.org/licenses/\n")
MIT = "MIT License\n\nCopyright (c) 2024 Someone\n\nPermission is hereby granted, free of charge\n"
LICENSED = """
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
setup(name="p", version="1.0", packages=["p"], classifiers=CLASSIFIERS,{files}
      ext_modules=[CppExtension("p._C", ["a.cpp"])], cmdclass={{"build_ext": BuildExtension}})
"""
OSI = "License :: OSI Approved :: "
# classifiers, files, setup() license_files -> the license expression (None: classifier kept)
LICENSE_CASES = [
    ([OSI + "MIT License"], {"LICENSE": MIT}, None, "MIT"),
    ([OSI + "Apache Software License"], {"LICENSE": APACHE_2}, None, "Apache-2.0"),
    ([OSI + "Apache Software License"], {"LICENSE.txt": MIT}, None, None),  # which Apache?
    ([OSI + "BSD License"], {"LICENSE": "BSD 3-Clause License\n"}, None, None),
    ([OSI + "BSD License"], {"LICENSE": "BSD\n", "NOTICE.md": "n\n"}, ["LICENSE", "NOTICE.md"],
     None),
    ([OSI + "MIT License", OSI + "Apache Software License"], {"LICENSE": APACHE_2}, None, None),
    ([OSI + "GNU General Public License v3 or later (GPLv3+)"], {"COPYING": "GPL\n"}, None,
     "GPL-3.0-or-later"),
    ([OSI + "GNU General Public License v3 (GPLv3)"], {"COPYING": "GPL\n"}, None, None),
    ([OSI + "MIT License"], {}, None, "MIT"),  # no license file at all
]


@pytest.mark.parametrize(("classifiers", "files", "license_files", "expression"), LICENSE_CASES)
def test_license_classifiers_become_an_expression_or_stay_without_a_warning(
    tmp_path: Path, classifiers: list[str], files: dict[str, str], license_files: list[str] | None,
    expression: str | None,
) -> None:
    """Before: `License ::` classifiers were kept next to `license-files`, so every build
    warned "'License ::' classifiers are deprecated for metadata >= 2.4". Now a classifier that
    states one license is the SPDX `license`; one that does not stays (without license-files:
    the build ships the same files) or, beside explicit license files, is dropped with a note."""
    setup_py = LICENSED.format(files=f" license_files={license_files!r}," if license_files else "")
    project = project_with(tmp_path, f"CLASSIFIERS = {classifiers!r}\n{setup_py}",
                           {**files})
    assert main([str(project), "--write"]) == 0
    text = (project / "pyproject.toml").read_text()
    metadata, warned = _metadata(project)
    assert not warned, warned
    lines = metadata.splitlines()
    assert [line for line in lines if line.startswith("License-Expression:")] == (
        [f"License-Expression: {expression}"] if expression else [])
    kept = [line for line in lines if line.startswith("Classifier: License ::")]
    shipped = sorted(line.split(": ")[1] for line in lines if line.startswith("License-File:"))
    assert shipped == sorted(files)  # every license file still ships
    if expression is None and license_files is None:
        assert kept == [f"Classifier: {c}" for c in classifiers]
        assert "kept: it names no single SPDX license" in " ".join(text.replace("#", "").split())
    else:
        assert kept == [], metadata
    count("setup.py License classifier shapes migrated and built without a warning")


def test_every_mapped_classifier_is_an_spdx_expression() -> None:
    from packaging.licenses import canonicalize_license_expression

    from pep517_torch.migrate.convert.license_classifiers import SPDX_OF_CLASSIFIER

    for classifier, spdx in SPDX_OF_CLASSIFIER.items():
        assert classifier.startswith("License :: ")
        assert str(canonicalize_license_expression(spdx)) == spdx, classifier
    count("License classifiers mapped to SPDX, each checked by packaging", len(SPDX_OF_CLASSIFIER))


def test_an_existing_static_license_classifier_is_settled_too(tmp_path: Path) -> None:
    """The existing [project] keeps its static classifiers; beside setup.py's license files
    they warned the same way."""
    project = project_with(tmp_path, LICENSED.format(files="").replace("CLASSIFIERS", "[]"),
                           {"LICENSE": MIT})
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "1.0"\nclassifiers = ["{OSI}MIT License"]\n')
    assert main([str(project), "--write"]) == 0
    metadata, warned = _metadata(project)
    assert not warned and "License-Expression: MIT" in metadata and "License ::" not in metadata


def test_a_migrated_project_builds_without_a_metadata_warning(tmp_path: Path) -> None:
    """Built once, as a user would (the CLI): nothing on stderr about the license."""
    project = project_with(tmp_path, f"CLASSIFIERS = {[OSI + 'MIT License']!r}\n"
                           + LICENSED.format(files=""), {
                               "LICENSE": MIT,
                               "a.cpp": "#include <Python.h>\nstatic PyModuleDef m = {"
                               "PyModuleDef_HEAD_INIT, \"_C\"};\nPyMODINIT_FUNC PyInit__C() {"
                               " return PyModule_Create(&m); }\n"})
    assert main([str(project), "--write"]) == 0
    env = clean_env()
    env.pop("PYTHONWARNINGS", None)
    built = _cli(["wheel", str(project), "-o", str(tmp_path / "dist")], tmp_path, env)
    assert built.returncode == 0, built.stderr
    assert "Warning" not in built.stdout + built.stderr and "deprecated" not in built.stderr
    import zipfile

    [wheel] = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
        assert "p-1.0.dist-info/licenses/LICENSE" in archive.namelist()
    assert "License-Expression: MIT" in text and "License ::" not in text


# -- 15. GPU architectures computed on the machine migrate runs on -----------------------------

GPU_HEAD = """import os, subprocess
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
def gencode(caps):
    return [f for c in caps for f in ("-gencode", f"arch=compute_{c},code=sm_{c}")]
"""
GPU_TAIL = """
setup(name="p", version="1.0", packages=["p"],
      ext_modules=[CUDAExtension("p._C", ["api.cpp", "k.cu"],
                                 extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", *FLAGS]})],
      cmdclass={"build_ext": BuildExtension})
"""
# How published setup.py files compute FLAGS; True: they follow the machine (left out).
GPU_SHAPES = {
    "get_device_capability, a fixed fallback": (True, """
try:
    major, minor = torch.cuda.get_device_capability()
    FLAGS = gencode([f"{major}{minor}"])
except Exception:
    FLAGS = gencode(["75", "80", "89"])"""),
    "only a CPU torch's AssertionError caught": (True, """
try:
    FLAGS = gencode(["%d%d" % torch.cuda.get_device_capability()])
except AssertionError:  # Torch not compiled with CUDA enabled
    FLAGS = gencode(["75", "80"])"""),
    "is_available() guards the capability": (True, """
if torch.cuda.is_available():
    FLAGS = gencode(["%d%d" % torch.cuda.get_device_capability(0)])
else:
    FLAGS = gencode(["80"])"""),
    "get_device_properties, -arch=sm_XY": (True, """
try:
    props = torch.cuda.get_device_properties(0)
    FLAGS = [f"-arch=sm_{props.major}{props.minor}"]
except (AssertionError, RuntimeError):
    FLAGS = ["-arch=sm_80"]"""),
    "nvidia-smi through subprocess": (True, """
try:
    out = subprocess.check_output(["nvidia-smi", "--query-gpu=compute_cap",
                                   "--format=csv,noheader"], text=True)
    FLAGS = gencode([out.split()[0].replace(".", "")])
except (OSError, subprocess.CalledProcessError):
    FLAGS = gencode(["75", "80", "89"])"""),
    "nvidia-smi through os.popen": (True, """
out = os.popen("nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null").read()
FLAGS = gencode([out.split()[0].replace(".", "")] if out.strip() else ["70", "75"])"""),
    "nvidia-smi in a shell pipeline": (True, """
done = subprocess.run("nvidia-smi --query-gpu=name,compute_cap --format=csv | tail -n 1",
                      shell=True, capture_output=True, text=True)
cap = done.stdout.strip().rpartition(", ")[2].replace(".", "")
FLAGS = gencode([cap] if cap.isdigit() else ["75"])"""),
    "$TORCH_CUDA_ARCH_LIST with a default": (True, """
arches = os.environ.get("TORCH_CUDA_ARCH_LIST", "7.5;8.0").replace(" ", ";").split(";")
FLAGS = gencode([a.replace(".", "").replace("+PTX", "") for a in arches if a])"""),
    "sets $TORCH_CUDA_ARCH_LIST from the GPU": (True, """
try:
    os.environ["TORCH_CUDA_ARCH_LIST"] = "%d.%d" % torch.cuda.get_device_capability()
except Exception:
    os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0"
FLAGS = []"""),
    "a fixed list, the GPU's name only printed": (False, """
try:
    print("building on", torch.cuda.get_device_name())
except Exception:
    pass
FLAGS = gencode(["80", "90"])"""),
    "$TORCH_CUDA_ARCH_LIST only printed": (False, """
print("TORCH_CUDA_ARCH_LIST is", os.environ.get("TORCH_CUDA_ARCH_LIST"))
FLAGS = gencode(["80", "90"])"""),
}
GPU_FILES = {"api.cpp": "", "k.cu": "__global__ void k(float* x) { x[0] = 1; }\n"}


def _arch_flags_in(document: dict[str, object]) -> list[str]:
    """Every nvcc option choosing GPU architectures anywhere in [tool.torch-ext]."""
    from pep517_torch.core.cuda.arch_flags import arch_options

    found: list[str] = []

    def walk(item: object) -> None:
        if isinstance(item, dict):
            for value in item.values():
                walk(value)
        elif isinstance(item, list):
            if all(isinstance(v, str) for v in item):
                found.extend(flag for _, flag in arch_options(item))
            for value in item:
                walk(value)

    walk(document["tool"]["torch-ext"])  # type: ignore[index]
    return found


@pytest.mark.parametrize("shape", list(GPU_SHAPES))
def test_arch_flags_that_follow_the_machine_are_left_to_the_arch_list_policy(
    tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: what setup.py computed on the machine migrate ran on (its fallback without a
    GPU) was written as fixed -gencode flags, so TORCH_CUDA_ARCH_LIST was ignored at build time
    and the wheel held no code for other GPUs. Now such flags are left out, with a note."""
    from pep517_torch.config.pyproject import tomllib
    from pep517_torch.migrate.command import migrate

    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    follows, code = GPU_SHAPES[shape]
    project = project_with(tmp_path, GPU_HEAD + code + GPU_TAIL, GPU_FILES)
    migration = migrate(project)
    assert migration.problems == [], migration.problems
    document = tomllib.loads(migration.text)
    flags = _arch_flags_in(document)
    words = " ".join(migration.text.replace("#", " ").split())
    if follows:
        assert flags == [], migration.text
        assert "cuda-arch-list" not in document["tool"]["torch-ext"], migration.text
        assert "arch-list policy chooses" in words, migration.text
    else:
        assert flags and all(("80" in f or "90" in f) for f in flags), migration.text
        assert "arch-list policy chooses" not in words, migration.text
    count("setup.py shapes computing GPU architectures migrated (fake GPUs, no GPU)")


def test_the_local_gpu_fixture_builds_for_the_arch_list_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fixtures/migrate/local_gpu: nvidia-smi, then torch, then a fixed 7.5/8.0/8.9. Before:
    its FORCE_CUDA override froze the fallback, so a build with TORCH_CUDA_ARCH_LIST=9.0 wrote
    sm_75/80/89 into build.ninja and said `TORCH_CUDA_ARCH_LIST (9.0) ignored`: no code for an
    H100 or H200. The build is planned (build.ninja written), nothing compiled."""
    import shutil

    from pep517_torch.backend import stages
    from pep517_torch.core import plan as core_plan
    from tests.migrate_helpers import FIXTURES

    project = tmp_path / "local_gpu"
    shutil.copytree(FIXTURES / "local_gpu", project)
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    assert main([str(project), "--write"]) == 0
    toolkit = make_fake_toolkit(tmp_path / "cuda")
    bin_dir = Path(sys.executable).parent
    for arch_list, wanted in (("9.0", ["sm_90"]), (None, ["sm_80", "sm_90", "sm_120"])):
        env = clean_env(CUDA_HOME=str(toolkit), PATH=f"{bin_dir}:{SYSTEM_PATH}", FORCE_CUDA="1")
        env.pop("TORCH_CUDA_ARCH_LIST", None)
        if arch_list:
            env["TORCH_CUDA_ARCH_LIST"] = arch_list
        loaded = stages.load(project, None, env)
        built = core_plan.prepare(list(loaded.project.extensions), loaded.project.options)
        ninja = built.ninja_file.read_text()
        assert "kernel.cu" in ninja
        for arch in wanted:
            assert f"code={arch}" in ninja, (arch, ninja)
        for frozen in ("sm_75", "sm_89"):
            assert f"code={frozen}" not in ninja
        assert not any("ignored" in note for note in built.notes), built.notes
        shutil.rmtree(built.build_dir)
    count("arch lists a migrated local-GPU project was planned with (set and default)", 2)

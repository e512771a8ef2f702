"""migrate: setup.py -> pyproject.toml, proven by building every fixture both ways.

Each good shape in fixtures/migrate is built the old way (setuptools + torch's BuildExtension,
as pip does for a setup.py project) and, after ``migrate --write`` and deleting setup.py, with
pep517_torch through ``pip wheel``; both wheels must ship the same modules under the same tag,
and the migrated one must import and compute. The builds run in parallel (tiny sources:
seconds each); everything else runs setup.py files intercepted, in-process.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pep517_torch.config import parse_settings
from pep517_torch.config.pyproject import tomllib
from pep517_torch.migrate.command import MigrateError, check_text, migrate
from tests.migrate_helpers import migrate_main as main
from pep517_torch.migrate.convert.pyproject_file import splice, split_blocks
from pep517_torch.migrate.convert.toml_writer import Table, render, value
from tests.commands import run
from tests.setup_py_builds import (
    COMPUTE, FIXTURE_VARIABLES, FIXTURES, GOOD, per_shape, wheel_contents,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _unset_fixture_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures' setup.py files read these; the expected output assumes them unset."""
    for name in FIXTURE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def without_probe_values(text: str) -> str:
    """The header says what a CUDA probe returned here, and the torch pin of the torch here;
    the tables do not depend on them."""
    text = re.sub(r"\((True|False|[0-9]+|'[^']*'|None) here\)", "(... here)", text)
    return re.sub(r"with torch \S+, the(\s#)? wheel requires torch\S+;", "(pin);", text)


def flat(text: str) -> str:
    """Comments unwrapped: each paragraph on one line."""
    return text.replace("\n#   ", " ").replace("\n# ", " ")


def migrated_text(setup_py: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main([str(setup_py)]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


# -- printing: every good shape converts to tables the config parser accepts --------------


@pytest.mark.parametrize("shape", GOOD)
def test_migrate_prints_tables_that_parse(shape: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = migrated_text(FIXTURES / shape / "setup.py", capsys)
    document = tomllib.loads(text)
    assert document["build-system"] == {"requires": ["pep517_torch", "torch"],
                                        "build-backend": "pep517_torch"}
    parse_settings(document)
    assert migrate(FIXTURES / shape).problems == []  # commented suggestions switched on too
    assert not (FIXTURES / shape / "pyproject.toml").exists()


def test_one_extension_keys(capsys: pytest.CaptureFixture[str]) -> None:
    document = tomllib.loads(migrated_text(FIXTURES / "one_ext" / "setup.py", capsys))
    assert document["project"]["authors"] == [{"name": "Ada Example", "email": "ada@example.org"}]
    assert document["project"]["scripts"] == {"tinyop-check": "tinyop:main"}
    assert document["project"]["optional-dependencies"] == {"test": ["pytest"]}
    (extension,) = document["tool"]["torch-ext"]["extension"]
    assert extension == {
        "name": "tinyop._C", "sources": ["csrc/tinyop.cpp"],
        "define-macros": {"TINYOP_FACTOR": "2", "TINYOP_FAST": True},
        "extra-cflags": ["-O2"], "openmp": True,  # -fopenmp left the flags and ldflags
    }


def test_nested_layout_paths_and_dynamic_version(capsys: pytest.CaptureFixture[str]) -> None:
    text = migrated_text(FIXTURES / "nested" / "setup.py", capsys)
    document = tomllib.loads(text)
    tool = document["tool"]["torch-ext"]
    assert tool["packages"] == ["nestpkg"] and tool["package-dir"] == "src"
    assert tool["py-modules"] == ["nest_compat"]
    assert tool["package-data"] == {"nestpkg": ["data/*.json"]}
    assert document["project"]["dynamic"] == ["version", "dependencies"]
    assert tool["version"] == {"file": "src/nestpkg/__init__.py"}
    assert document["project"]["readme"] == "README.md"
    first, second = tool["extension"]
    assert first["sources"] == ["csrc/core.cpp"]  # absolute in setup.py
    assert first["include-dirs"] == second["include-dirs"] == ["csrc/include"]
    assert second["sources"] == ["csrc/ops/module.cpp", "csrc/ops/times3.cpp"]  # kept explicit
    assert str(FIXTURES) not in text


def test_cuda_choice_becomes_cuda_table_and_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    text = migrated_text(FIXTURES / "cuda_choice" / "setup.py", capsys)
    tool = tomllib.loads(text)["tool"]["torch-ext"]
    (extension,) = tool["extension"]
    assert extension["sources"] == ["csrc/ops.cpp"]  # the CPU branch, chosen on every machine
    assert extension["cuda"] == {
        "sources": ["csrc/ops_cuda.cu"], "define-macros": {"WITH_CUDA": True},
        "extra-cuda-cflags": ["-O2", "--use_fast_math"],
    }
    force, debug = tool["overrides"]
    assert force == {"if": {"env": {"FORCE_CUDA": "1"}}, "cuda": True}
    assert debug == {"if": {"env": {"CUDACHOICE_DEBUG": True}},
                     "extension": {"cudachoice._C": {"extra-cflags": ["-O0", "-g"]}}}
    assert "torch.cuda.is_available() (... here)" in without_probe_values(text)  # pointed out
    assert "$FORCE_CUDA: unset here" in text


def test_op_library_and_limited_api(capsys: pytest.CaptureFixture[str]) -> None:
    text = migrated_text(FIXTURES / "op_library" / "setup.py", capsys)
    (extension,) = tomllib.loads(text)["tool"]["torch-ext"]["extension"]
    assert extension["python-abi-suffix"] is False and "kind" not in extension
    assert 'say kind = "library"' in flat(text)
    (limited,) = tomllib.loads(migrated_text(FIXTURES / "limited_api" / "setup.py", capsys))[
        "tool"]["torch-ext"]["extension"]
    assert limited["py-limited-api"] == "cp310" and "define-macros" not in limited


def test_docs_example_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    docs = (ROOT / "docs" / "migrate.md").read_text()
    example = docs.rpartition("```toml\n")[2].partition("```")[0]
    actual = migrated_text(FIXTURES / "cuda_choice" / "setup.py", capsys)
    assert without_probe_values(example) == without_probe_values(actual)


def test_python_dash_m_entry_point(capsys: pytest.CaptureFixture[str]) -> None:
    setup_py = FIXTURES / "cuda_choice" / "setup.py"
    out = run(sys.executable, "-m", "pep517_torch.migrate", setup_py, cwd=ROOT,
              unset=FIXTURE_VARIABLES).stdout
    assert out == migrated_text(setup_py, capsys)


# -- the proof: both builds ship the same modules, and the migrated one computes -----------


@dataclass
class Proof:
    old_wheel: Path
    new_wheel: Path
    computed: str


def _build_new_and_compute(shape: str, source: Path, work: Path) -> tuple[Path, str]:
    out, site = work / "new_out", work / "site"
    run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
        "--no-cache-dir", "-q", "-w", out, source, unset=FIXTURE_VARIABLES)
    (wheel,) = out.glob("*.whl")
    run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "-q",
        "--target", site, wheel, unset=FIXTURE_VARIABLES)
    computed = run(sys.executable, "-c", COMPUTE[shape] + "\nprint('ok')", cwd=work,
                   env={"PYTHONPATH": str(site)}, unset=FIXTURE_VARIABLES).stdout
    return wheel, computed


@pytest.fixture(scope="session")
def proofs(
    tmp_path_factory: pytest.TempPathFactory, torch_built_wheels: dict[str, Path | BaseException]
) -> dict[str, Proof | BaseException]:
    root = tmp_path_factory.mktemp("migrate")
    for shape in GOOD:  # serially, in-process: migrate patches process-wide state
        shutil.copytree(FIXTURES / shape, root / shape / "new")
        assert main([str(root / shape / "new"), "--write"]) == 0
        (root / shape / "new" / "setup.py").unlink()

    def prove(shape: str) -> Proof:
        wheel, computed = _build_new_and_compute(shape, root / shape / "new", root / shape)
        old = torch_built_wheels[shape]
        if isinstance(old, BaseException):
            raise old
        return Proof(old, wheel, computed)

    return per_shape(prove)


@pytest.mark.compile
@pytest.mark.parametrize("shape", GOOD)
def test_migrated_wheel_matches_setup_py_wheel(
    shape: str, proofs: dict[str, Proof | BaseException]
) -> None:
    proof = proofs[shape]
    if isinstance(proof, BaseException):
        raise proof
    old, new = wheel_contents(proof.old_wheel), wheel_contents(proof.new_wheel)
    assert new == old, f"setuptools: {old}\npep517_torch: {new}"
    assert old[2], "no native module in the wheel"
    assert proof.computed.strip() == "ok"


# -- bad input: exit status 2 and a one-line message naming the file ----------------------


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    return captured.err


def test_setup_py_that_raises(capsys: pytest.CaptureFixture[str]) -> None:
    message = _error([str(FIXTURES / "raises" / "setup.py")], capsys)
    assert str(FIXTURES / "raises" / "setup.py") in message
    assert "RuntimeError: version file VERSION.txt is missing" in message
    assert '(line 7: raise RuntimeError("version file VERSION.txt is missing"))' in message


def test_setup_py_without_extensions(capsys: pytest.CaptureFixture[str]) -> None:
    message = _error([str(FIXTURES / "no_extensions")], capsys)
    assert "no_extensions/setup.py: setup() defines no CppExtension/CUDAExtension" in message


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (None, "setup.py: no such file"),
        ("from setuptools import setup\nif __name__ == 'x':\n    setup()\n",
         "setup() was never called"),
        ("def broken(:\n", "not valid Python: SyntaxError (line 1)"),
        ("import sys\nsys.exit(3)\n", "setup.py exited with status 3"),
    ],
)
def test_other_bad_input(source: str | None, expected: str, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    if source is not None:
        (tmp_path / "setup.py").write_text(source)
    message = _error([str(tmp_path)], capsys)
    assert f"{tmp_path / 'setup.py'}: " in message and expected in message


# -- the environment: what setup.py reads becomes overrides or suggestions ----------------

ENV_SETUP = """
import os
from setuptools import setup
from torch.utils.cpp_extension import CppExtension

environment = dict(os.environ)  # walking the environment is not reading every variable
flags = ["-march=" + os.environ.get("MY_ARCH", "native")]
if os.environ.get("MY_FAST"):
    flags.append("-ffast-math")
if os.getenv("MY_DEBUG", "0") == "1":
    flags.append("-g")
if "MY_EXTRA" in os.environ:
    extra = [CppExtension("pkg._extra", ["b.cpp"])]
else:
    extra = []
os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0;9.0"
setup(name="pkg", version="1.0", packages=["pkg"],
      ext_modules=[CppExtension("pkg._C", ["a.cpp"], extra_compile_args=flags)] + extra)
"""


def test_environment_reads_become_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MY_ARCH", "MY_DEBUG", "MY_EXTRA", "MY_FAST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MY_FAST", "yes")
    (tmp_path / "setup.py").write_text(ENV_SETUP)
    (tmp_path / "pkg").mkdir()
    for name in ("pkg/__init__.py", "a.cpp", "b.cpp"):
        (tmp_path / name).write_text("")
    migration = migrate(tmp_path / "setup.py")
    assert migration.problems == []
    tool = tomllib.loads(migration.text)["tool"]["torch-ext"]
    assert tool["cuda-arch-list"] == "8.0;9.0"  # set by setup.py itself
    main_ext, extra_ext = tool["extension"]
    assert main_ext["extra-cflags"] == ["-march=native", "-ffast-math"]  # MY_FAST=yes here
    assert extra_ext == {"name": "pkg._extra", "sources": ["b.cpp"],
                         "if": {"env": {"MY_EXTRA": True}}}
    overrides = tool["overrides"]
    assert {"if": {"env": {"MY_DEBUG": "1"}},
            "append": {"extension": {"pkg._C": {"extra-cflags": ["-g"]}}}} in overrides
    assert {"if": {"env": {"MY_FAST": False}},
            "extension": {"pkg._C": {"extra-cflags": ["-march=native"]}}} in overrides
    # MY_ARCH's value is copied into a flag: only a commented suggestion, with a placeholder
    assert "# if.env.MY_ARCH = true" in migration.text
    assert '-march=<value of MY_ARCH>' in migration.text
    assert "HOME" not in migration.text  # dict(os.environ) did not count as reads


# -- --write: create, update, refuse, force ------------------------------------------------

EXISTING = """\
# settings of this project

# how to build it
[build-system]
requires = ["setuptools>=64", "wheel", "pybind11>=2.10"]
build-backend = "setuptools.build_meta"

[tool.black]
line-length = 100
extend-exclude = '''
[not-a-table]
'''

[tool.pytest.ini_options]
markers = [
    ["not", "a header"],
]
"""


def test_write_keeps_other_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "one_ext"
    shutil.copytree(FIXTURES / "one_ext", project)
    (project / "pyproject.toml").write_text(EXISTING)
    assert main([str(project / "setup.py"), "--write"]) == 0
    text = (project / "pyproject.toml").read_text()
    document = tomllib.loads(text)
    assert document["build-system"]["requires"] == ["pep517_torch", "torch", "pybind11>=2.10"]
    assert document["tool"]["black"] == tomllib.loads(EXISTING)["tool"]["black"]
    assert document["tool"]["pytest"] == tomllib.loads(EXISTING)["tool"]["pytest"]
    assert text.startswith("# settings of this project\n") and "# how to build it" not in text
    parse_settings(document)
    # A second run finds [tool.torch-ext]: refused without --force, replaced with it
    assert main([str(project), "--write"]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert (project / "pyproject.toml").read_text() == text
    assert main([str(project), "--write", "--force"]) == 0
    assert tomllib.loads((project / "pyproject.toml").read_text()) == document


def test_write_merges_existing_project_table(tmp_path: Path) -> None:
    project = tmp_path / "one_ext"
    shutil.copytree(FIXTURES / "one_ext", project)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "tinyop"\ndescription = "from pyproject"\n'
        'dynamic = ["version", "dependencies", "entry-points"]\n'
    )
    assert main([str(project), "--write"]) == 0
    document = tomllib.loads((project / "pyproject.toml").read_text())
    table = document["project"]
    assert table["description"] == "from pyproject"  # static values of pyproject win
    assert table["version"] == "1.2.0" and "dependencies" not in table
    # the torch pin is pep517_torch's to add (PEP 621): setup.py's requirements move to the tool
    assert document["tool"]["torch-ext"]["dependencies"] == ["torch>=2.0"]
    assert table["dynamic"] == ["dependencies", "entry-points"]  # entry-points: for a human


# -- the TOML writer and the block splitter --------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.recursive(
    st.text() | st.booleans() | st.integers(-2**63, 2**63 - 1),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
))
def test_toml_values_round_trip(item: object) -> None:
    table = Table(("t",))
    table.add(("weird key", "x"), item, "a comment\nwith a newline")
    assert tomllib.loads(render([table]))["t"]["weird key"]["x"] == item
    assert tomllib.loads(f"v = {value(item)}")["v"] == item


def test_splice_finds_only_real_headers() -> None:
    blocks = split_blocks(EXISTING)
    assert [b.name for b in blocks] == [None, ("build-system",), ("tool", "black"),
                                        ("tool", "pytest", "ini_options")]
    assert blocks[1].lines[0] == "# how to build it"  # a comment goes with its header
    generated = '[build-system]\nrequires = ["x"]\n'
    assert "setuptools" not in splice(EXISTING, generated)


def test_check_text_reports_config_errors() -> None:
    bad = '[project]\nname = "x"\nversion = "1"\n[[tool.torch-ext.extension]]\nname = "x._C"\n'
    (problem,) = check_text(bad)
    assert "sources" in problem


def test_running_setup_py_leaves_the_process_as_it_was() -> None:
    import setuptools
    import torch
    import torch.utils.cpp_extension as cpp_extension

    def state() -> tuple[object, ...]:
        return (os.getcwd(), sys.argv[:], sys.path[:], dict(os.environ), setuptools.setup,
                torch.cuda.is_available, cpp_extension.CppExtension, type(cpp_extension),
                type(os.environ).__dict__.get("__getitem__"), subprocess.run,
                subprocess.check_output, subprocess.getstatusoutput, os.system, shutil.which,
                os.path.exists, os.path.isdir, Path.exists, Path.is_dir)

    before = state()
    migrate(FIXTURES / "cuda_choice")
    migrate(FIXTURES / "nvcc_probe")  # runs nvcc, which, isdir and reads $CUDA_HOME
    said = re.escape("setup.py raised RuntimeError: version file VERSION.txt is missing")
    with pytest.raises(MigrateError, match=said):
        migrate(FIXTURES / "raises")
    after = state()
    assert after == before
    assert not list((FIXTURES / "cuda_choice").rglob("__pycache__"))


# -- other setup.py shapes (nothing compiled) ------------------------------------------------


def _project(tmp_path: Path, setup_py: str, *files: str) -> Path:
    (tmp_path / "setup.py").write_text(setup_py)
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    return tmp_path


def test_cuda_only_project(tmp_path: Path) -> None:
    project = _project(tmp_path, """
import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
if not torch.cuda.is_available():
    raise RuntimeError("this project needs CUDA")
setup(name="gpuonly", version="1.0", ext_modules=[CUDAExtension("gpuonly", ["k.cu", "b.cpp"])])
""", "k.cu", "b.cpp")
    migration = migrate(project)
    tool = tomllib.loads(migration.text)["tool"]["torch-ext"]
    assert tool["cuda"] is True and migration.problems == []
    assert tool["extension"] == [{"name": "gpuonly", "sources": ["k.cu", "b.cpp"]}]
    assert "this project needs CUDA" in flat(migration.text)


def test_distutils_setup_generator_and_cuda_home(tmp_path: Path) -> None:
    project = _project(tmp_path, """
from distutils.core import setup
import pybind11
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension
exts = [CppExtension("pkg._cpu", ["cpu.cpp"], include_dirs=[pybind11.get_include()])]
if CUDA_HOME is not None:
    exts.append(CUDAExtension("pkg._gpu", ["gpu.cpp"], libraries=["cublas"]))
setup(name="pkg", version="1.0", packages=["pkg"], ext_modules=(e for e in exts),
      cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)})
""", "cpu.cpp", "gpu.cpp", "pkg/__init__.py")
    migration = migrate(project)
    document = tomllib.loads(migration.text)
    assert "pybind11" in document["build-system"]["requires"]
    _, gpu = document["tool"]["torch-ext"]["extension"]
    assert "is outside the project: it is specific to this machine" in flat(migration.text)
    assert gpu == {"name": "pkg._gpu", "sources": ["gpu.cpp"], "libraries": ["cublas"],
                   "with-cuda": True, "if": {"cuda": True}}


def test_a_setup_that_escapes_interception_builds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, "import setuptools.dist\n"
                       "setuptools.dist.Distribution({'name': 'x'}).run_commands()\n")
    assert "could not intercept tried to run commands" in _error([str(project)], capsys)
    assert sorted(p.name for p in project.iterdir()) == ["setup.py"]


def test_device_linking_is_converted(tmp_path: Path) -> None:
    """dlink / dlink_libraries / nvcc_dlink become dlink keys; in a CUDA-only branch, the
    `cuda` table's."""
    project = _project(tmp_path, """
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
if torch.cuda.is_available():
    ext = CUDAExtension("pkg._C", ["a.cpp", "k.cu"], dlink=True, dlink_libraries=["nvshmem"],
                        extra_compile_args={"cxx": [], "nvcc": ["-O2"], "nvcc_dlink": ["-dlto"]})
else:
    ext = CppExtension("pkg._C", ["a.cpp"])
setup(name="pkg", version="1.0", ext_modules=[ext], cmdclass={"build_ext": BuildExtension})
""", "a.cpp", "k.cu")
    migration = migrate(project)
    (extension,) = tomllib.loads(migration.text)["tool"]["torch-ext"]["extension"]
    assert extension["cuda"] == {
        "sources": ["k.cu"], "extra-cuda-cflags": ["-O2"], "dlink": True,
        "dlink-libraries": ["nvshmem"], "extra-dlink-flags": ["-dlto"],
    }
    assert "device linking" not in migration.text and migration.problems == []


def test_a_setup_py_on_pep517_torch_setuptools_migrates_alike(tmp_path: Path) -> None:
    """After the one-import switch, migrate still reads the setup.py (and our options)."""
    text = (FIXTURES / "op_library" / "setup.py").read_text()
    switched = text.replace("from torch.utils.cpp_extension import",
                            "from pep517_torch.setuptools import")
    switched = switched.replace("no_python_abi_suffix=True)",
                                'no_python_abi_suffix=True, torch_requirement="exact")')
    assert switched != text
    shutil.copytree(FIXTURES / "op_library", tmp_path / "op_library")
    (tmp_path / "op_library" / "setup.py").write_text(switched)
    ours = tomllib.loads(migrate(tmp_path / "op_library").text)["tool"]["torch-ext"]
    theirs = tomllib.loads(migrate(FIXTURES / "op_library").text)["tool"]["torch-ext"]
    assert ours.pop("torch-requirement") == "exact" and ours == theirs

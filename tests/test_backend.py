"""The PEP 517 hooks called directly, as a frontend calls them: in the project directory.

fixtures/multi (three extensions and package data) is built once per module through
`build_wheel`; its metadata, its single build.ninja and its incremental rebuilds are checked
on that build. fixtures/broken/<case> each fail with a ConfigError naming the key path,
through the hook and once through pip.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pep517_torch as backend
from pep517_torch.errors import BuildError, ConfigError, Pep517TorchError
from tests.commands import run_python
from tests.conftest import FIXTURES

pytestmark = pytest.mark.compile

HOOKS = (
    "build_wheel", "build_sdist", "build_editable",
    "get_requires_for_build_wheel", "get_requires_for_build_sdist",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_wheel", "prepare_metadata_for_build_editable",
)
MULTI_EXTENSIONS = ("multiops._C", "multiops.sub._info", "_multiops_native")
MULTI_OBJECTS = 4  # module.cpp, ops.cpp, info.cpp twice
BROKEN = {  # case -> (key path, words of the message)
    "unknown_key": ("tool.torch-ext.extension[0].extra-cxxflags", "did you mean 'extra-cflags'"),
    "wrong_type": ("tool.torch-ext.extension[0].openmp", 'expected a boolean, got string "yes"'),
    "empty_sources": ("tool.torch-ext.extension[0].sources", "must have at least 1 entry"),
    "glob_matches_nothing": ("tool.torch-ext.extension[0].sources[0]",
                             "'csrc/*.cc' matches no file"),
    "source_outside_root": ("tool.torch-ext.extension[0].sources[0]",
                            "points outside the project root"),
    "duplicate_extension": ("tool.torch-ext.extension[1].name", "'brk._C' is already used"),
    "bad_module_name": ("tool.torch-ext.extension[0].name", "is not a valid module name"),
    "malformed_toml": (None, "pyproject.toml: invalid TOML"),
    "missing_project_name": ("project", "missing required key 'name'"),
    "unknown_condition": ("tool.torch-ext.overrides[0].if.gpu", "unknown key 'gpu'"),
    "cuda_table_without_cuda": ("tool.torch-ext.extension[0].cuda", "with-cuda = false"),
}


@contextlib.contextmanager
def in_directory(path: Path):  # type: ignore[no-untyped-def]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(path)
        yield


def call_hook(project: Path, hook: Callable[..., Any], *args: Any) -> tuple[Any, str]:
    """Run a hook in ``project`` (as frontends do) and return its result and what it printed.

    A hook reports our errors by printing them and exiting 1; the error it exits from is
    re-raised here so that tests can inspect it."""
    output = io.StringIO()
    with in_directory(project), contextlib.redirect_stdout(output):
        try:
            result = hook(*args)
        except SystemExit as exit_:
            assert exit_.code == 1 and isinstance(exit_.__cause__, Pep517TorchError), exit_
            raise exit_.__cause__ from None
    return result, output.getvalue()


def objects(project: Path) -> list[Path]:
    return sorted(project.rglob("*.o"))


def copy_fixture(name: str, target: Path) -> Path:
    destination = target / Path(name).name
    shutil.copytree(FIXTURES / name, destination, ignore=shutil.ignore_patterns("build", "dist"))
    return destination


def compiled(log: str) -> int:
    found = re.findall(r"extensions?: (\d+) compiled", log)
    assert len(found) == 1, log
    return int(found[0])


# --------------------------------------------------------------------------- hooks


def test_every_hook_exists() -> None:
    for name in HOOKS:
        assert callable(getattr(backend, name)), name
    assert set(HOOKS) <= set(dir(backend))
    for name in HOOKS:
        if name.startswith("get_requires"):
            requires = getattr(backend, name)(None)
            assert isinstance(requires, list) and all(isinstance(r, str) for r in requires)


def test_the_backend_never_imports_torch(tmp_path: Path) -> None:
    project = copy_fixture("multi", tmp_path)
    code = f"""
import sys
import pep517_torch
assert "torch" not in sys.modules, "import"
for hook in ("wheel", "sdist", "editable"):
    getattr(pep517_torch, "get_requires_for_build_" + hook)(None)
assert "torch" not in sys.modules, "get_requires"
name = pep517_torch.prepare_metadata_for_build_wheel({str(tmp_path / "md")!r})
assert "torch" not in sys.modules, "prepare_metadata"
pep517_torch.prepare_metadata_for_build_editable({str(tmp_path / "md2")!r})
assert "torch" not in sys.modules, "prepare_metadata_for_build_editable"
print(name)
"""
    result = run_python(code, cwd=project)
    assert result.stdout.strip() == "multiops-0.5.0.dist-info"
    assert objects(project) == []


# --------------------------------------------------------------------------- fixtures/multi


@dataclass
class MultiBuild:
    project: Path
    metadata_dir: Path
    dist_info: str
    objects_after_metadata: list[Path]
    wheel: Path
    log: str


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory) -> MultiBuild:
    tmp = tmp_path_factory.mktemp("multi")
    project = copy_fixture("multi", tmp)
    metadata_dir = tmp / "metadata"
    metadata_dir.mkdir()
    dist_info, _ = call_hook(project, backend.prepare_metadata_for_build_wheel, str(metadata_dir))
    before = objects(project)
    out = tmp / "out"
    name, log = call_hook(project, backend.build_wheel, str(out))
    return MultiBuild(project, metadata_dir, dist_info, before, out / name, log)


def build_dir(project: Path) -> Path:
    (ninja,) = project.glob("build/*/build.ninja")
    return ninja.parent


def test_prepare_metadata_compiles_nothing_and_matches_the_wheel(multi: MultiBuild) -> None:
    assert multi.dist_info == "multiops-0.5.0.dist-info"
    assert multi.objects_after_metadata == []
    prepared = (multi.metadata_dir / multi.dist_info / "METADATA").read_bytes()
    with zipfile.ZipFile(multi.wheel) as zf:
        assert zf.read(f"{multi.dist_info}/METADATA") == prepared
    text = prepared.decode()
    assert "Requires-Dist: numpy>=1.20" in text and "Requires-Dist: torch<2.14,>=2.13" in text


def test_multi_wheel_installs_and_computes(multi: MultiBuild, tmp_path: Path) -> None:
    assert re.fullmatch(r"multiops-0\.5\.0-cp311-cp311-manylinux_2_\d+_x86_64\.whl", multi.wheel.name)
    with zipfile.ZipFile(multi.wheel) as zf:
        members = set(zf.namelist())
    data = {"multiops/data/defaults.json", "multiops/py.typed"}
    assert data | {"multiops/sub/__init__.py"} <= members
    assert sum(m.endswith(".so") for m in members) == 3
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                    "--target", site, multi.wheel], check=True, capture_output=True)
    result = run_python("import multiops; multiops.main()", env={"PYTHONPATH": str(site)}, cwd=site)
    assert result.stdout.strip() == "[1.0, 3.0, 5.0] [2, 3]"  # 2x+1 with defaults.json, values
    script = site / "bin" / "multiops-info"
    assert script.exists()


def test_one_build_ninja_for_every_extension(multi: MultiBuild) -> None:
    directory = build_dir(multi.project)
    assert list(multi.project.rglob("build.ninja")) == [directory / "build.ninja"]
    ninja = (directory / "build.ninja").read_text()
    links = re.findall(r"^build (\S+): link ", ninja, re.M)
    assert len(links) == len(MULTI_EXTENSIONS)
    for name in MULTI_EXTENSIONS:
        assert any(link.startswith("out/" + name.replace(".", "/")) for link in links), name
    assert compiled(multi.log) == MULTI_OBJECTS and "3 linked" in multi.log


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_fixture_names_the_key(case: str, tmp_path: Path) -> None:
    key, words = BROKEN[case]
    project = FIXTURES / "broken" / case
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=re.escape(words)) as caught:
        call_hook(project, backend.build_wheel, str(out))
    message = str(caught.value)
    assert caught.value.key == key
    if key is not None:
        assert message.startswith(f"{key}: ")
    else:
        assert re.search(r"at line \d+", message)
    assert not out.exists()
    assert not (project / "build").exists()


def test_broken_fixtures_are_all_listed() -> None:
    assert {p.name for p in (FIXTURES / "broken").iterdir() if p.is_dir()} == set(BROKEN)
    for case, (key, _) in BROKEN.items():
        first = (FIXTURES / "broken" / case / "pyproject.toml").read_text().splitlines()[0]
        assert first.startswith("# Error: ") and (key is None or key in first), case


def test_broken_fixture_through_pip(tmp_path: Path) -> None:
    project = shutil.copytree(FIXTURES / "broken" / "unknown_key", tmp_path / "unknown_key")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
         "-w", out, project],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert "tool.torch-ext.extension[0].extra-cxxflags" in result.stdout + result.stderr
    assert not out.exists() or list(out.iterdir()) == []


def test_unknown_config_setting_is_an_error_naming_it(tmp_path: Path) -> None:
    project = copy_fixture("multi", tmp_path)
    with pytest.raises(ConfigError, match="unknown config setting 'build_typ'") as caught:
        call_hook(project, backend.build_wheel, str(tmp_path / "out"), {"build_typ": "debug"})
    assert caught.value.key == "build_typ"
    assert "did you mean 'build-type'" in str(caught.value)
    with pytest.raises(ConfigError, match="unknown config setting 'nope'") as caught:
        call_hook(project, backend.prepare_metadata_for_build_wheel, str(tmp_path), {"nope": "1"})
    assert caught.value.key == "nope"
    assert objects(project) == [] and not (tmp_path / "out").exists()


def test_failed_compile_leaves_no_wheel(tmp_path: Path) -> None:
    project = copy_fixture("shapes/pkgdir", tmp_path)  # three small modules, one source broken
    extra = project / "native" / "extra.cpp"
    extra.write_text(extra.read_text().replace("return 7;", "return undeclared_name;"))
    out = tmp_path / "out"
    out.mkdir()  # a frontend's output directory exists before the hook runs
    said = re.escape("build: compiling native/extra.cpp failed")
    with pytest.raises(BuildError, match=said) as caught:
        call_hook(project, backend.build_wheel, str(out))
    assert "native/extra.cpp" in (caught.value.first_error or "")
    assert "undeclared_name" in caught.value.output
    assert list(out.iterdir()) == []


def test_sdist_and_editable_hooks_write_what_they_return(multi: MultiBuild, tmp_path: Path) -> None:
    name, _ = call_hook(multi.project, backend.build_sdist, str(tmp_path / "sdist"))
    assert name == "multiops-0.5.0.tar.gz" and (tmp_path / "sdist" / name).is_file()
    name, log = call_hook(multi.project, backend.build_editable, str(tmp_path / "editable"))
    assert name == "multiops-0.5.0-cp311-cp311-linux_x86_64.whl"
    assert (tmp_path / "editable" / name).is_file()
    assert compiled(log) == 0  # the wheel's build directory serves the editable install too
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert os.path.islink(multi.project / "multiops" / f"_C{suffix}")  # linked into the tree


# Last in the file: it edits the shared fixtures/multi build.
def test_rebuilds_are_incremental(multi: MultiBuild, tmp_path: Path) -> None:
    """Runs last on the shared build: it edits the project."""
    project = multi.project
    ninja_log = build_dir(project) / ".ninja_log"

    def rebuild(*settings: str) -> tuple[str, list[str]]:
        known = len(ninja_log.read_text().splitlines())
        config = dict(s.split("=", 1) for s in settings) or None
        _, log = call_hook(project, backend.build_wheel, str(tmp_path / "out"), config)
        rebuilt = [line.split("\t")[3] for line in ninja_log.read_text().splitlines()[known:]]
        return log, [r for r in rebuilt if r.endswith(".o")]

    log, rebuilt = rebuild()
    assert compiled(log) == 0 and rebuilt == []

    module = project / "csrc" / "module.cpp"
    module.write_text(module.read_text().replace("multiops native ops", "multiops ops"))
    log, rebuilt = rebuild()
    assert compiled(log) == 1 and rebuilt == ["obj/multiops._C/csrc/module.cpp.o"]

    log, rebuilt = rebuild("strip=true")  # a link flag: no object changes
    assert compiled(log) == 0 and rebuilt == [] and "3 linked" in log

    log, rebuilt = rebuild("build-type=debug")  # every object's flags change
    assert compiled(log) == MULTI_OBJECTS and len(set(rebuilt)) == MULTI_OBJECTS
    assert "-O0" in (build_dir(project) / "build.ninja").read_text()

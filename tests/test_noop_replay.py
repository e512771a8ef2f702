"""A no-op `prepare_metadata_for_build_wheel` / `build_wheel` replays the last result (noop_cache.py)
only while nothing it was made from changed.

Each hook runs in a fresh interpreter, as pip runs it. A replay is seen from the outside: the
config layer was never imported, and the wheel's bytes are the last build's. Then, for each
kind of input, one change: the next build must be a real one (the config layer imported), and
its wheel must carry the change where a wheel can show it. tests/tiny_project.py's module
compiles in about a second.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pep517_torch.core.lock import build_lock
from tests.commands import run
from tests.conftest import count
from tests.tiny_project import set_value, wheel_value, write_project

pytestmark = pytest.mark.compile

NAME = "replayed"
UNSET = ("SOURCE_DATE_EPOCH", "PEP517_TORCH_NO_REPLAY")
HOOK = r"""
import json, sys
import pep517_torch.buildapi as api
hook, out, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if hook == "metadata":
    name = api.prepare_metadata_for_build_wheel(out, settings)
elif hook == "editable":
    name = api.build_editable(out, settings)
else:
    name = api.build_wheel(out, settings)
print(json.dumps({"name": name, "config": any(m.startswith("pep517_torch.config") for m in sys.modules)}))
"""


@dataclass
class Run:
    name: str
    replayed: bool  # no module of the config layer was imported
    output: str
    out: Path

    @property
    def path(self) -> Path:
        return self.out / self.name


@dataclass
class Build:
    metadata: Run
    wheel: Run

    @property
    def replayed(self) -> bool:
        return self.metadata.replayed and self.wheel.replayed


class Project:
    """The tiny project, its environment (changes to this process's) and settings, and a
    counter for output folders."""

    def __init__(self, root: Path, outputs: Path) -> None:
        self.root, self.outputs = root, outputs
        self.env = {"PATH": f"{outputs / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        self.settings: dict[str, str] | None = None
        self.runs = 0
        (outputs / "bin").mkdir(parents=True)  # on PATH from the start: a compiler may appear

    def run_hook(self, hook: str, out: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(sys.executable, "-c", HOOK, hook, out, json.dumps(self.settings),
                   cwd=self.root, env=self.env, unset=UNSET, check=check, timeout=600)

    def hook(self, hook: str) -> Run:
        self.runs += 1
        out = self.outputs / f"{self.runs}-{hook}"
        result = self.run_hook(hook, out)
        found = json.loads(result.stdout.strip().splitlines()[-1])
        return Run(found["name"], not found["config"], result.stdout + result.stderr, out)

    def build(self) -> Build:
        return Build(self.hook("metadata"), self.hook("wheel"))

    def settled(self) -> Build:
        """Build until both hooks replay: a build whose inputs changed while it ran (or just
        before: their ctime is that close) records nothing, the next one does."""
        for _ in range(3):
            build = self.build()
            if build.replayed:
                return build
        raise AssertionError(f"no replay after three builds:\n{build.wheel.output}")


def wheel_member(wheel: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(suffix)]
        return archive.read(name)


def value_of(project: Project, wheel: Path) -> int:
    project.runs += 1
    return wheel_value(wheel, project.outputs / f"unpacked-{project.runs}", NAME)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = write_project(tmp_path / "proj", NAME)
    (root / "csrc" / "value.cpp").write_text(
        "#if __has_include(<offset.h>)\n#include <offset.h>\n#endif\n"
        "#ifndef OFFSET\n#define OFFSET 0\n#endif\nint value() { return OFFSET; }\n"
    )
    with (root / "pyproject.toml").open("a") as file:
        file.write('\n[[tool.torch-ext.overrides]]\nif.env.REPLAY_OFFSET = "5"\n'
                   'append.extension."*" = { define-macros = { OFFSET = 5 } }\n')
    return Project(root, tmp_path / "out")


def test_a_noop_replays_the_last_result_without_the_config_layer(project: Project) -> None:
    settled = project.settled()
    again = project.build()
    assert again.replayed
    assert again.wheel.path.read_bytes() == settled.wheel.path.read_bytes()
    assert again.wheel.name == settled.wheel.name
    assert "nothing changed since the last build" in again.wheel.output
    assert f"wrote {again.wheel.path}" in again.wheel.output
    # the metadata replayed is the wheel's
    prepared = (again.metadata.path / "METADATA").read_bytes()
    assert prepared == wheel_member(again.wheel.path, ".dist-info/METADATA")
    assert value_of(project, again.wheel.path) == 0


def _edit_shipped_python(project: Project) -> Callable[[Path], None] | None:
    (project.root / NAME / "__init__.py").write_text("from ._C import value\nEDITED = 1\n")
    return lambda wheel: (
        None if b"EDITED = 1" in wheel_member(wheel, f"{NAME}/__init__.py") else pytest.fail("stale")
    )


def _add_package_file(project: Project) -> Callable[[Path], None] | None:
    (project.root / NAME / "extra.py").write_text("X = 1\n")
    return lambda wheel: None if wheel_member(wheel, f"{NAME}/extra.py") == b"X = 1\n" else pytest.fail("stale")


def _touch_source(project: Project) -> Callable[[Path], None] | None:
    source = project.root / "csrc" / "value.cpp"
    os.utime(source, ns=(time.time_ns(), time.time_ns()))
    return None


def _edit_source(project: Project) -> Callable[[Path], None] | None:
    set_value(project.root, 7)
    return lambda wheel: None if value_of(project, wheel) == 7 else pytest.fail("stale")


def _change_pyproject(project: Project) -> Callable[[Path], None] | None:
    path = project.root / "pyproject.toml"
    path.write_text(path.read_text().replace('version = "1.0"', 'version = "1.1"'))
    return lambda wheel: None if "-1.1-" in wheel.name else pytest.fail("stale")


def _set_condition_variable(project: Project) -> Callable[[Path], None] | None:
    project.env["REPLAY_OFFSET"] = "5"  # read by an `if.env` condition only
    return lambda wheel: None if value_of(project, wheel) == 5 else pytest.fail("stale")


def _change_config_settings(project: Project) -> Callable[[Path], None] | None:
    project.settings = {"torch-requirement": "none"}
    return lambda wheel: (
        None if b"Requires-Dist: torch" not in wheel_member(wheel, ".dist-info/METADATA")
        else pytest.fail("stale")
    )


def _another_torch(project: Project) -> Callable[[Path], None] | None:
    """torch found elsewhere, with another version file: every entry of the real one linked,
    version.py copied and changed."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations
    real = Path(next(iter(spec.submodule_search_locations)))
    fake = project.outputs / "faketorch" / "torch"
    fake.mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name != "version.py":
            (fake / entry.name).symlink_to(entry)
    (fake / "version.py").write_text((real / "version.py").read_text() + "# another build\n")
    project.env["PYTHONPATH"] = str(fake.parent)
    return None


def _compile_variable(project: Project) -> Callable[[Path], None] | None:
    """CPLUS_INCLUDE_PATH names a folder with offset.h: no command line holds it."""
    folder = project.outputs / "include"
    folder.mkdir()
    (folder / "offset.h").write_text("#define OFFSET 3\n")
    project.env["CPLUS_INCLUDE_PATH"] = str(folder)
    return lambda wheel: None if value_of(project, wheel) == 3 else pytest.fail("stale")


def _compiler_on_path(project: Project) -> Callable[[Path], None] | None:
    """A c++ appears in a folder already on PATH (PATH itself is unchanged)."""
    real = shutil.which("c++")
    assert real is not None
    wrapper = project.outputs / "bin" / "c++"
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return None


def _source_date_epoch(project: Project) -> Callable[[Path], None] | None:
    project.env["SOURCE_DATE_EPOCH"] = "1700000000"

    def check(wheel: Path) -> None:
        with zipfile.ZipFile(wheel) as archive:
            assert archive.infolist()[0].date_time[:3] == (2023, 11, 14)

    return check


def _delete_artifact(project: Project) -> Callable[[Path], None] | None:
    (artifact,) = project.root.glob(f"build/*/out/{NAME}/_C*.so")
    artifact.unlink()
    return lambda wheel: None if value_of(project, wheel) == 0 else pytest.fail("no module")


def _remove_build_dir(project: Project) -> Callable[[Path], None] | None:
    shutil.rmtree(project.root / "build")
    return lambda wheel: None if value_of(project, wheel) == 0 else pytest.fail("no module")


CHANGES: dict[str, Callable[[Project], Callable[[Path], None] | None]] = {
    "a shipped .py edited": _edit_shipped_python,
    "a file added to a package": _add_package_file,
    "a source touched": _touch_source,
    "a source edited": _edit_source,
    "pyproject.toml changed": _change_pyproject,
    "a variable an if.env condition reads set": _set_condition_variable,
    "other config settings": _change_config_settings,
    "torch found elsewhere, another version file": _another_torch,
    "another compiler on PATH": _compiler_on_path,
    "CPLUS_INCLUDE_PATH set": _compile_variable,
    "SOURCE_DATE_EPOCH set": _source_date_epoch,
    "an artifact deleted": _delete_artifact,
    "the build directory removed": _remove_build_dir,
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_any_change_to_an_input_makes_the_next_build_real(project: Project, change: str) -> None:
    project.settled()
    check = CHANGES[change](project)
    after = project.build()
    assert not after.wheel.replayed, after.wheel.output
    if check is not None:
        check(after.wheel.path)
    assert (after.metadata.path / "METADATA").read_bytes() == wheel_member(
        after.wheel.path, ".dist-info/METADATA")
    count("inputs whose change made the next no-op build a real one")


def test_the_metadata_replays_only_while_the_readme_is_unchanged(project: Project) -> None:
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        'version = "1.0"', 'version = "1.0"\nreadme = "README.md"'))
    (project.root / "README.md").write_text("first\n")
    project.settled()
    (project.root / "README.md").write_text("second\n")
    after = project.hook("metadata")
    assert not after.replayed
    assert (after.path / "METADATA").read_bytes().endswith(b"second\n")


def test_a_folder_that_becomes_a_package_makes_the_next_build_real(project: Project) -> None:
    """Packages discovered (no `packages` list): a folder gaining __init__.py ships."""
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'packages = ["{NAME}"]\n', ""))
    (project.root / "later").mkdir()
    (project.root / "later" / "mod.py").write_text("Y = 2\n")
    first = project.settled()
    with zipfile.ZipFile(first.wheel.path) as archive:
        assert not any(n.startswith("later/") for n in archive.namelist())
    (project.root / "later" / "__init__.py").write_text("")
    after = project.build()
    assert not after.wheel.replayed
    assert wheel_member(after.wheel.path, "later/mod.py") == b"Y = 2\n"


def test_other_settings_have_their_own_record(project: Project) -> None:
    first = project.settled()
    project.settings = {"torch-requirement": "none"}
    project.settled()
    project.settings = None
    again = project.build()
    assert again.replayed
    assert again.wheel.path.read_bytes() == first.wheel.path.read_bytes()


def test_a_failed_build_leaves_no_record(project: Project, machine_cache: Path) -> None:
    project.settled()
    wheels = [path for path in (machine_cache / "last-builds").glob("wheel-*.json")
              if json.loads(path.read_text())["key"][1] == str(project.root)]
    assert len(wheels) == 1
    (project.root / "csrc" / "value.cpp").write_text("int value() { return }\n")
    result = project.run_hook("wheel", project.outputs / "x", check=False)
    assert result.returncode != 0
    assert "error" in result.stdout + result.stderr
    assert not any(path.exists() for path in wheels)


def test_an_editable_build_never_replays(project: Project) -> None:
    project.settled()
    assert not project.hook("editable").replayed
    assert not project.hook("editable").replayed


def test_a_replay_takes_no_lock_and_a_real_build_still_does(project: Project) -> None:
    """The replay only reads: it answers while another build holds the build directory. A
    real build (after an edit) waits for the holder, as always."""
    project.settled()
    (build_dir,) = (p.parent for p in project.root.glob("build/*/build.ninja"))
    with build_lock(build_dir, "a test holding the lock"):
        assert project.hook("wheel").replayed
        set_value(project.root, 3)
        env = {name: value for name, value in os.environ.items() if name not in UNSET}
        waiter = subprocess.Popen(
            [sys.executable, "-c", HOOK, "wheel", str(project.outputs / "w"), "null"],
            cwd=project.root, env={**env, **project.env}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )
        time.sleep(3)
        assert waiter.poll() is None, waiter.communicate()[0]  # waiting for the lock
    output, _ = waiter.communicate(timeout=600)
    assert waiter.returncode == 0, output
    assert "waiting for process" in output
    (wheel,) = (project.outputs / "w").glob("*.whl")
    assert value_of(project, wheel) == 3


def test_no_replay_when_asked(project: Project) -> None:
    project.settled()
    project.env["PEP517_TORCH_NO_REPLAY"] = "1"
    assert not project.hook("wheel").replayed


# -- issue 43: a record read back is untrusted input ---------------------------------------------


def _record(project: Project) -> Path:
    folder = Path(os.environ["PEP517_TORCH_CACHE_DIR"]) / "last-builds"
    for path in folder.glob("wheel-*.json"):
        if json.loads(path.read_text())["key"][1] == str(project.root):
            return path
    raise AssertionError("no record")


def _forge_name(record: dict, tmp_path: Path) -> None:
    record["output"]["wheel"] = "evil-9.9-py3-none-any.whl"


def _forge_kept(record: dict, tmp_path: Path) -> None:
    other = tmp_path / "other.whl"  # another file, its identity recorded as the kept wheel's
    other.write_bytes(b"not the wheel this build made")
    st = other.stat()
    record["output"].update(kept=str(other), kept_identity=[st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns])


def _forge_notes(record: dict, tmp_path: Path) -> None:
    record["notes"] = ["pep517_torch: \x1b[2J\x1b]0;owned\x07"]


@pytest.mark.parametrize("forge", [_forge_name, _forge_kept, _forge_notes],
                         ids=["a wheel name", "a kept wheel elsewhere", "escapes in a note"])
def test_a_forged_noop_record_replays_nothing_it_names(project: Project, tmp_path: Path,
                                                       forge: Callable[[dict, Path], None]) -> None:
    """What a record names (the wheel's file name, where the kept wheel lies) is checked as a
    build would make it: a forged one is named in one line and the hook builds; what it
    prints is shown escaped."""
    settled = project.settled()
    path = _record(project)
    record = json.loads(path.read_text())
    forge(record, tmp_path)
    path.write_text(json.dumps(record))
    again = project.hook("wheel")
    assert again.name == settled.wheel.name, again.output
    assert again.path.read_bytes() != b"not the wheel this build made"
    assert "\x1b" not in again.output and "evil" not in again.name, again.output
    if forge is not _forge_notes:
        assert not again.replayed and again.output.count(str(path)) == 1, again.output
    count("issue 43 item 2: a forged no-op record")


def test_a_build_that_lists_its_operators_still_replays(project: Project) -> None:
    """A shipped module naming torch.library makes every build list its operators in a child
    process; the child runs in the build's own environment, never a copy of the audited one
    (which counted every variable as read, and no op library ever replayed)."""
    (project.root / NAME / "ops.py").write_text("import torch.library  # registers nothing\n")
    first = project.build()
    assert "listing the operators" in first.wheel.output, first.wheel.output
    settled = project.settled()
    again = project.build()
    assert again.replayed
    assert again.wheel.path.read_bytes() == settled.wheel.path.read_bytes()

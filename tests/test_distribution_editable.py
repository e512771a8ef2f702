"""The editable hook: strict finder, torch check and ninja rebuild, run in fresh interpreters."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pep517_torch import shipped_runtime
from pep517_torch.distribution.editable import RebuildCommand, editable_members
from tests.machine_changes import Machine, cases, change

NINJA = shutil.which("ninja")
needs_ninja = pytest.mark.skipif(NINJA is None, reason="needs ninja on PATH")

# A "compiler" that copies its input, and fails with a diagnostic when the input says FAIL.
BUILD_NINJA = """\
rule copy
  command = if grep -q FAIL $in; then echo "input.txt:1: error: FAIL found" >&2; exit 1; fi; $
            cp $in $out
  description = copying input.txt
build out/data.txt: copy {input}
"""


class Project:
    """A source tree, its build directory and a site directory holding the editable install."""

    def __init__(self, base: Path) -> None:
        self.root = base / "proj"
        self.build = base / "build"
        self.site = base / "site"
        package = self.root / "src" / "myproj"
        (package / "sub").mkdir(parents=True)
        (package / "__init__.py").write_text(
            "import os\nwith open(os.path.join(os.path.dirname(__file__), 'data.txt')) as f:\n"
            "    VALUE = f.read().strip()\n"
        )
        (package / "sub" / "__init__.py").write_text("NAME = 'sub'\n")
        (self.root / "helper.py").write_text("HELP = 'me'\n")
        (self.root / "stray.py").write_text("raise SystemExit('stray must not be importable')\n")
        (self.root / "input.txt").write_text("one\n")
        self.build.mkdir()
        (self.build / "build.ninja").write_text(BUILD_NINJA.format(input=self.root / "input.txt"))
        self.site.mkdir()
        self.artifact = self.build / "out" / "data.txt"
        self.link = package / "data.txt"

    def install(
        self, *, torch_version: str | None = None, ninja: str | None = NINJA, rebuild: bool = True
    ) -> None:
        command = None
        if rebuild:
            subprocess.run([NINJA, "-C", self.build], check=True, capture_output=True)
            self.link.symlink_to(self.artifact)
            command = RebuildCommand(Path(ninja or "/nowhere/ninja"), self.build, ("out/data.txt",))
        members = editable_members(
            "MyProj",
            package_roots={
                "myproj": self.root / "src" / "myproj",
                "helper": self.root / "helper.py",
            },
            artifacts=[(self.artifact, self.link)] if rebuild else [],
            rebuild=command,
            torch_version=torch_version,
        )
        write_members(self.site, members)

    def install_torch_metadata(self, version: str) -> None:
        dist_info = self.site / f"torch-{version}.dist-info"
        dist_info.mkdir()
        metadata = f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
        (dist_info / "METADATA").write_text(metadata)

    def python(self, code: str, **env: str) -> subprocess.CompletedProcess[str]:
        # -S: only the stdlib and our site directory, so the real torch of this venv is not seen.
        script = f"import site; site.addsitedir({str(self.site)!r})\n{code}"
        return subprocess.run(
            [sys.executable, "-S", "-c", script],
            cwd=self.root.parent,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )


def write_members(site: Path, members: list[tuple[str, bytes]]) -> None:
    """Install an editable wheel's members into ``site`` as an installer would."""
    for name, data in members:
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)


def make_stale(project: Project) -> None:
    """Date the artifact back, so that the edit of input.txt is newer even on coarse clocks."""
    past = os.path.getmtime(project.root / "input.txt") - 10
    os.utime(project.artifact, (past, past))


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def test_members(project: Project) -> None:
    project.install(rebuild=False)
    pth = project.site / "_pep517_torch_editable_myproj.pth"
    assert pth.read_text() == "import _pep517_torch_editable_myproj\n"
    source = (project.site / "_pep517_torch_editable_myproj" / "__init__.py").read_text()
    assert "CONFIG = {" in source and "import pep517_torch" not in source
    compile(source, "hook", "exec")
    shipped = project.site / "_pep517_torch_editable_myproj" / "runtime"
    package = Path(shipped_runtime.__file__).parent
    assert sorted(p.name for p in shipped.iterdir()) == sorted(p.name for p in package.glob("*.py"))
    assert all((shipped / p.name).read_bytes() == p.read_bytes() for p in package.glob("*.py"))


@needs_ninja
def test_the_runtime_ships_with_the_hook_and_loads_only_to_rebuild(project: Project) -> None:
    """The hook runs without pep517_torch: it carries pep517_torch's runtime as modules of
    its own package, imported when the project is, to rebuild it (nothing more at
    interpreter start)."""
    project.install()
    (project.root / "input.txt").write_text("two\n")
    make_stale(project)
    show = ("print(sorted(m for m in sys.modules if m.startswith('_pep517_torch_editable_myproj')),"
            " 'pep517_torch' in sys.modules)\n")
    result = project.python(f"import sys\n{show}import myproj\n{show}")
    assert result.returncode == 0, result.stderr
    started, imported = result.stdout.splitlines()
    assert started == "['_pep517_torch_editable_myproj'] False"
    assert "'_pep517_torch_editable_myproj.runtime.ninja'" in imported and imported.endswith("] False")


def test_interpreter_start_with_the_hook_imports_no_json_or_re(project: Project) -> None:
    """The .pth runs at every interpreter start of the environment: its config is a Python
    literal, so json (re, enum, functools: ~10 ms) loads only when a rebuild needs it."""
    project.install()
    before = project.python("import sys; print(sorted({'json', 're', 'enum'} & set(sys.modules)))")
    assert before.returncode == 0, before.stderr
    assert before.stdout.strip() == "[]"
    after = project.python("import myproj, sys; print(myproj.VALUE)")
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "one"


def test_strict_finder_maps_only_the_projects_names(project: Project) -> None:
    project.install(rebuild=False)
    (project.root / "src" / "myproj" / "data.txt").write_text("plain\n")
    result = project.python(
        "import myproj, myproj.sub, helper\n"
        "print(myproj.VALUE, myproj.sub.NAME, helper.HELP)\n"
        "print(myproj.__file__)\n"
        "try:\n    import stray\nexcept ModuleNotFoundError:\n    print('no stray')\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "plain sub me",
        str(project.root / "src" / "myproj" / "__init__.py"),
        "no stray",
    ]
    assert result.stderr == ""


def test_quotes_in_paths_survive(tmp_path: Path) -> None:
    project = Project(tmp_path / "it's '''quoted'''")
    project.install(rebuild=False)
    (project.root / "src" / "myproj" / "data.txt").write_text("q\n")
    result = project.python("import myproj; print(myproj.VALUE)")
    assert (result.returncode, result.stdout) == (0, "q\n"), result.stderr


@pytest.mark.parametrize(("installed", "ok"), [("2.13.1", True), ("2.12.0", False), (None, False)])
def test_torch_version_check(project: Project, installed: str | None, ok: bool) -> None:
    project.install(torch_version="2.13.0+cpu", rebuild=False)
    (project.root / "src" / "myproj" / "data.txt").write_text("x\n")
    if installed is not None:
        project.install_torch_metadata(installed)
    result = project.python(
        "for attempt in range(2):\n"
        "    try:\n        import myproj\n        print('imported')\n"
        "    except ImportError as error:\n        print(error)\n"
    )
    assert result.returncode == 0, result.stderr
    if ok:
        assert result.stdout == "imported\nimported\n"
        return
    first, second = result.stdout.splitlines()
    assert first == second  # the failure repeats; it is not a one-time event
    assert "MyProj was built in editable mode against torch 2.13.0+cpu" in first
    assert ("torch 2.12.0 is installed" if installed else "torch is not installed") in first
    assert "pip install -e . --no-build-isolation" in first and "pip install torch==2.13.0" in first


@needs_ninja
def test_rebuild_on_import(project: Project) -> None:
    project.install()
    code = "import myproj; print(myproj.VALUE)"
    result = project.python(code)
    assert (result.returncode, result.stdout, result.stderr) == (0, "one\n", "")

    (project.root / "input.txt").write_text("two\n")
    make_stale(project)
    assert project.python(code, PEP517_TORCH_EDITABLE_REBUILD="0").stdout == "one\n"  # opted out
    result = project.python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "two\n"
    lines = result.stderr.splitlines()
    assert lines[:2] == ["pep517_torch: rebuilding MyProj (editable install)...",
                         "[1/1] copying input.txt..."]
    assert lines[2].startswith("[1/1] copying input.txt: done in ")
    log = project.build / "build.log"
    assert lines[3] == f"pep517_torch: rebuilt MyProj in {lines[3].split(' in ')[1].split()[0]} s (log: {log})"
    assert len(lines) == 4 and "[1/1] copying input.txt: done in " in log.read_text()

    result = project.python(code)
    assert (result.stdout, result.stderr) == ("two\n", "")
    assert "copying input.txt: done" in log.read_text()  # nothing to do: the last log stays


@needs_ninja
def test_failed_rebuild_raises_import_error_with_the_output(project: Project) -> None:
    project.install()
    (project.root / "input.txt").write_text("FAIL\n")
    make_stale(project)
    result = project.python("import myproj")
    assert result.returncode != 0
    assert "pep517_torch: rebuilding MyProj (editable install)..." in result.stderr
    log = project.build / "build.log"
    assert (f"ImportError: pep517_torch: rebuilding MyProj (editable install) failed"
            f" (full log: {log}); fix the error") in result.stderr
    assert "input.txt:1: error: FAIL found" in result.stderr
    assert "input.txt:1: error: FAIL found" in log.read_text()


@needs_ninja
def test_missing_ninja_warns_and_uses_the_existing_build(project: Project, tmp_path: Path) -> None:
    project.install(ninja="/nowhere/ninja")
    (project.root / "input.txt").write_text("two\n")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    result = project.python("import myproj, myproj.sub; print(myproj.VALUE)", PATH=str(empty))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "one\n"
    assert result.stderr.count("ninja not found") == 1


@needs_ninja
def test_missing_link_is_recreated(project: Project) -> None:
    project.install()
    project.link.unlink()
    result = project.python("import myproj; print(myproj.VALUE)")
    assert (result.returncode, result.stdout) == (0, "one\n"), result.stderr
    assert project.link.is_symlink() and project.link.resolve() == project.artifact


@needs_ninja
def test_import_after_fixing_a_failed_rebuild_retries(project: Project) -> None:
    project.install()
    (project.root / "input.txt").write_text("FAIL\n")
    make_stale(project)
    result = project.python(
        "from pathlib import Path\n"
        "try:\n    import myproj\nexcept ImportError:\n    print('failed')\n"
        f"Path({str(project.root / 'input.txt')!r}).write_text('fixed\\n')\n"
        "import myproj\nprint(myproj.VALUE)\n"
    )
    assert (result.returncode, result.stdout) == (0, "failed\nfixed\n"), result.stderr


def test_link_into_tree_replaces_a_link_and_refuses_a_real_file(tmp_path: Path) -> None:
    from pep517_torch.distribution.editable import link_into_tree
    from pep517_torch.errors import ConfigError

    built_1, built_2 = tmp_path / "b1.so", tmp_path / "b2.so"
    link = tmp_path / "pkg" / "lib" / "ops.so"  # an operator library's own folder is made
    link_into_tree(link, built_1)
    link_into_tree(link, built_2)
    assert os.readlink(link) == str(built_2)
    stale = tmp_path / "pkg" / "_C.so"
    stale.write_bytes(b"an in-place build")
    with pytest.raises(ConfigError, match="_C.so exists and is not a link to the built extension"):
        link_into_tree(stale, built_1)
    assert stale.read_bytes() == b"an in-place build"


def test_watched_folders_hold_sources_their_subfolders_and_parents(tmp_path: Path) -> None:
    from pep517_torch.distribution.editable import watched_folders

    root = tmp_path / "proj"
    for folder in ("src/pkg/csrc/kernels/deep", "src/pkg/csrc/.git", "src/pkg/csrc/build",
                   "src/pkg/csrc/__pycache__", "docs"):
        (root / folder).mkdir(parents=True)
    sources = [root / "src/pkg/csrc/a.cpp"]
    watched = watched_folders(root, sources, lambda path: path.name == "build")
    assert watched == [root, root / "src", root / "src/pkg", root / "src/pkg/csrc",
                       root / "src/pkg/csrc/kernels", root / "src/pkg/csrc/kernels/deep"]


@pytest.mark.parametrize("case", [*cases("compiler", "nvcc", "torch", "CPLUS_INCLUDE_PATH"), "pyproject.toml"])
def test_the_hook_names_what_makes_it_build_again(
        tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import hook asks the one why_stale (the runtime's build_inputs) of what the install
    watched and of the compile core's record in the build folder's ledger: each fact a compile
    depends on (nvcc included) and a compile variable, changed for real, and pyproject.toml
    edited, are named in the line the rebuild says first."""
    import time

    from pep517_torch.core import compile_record
    from pep517_torch.distribution import _editable_hook as hook
    from pep517_torch.shipped_runtime import build_inputs

    machine = Machine(tmp_path / "machine")
    root, build = tmp_path / "project", tmp_path / "project" / "build"
    build.mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\n")
    (build / "build.ninja").write_text("")
    compile_record.record(build, root, {}, [], started_ns=time.time_ns(), env=machine.env,
                          now=machine.facts())
    config = {"project": "MyProj", "root": str(root), "env": {}, "rebuild": {"build_dir": str(build)},
              "watched": build_inputs.stamp_files([root / "pyproject.toml"])}
    for name, value in machine.env.items():
        monkeypatch.setenv(name, value)
    assert hook._why_replan(config) is None
    if case == "pyproject.toml":
        (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
        words, how = "pyproject.toml changed", "plan"
    else:
        words, how = change(case, machine, monkeypatch), "everything"
    for name, value in machine.env.items():
        monkeypatch.setenv(name, value)
    reason, does = hook._why_replan(config)
    assert reason.startswith(words) and does == how, (reason, does)
    said: list[str] = []
    monkeypatch.setattr(hook, "_runtime", lambda module: _SayingRuntime(module, said))
    with pytest.raises(ImportError):  # no interpreter to run the re-plan: the line was said first
        hook._replan(config, {"python": str(tmp_path / "no-python"), "build_dir": str(build)}, reason, does)
    assert said and said[0].startswith(f"MyProj: {words}"), said


class _SayingRuntime:
    """A runtime module whose user_line.say is recorded."""

    def __init__(self, module: str, said: list[str]) -> None:
        import importlib

        self._module, self._said = importlib.import_module(f"pep517_torch.shipped_runtime.{module}"), said

    def __getattr__(self, name: str) -> object:
        if name == "say":
            return self._said.append
        return getattr(self._module, name)

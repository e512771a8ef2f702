"""Hostile paths behind every launcher, present and absent: ccache expands `$VAR` and `${VAR}`
in its settings (CCACHE_BASEDIR, CCACHE_STATSLOG), so a project whose path holds `$x` built
nothing once ccache was installed. And the summary line names the launcher in use, how it was
chosen and how to turn it off.

Tiny sources (Python.h only): each build is a second or two.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pep517_torch.shipped_runtime.environment import CCACHE_SLOPPINESS
from tests.commands import run, run_python
from tests.conftest import HOSTILE_NAME, count
from tests.servers import Distccd, distccd, free_port, tool
from tests.test_frontends import venv  # noqa: F401 (a fixture: a fresh venv seeing ours)
from tests.tiny_project import pyproject

pytestmark = pytest.mark.compile

LAUNCHERS = ("ccache", "sccache", "distcc")
VALUE = "it's $x ${y} $$z \"q\" #h"
SOURCE = textwrap.dedent(
    """
    #include <Python.h>
    static PyObject* greeting(PyObject*, PyObject*) { return PyUnicode_FromString(GREETING); }
    static PyMethodDef methods[] = {{"greeting", greeting, METH_NOARGS, nullptr}, {nullptr}};
    static PyModuleDef def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};
    PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&def); }
    """
)
OFF = "PEP517_TORCH_COMPILER_LAUNCHER=none turns it off"


def hostile_project(tmp_path: Path) -> Path:
    """A project under `$x`, `${y` and `$HOME` (ccache's syntax: an unset variable, an unclosed
    brace, a set one), with a source in a folder named like them too."""
    project = tmp_path / HOSTILE_NAME / "proj ${y $HOME ü"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "src $x").mkdir()
    (project / "src $x" / "m $z.cpp").write_text(SOURCE)
    macro = json.dumps('"' + VALUE.replace("\\", "\\\\").replace('"', '\\"') + '"')
    (project / "pyproject.toml").write_text(pyproject("hostile", textwrap.dedent(f"""\
        name = "pkg._C"
        sources = ["src $x/*.cpp"]
        define-macros = {{ GREETING = {macro} }}
        """), packages=["pkg"]))
    return project


def path_without(names: tuple[str, ...], scratch: Path) -> str:
    """PATH (the venv's bin first, as tests/servers.py finds tools) with ``names`` gone: each
    folder holding one of them is replaced by a folder of links to everything else in it."""
    folders = [str(Path(sys.executable).parent), *os.environ.get("PATH", "").split(os.pathsep)]
    out = []
    for index, folder in enumerate(dict.fromkeys(f for f in folders if f)):
        if not any(os.path.lexists(os.path.join(folder, name)) for name in names):
            out.append(folder)
            continue
        mirror = scratch / f"bin{index}"
        mirror.mkdir(parents=True)
        for entry in os.scandir(folder):
            if entry.name not in names:
                (mirror / entry.name).symlink_to(entry.path)
        out.append(str(mirror))
    return os.pathsep.join(out)


def build(project: Path, out: Path, env: dict[str, str], *settings: str) -> str:
    """``python -m pep517_torch wheel`` (every variable of ``env`` set, None ones unset); its
    summary line; the wheel imports and returns the macro's value unchanged."""
    result = run(sys.executable, "-m", "pep517_torch", "wheel", project, "-o", out, *settings,
                 env=env, cwd=out.parent, unset=("PEP517_TORCH_COMPILER_LAUNCHER",), check=False)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    [wheel] = out.glob("*.whl")
    site = out / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    greeting = run_python("import pkg._C as c; print(c.greeting())", env={"PYTHONPATH": str(site)})
    assert greeting.stdout.rstrip("\n") == VALUE
    [summary] = [line for line in said.splitlines() if " extension: " in line]
    return summary


@pytest.fixture
def ccache_env(tmp_path: Path) -> dict[str, str]:
    """A ccache of this test's own (its cache and statistics), so hits are this test's."""
    return {"CCACHE_DIR": str(tmp_path / "ccache"), "CCACHE_CONFIGPATH": str(tmp_path / "ccache.conf")}


def ccache_compiles(env: dict[str, str]) -> int:
    out = run(tool("ccache"), "--print-stats", env=env).stdout
    return sum(int(line.split("\t")[1]) for line in out.splitlines()
               if line.split("\t")[0] in ("cache_miss", "direct_cache_hit", "preprocessed_cache_hit"))


def test_ccache_found_on_path_builds_a_hostile_path_and_says_so(
    tmp_path: Path, ccache_env: dict[str, str]
) -> None:
    tool("ccache")
    project = hostile_project(tmp_path)
    summary = build(project, tmp_path / "auto", ccache_env)
    assert f'through ccache (found on PATH by "auto"; {OFF})' in summary, summary
    assert ccache_compiles(ccache_env) == 1
    # a second tree, same sources: ccache serves it (CCACHE_BASEDIR and the relative paths)
    other = hostile_project(tmp_path / "again $x")
    summary = build(other, tmp_path / "second", ccache_env)
    assert "(1 from cache) through ccache" in summary, summary
    count("ccache settings spelled with $x, ${y and $HOME in the project's path", 3)


def test_ccache_chosen_explicitly_and_turned_off(tmp_path: Path, ccache_env: dict[str, str]) -> None:
    tool("ccache")
    project = hostile_project(tmp_path)
    summary = build(project, tmp_path / "explicit", ccache_env, "-Ccompiler-launcher=ccache")
    assert ("through ccache (-Ccompiler-launcher=ccache; -Ccompiler-launcher=none turns it off)"
            in summary), summary
    variable = {**ccache_env, "PEP517_TORCH_COMPILER_LAUNCHER": "ccache"}
    (project / "src $x" / "m $z.cpp").write_text(SOURCE + "// edited\n")
    summary = build(project, tmp_path / "variable", variable)
    assert f"through ccache (PEP517_TORCH_COMPILER_LAUNCHER=ccache; {OFF})" in summary, summary
    before = ccache_compiles(ccache_env)
    (project / "src $x" / "m $z.cpp").write_text(SOURCE + "// edited again\n")
    summary = build(project, tmp_path / "off", ccache_env, "-Ccompiler-launcher=none")
    assert "1 compiled, 1 linked" in summary and "through" not in summary, summary
    assert ccache_compiles(ccache_env) == before  # ccache is on PATH, and ran for nothing


@pytest.mark.parametrize("hidden", [LAUNCHERS, ("ccache",)], ids=["none-on-path", "sccache-only"])
def test_auto_without_ccache_on_path(tmp_path: Path, hidden: tuple[str, ...]) -> None:
    """Launchers absent: "auto" builds without one, and says nothing of one; with ccache absent
    and sccache present, "auto" takes sccache (and says so)."""
    port = str(free_port())
    env = {"PATH": path_without(hidden, tmp_path / "path"), "SCCACHE_DIR": str(tmp_path / "sc"),
           "SCCACHE_SERVER_PORT": port}
    try:
        summary = build(hostile_project(tmp_path), tmp_path / "out", env)
    finally:
        if "sccache" not in hidden:
            subprocess.run([tool("sccache"), "--stop-server"], env={**os.environ, **env},
                           capture_output=True, timeout=60)
    if "sccache" in hidden:
        assert "1 compiled, 1 linked" in summary and "through" not in summary, summary
    else:
        assert f'through sccache (found on PATH by "auto"; {OFF})' in summary, summary


def test_sccache_builds_a_hostile_path(tmp_path: Path) -> None:
    sccache = tool("sccache")
    env = {"SCCACHE_DIR": str(tmp_path / "sc"), "SCCACHE_SERVER_PORT": str(free_port()),
           "PEP517_TORCH_COMPILER_LAUNCHER": sccache}
    try:
        summary = build(hostile_project(tmp_path), tmp_path / "out", env)
        stats = json.loads(run(sccache, "--show-stats", "--stats-format", "json", env=env).stdout)
    finally:
        subprocess.run([sccache, "--stop-server"], env={**os.environ, **env}, capture_output=True,
                       timeout=60)
    assert f"through sccache (PEP517_TORCH_COMPILER_LAUNCHER={sccache}; {OFF})" in summary, summary
    assert stats["stats"]["compile_requests"] >= 1


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Distccd]:
    with distccd(tmp_path) as running:
        yield running


def test_distcc_builds_a_hostile_path(tmp_path: Path, server: Distccd) -> None:
    (tmp_path / "distcc-state").mkdir()
    env = {"DISTCC_HOSTS": server.hosts(), "DISTCC_DIR": str(tmp_path / "distcc-state"),
           "DISTCC_FALLBACK": "0"}  # a compile distcc could not send fails
    summary = build(hostile_project(tmp_path), tmp_path / "out", env, "-Ccompiler-launcher=distcc")
    assert "through distcc (-Ccompiler-launcher=distcc; -Ccompiler-launcher=none turns it off)" in summary
    assert len(server.compiled()) == 1


def test_the_jit_behind_ccache_in_a_hostile_build_directory(
    tmp_path: Path, ccache_env: dict[str, str]
) -> None:
    """The JIT sets no CCACHE_BASEDIR, but its traced build points CCACHE_STATSLOG into the
    build directory: that path is spelled for ccache too."""
    tool("ccache")
    source = hostile_project(tmp_path) / "src $x" / "m $z.cpp"
    source.write_text(SOURCE.replace('"_C"', '"jit_hostile"').replace("PyInit__C", "PyInit_jit_hostile"))
    directory = source.parent / "build $x ${y"
    flag = shlex.quote("-DGREETING=" + json.dumps(VALUE))  # the JIT splits flags as torch does
    code = textwrap.dedent(f"""\
        import pep517_torch
        m = pep517_torch.load("jit_hostile", [{str(source)!r}], verbose=True,
                              build_directory={str(directory)!r}, extra_cflags=[{flag!r}])
        print(m.greeting())
        """)
    env = {**ccache_env, "PEP517_TORCH_COMPILER_LAUNCHER": "ccache"}
    said = run_python(code, env=env)
    assert said.stdout.splitlines()[-1] == VALUE
    assert f"through ccache (PEP517_TORCH_COMPILER_LAUNCHER=ccache; {OFF})" in said.stdout + said.stderr
    assert ccache_compiles(ccache_env) == 1


def noting_ccache(folder: Path) -> tuple[Path, Path]:
    """A ``ccache`` that notes the ccache settings of each compile it runs (sloppiness and
    base directory, as ccache reads them; not a query such as ``--version``), then runs the
    real one."""
    log, script = folder / "settings.log", folder / "bin" / "ccache"
    script.parent.mkdir(parents=True)
    script.write_text(
        "#!/bin/sh\n"
        'for word; do [ "$word" = -c ] && compiles=1; done\n'
        f'[ -n "$compiles" ] && printf "%s|%s\\n" "$CCACHE_SLOPPINESS" "$CCACHE_BASEDIR"'
        f' >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(tool("ccache"))} "$@"\n')
    script.chmod(0o755)
    return script, log


def settings_seen(log: Path, project: Path) -> set[tuple[bool, bool]]:
    """(sloppiness ours, base directory the project's) for each ccache run the log noted."""
    rows = [line.split("|", 1) for line in log.read_text().splitlines()]
    spelled = str(project).replace("$", "${PEP517_TORCH_CCACHE_DOLLAR}")
    return {(sloppiness == CCACHE_SLOPPINESS, basedir == spelled) for sloppiness, basedir in rows}


def test_ccache_in_cxx_gets_the_settings_ours_gets(tmp_path: Path, ccache_env: dict[str, str]) -> None:
    """CXX="ccache g++" (the user's launcher, so "auto" adds none): ccache still runs with the
    sloppiness that lets it cache PCH compiles and the project as its base directory. Before:
    only a launcher we chose got them."""
    script, log = noting_ccache(tmp_path / "tools")
    project = hostile_project(tmp_path)
    summary = build(project, tmp_path / "out", {**ccache_env, "CXX": f"{script} g++"})
    assert "through ccache" in summary, summary
    assert settings_seen(log, project) == {(True, True)}, log.read_text()


def test_an_editable_rebuild_runs_ccache_with_the_builds_settings(
    tmp_path: Path, ccache_env: dict[str, str], venv: Path  # noqa: F811
) -> None:
    """The rebuild on import runs the install's ninja file, which names ccache but not its
    settings: the hook gives ccache those of the build that wrote it. Before: none."""
    script, log = noting_ccache(tmp_path / "tools")
    env = {**ccache_env, "PATH": f"{script.parent}{os.pathsep}{os.environ['PATH']}"}
    project = hostile_project(tmp_path)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-build-isolation",
        "--no-deps", "--no-index", "-e", project, env=env,
        unset=("PEP517_TORCH_COMPILER_LAUNCHER",))
    installed = log.read_text()
    [obj] = (project / "build").rglob("*.o")
    obj.unlink()  # a step only ninja's own check sees: the plain ninja run, not a re-plan
    said = run(python, "-c", "import pkg._C as c; print(c.greeting())", env=env, cwd=tmp_path,
               unset=("PEP517_TORCH_COMPILER_LAUNCHER",))
    assert said.stdout.splitlines()[-1] == VALUE, said.stderr
    assert "rebuilding hostile (editable install)" in said.stderr, said.stderr
    log.write_text(log.read_text()[len(installed):])  # the rebuild's runs only
    assert settings_seen(log, project) == {(True, True)}, log.read_text()
    count("ways ccache runs with our settings: our launcher, CXX's, an editable rebuild", 3)

"""What used to end in a traceback is one line naming what is wrong (issue 35 item 8): a source
(or project, or build directory, or flag) whose name is not UTF-8, a path on the command line
that is a symbolic-link loop, a hostile build-trace.json, a pyproject.toml nested too deeply.
Nothing here compiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pep517_torch.core.spec import ExtensionSpec
from pep517_torch.errors import ConfigError
from tests.commands import run_cli
from tests.conftest import count, write
from tests.tiny_project import pyproject

EXTENSION = '[[tool.torch-ext.extension]]\nname = "pkg._C"\nsources = ["csrc/*.cpp"]\n'


def project(root: Path, *, project: str = "", tool: str = EXTENSION) -> Path:
    write(root / "pyproject.toml", pyproject("pkg", project=project, tool=tool))
    write(root / "pkg" / "__init__.py")
    return root


def one_line(result: subprocess.CompletedProcess[str], *words: str, rc: int = 2) -> str:
    said = result.stderr.strip().splitlines()
    assert result.returncode == rc and len(said) == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and said[0].startswith("pep517_torch: error: ")
    for word in words:
        assert word in said[0], said[0]
    return said[0]


# ------------------------------------------------------------------- names that are not UTF-8

BAD = os.fsdecode(b"\xff")  # the undecodable byte, as Python names it (a lone surrogate)


def test_a_source_whose_name_is_not_utf8_is_named_as_bytes(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    (root / "csrc").mkdir()
    (root / "csrc" / f"{BAD}bad.cpp").write_text("int f() { return 1; }\n")
    line = one_line(run_cli("wheel", str(root)), r"b'csrc/\xffbad.cpp'", r"the byte b'\xff', which is not UTF-8",
                    "extension[0].sources[0]")
    assert "rename the file" in line and not (root / "build").exists()
    count("item 8: names that are not UTF-8")


def test_a_project_or_build_directory_whose_name_is_not_utf8(tmp_path: Path) -> None:
    root = project(tmp_path / f"p{BAD}")
    write(root / "csrc" / "a.cpp", "int f() { return 1; }\n")
    one_line(run_cli("wheel", str(root)), r"the project directory", r"\xff", "not UTF-8")
    root = project(tmp_path / "q")
    write(root / "csrc" / "a.cpp", "int f() { return 1; }\n")
    one_line(run_cli("wheel", str(root), f"-Cbuild-dir=out{BAD}"), "build-dir", r"b'\xff'")
    assert not (root / f"out{BAD}").exists()
    count("item 8: names that are not UTF-8", 2)


def test_the_jit_and_a_spec_refuse_them_too(tmp_path: Path, jit_env: Path) -> None:
    from pep517_torch import load

    source = tmp_path / f"{BAD}.cpp"
    source.write_text("int f() { return 1; }\n")
    for arguments, key in (({"sources": [str(source)]}, "sources"),
                           ({"sources": [str(write(tmp_path / "a.cpp"))], "extra_cflags": [f"-DX={BAD}"]}, "extra_cflags"),
                           ({"sources": [str(write(tmp_path / "a.cpp"))], "build_directory": str(tmp_path / BAD)}, "build_directory")):
        with pytest.raises(ConfigError, match="not UTF-8") as caught:
            load("nonutf8", is_python_module=False, **arguments)  # type: ignore[arg-type]
        assert caught.value.key == key
    with pytest.raises(ConfigError, match=r"b'.*\\xff.cpp' contains the byte") as caught:
        ExtensionSpec("m", (source,))  # the setuptools face's way in
    assert not (tmp_path / BAD).exists()
    count("item 8: names that are not UTF-8", 4)


# -------------------------------------------------------------- a symbolic-link loop as a path

@pytest.mark.parametrize("command", [
    ["wheel", "{loop}"], ["wheel", "{loop}/deeper"], ["sdist", "{loop}"], ["doctor", "{loop}"],
    ["index", "{loop}"], ["explain", "{loop}"], ["wheel", "{project}", "-o", "{loop}"],
    ["sdist", "{project}", "-o", "{loop}/dist"],
])
def test_a_symlink_loop_on_the_command_line_is_one_line(tmp_path: Path, command: list[str]) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    root = project(tmp_path / "p", tool="")
    args = [part.format(loop=loop, project=root) for part in command]
    one_line(run_cli(*args), "cannot be resolved (a symbolic link loop)", str(loop))
    assert not (root / "dist").exists() and not (root / "build").exists()
    count("item 8: symlink loops on the command line")


# ------------------------------------------------------------------------ hostile traces

STEP = {"ph": "X", "name": "compiling a.cpp", "ts": 0, "dur": 2_000_000, "tid": 1, "pid": 1,
        "args": {"kind": "compile"}}
LINK = {**STEP, "name": "linking m", "ts": 2_000_000, "dur": 500_000}
HOSTILE_TRACES = {
    "string events": {"traceEvents": ["x"]},
    "number events": {"traceEvents": [1, 2]},
    "dur 1e308": {"traceEvents": [{**STEP, "dur": 1e308}]},
    "dur Infinity": '{"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": Infinity, "tid": 1}]}',
    "ts NaN": '{"traceEvents": [{"ph": "X", "name": "a", "ts": NaN, "dur": 1, "tid": 1}]}',
    "100,000 nested [": "[" * 100_000 + "]" * 100_000,
    "100,000 nested {": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "negative dur": {"traceEvents": [STEP, {**LINK, "dur": -500_000}]},
    "negative ts": {"traceEvents": [{**STEP, "ts": -5_000_000}]},
    "ts 10**300": {"traceEvents": [{**STEP, "ts": 10**300}]},
    "tid 10**9": {"traceEvents": [{**STEP, "tid": 10**9}]},
    "tid 0": {"traceEvents": [{**STEP, "tid": 0}]},
    "tid text": {"traceEvents": [{**STEP, "tid": "a"}]},
    "dur true": {"traceEvents": [{**STEP, "dur": True}]},
    "no name": {"traceEvents": [{"ph": "X", "ts": 0, "dur": 1, "tid": 1}]},
    "name null": {"traceEvents": [{**STEP, "name": None}]},
    "name with escapes": {"traceEvents": [{**STEP, "name": "a\n\x1b[31mred"}]},
    "args a number": {"traceEvents": [{**STEP, "args": 5}]},
    "outputs a number": {"traceEvents": [{**STEP, "args": {"outputs": 5}}]},
    "jobs text": {"traceEvents": [STEP], "otherData": {"jobs": "x"}},
    "jobs -1": {"traceEvents": [STEP], "otherData": {"jobs": -1}},
    "otherData a number": {"traceEvents": [STEP], "otherData": 5},
    "events not a list": {"traceEvents": {"a": 1}},
    "not UTF-8 nor JSON": b"\xff\xfe{}",
}


@pytest.mark.parametrize("case", list(HOSTILE_TRACES))
def test_trace_reads_a_hostile_file_in_one_line(tmp_path: Path, case: str) -> None:
    document = HOSTILE_TRACES[case]
    trace = tmp_path / "build-trace.json"
    if isinstance(document, bytes):
        trace.write_bytes(document)
    else:
        trace.write_text(document if isinstance(document, str) else json.dumps(document))
    one_line(run_cli("trace", str(tmp_path), "--html", str(tmp_path / "t.html")), str(trace))
    assert not (tmp_path / "t.html").exists()
    count("item 8: hostile build-trace.json files")


def test_a_good_trace_still_reads(tmp_path: Path) -> None:
    (tmp_path / "build-trace.json").write_text(json.dumps({"traceEvents": [STEP, LINK], "otherData": {"jobs": 2}}))
    result = run_cli("trace", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "compiling a.cpp     2.00     1    80%" in result.stdout and "-" not in result.stdout.split("share")[1].split("\n")[1]


# --------------------------------------------------------------- pyproject.toml nested deeply

@pytest.mark.parametrize(("where", "depth"), [
    ("sources", 5000), ("keywords", 5000), ("tool.x", 5000), ("inline tables", 5000),
    ("sources", 1000), ("tool.x", 1000),
])
def test_a_deeply_nested_pyproject_is_one_line_in_every_face(tmp_path: Path, where: str, depth: int) -> None:
    nested = "[" * depth + '"x"' + "]" * depth
    tool = {"sources": EXTENSION.replace('["csrc/*.cpp"]', nested),
            "tool.x": f"[tool.x]\ny = {nested}\n",
            "inline tables": f"[tool.x]\ny = {'{a = ' * depth}1{'}' * depth}\n"}.get(where, "")
    root = project(tmp_path / "p", project=f"keywords = {nested}" if where == "keywords" else "", tool=tool)
    for command in ("wheel", "sdist"):
        one_line(run_cli(command, str(root)), "pyproject.toml: invalid TOML: arrays or tables nested too deeply")
    hook = subprocess.run([sys.executable, "-c", "import pep517_torch.buildapi as b, tempfile; "
                           "b.prepare_metadata_for_build_wheel(tempfile.mkdtemp())"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    one_line(hook, "nested too deeply", rc=1)
    count("item 8: deeply nested pyproject.toml (CLI wheel, sdist and the PEP 517 hook)", 3)

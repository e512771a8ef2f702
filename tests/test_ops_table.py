"""ops/ without torch: the table a child answers (every field checked), the verdicts over it,
what the terminal is shown, and the child run by a stand-in interpreter that hangs, crashes
or answers garbage (issue 46)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pep517_torch.backend.op_listing import _stub_files
from pep517_torch.errors import OpsError
from pep517_torch.ops import child
from pep517_torch.ops.listing import Contents, list_ops, module_name, stage
from pep517_torch.ops.render import printable, summary_lines, table_text
from pep517_torch.ops.table import ASKED_KEYS, Op, OpsTable, TableError, read_answer, read_table
from pep517_torch.ops.verdicts import judge

SCHEMA = "ns::f(Tensor x) -> Tensor"


def _op(kernels: list[str], **fields: object) -> dict[str, object]:
    return {"name": "ns::f", "schema": SCHEMA, "kernels": kernels, "source": "pkg/_C.so", **fields}


def _codes(kernels: list[str], **fields: object) -> list[str]:
    op = read_table({"torch": "2.13.0+cpu", "ops": [_op(kernels, **fields)]}).ops[0]
    return [verdict.code for verdict in judge(op)]


def test_the_child_asks_the_keys_the_table_knows() -> None:
    assert child.ASKED_KEYS == ASKED_KEYS


@pytest.mark.parametrize(("kernels", "fields", "codes"), [
    (["CPU", "CUDA", "Meta", "Autograd"], {}, []),
    (["CPU"], {"fake": True}, []),  # torch.library.register_fake
    (["CompositeImplicitAutograd"], {}, []),  # decomposes: nothing of its own needed
    (["CompositeExplicitAutograd", "Autograd"], {}, []),
    (["CPU", "CUDA"], {}, ["no-fake"]),
    # torch.library.custom_op's own Meta kernel only raises: a fake implementation is needed
    (["Meta", "Autograd", "CompositeExplicitAutograd"], {"custom_op": True}, ["no-fake"]),
    (["CUDA", "Meta"], {}, ["cuda-only"]),
    (["CPU", "CUDA", "Meta", "AutogradCPU"], {}, ["autograd-partial"]),
    (["CPU", "CUDA", "Meta", "AutogradCPU", "AutogradCUDA"], {}, []),
    ([], {}, ["no-kernel"]),
    (["CPU", "Meta"], {"schema": None}, ["no-schema"]),
])
def test_each_verdict(kernels: list[str], fields: dict[str, object], codes: list[str]) -> None:
    assert _codes(kernels, **fields) == codes


def test_a_verdict_names_what_is_missing_and_the_device() -> None:
    op = read_table({"torch": "2", "ops": [_op(["CPU", "CUDA", "Meta", "AutogradCUDA"])]}).ops[0]
    (verdict,) = judge(op)
    assert "autograd for CUDA but not CPU" in verdict.line()


@pytest.mark.parametrize(("answer", "words"), [
    ([], "not a JSON object"),
    ({"ops": []}, "'torch' must be a string"),
    ({"torch": "2", "ops": {}}, "'ops' must be a list"),
    ({"torch": "2", "ops": [_op(["CPU"], name="f")]}, "not an operator name"),
    ({"torch": "2", "ops": [_op(["CPU"], name="ns::f; rm -rf /")]}, "not an operator name"),
    ({"torch": "2", "ops": [_op(["CPU\x1b[2J"])]}, "not a dispatch key"),
    ({"torch": "2", "ops": [_op(["CPU"], schema="a\nb")]}, "line break"),
    ({"torch": "2", "ops": [_op(["CPU"], source="x\x1b[31m")]}, "control character"),
    ({"torch": "2", "ops": [_op(["CPU"], fake="yes")]}, "'ops[0].fake' must be true or false"),
    ({"torch": "2", "ops": [_op(["CPU"]), _op(["CPU"])]}, "names an op twice"),
    ({"torch": "2", "ops": [_op(["CPU"], schema="s" * 9000)]}, "longer than"),
    ({"torch": "2", "ops": [], "stubs": {"../evil.pyi": ""}}, "no stub file"),
    ({"torch": "2", "ops": [], "stubs": {"/etc/x.pyi": ""}}, "no stub file"),
    ({"torch": "2", "ops": [], "checks": [{"op": "ns::f", "test": "t", "status": "ok"}]},
     "passed, failed or no sample"),
])
def test_an_answer_that_is_not_a_table_is_refused_naming_the_field(answer: object, words: str) -> None:
    with pytest.raises(TableError, match=words.replace("[", r"\[").replace(";", ";")):
        read_table(json.dumps(answer).encode())


def test_bounds() -> None:
    with pytest.raises(TableError, match="larger than"):
        read_table(b" " * (16 * 1024 * 1024 + 1))
    with pytest.raises(TableError, match="more than"):
        read_table({"torch": "2", "ops": [_op(["CPU"], name=f"ns::f{i}") for i in range(20_001)]})
    with pytest.raises(TableError, match="not JSON"):
        read_table(b"[" * 100_000)
    with pytest.raises(TableError, match="seconds"):
        read_answer(json.dumps({"torch": "2", "ops": [], "seconds": "1"}).encode())


def test_a_table_round_trips_through_the_record() -> None:
    table = read_table({"torch": "2.13.0+cpu", "ops": [_op(["CPU", "Meta"], fake=True)],
                        "problems": ["importing x failed: E"]})
    again = read_table(json.loads(json.dumps(table.as_json())))
    assert again == OpsTable(table.torch, table.ops, table.problems)


def test_what_a_child_said_is_escaped_on_the_terminal() -> None:
    assert printable("a\x1b[31mb\u202ec\nd") == "a\\x1b[31mb\\u202ec\\x0ad"
    table = read_table({"torch": "2\x1b]0;pwned\x07", "ops": [_op(["CPU"])],
                        "problems": ["loading x failed: \x1b[2J\u202egnp.exe"]})
    shown = "\n".join([table_text(table, []), *summary_lines(table, [])])
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert "\\x1b[2J" in shown


def test_module_names_of_archive_names() -> None:
    assert module_name("pkg/sub/mod.py") == "pkg.sub.mod"
    assert module_name("pkg/__init__.py") == "pkg"
    assert module_name("pkg/data/x.json") is None
    assert module_name("pkg/not-a-name.py") is None


def test_staging_refuses_a_path_out_of_the_folder(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text("")
    with pytest.raises(OpsError, match="not a path inside a wheel"):
        stage(Contents(files=(("../x.py", source),)), tmp_path / "stage")
    staged = stage(Contents(files=(("pkg/x.py", source),)), tmp_path / "ok")
    assert (staged / "pkg" / "x.py").resolve() == source


def test_a_module_using_torch_library_is_imported_and_one_that_does_not_is_not(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\n@torch.library.register_fake('ns::f')\ndef f(x): ...\n")
    (tmp_path / "b.py").write_text("from torch import library as L\n")
    (tmp_path / "c.py").write_text("import torch  # nothing registered here\n")
    contents = Contents(files=tuple((f"pkg/{n}.py", tmp_path / f"{n}.py") for n in "abc"))
    assert contents.python_users() == ["pkg.a", "pkg.b"]


# -- the child run by a stand-in interpreter ---------------------------------------------------

STAND_IN = """\
import json, os, signal, sys, time
path = sys.argv[2]
if path == "-":  # started early: the request's path comes on stdin
    path = sys.stdin.readline().strip()
    if not path:
        sys.exit(0)
request = json.load(open(path))
mode = os.environ["STAND_IN"]
print("pep517_torch-ops: loading pkg._C", file=sys.stderr, flush=True)
if mode == "hang":
    time.sleep(600)
if mode == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
if mode == "silent":
    sys.exit(0)
if mode == "twice" and "pkg/b.so" in request["libraries"]:
    print("pep517_torch-ops: loading pkg/b.so", file=sys.stderr, flush=True)
    print("terminate called after throwing an instance of 'c10::Error'", file=sys.stderr)
    print("  what():  Only a single TORCH_LIBRARY can be used to register the namespace ns;"
          " please put all of your definitions in a single TORCH_LIBRARY block.", file=sys.stderr)
    print("frame #0: c10::Error::Error(...)", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGABRT)
mode = "good" if mode == "twice" else mode
answers = {
    "garbage": "\\x00not json",
    "hostile": json.dumps({"torch": "2", "ops": [{"name": "ns::f\\x1b[2J", "kernels": []}]}),
    "huge": json.dumps({"torch": "2", "ops": [], "problems": ["x" * 100] * 180000}),
    "good": json.dumps({"torch": "2.13.0+cpu", "ops": [{"name": "ns::f", "schema": "ns::f() -> ()",
                         "kernels": ["CPU"], "source": "pkg/_C.so"}], "problems": []}),
}
open(request["answer"], "w").write(answers[mode])
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    script = tmp_path / "python"
    script.write_text(f"#!{sys.executable}\n{STAND_IN}")
    script.chmod(0o755)

    def ask(mode: str, timeout: float = 60, libraries: tuple[str, ...] = ()) -> object:
        monkeypatch.setenv("STAND_IN", mode)
        files = []
        for name in libraries:
            (tmp_path / name.replace("/", "_")).write_bytes(b"")
            files.append((name, tmp_path / name.replace("/", "_")))
        return list_ops(Contents(files=tuple(files), libraries=libraries), str(script),
                        timeout=timeout, scratch=tmp_path)

    return ask


@pytest.mark.parametrize(("mode", "words"), [
    ("garbage", "answer is not an operator table: not JSON"),
    ("hostile", "'ops[0].name' is not an operator name"),
    ("huge", "answer is not an operator table"),
    ("silent", "wrote no answer while loading pkg._C"),
    ("crash", "was killed by SIGSEGV while loading pkg._C"),
])
def test_a_child_that_fails_is_one_line(stand_in, mode: str, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OpsError) as error:
        stand_in(mode)
    assert words in str(error.value)
    assert "\x1b" not in str(error.value) and "\n" not in str(error.value)


def test_a_child_that_hangs_is_killed_at_the_timeout(stand_in) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OpsError, match="took longer than 1 s while loading pkg._C"):
        stand_in("hang", timeout=1)


def test_an_artifact_that_kills_the_child_is_left_out_and_said(stand_in) -> None:  # type: ignore[no-untyped-def]
    """A second TORCH_LIBRARY of one namespace aborts the process (torch_scatter's _cpu and
    _cuda variants): the listing goes on without it, and the table says why."""
    answer = stand_in("twice", libraries=("pkg/a.so", "pkg/b.so"))
    assert [op.name for op in answer.table.ops] == ["ns::f"]
    assert answer.table.problems == (
        "pkg/b.so is not loaded beside the artifacts before it: it defines the namespace ns with"
        " TORCH_LIBRARY too, and torch aborts on a second (variants of one library, such as _cpu"
        " and _cuda, load one at a time)",)


def test_a_good_answer_is_read(stand_in) -> None:  # type: ignore[no-untyped-def]
    answer = stand_in("good")
    assert [op.name for op in answer.table.ops] == ["ns::f"]


def test_a_stub_that_does_not_parse_is_the_build_s_error(tmp_path: Path) -> None:
    class Project:
        files: tuple[tuple[str, Path], ...] = ()

    files = _stub_files(None, {"pkg/_C.pyi": "def f(x: int) -> int: ...\n"}, Project())  # type: ignore[arg-type]
    assert files == {"pkg/_C.pyi": b"def f(x: int) -> int: ...\n", "pkg/py.typed": b""}
    with pytest.raises(OpsError, match=r"the stub pkg/_C.pyi .* does not parse \(line 1"):
        _stub_files(None, {"pkg/_C.pyi": "def f(x: int -> int: ...\n"}, Project())  # type: ignore[arg-type]
    with pytest.raises(OpsError, match="pip install pybind11-stubgen"):
        _stub_files("pybind11-stubgen is not installed ...: pip install pybind11-stubgen", {},
                    Project())  # type: ignore[arg-type]


def test_an_op_reports_whether_its_schema_writes() -> None:
    assert Op("ns::f", "ns::f(Tensor(a!) x) -> ()", ("CPU",)).mutable
    assert not Op("ns::f", "ns::f(Tensor x) -> Tensor(a)", ("CPU",)).mutable


@pytest.mark.parametrize(("table", "settings", "wanted"), [
    ("stubs = true\n", None, True),
    ("", None, False),
    ("", {"stubs": "true"}, True),
    ("stubs = true\n", {"stubs": "false"}, False),
    ('[[tool.torch-ext.overrides]]\nif = { platform = "linux" }\nstubs = true\n', None, True),
    ("stubs = 3\n", None, False),  # a table that does not parse: its build says why
])
def test_the_build_requires_pybind11_stubgen_only_for_stubs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, settings: dict[str, str] | None,
    wanted: bool,
) -> None:
    from pep517_torch import buildapi

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "1"\n[tool.torch-ext]\n' + table)
    monkeypatch.chdir(tmp_path)
    requires = buildapi.get_requires_for_build_wheel(settings)
    assert requires == (["pybind11-stubgen>=3.0,<4"] if wanted else [])


@pytest.mark.compile
def test_only_an_artifact_that_calls_torch_s_registration_api_is_loaded(tmp_path: Path) -> None:
    """A module that registers nothing (a pybind11 module, a C module) costs no child and no
    torch import; one whose dynamic symbols name torch::Library (TORCH_LIBRARY*), the stable
    ABI's registration shim or c10::RegisterOperators is listed."""
    import subprocess

    sources = {
        "plain": "int answer(void) { return 42; }\n",
        "library": "extern void _ZN5torch7LibraryC1Ev(void);\nvoid f(void) { _ZN5torch7LibraryC1Ev(); }\n",
        "stable": "extern void aoti_torch_library_init_def(void);\nvoid f(void) { aoti_torch_library_init_def(); }\n",
    }
    found = {}
    for name, text in sources.items():
        (tmp_path / f"{name}.c").write_text(text)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", tmp_path / f"{name}.so", tmp_path / f"{name}.c"],
                       check=True)
        found[name] = Contents(files=((f"pkg/{name}.so", tmp_path / f"{name}.so"),),
                               libraries=(f"pkg/{name}.so",)).registers_ops()
    assert found == {"plain": False, "library": True, "stable": True}


def test_the_cli_names_a_missing_pybind11_stubgen_before_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from importlib import metadata

    from pep517_torch.cli import main

    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "pep517_torch"\n'
        '[project]\nname = "p"\nversion = "1"\n[tool.torch-ext]\nstubs = true\n')
    real = metadata.version

    def version(name: str) -> str:
        if name == "pybind11-stubgen":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    assert main(["wheel", str(tmp_path)]) == 1
    said = capsys.readouterr().err
    assert "build requirements missing from this environment: pybind11-stubgen>=3.0,<4" in said
    assert main(["wheel", str(tmp_path), "-Cstubs=false", "-o", str(tmp_path / "dist")]) == 0

"""The operator fixtures built once each, as users build them (`python -m pep517_torch wheel`),
and what pep517_torch says of them (issue 46): goodops (CPU and Meta kernels, autograd from
Python, a pybind11 module with its stub), nofakeops (no fake kernel), lieops (a schema that
hides a mutation). Each verdict at build time, the table the wheel's record keeps, `ops` on a
project and on a wheel, opcheck passing for the first and failing for the others with the
failing test named, `ops-check = "strict"`, and mypy reading the stub."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from pep517_torch.ops.table import read_table
from tests.commands import run, run_cli

pytestmark = pytest.mark.compile

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
NAMES = {"opsgood": "goodops", "opsnofake": "nofakeops", "opslie": "lieops"}
GOOD_SCHEMA = "goodops::fused_scale_add(Tensor x, Tensor y, float alpha) -> Tensor"


class Built:
    def __init__(self, root: Path, wheel: Path, output: str) -> None:
        self.root, self.wheel, self.output = root, wheel, output

    def record(self) -> dict[str, object]:
        with zipfile.ZipFile(self.wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/pep517_torch.json"))
            return json.loads(archive.read(name))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """Each fixture copied and built once for the module (3 small TUs of <torch/library.h>,
    one of torch's pybind11 header)."""
    found = {}
    base = tmp_path_factory.mktemp("ops")
    for fixture in NAMES:
        root = base / fixture
        shutil.copytree(FIXTURES / fixture, root, ignore=shutil.ignore_patterns("build", "dist"))
        result = run_cli("wheel", root, "-o", root / "dist", timeout=900)
        said = result.stdout + result.stderr
        assert result.returncode == 0, said
        found[fixture] = Built(root, next((root / "dist").glob("*.whl")), said)
    return found


def _op_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("pep517_torch: op ")]


def test_each_build_says_its_ops_and_their_verdicts(built: dict[str, Built]) -> None:
    assert _op_lines(built["opsgood"].output) == [
        f"pep517_torch: op {GOOD_SCHEMA}: CPU, Meta, Autograd"]
    nofake = _op_lines(built["opsnofake"].output)
    assert nofake[0] == "pep517_torch: op nofakeops::scale(Tensor x, float factor) -> Tensor: CPU"
    assert nofake[1].startswith("pep517_torch: op nofakeops::scale: no fake (Meta) kernel:")
    assert nofake[1].endswith("[no-fake]") and len(nofake) == 2
    # the lie is in what the kernel does: its registrations are complete, no verdict
    assert _op_lines(built["opslie"].output) == [
        "pep517_torch: op lieops::scaled(Tensor x, float factor) -> Tensor: CPU, Meta"]


def test_the_wheel_s_record_keeps_the_table(built: dict[str, Built]) -> None:
    good = read_table(built["opsgood"].record()["ops"])  # type: ignore[arg-type]
    (op,) = good.ops
    assert (op.name, op.schema) == ("goodops::fused_scale_add", GOOD_SCHEMA)
    assert set(op.kernels) == {"CPU", "Meta", "Autograd"}
    assert op.source == "goodops._C" and good.torch.startswith("2.13.0")
    lie = read_table(built["opslie"].record()["ops"])  # type: ignore[arg-type]
    assert [o.name for o in lie.ops] == ["lieops::scaled"]


def test_ops_prints_a_wheel_s_recorded_table_and_lists_it_again_on_load(built: dict[str, Built]) -> None:
    wheel = built["opsnofake"].wheel
    recorded = run_cli("ops", wheel)
    assert recorded.returncode == 0, recorded.stderr
    assert "nofakeops::scale  CPU" in recorded.stdout and "[no-fake]" in recorded.stdout
    assert "the table the wheel's build recorded" in recorded.stdout
    loaded = run_cli("ops", wheel, "--load", "--json")
    assert loaded.returncode == 0, loaded.stderr
    table = json.loads(loaded.stdout)
    assert [(o["name"], o["kernels"]) for o in table["ops"]] == [("nofakeops::scale", ["CPU"])]
    assert [v["code"] for v in table["verdicts"]] == ["no-fake"]


def test_ops_on_a_project_lists_its_last_build(built: dict[str, Built]) -> None:
    result = run_cli("ops", built["opsgood"].root, "--json")
    assert result.returncode == 0, result.stderr
    table = json.loads(result.stdout)
    assert [o["schema"] for o in table["ops"]] == [GOOD_SCHEMA] and table["verdicts"] == []


def _rows(result: object) -> dict[tuple[str, str], str]:
    table = json.loads(result.stdout)  # type: ignore[attr-defined]
    return {(row["op"], row["test"]): row["status"] for row in table["checks"]}


def test_opcheck_passes_for_the_good_op(built: dict[str, Built]) -> None:
    result = run_cli("ops", built["opsgood"].root, "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed, 0 failed" in result.stdout
    for test in ("test_schema", "test_autograd_registration", "test_faketensor",
                 "test_aot_dispatch_dynamic"):
        assert f"goodops::fused_scale_add  {test}" in result.stdout


def test_opcheck_fails_without_a_fake_kernel_naming_the_test(built: dict[str, Built]) -> None:
    result = run_cli("ops", built["opsnofake"].root, "--check", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert _rows(result) == {
        ("nofakeops::scale", "test_schema"): "passed",
        ("nofakeops::scale", "test_autograd_registration"): "passed",
        ("nofakeops::scale", "test_faketensor"): "failed",
        ("nofakeops::scale", "test_aot_dispatch_dynamic"): "failed",
    }


def test_opcheck_finds_the_schema_s_lie(built: dict[str, Built]) -> None:
    result = run_cli("ops", built["opslie"].root, "--check")
    assert result.returncode == 1, result.stdout + result.stderr
    failed = [line for line in result.stdout.splitlines() if " failed " in line]
    assert len(failed) == 1 and "lieops::scaled" in failed[0] and "test_schema" in failed[0]
    assert "Argument x is not defined as mutable but was mutated" in failed[0]
    assert "3 passed, 1 failed" in result.stdout


def test_strict_makes_a_verdict_an_error_and_writes_no_wheel(built: dict[str, Built], tmp_path: Path) -> None:
    result = run_cli("wheel", built["opsnofake"].root, "-o", tmp_path, "-Cops-check=strict")
    assert result.returncode != 0
    assert 'ops-check = "strict": 1 operator problem: nofakeops::scale: no fake' in result.stderr
    assert "Traceback" not in result.stderr and list(tmp_path.iterdir()) == []


def test_check_needs_samples_it_can_read(built: dict[str, Built], tmp_path: Path) -> None:
    missing = run_cli("ops", built["opsgood"].root, "--check", "--samples", tmp_path / "none.py")
    assert missing.returncode == 2 and "--samples: " in missing.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("def samples():\n    raise ValueError('no tensors today')\n")
    failed = run_cli("ops", built["opsgood"].root, "--check", "--samples", broken)
    assert failed.returncode == 1
    assert "samples() failed: ValueError: no tensors today" in failed.stderr


def test_ops_on_a_project_not_built_says_so(tmp_path: Path) -> None:
    root = tmp_path / "opslie"
    shutil.copytree(FIXTURES / "opslie", root, ignore=shutil.ignore_patterns("build", "dist"))
    result = run_cli("ops", root)
    assert result.returncode == 2 and "lieops._C: not built in" in result.stderr


def test_the_stub_ships_with_py_typed_and_mypy_reads_it(built: dict[str, Built], tmp_path: Path) -> None:
    with zipfile.ZipFile(built["opsgood"].wheel) as archive:
        names = archive.namelist()
        stub = archive.read("goodops/_C.pyi").decode()
        archive.extractall(tmp_path / "site")
    assert "goodops/py.typed" in names
    assert "def fused_scale_add(x: torch.Tensor, y: torch.Tensor, alpha:" in stub
    # nofakeops is an op library: no module, no stub; its table is its record
    with zipfile.ZipFile(built["opsnofake"].wheel) as archive:
        assert not [n for n in archive.namelist() if n.endswith(".pyi")]
    (tmp_path / "ok.py").write_text(
        "import torch\nfrom goodops import _C\n"
        "y: torch.Tensor = _C.fused_scale_add(torch.ones(2), torch.ones(2), 2.0)\n")
    (tmp_path / "bad.py").write_text(
        "import torch\nfrom goodops import _C\n"
        "_C.fused_scale_add(torch.ones(2), torch.ones(2), '2.0')\n"
        "_C.fused_scale_add(torch.ones(2))\n")
    # torch's own annotations are not what is tested (and cost a minute to analyse)
    (tmp_path / "mypy.ini").write_text("[mypy]\n[mypy-torch.*]\nfollow_imports = skip\n")

    def mypy(file: str) -> tuple[int, str]:
        result = run(sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir",
                     tmp_path / "cache", file, cwd=tmp_path, env={"MYPYPATH": str(tmp_path / "site")},
                     check=False)
        return result.returncode, result.stdout

    assert mypy("ok.py") == (0, "Success: no issues found in 1 source file\n")
    code, said = mypy("bad.py")
    assert code == 1, said
    assert 'bad.py:3: error: Argument 3 to "fused_scale_add" has incompatible type "str"' in said
    assert 'bad.py:4: error: Missing positional arguments "y", "alpha"' in said


def test_the_good_op_computes_and_trains(built: dict[str, Built], tmp_path: Path) -> None:
    with zipfile.ZipFile(built["opsgood"].wheel) as archive:
        archive.extractall(tmp_path)
    code = (
        "import torch, goodops\n"
        "x = torch.arange(4.0, requires_grad=True); y = torch.ones(4, requires_grad=True)\n"
        "out = goodops.fused_scale_add(x, y, 3.0)\n"
        "assert torch.equal(out, x.detach() * 3 + 1)\n"
        "out.sum().backward()\n"
        "assert torch.equal(x.grad, torch.full((4,), 3.0)) and torch.equal(y.grad, torch.ones(4))\n"
    )
    run(sys.executable, "-c", code, cwd=tmp_path)


def test_a_jit_build_lists_its_ops_and_warns_of_a_verdict(tmp_path: Path) -> None:
    """load() of an op library: the verdict reaches the caller as a warning (nobody watches
    a JIT build's output), the table stays in the build directory for `ops BUILD_DIR`. The
    ops are listed in the JIT's own process as it loads the library: no child process, no
    second import of torch."""
    code = (
        "import subprocess, warnings, torch, pep517_torch\n"
        "started, popen = [], subprocess.Popen.__init__\n"
        "def spy(self, args, *rest, **options):\n"
        "    started.append(' '.join(map(str, args)) if not isinstance(args, (str, bytes)) else args)\n"
        "    popen(self, args, *rest, **options)\n"
        "subprocess.Popen.__init__ = spy\n"
        "with warnings.catch_warnings(record=True) as said:\n"
        "    warnings.simplefilter('always')\n"
        f"    pep517_torch.load('jitnofake', [{str(FIXTURES / 'opsnofake/csrc/ops.cpp')!r}],"
        " is_python_module=False)\n"
        "assert started and not [c for c in started if 'child.py' in str(c)], started\n"
        "assert torch.equal(torch.ops.nofakeops.scale(torch.ones(2), 2.0), torch.full((2,), 2.0))\n"
        "print([str(w.message) for w in said])\n"
    )
    result = run(sys.executable, "-c", code, cwd=tmp_path,
                 env={"TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")})
    assert "pep517_torch: op nofakeops::scale: no fake (Meta) kernel" in result.stdout
    build_dir = tmp_path / "ext" / "jitnofake"
    table = read_table((build_dir / "pep517_torch_ops.json").read_bytes())
    assert [(op.name, op.kernels) for op in table.ops] == [("nofakeops::scale", ("CPU",))]
    shown = run_cli("ops", build_dir)
    assert shown.returncode == 0 and "[no-fake]" in shown.stdout


def test_two_libraries_of_one_namespace_are_listed_one_at_a_time(built: dict[str, Built], tmp_path: Path) -> None:
    """A package's _cpu and _cuda variants (torch_scatter's way) both define their namespace:
    torch aborts the process that loads the second. The listing says so and lists the first."""
    from pep517_torch.ops.listing import Contents, list_ops

    (library,) = (built["opsnofake"].root / "build").glob("*/out/nofakeops/_C*.so")
    twin = tmp_path / "_C_cuda.so"
    shutil.copy(library, twin)
    contents = Contents(files=(("nofakeops/_C.so", library), ("nofakeops/_C_cuda.so", twin)),
                        libraries=("nofakeops/_C.so", "nofakeops/_C_cuda.so"))
    answer = list_ops(contents, sys.executable, scratch=tmp_path)
    assert [(op.name, op.source) for op in answer.table.ops] == [("nofakeops::scale", "nofakeops/_C.so")]
    assert answer.table.problems == (
        "nofakeops/_C_cuda.so is not loaded beside the artifacts before it: it defines the"
        " namespace nofakeops with TORCH_LIBRARY too, and torch aborts on a second (variants of"
        " one library, such as _cpu and _cuda, load one at a time)",)

"""The edit loop of a wheel built with unity TUs (issue 37): an edited file leaves its group and
compiles alone, its former partners are compiled again from their own text (never an old unity
object holding the edited file's old code), untouched groups keep their objects, later edits
of that file cost one compile, and a header every file includes brings the cold groups back.

The sources include a small torch header (c10's macros), which makes them torch-heavy, and
compile in about a second each; every build runs with two heavy job slots. Each has ~6000
code tokens of its own (a long function), as a file with a few kernels has: enough for a split
to pay (core/unity/regroup.py weighs a TU's fixed part against its members' own code).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.core.ninja import trace_view
from pep517_torch.core.unity import regroup as unity_regroup
from tests import test_unity_build as unity_build
from tests.test_unity_build import PYPROJECT, module_source

pytestmark = pytest.mark.compile

HEAVY = '#include <c10/macros/Macros.h>\n#include "shared.h"\n'
NAMES = "abcd"


def own_code(name: str) -> str:
    """A function of ~6000 code tokens, as a file with a few kernels has."""
    steps = "".join(f"  v = v * {i % 7 + 2} + {i};\n" for i in range(1000))
    return f"unsigned long work_{name}(unsigned long v) {{\n{steps}  return v;\n}}\n"


def write_sources(root: Path, values: dict[str, int], shared: int = 0) -> None:
    csrc = root / "csrc"
    csrc.mkdir(parents=True, exist_ok=True)
    (csrc / "shared.h").write_text(f"#pragma once\n#define SHARED {shared}\n")
    (csrc / "only_d.h").write_text("#pragma once\n#define ONLY_D 0\n")
    for name, value in values.items():
        extra = '#include "only_d.h"\n' if name == "d" else ""
        own = " + ONLY_D" if name == "d" else ""
        (csrc / f"{name}.cpp").write_text(
            f"{HEAVY}{extra}{own_code(name)}int value_{name}() {{ return {value} + SHARED{own}; }}\n")


def project(root: Path) -> Path:
    (root / "unityops").mkdir(parents=True)
    (root / "unityops" / "__init__.py").write_text("from ._C import values\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    write_sources(root, {n: i + 1 for i, n in enumerate(NAMES)})
    (root / "csrc" / "module.cpp").write_text(module_source(list(NAMES)))
    return root


def build(root: Path, out: Path) -> tuple[tuple[int, ...], list[str]]:
    """A wheel with two heavy job slots: what its module computes, and the compile steps that
    ran (each as the progress lines name it: ``csrc/a.cpp + csrc/c.cpp``)."""
    values, _ = unity_build.build(root, out, jobs=2)
    [build_dir] = (root / "build").iterdir()
    compiled = sorted(step.name.removeprefix("compiling ") for step in trace_view.steps(build_dir)
                      if step.name.startswith("compiling ") and "module.cpp" not in step.name)
    return values, compiled


def edit(root: Path, name: str, value: int) -> None:
    path = root / "csrc" / f"{name}.cpp"
    head, value_line = path.read_text().rsplit("int value_", 1)
    path.write_text(head + "int value_" + value_line.replace("return ", f"return {value} + 0 * ", 1))


def test_an_edited_file_leaves_its_group_and_its_partner_compiles_on_its_own(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    values, compiled = build(root, tmp_path / "o1")
    assert values == (1, 2, 3, 4)
    assert compiled == ["csrc/a.cpp + csrc/c.cpp", "csrc/b.cpp + csrc/d.cpp"], compiled

    edit(root, "c", 30)  # c leaves {a, c}; a compiles again beside it; {b, d} keeps its object
    values, compiled = build(root, tmp_path / "o2")
    assert values == (1, 2, 30, 4)
    assert compiled == ["csrc/a.cpp", "csrc/c.cpp"], compiled

    edit(root, "c", 300)  # the next edit of c costs one compile
    values, compiled = build(root, tmp_path / "o3")
    assert values == (1, 2, 300, 4)
    assert compiled == ["csrc/c.cpp"], compiled

    values, compiled = build(root, tmp_path / "o4")  # nothing changed: nothing compiles
    assert values == (1, 2, 300, 4) and compiled == []


def test_a_header_one_member_includes_splits_that_member_off(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    build(root, tmp_path / "o1")
    (root / "csrc" / "only_d.h").write_text("#pragma once\n#define ONLY_D 40\n")
    values, compiled = build(root, tmp_path / "o2")
    assert values == (1, 2, 3, 44)
    assert compiled == ["csrc/b.cpp", "csrc/d.cpp"], compiled


def test_a_header_every_file_includes_brings_the_cold_groups_back(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    build(root, tmp_path / "o1")
    edit(root, "c", 30)
    assert build(root, tmp_path / "o2")[1] == ["csrc/a.cpp", "csrc/c.cpp"]
    write_sources(root, {"a": 1, "b": 2, "c": 30, "d": 4}, shared=100)
    values, compiled = build(root, tmp_path / "o3")
    assert values == (101, 102, 130, 104)
    assert compiled == ["csrc/a.cpp + csrc/c.cpp", "csrc/b.cpp + csrc/d.cpp"], compiled


def test_the_cheapest_plan_on_the_slots_there_are(tmp_path: Path) -> None:
    a, b, c, d = (tmp_path / f"{n}.cpp" for n in NAMES)
    cold = [[a, c], [b, d]]
    objects = {(a, c): "ac.o", (b, d): "bd.o", (a,): "a.o", (b,): "b.o", (c,): "c.o", (d,): "d.o"}
    for name in objects.values():
        (tmp_path / name).write_bytes(b"")
    big = dict.fromkeys([a, b, c, d], 6000)  # each file's own code costs most of a TU
    small = dict.fromkeys([a, b, c, d], 60)  # bench4's: a few lines each

    def regroup(stale: dict[str, list[str]], slots: int, last: list[list[Path]] | None = cold,
                tokens: dict[Path, int] = big) -> tuple[list[list[Path]], list[list[Path]]]:
        return unity_regroup.regroup(cold, last, stale, lambda m: Path(objects[tuple(m)]),
                                     tmp_path, slots, (), tokens.__getitem__)

    # On two slots the edited file and its partner compile side by side; on one, the group
    # as it was is one compile instead of two.
    assert regroup({"ac.o": [str(c)]}, 2) == ([[b, d]], [[c], [a]])
    assert regroup({"ac.o": [str(c)]}, 1) == ([[b, d]], [[a, c]])
    # Files of a few lines: a TU of two costs about one file, so the split would only burn a
    # second TU's fixed part (bench4 with the PCH: 14.2 CPU-s for two, 12.9-15.6 for one).
    assert regroup({"ac.o": [str(c)]}, 2, tokens=small) == ([[b, d]], [[a, c]])
    # No record of what changed (a first build, a folder made elsewhere): the cold groups.
    assert regroup({}, 2, last=None) == ([], cold)
    assert unity_regroup.regroup(cold, cold, None, lambda m: Path("x"), tmp_path, 2) == ([], cold)
    # A group whose object is gone compiles again as it was; the others keep theirs.
    (tmp_path / "bd.o").unlink()
    assert regroup({}, 2) == ([[a, c]], [[b, d]])

"""Unity TUs: which names a file declares for itself, and which files may share a TU (no compile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.core.unity import groups as unity

HEAD = "#include <torch/extension.h>\n"


def names(tmp_path: Path, text: str) -> unity.FileNames:
    path = tmp_path / "x.cpp"
    path.write_text(text)
    return unity.file_names(path)


@pytest.mark.parametrize(
    ("text", "declared"),
    [
        ("static int helper(int x) { return x; }", {"helper"}),
        ("static PyObject* answer(PyObject*, PyObject*) { return nullptr; }", {"answer"}),
        ("namespace { at::Tensor scale(const at::Tensor& x, double f) { return x; } }", {"scale"}),
        ("static std::map<int, int> table, other;", {"table", "other"}),
        ("static const float kScale = 2.0f, kBias = 1.0f;", {"kScale", "kBias"}),
        ("template <typename T> static T twice(T x) { return x * 2; }", {"twice"}),
        ("namespace { struct Impl { int v = 1; }; int counter = 0; void run() {} }",
         {"Impl", "counter", "run"}),
        ("namespace ops { namespace { int hidden; } }", {"hidden"}),
        ("struct Params { int n; };", {"Params"}),
        ("enum class Mode { fast, slow };", {"Mode"}),
        ("typedef float scalar_t;", {"scalar_t"}),
        ("using index_t = long;", {"index_t"}),
        ("using torch::Tensor;", {"Tensor"}),
        ("#define BLOCK 256\n#define TEMP 1\n#undef TEMP\n", {"BLOCK"}),
        ('extern "C" { static int c_helper() { return 1; } }', {"c_helper"}),
        ("static auto square = [](int x) { static int calls; return x * x; };", {"square"}),
    ],
)
def test_names_a_file_declares_for_itself(tmp_path: Path, text: str, declared: set[str]) -> None:
    assert names(tmp_path, HEAD + text).own == {name.encode() for name in declared}


@pytest.mark.parametrize(
    "text",
    [
        "torch::Tensor scale(const torch::Tensor& x) { static int calls = 0; return x; }",
        "struct Op { static int count(); int run() { return 1; } };\nstruct Op;",
        'const char* text = "static int helper() {}"; // static int other();',
        "/* namespace { int hidden; } */ int visible();",
        'const char* raw = R"x(static int helper();)x";',
        "TORCH_LIBRARY(myops, m) { m.def(\"f(Tensor x) -> Tensor\"); }",
    ],
)
def test_external_names_and_what_text_only_mentions_are_not_declared(tmp_path: Path, text: str) -> None:
    found = names(tmp_path, HEAD + text).own
    assert not found & {b"helper", b"hidden", b"other", b"calls", b"count", b"run"}, found


def test_a_namespace_scope_using_directive_is_seen(tmp_path: Path) -> None:
    assert names(tmp_path, HEAD + "using namespace torch::indexing;").using_namespace
    assert not names(tmp_path, HEAD + "void f() { using namespace std; }").using_namespace


def write(directory: Path, files: dict[str, str]) -> list[Path]:
    for name, text in files.items():
        (directory / name).write_text(text)
    return sorted(directory / name for name in files if name.endswith(".cpp"))


def member_names(groups: list[list[Path]]) -> list[list[str]]:
    return [[path.name for path in group] for group in groups]


def test_four_independent_files_make_one_group_per_slot(tmp_path: Path) -> None:
    sources = write(tmp_path, {f"{n}.cpp": f"{HEAD}int {n}_value() {{ return 1; }}\n" for n in "abcd"})
    groups, notes = unity.group(sources, 2)
    assert member_names(groups) == [["a.cpp", "c.cpp"], ["b.cpp", "d.cpp"]] and notes == []


def test_no_more_files_than_slots_keeps_every_file_alone(tmp_path: Path) -> None:
    sources = write(tmp_path, {f"{n}.cpp": HEAD for n in "ab"})
    assert unity.group(sources, 2) == ([[sources[0]], [sources[1]]], [])


def test_files_declaring_the_same_names_for_themselves_never_share_a_tu(tmp_path: Path) -> None:
    sources = write(tmp_path, {
        "a.cpp": HEAD + "static int helper() { return 1; }\n",
        "b.cpp": HEAD + "static int helper() { return 2; }\n",
        "c.cpp": HEAD + "namespace { struct Impl { int v = 3; }; }\n",
        "d.cpp": HEAD + "namespace { struct Impl { int v = 4; }; }\n",
        "e.cpp": HEAD + "int helper_free_e();\n",
    })
    groups, notes = unity.group(sources, 1)
    together = [set(group) for group in member_names(groups)]
    assert not any({"a.cpp", "b.cpp"} <= g or {"c.cpp", "d.cpp"} <= g for g in together), together
    assert any("'helper'" in note for note in notes) and any("'Impl'" in note for note in notes)


def test_a_name_one_file_declares_and_another_calls_keeps_them_apart(tmp_path: Path) -> None:
    """An overload declared for one file must not win a call in another."""
    sources = write(tmp_path, {
        "a.cpp": HEAD + "static float scale(float x) { return x; }\n",
        "b.cpp": HEAD + "double use(double x) { return scale(x); }\n",
        "c.cpp": HEAD,
    })
    groups, notes = unity.group(sources, 1)
    assert ["a.cpp", "b.cpp"] not in member_names(groups)
    assert notes == ["b.cpp compiled on its own: a.cpp declares 'scale', which b.cpp names too"]


def test_macros_of_a_header_only_one_file_includes_count_as_its_own(tmp_path: Path) -> None:
    sources = write(tmp_path, {
        "private.h": "#pragma once\n#define WIDTH 4\n",
        "shared.h": "#pragma once\n#define CHECK(x) x\n",
        "a.cpp": HEAD + '#include "private.h"\n#include "shared.h"\nint a() { return CHECK(WIDTH); }\n',
        "b.cpp": HEAD + '#include "shared.h"\nint WIDTH = 2; int b() { return CHECK(WIDTH); }\n',
        "c.cpp": HEAD + '#include "shared.h"\nint c() { return CHECK(1); }\n',
    })
    groups, _ = unity.group(sources, 1)
    assert member_names(groups) == [["a.cpp", "c.cpp"], ["b.cpp"]]


def test_a_using_directive_goes_last_and_only_once_per_group(tmp_path: Path) -> None:
    sources = write(tmp_path, {
        "a.cpp": HEAD + "using namespace torch;\nint a();\n",
        "b.cpp": HEAD + "int b();\n",
        "c.cpp": HEAD + "using namespace at;\nint c();\n",
    })
    groups, notes = unity.group(sources, 1)
    assert member_names(groups) == [["b.cpp", "a.cpp"], ["c.cpp"]]
    assert notes == ["c.cpp compiled on its own: c.cpp and another file both have 'using namespace'"]


def test_a_path_no_include_line_can_name_stays_alone(tmp_path: Path) -> None:
    quoted = tmp_path / 'say "hi"'
    quoted.mkdir()
    sources = [*write(tmp_path, {"a.cpp": HEAD, "b.cpp": HEAD}), *write(quoted, {"c.cpp": HEAD})]
    groups, _ = unity.group(sources, 1)
    assert [quoted / "c.cpp"] in groups and [tmp_path / "a.cpp", tmp_path / "b.cpp"] in groups


def test_groups_hold_at_most_max_files(tmp_path: Path) -> None:
    count = 2 * unity.MAX_FILES + 1
    sources = write(tmp_path, {f"f{i:02d}.cpp": f"{HEAD}int f{i}();\n" for i in range(count)})
    groups, _ = unity.group(sources, 1)
    assert len(groups) == 3 and max(map(len, groups)) <= unity.MAX_FILES
    assert sorted(path for group in groups for path in group) == sources


def test_the_generated_tu_includes_each_member_by_its_absolute_path(tmp_path: Path) -> None:
    members = [tmp_path / "dir with spaces $x" / "a.cpp", tmp_path / "b.cpp"]
    text = unity.source_text(members)
    assert text.splitlines()[1:] == [f'#include "{members[0]}"', f'#include "{members[1]}"']

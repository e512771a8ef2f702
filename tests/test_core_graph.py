"""The ninja file without compiling: escaping, object names, hostile paths."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from pep517_torch.core import naming
from pep517_torch.core.ninja import syntax as ninja_syntax
from pep517_torch.core.plan import prepare
from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind
from pep517_torch.core.toolchain.tools import find_ninja

NASTY = ["a b", "dollar$x", "colon:y", "quote'q", 'dq"x', "hash#h", "semi;s", "amp&a", "ünï", "$(touch PWNED)"]


@pytest.mark.parametrize("text", NASTY)
def test_shell_args_keep_every_argument_whole(text: str) -> None:
    line = ninja_syntax.shell_args([text, "-DX=" + text])
    unescaped = line.replace("$$", "$")  # what ninja hands to the shell
    assert shlex.split(unescaped) == [text, "-DX=" + text]


def test_newlines_are_refused() -> None:
    with pytest.raises(ValueError, match="newline"):
        ninja_syntax.escape_path("a\nb")


def make_sources(directory: Path, names: list[str]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("int f_" + str(abs(hash(name))) + "() { return 0; }\n")
        paths.append(path)
    return paths


def test_object_names_never_collide(tmp_path: Path) -> None:
    sources = make_sources(tmp_path, ["x.cpp", "x.cu", "a/x.cpp", "b/x.cpp", "a b.cpp", "a_b.cpp"])
    spec = ExtensionSpec("pkg._C", tuple(sources))
    names = [naming.object_name(spec, s, tmp_path) for s in sources]
    assert len(set(names)) == len(names)
    assert all(n.startswith("obj/pkg._C/") and " " not in n for n in names)


def test_ninja_accepts_a_graph_of_hostile_paths(tmp_path: Path) -> None:
    root = tmp_path / "dir with spaces ünï $x 'q' #h"
    sources = make_sources(root, [f"{n}.cpp" for n in NASTY])
    specs = [
        ExtensionSpec("pkg._C", tuple(sources[:5]), include_dirs=(root,)),
        ExtensionSpec("pkg.sub._ops", tuple(sources[5:]), kind=Kind.LIBRARY,
                      python_abi_suffix=False, define_macros=(("MSG", '"a b"'),)),
    ]
    build = tmp_path / "build dir $y"
    plan = prepare(specs, BuildOptions(build_dir=build, source_root=root, pch=False))
    text = plan.ninja_file.read_text()
    assert text.count("rule cxx") == 1 and "build out/pkg/sub/_ops.so: link" in text
    dry = subprocess.run([str(find_ninja({})), "-C", str(build), "-n"], capture_output=True, text=True)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.count("compiling ") == len(NASTY)
    # Rewritten only when the content changes: same specs, same mtime.
    before = plan.ninja_file.stat().st_mtime_ns
    prepare(specs, BuildOptions(build_dir=build, source_root=root, pch=False))
    assert plan.ninja_file.stat().st_mtime_ns == before


def test_the_whole_torch_api_starts_before_a_few_of_its_headers(tmp_path: Path) -> None:
    """ninja starts ready compiles in the order the file lists them: a TU of torch/extension.h
    (~30 s) goes before one of torch/library.h (a few seconds), even in a later extension, as
    in an op library of a dozen extensions with two pybind11 modules declared last."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "op.cpp").write_text("#include <torch/library.h>\n")
    (root / "aten.cpp").write_text('#include "aten.h"\n')  # through a project header
    (root / "aten.h").write_text("#include <ATen/ATen.h>\n")
    (root / "module.cpp").write_text("#include <torch/extension.h>\n")
    (root / "plain.cpp").write_text("int plain() { return 0; }\n")
    specs = [ExtensionSpec("pkg._op", (root / "op.cpp", root / "plain.cpp")),
             ExtensionSpec("pkg._aten", (root / "aten.cpp",)),
             ExtensionSpec("pkg._module", (root / "module.cpp",))]
    plan = prepare(specs, BuildOptions(build_dir=tmp_path / "b", source_root=root, pch=False,
                                       unity=False))
    text = plan.ninja_file.read_text()
    order = [line.split(":")[0].split()[-1] for line in text.splitlines()
             if line.startswith("build obj/") and ": cxx " in line]
    assert [Path(o).name for o in order] == ["module.cpp.o", "aten.cpp.o", "op.cpp.o", "plain.cpp.o"]

"""The include scan: which includes are conditional (inside #if blocks), and the CPU-torch check
that refuses only unconditional includes of torch's CUDA headers."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from pep517_torch.core import scan
from pep517_torch.core.build import build
from pep517_torch.core.plan import prepare
from pep517_torch.core.spec import BuildOptions, ExtensionSpec, Kind
from pep517_torch.errors import ToolchainError
from tests.commands import run_python


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def flags(path: Path) -> list[tuple[str, bool]]:
    return [(i.header, i.conditional) for i in scan.includes(path)]


def test_includes_inside_if_blocks_are_conditional(tmp_path: Path) -> None:
    source = write(tmp_path / "a.cpp", """\
        #include <torch/library.h>
        #ifdef WITH_CUDA
        #include <ATen/cuda/CUDAContext.h>
        #else
        #include "cpu.h"
        #endif
        # if defined(USE_CUDA) && \\
             !defined(USE_ROCM)
        #  if TORCH_CUDA_VERSION > 12
        #    include <c10/cuda/CUDAGuard.h>
        #  endif
        #  include <c10/cuda/CUDAStream.h>
        # elif 0
        #include <nested.h>
        # endif
        /* #if in a comment
        */
        #include <after.h>
        #ifndef NDEBUG
        #define EXTRA 1
        #include <debug.h>
        #endif
        """)
    assert flags(source) == [
        ("torch/library.h", False),
        ("ATen/cuda/CUDAContext.h", True),
        ("cpu.h", True),
        ("c10/cuda/CUDAGuard.h", True),
        ("c10/cuda/CUDAStream.h", True),
        ("nested.h", True),
        ("after.h", False),
        ("debug.h", True),
    ]


@pytest.mark.parametrize(
    "guard",
    [
        "#ifndef MY_HEADER_H\n#define MY_HEADER_H\n",
        "#if !defined(MY_HEADER_H)\n#define MY_HEADER_H\n",
        "#pragma once\n#  ifndef MY_HEADER_H\n#  define MY_HEADER_H 1\n",
    ],
)
def test_an_include_guard_is_not_a_condition(tmp_path: Path, guard: str) -> None:
    header = tmp_path / "h.h"
    header.write_text(
        f"// licence\n{guard}#include <c10/cuda/CUDAGuard.h>\n#ifdef X\n#include <x.h>\n#endif\n"
        "#endif  // MY_HEADER_H\n"
    )
    assert flags(header) == [("c10/cuda/CUDAGuard.h", False), ("x.h", True)]


def test_a_block_that_does_not_close_the_file_is_no_guard(tmp_path: Path) -> None:
    header = tmp_path / "h.h"
    header.write_text(
        "#ifndef WITH_CUDA\n#define WITH_CUDA\n#endif\n#ifndef WITH_CUDA\n#define WITH_CUDA\n"
        "#include <ATen/cuda/CUDAContext.h>\n#endif\n"
    )
    assert flags(header) == [("ATen/cuda/CUDAContext.h", True)]


def test_conditions_carry_through_project_headers(tmp_path: Path) -> None:
    write(tmp_path / "cuda_bits.h", "#pragma once\n#include <ATen/cuda/CUDAContext.h>\n")
    guarded = write(tmp_path / "guarded.cpp", '#ifdef WITH_CUDA\n#include "cuda_bits.h"\n#endif\n')
    [found] = [i for i in scan.walk_includes([guarded], []) if i.header.startswith("ATen")]
    assert found.conditional and found.file.name == "cuda_bits.h"
    assert scan.torch_cuda_includes(scan.walk_includes([guarded], [])) == []
    # reached unconditionally by another source: the include is unconditional again
    plain = write(tmp_path / "plain.cpp", '#include "cuda_bits.h"\n')
    for order in ([guarded, plain], [plain, guarded]):
        [offending] = scan.torch_cuda_includes(scan.walk_includes(order, []))
        assert (offending.file.name, offending.line, offending.conditional) == ("cuda_bits.h", 2, False)


GUARDED_OP = """\
    #include <torch/library.h>
    #include <ATen/core/Tensor.h>
    #ifdef WITH_CUDA
    #include <ATen/cuda/CUDAContext.h>
    #endif
    at::Tensor plus_one(const at::Tensor& x) { return x.add(1); }
    TORCH_LIBRARY(guarded, m) { m.def("plus_one(Tensor x) -> Tensor", plus_one); }
    """


@pytest.mark.compile
def test_guarded_cuda_include_builds_on_a_cpu_torch(tmp_path: Path) -> None:
    """Real projects guard torch's CUDA headers with #ifdef WITH_CUDA; on a CPU torch such a
    source compiles (the block is skipped), so it must not be refused before compiling."""
    source = write(tmp_path / "csrc" / "ops.cpp", GUARDED_OP)
    spec = ExtensionSpec("guarded", (source,), kind=Kind.LIBRARY, python_abi_suffix=False,
                         pch=False)
    result = build([spec], BuildOptions(build_dir=tmp_path / "b"), log=lambda _: None)
    code = (f"import torch; torch.ops.load_library({str(result.artifacts['guarded'])!r});"
            " print(torch.ops.guarded.plus_one(torch.arange(3.0)).tolist())")
    assert run_python(code).stdout.strip() == "[1.0, 2.0, 3.0]"


def test_unguarded_cuda_include_is_refused_before_compiling(tmp_path: Path) -> None:
    source = write(tmp_path / "csrc" / "ops.cpp", GUARDED_OP.replace("#ifdef WITH_CUDA", "")
                   .replace("#endif", ""))
    spec = ExtensionSpec("unguarded", (source,), kind=Kind.LIBRARY, python_abi_suffix=False)
    said = f"{source}:4 includes <ATen/cuda/CUDAContext.h>, but torch 2.13.0+cpu is a CPU build"
    with pytest.raises(ToolchainError, match="^" + re.escape(said)) as failure:
        prepare([spec], BuildOptions(build_dir=tmp_path / "b"))
    assert "Extension 'unguarded' needs a CUDA build of torch" in str(failure.value)
    assert not (tmp_path / "b").exists()


def test_scan_finds_first_include_and_torch_cuda_headers(tmp_path: Path) -> None:
    (tmp_path / "h.h").write_text('#pragma once\n#include <ATen/cuda/CUDAContext.h>\n')
    source = tmp_path / "a.cpp"
    source.write_text('// comment\n/* block\n comment */\n#pragma once\n#include <torch/extension.h>\n#include "h.h"\n')
    assert scan.first_directive_include(source) == "torch/extension.h"
    found = scan.walk_includes([source], [])
    assert scan.uses_torch_headers(found)
    [cuda] = scan.torch_cuda_includes(found)
    assert (cuda.file.name, cuda.line) == ("h.h", 2)


def test_cpu_torch_refuses_torch_cuda_headers_before_compiling(tmp_path: Path) -> None:
    source = tmp_path / "a.cpp"
    source.write_text("#include <c10/cuda/CUDAGuard.h>\n")
    with pytest.raises(ToolchainError, match=r"a\.cpp:1 includes <c10/cuda/CUDAGuard\.h>.*CPU build"):
        prepare([ExtensionSpec("m", (source,))], BuildOptions(build_dir=tmp_path / "b"))
    assert not (tmp_path / "b" / "obj").exists()


def test_headers_that_reach_each_other_through_dot_dot_and_symlinks_are_walked_once(tmp_path: Path) -> None:
    """glm's headers include their siblings as "../detail/x.hpp", round in circles; a symlink
    to "." does the same without "..": each file is scanned once, under the path first seen
    (the walk used to grow "detail/../detail/../…" until the name was too long)."""
    from pep517_torch.core import plan

    glm = tmp_path / "third_party" / "glm"
    write(glm / "glm" / "glm.hpp", '#include "detail/setup.hpp"\n#include "detail/qualifier.hpp"\n')
    write(glm / "glm" / "detail" / "setup.hpp", '#pragma once\n#include "../detail/qualifier.hpp"\n')
    write(glm / "glm" / "detail" / "qualifier.hpp", '#pragma once\n#include "../detail/setup.hpp"\n'
          '#include <ATen/cuda/CUDAContext.h>\n')
    looped = tmp_path / "inc"
    write(looped / "a.h", '#include "self/a.h"\n#include <torch/extension.h>\n')
    (looped / "self").symlink_to(".", target_is_directory=True)
    source = write(tmp_path / "csrc" / "k.cpp", '#include <glm/glm.hpp>\n#include "a.h"\nint k();\n')
    dirs = [glm, looped]
    reached = scan.reached_files([source], dirs)
    assert sorted(str(p.relative_to(tmp_path)) for p in reached) == [
        "csrc/k.cpp", "inc/a.h", "third_party/glm/glm/detail/qualifier.hpp",
        "third_party/glm/glm/detail/setup.hpp", "third_party/glm/glm/glm.hpp"]
    assert [i.header for i in scan.torch_cuda_includes(scan.walk_includes([source], dirs))] == [
        "ATen/cuda/CUDAContext.h"]
    leading = write(tmp_path / "csrc" / "l.cpp", '#include "a.h"\nint l();\n')
    assert scan.leading_header(leading, [looped]) is None  # a.h's first include is itself
    # the planner walks them too: one line about the CUDA header, no traceback
    spec = ExtensionSpec("m", (source,), include_dirs=tuple(dirs))
    with pytest.raises(ToolchainError, match="CUDAContext.h"):
        plan.check([spec], BuildOptions(build_dir=tmp_path / "b", compiler_launcher="none",
                                        source_root=tmp_path, pch=False))

"""An editable install whose build folder is a cache (issue 24 item 5).

After `pip install -e . --no-build-isolation`: `rm -rf build` (sources intact) rebuilds on the
next import; a compile error's ImportError ends with the compiler's first error (file:line);
a project that moved says that it moved. Each step compiles ~1 s CPython C-API sources.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path

from tests.commands import run_python
from tests.test_editable_replan import LIMIT, install
from tests.test_frontends import venv  # noqa: F401 (a fixture: a fresh venv seeing ours)
from tests.tiny_project import set_value, write_project

CODE = "import healing; print(healing.value())"


def ends_with_the_compilers_error(stderr: str, project: Path) -> None:
    """The ImportError's last unindented line is gcc's first error, file:line first (only
    the quoted source line and caret follow); the log's path comes before it."""
    message = stderr.rstrip().split("ImportError: ", 1)[1].splitlines()
    unindented = [line for line in message if not line.startswith((" ", "\t"))]
    assert unindented[-1].startswith(f"{project / 'csrc' / 'value.cpp'}:1:"), stderr
    assert "undefined_name" in unindented[-1] and "error" in unindented[-1]
    assert "full log" in "\n".join(unindented[:-1])


def test_a_removed_build_folder_is_built_again(tmp_path: Path, venv: Path) -> None:  # noqa: F811
    project = write_project(tmp_path / "proj", "healing")
    set_value(project, 5)
    python = venv / "bin" / "python"
    install(project, python)
    import_healing = partial(run_python, CODE, python=python, cwd=tmp_path, check=False,
                             timeout=LIMIT)
    assert import_healing().stdout.split() == ["5"]
    shutil.rmtree(project / "build")
    again = import_healing()
    assert again.returncode == 0 and again.stdout.split() == ["5"], again.stderr
    assert "the build directory is gone or incomplete; building it again" in again.stderr
    assert (project / "build").is_dir()
    warm = import_healing()  # and then no rebuild at all
    assert warm.stdout.split() == ["5"] and "building" not in warm.stderr, warm.stderr

    # A compile error after the folder is gone: the ImportError ends with the compiler's error.
    shutil.rmtree(project / "build")
    (project / "csrc" / "value.cpp").write_text("int value() { return undefined_name; }\n")
    broken = import_healing()
    assert broken.returncode != 0
    ends_with_the_compilers_error(broken.stderr, project)
    set_value(project, 6)
    fixed = import_healing()
    assert fixed.stdout.split() == ["6"], fixed.stderr


def test_a_compile_error_on_import_ends_with_the_compilers_first_error(
    tmp_path: Path, venv: Path  # noqa: F811
) -> None:
    project = write_project(tmp_path / "proj", "healing")
    python = venv / "bin" / "python"
    install(project, python)
    import_healing = partial(run_python, CODE, python=python, cwd=tmp_path, check=False,
                             timeout=LIMIT)
    (project / "csrc" / "value.cpp").write_text("int value() { return undefined_name; }\n")
    broken = import_healing()
    assert broken.returncode != 0
    ends_with_the_compilers_error(broken.stderr, project)


def test_a_moved_project_says_that_it_moved(tmp_path: Path, venv: Path) -> None:  # noqa: F811
    project = write_project(tmp_path / "proj", "healing")
    python = venv / "bin" / "python"
    install(project, python)
    import_healing = partial(run_python, CODE, python=python, cwd=tmp_path, check=False,
                             timeout=LIMIT)
    project.rename(tmp_path / "elsewhere")
    moved = import_healing()
    assert moved.returncode != 0
    last = moved.stderr.rstrip().splitlines()[-1]
    assert last.startswith("ImportError: healing is installed in editable mode from"), moved.stderr
    assert str(project) in last and "the project moved or was deleted" in last

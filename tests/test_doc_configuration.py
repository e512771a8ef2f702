"""Every TOML example in docs/configuration.md builds as written (issue #15 item 5).

Each ```toml block is taken from the page, completed into a project around it (a `[project]`
table if it has none, and the smallest files its keys point at: one tiny C-API source per
source glob, the packages, version files, package data and sdist files it names) and built
into a wheel and an sdist. The built modules are then imported from the unpacked wheel and
operator libraries loaded with ``torch.ops.load_library``. What the test adds never includes
an ``__init__.py`` the page does not ask for: a module's package is a package (the page says
so), an operator library's folder is just a folder.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.config.pyproject import tomllib
from pep517_torch.core.naming import artifact_name
from pep517_torch.core.spec import Kind
from tests.commands import run_python
from tests.tiny_project import NAMED_MODULE as MODULE_SOURCE

pytestmark = pytest.mark.compile

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"

LIBRARY_SOURCE = 'extern "C" int example_marker() { return 42; }\n'
EXTRA_SOURCE = "int example_extra_{n}() {{ return {n}; }}\n"
CUDA_SOURCE = "__global__ void example_kernel_{n}(float* x) {{ x[threadIdx.x] += {n}.0f; }}\n"


def examples() -> Iterator[tuple[str, str]]:
    """(id, TOML text) of every ```toml block, named after the heading above it."""
    heading, seen = "top", {}
    for match in re.finditer(r"^(#{2,4}) ([^\n]+)$|^```toml\n(.*?)^```", DOC.read_text(), re.M | re.S):
        if match.group(2):
            heading = re.sub(r"[^a-z0-9]+", "-", match.group(2).lower()).strip("-")
            continue
        seen[heading] = seen.get(heading, 0) + 1
        yield f"{heading}-{seen[heading]}", match.group(3)


class Project:
    """The smallest project around one example."""

    def __init__(self, root: Path, text: str) -> None:
        self.root = root
        self.doc = tomllib.loads(text)
        if "project" not in self.doc:
            text = ('[project]\nname = "example"\nversion = "1.0.0"\ndynamic = ["dependencies"]\n\n'
                    + text)
            self.doc = tomllib.loads(text)
        self.tool: dict[str, Any] = self.doc.get("tool", {}).get("torch-ext", {})
        self.counter = 0
        root.mkdir(parents=True)
        (root / "pyproject.toml").write_text(text)
        for line in text.splitlines():  # "# a/b -> ../c": the example describes a symlink
            link = re.match(r"#\s*(\S+)\s*->\s*(\S+)\s*$", line.strip())
            if link:
                (root / link.group(1)).parent.mkdir(parents=True, exist_ok=True)
                target = (root / link.group(1)).parent / link.group(2)
                target.mkdir(parents=True, exist_ok=True)
                (root / link.group(1)).symlink_to(link.group(2), target_is_directory=True)

    def package_dir(self, name: str) -> Path:
        mapping = self.tool.get("package-dir", {})
        mapping = {"": mapping} if isinstance(mapping, str) else mapping
        parts = name.split(".")
        for depth in range(len(parts), 0, -1):
            if ".".join(parts[:depth]) in mapping:
                return self.root / mapping[".".join(parts[:depth])] / Path(*parts[depth:])
        return self.root / mapping.get("", "") / Path(*parts)

    def package(self, name: str) -> None:
        for depth in range(1, name.count(".") + 2):
            init = self.package_dir(".".join(name.split(".")[:depth])) / "__init__.py"
            init.parent.mkdir(parents=True, exist_ok=True)
            if not init.exists():
                init.write_text('__version__ = "1.0.0"\n')

    def file(self, glob: str, content: str) -> Path:
        """A file the glob matches (created unless it exists)."""
        self.counter += 1
        relative = re.sub(r"\*\*/", "", glob).replace("**", "x").replace("?", "x")
        relative = re.sub(r"\[[^]]*\]", "x", relative).replace("*", f"example{self.counter}")
        path = self.root / relative
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            numbered = content in (EXTRA_SOURCE, CUDA_SOURCE)  # templates of unique names
            path.write_text(content.format(n=self.counter) if numbered else content)
        return path

    def extension(self, table: dict[str, Any], extra_tables: list[dict[str, Any]]) -> None:
        name = table["name"]
        if "." in name:
            kind = table.get("kind", "module")
            self.package(name.rpartition(".")[0] if kind == "module" else name.split(".")[0])
        first = LIBRARY_SOURCE if table.get("kind") == "library" else MODULE_SOURCE
        for index, glob in enumerate(table.get("sources", [])):
            self.file(glob, CUDA_SOURCE if glob.endswith(".cu") else first if index == 0 else EXTRA_SOURCE)
        for extra in [table.get("cuda", {}), *extra_tables]:
            for glob in extra.get("sources", []):
                self.file(glob, CUDA_SOURCE if glob.endswith(".cu") else EXTRA_SOURCE)
        for key in ("include-dirs", "library-dirs"):
            for directory in [*table.get(key, []), *table.get("cuda", {}).get(key, [])]:
                (self.root / directory).mkdir(parents=True, exist_ok=True)

    def complete(self) -> None:
        overrides = self.tool.get("overrides", [])
        for table in self.tool.get("extension", []):
            changes = [*overrides, *(o.get("append", {}) for o in overrides)]
            extra = [c.get("extension", {}).get(key, {}) for c in changes for key in (table["name"], "*")]
            self.extension(table, extra)
        mapping = self.tool.get("package-dir", {})
        for name in [*self.tool.get("packages", []), *(mapping if isinstance(mapping, dict) else ())]:
            if name:
                self.package(name)
        for module in self.tool.get("py-modules", []):
            path = self.package_dir(module).with_suffix(".py")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("ANSWER = 42\n")
        for package, globs in self.tool.get("package-data", {}).items():
            self.package(package)
            for glob in globs:
                self.file(str(self.package_dir(package).relative_to(self.root) / glob), "data\n")
        for glob in self.tool.get("sdist-include", []):
            self.file(glob, "// vendored\n")
        versions = [self.tool.get("version", {})]
        versions += [o.get("version", {}) for o in self.tool.get("overrides", [])]
        for version in versions:
            if "file" in version:
                path = self.root / version["file"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text('__version__ = "1.0.0"\nVERSION = "1.0.0"\n')
        if not any(self.root.glob("**/__init__.py")) and not self.tool.get("py-modules"):
            self.package(re.sub(r"[^A-Za-z0-9_]", "_", self.doc["project"]["name"]))
        if "setuptools_scm" in self.doc.get("tool", {}):  # a version from git: a tagged clone
            (self.root / ".gitignore").write_text("build/\n")
            for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "example"],
                         ["tag", "v1.0.0"]):
                subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                                *args], cwd=self.root, check=True, capture_output=True)

    def environment_keys(self) -> set[str]:
        """Variables the example's conditions and version read: unset for a build as written."""
        found = set(re.findall(r"env\.([A-Z_][A-Z0-9_]*)", (self.root / "pyproject.toml").read_text()))
        found |= set(re.findall(r'suffix-env\s*=\s*"([^"]+)"', (self.root / "pyproject.toml").read_text()))
        return found


def _built(root: Path, out: Path, settings: dict[str, str]) -> tuple[pipeline.Loaded, Path]:
    loaded = pipeline.load(root, settings)
    wheel = out / pipeline.build_wheel(root, out, settings)
    sdist = out / pipeline.build_sdist(root, out, settings)
    assert sdist.is_file()
    return loaded, wheel


IMPORT_CHECK = """
import ctypes, importlib, sys, torch
for kind, name, path in {checks!r}:
    if kind == "module":
        assert importlib.import_module(name).answer() == 42, name
    else:
        torch.ops.load_library(path)
        assert ctypes.CDLL(path).example_marker() == 42, path
print("ok", len({checks!r}))
"""


def check_wheel(loaded: pipeline.Loaded, wheel: Path, unpacked: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(unpacked)
    checks = []
    for spec in loaded.project.extensions:
        arcname = artifact_name(spec)
        assert arcname in names, (arcname, sorted(names))
        kind = "module" if spec.kind is Kind.MODULE else "library"
        checks.append((kind, spec.name, str(unpacked / arcname)))
    if checks:
        result = run_python(IMPORT_CHECK.format(checks=checks), env={"PYTHONPATH": str(unpacked)},
                            cwd=unpacked.parent)
        assert f"ok {len(checks)}" in result.stdout


EXAMPLES = list(examples())


def test_the_page_has_its_examples() -> None:
    assert len(EXAMPLES) >= 12
    assert any("kind = \"library\"" in text for _, text in EXAMPLES)


@pytest.mark.parametrize("text", [t for _, t in EXAMPLES], ids=[i for i, _ in EXAMPLES])
def test_example_builds_as_written(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = Project(tmp_path / "project", text)
    example.complete()
    for key in example.environment_keys():
        monkeypatch.delenv(key, raising=False)
    loaded, wheel = _built(example.root, tmp_path / "dist", {})
    check_wheel(loaded, wheel, tmp_path / "unpacked")


# Examples whose built files change with CUDA on: a `cuda` table or an `if.cuda` condition.
CUDA_EXAMPLES = [(i, t) for i, t in EXAMPLES if re.search(r"\.cuda\]|\bif\.cuda\b", t)]


@pytest.mark.cuda
@pytest.mark.parametrize("text", [t for _, t in CUDA_EXAMPLES], ids=[i for i, _ in CUDA_EXAMPLES])
def test_cuda_example_builds_with_cuda_on(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same examples with -Ccuda=true: their `cuda` tables and `.cu` files compile with
    nvcc (against this CPU torch: the kernels are built, not run)."""
    if sys.platform != "linux":
        pytest.skip("nvcc builds are tested on Linux")
    from pep517_torch.core.cuda import toolkit as cuda

    if cuda.find_cuda(dict(__import__("os").environ)) is None:
        pytest.skip("no nvcc")
    example = Project(tmp_path / "project", text)
    example.complete()
    for key in example.environment_keys():
        monkeypatch.delenv(key, raising=False)
    loaded, wheel = _built(example.root, tmp_path / "dist", {"cuda": "true"})
    assert any(spec.uses_cuda for spec in loaded.project.extensions)
    check_wheel(loaded, wheel, tmp_path / "unpacked")


def _library_example() -> str:
    return next(text for _, text in EXAMPLES if 'kind = "library"' in text)


def test_editable_links_an_operator_library_into_its_folder(tmp_path: Path) -> None:
    """An op library's folder needs no ``__init__.py``: the editable install links the built
    library there, where ``torch.ops.load_library`` finds it next to the package."""
    example = Project(tmp_path / "project", _library_example())
    example.complete()
    assert not (example.root / "myops" / "lib").exists()
    pipeline.build_wheel(example.root, tmp_path / "dist", None, editable=True)
    link = example.root / "myops" / "lib" / "myops_kernels.so"
    assert link.is_symlink() and link.resolve().is_file()
    result = run_python(f"import ctypes, torch; torch.ops.load_library({str(link)!r});"
                        f" print(ctypes.CDLL({str(link)!r}).example_marker())")
    assert result.stdout.strip() == "42"


def test_a_module_still_needs_a_shipped_package(tmp_path: Path) -> None:
    """Only artifacts that are files may sit in a plain folder; a Python module is imported as
    part of its package, so that package must be shipped."""
    from pep517_torch.errors import ConfigError

    text = _library_example().replace('kind = "library"', 'kind = "module"')
    example = Project(tmp_path / "project", text)
    example.complete()
    (example.root / "myops" / "lib" / "__init__.py").unlink()
    with pytest.raises(ConfigError, match="package 'myops.lib', which is not one of the packages"):
        pipeline.build_wheel(example.root, tmp_path / "dist", None)
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())

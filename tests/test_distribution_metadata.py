"""METADATA from [project], the torch pin, and dynamic versions."""

from __future__ import annotations

import re
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from pep517_torch.config.version import read_version
from pep517_torch.distribution.metadata import build_metadata, merge_requirements, torch_pin
from pep517_torch.errors import ConfigError, ToolchainError


ROOT_FILES = {
    "README.md": "# Demo\n\nLong text.\n", "LICENSE": "BSD\n", "LICENSES/vendored.txt": "MIT\n",
}


def full_pyproject(**changes: Any) -> dict[str, Any]:
    project = {
        "name": "My_Ext.Ops",
        "dynamic": ["version"],
        "description": "Fast ops",
        "readme": "README.md",
        "license": "BSD-3-Clause AND MIT",
        "license-files": ["LICENSE", "LICENSES/*.txt"],
        "requires-python": ">=3.10",
        "authors": [{"name": "Ada", "email": "ada@example.org"}],
        "dependencies": ["numpy>=1.26"],
        "optional-dependencies": {"test": ["pytest>=8"]},
        "urls": {"Source": "https://example.org/src"},
        "scripts": {"my-ext": "my_ext.cli:main"},
        "gui-scripts": {"my-ext-gui": "my_ext.gui:main"},
        "entry-points": {"torch.ops": {"fast": "my_ext.ops"}},
        **changes,
    }
    return {"project": project}


def parse(data: bytes) -> Any:
    return BytesParser().parsebytes(data)


def test_full_project(root: Path) -> None:
    pin = torch_pin("2.13.0+cpu", "minor")
    assert pin is not None
    metadata = build_metadata(full_pyproject(), root, version="1.2.0", extra_requirements=[pin])
    assert metadata.name == "My_Ext.Ops"
    assert (metadata.distribution_name, metadata.version) == ("my_ext_ops", "1.2.0")
    message = parse(metadata.metadata_bytes())
    assert message["Metadata-Version"] == "2.4"
    assert message["License-Expression"] == "BSD-3-Clause AND MIT"
    assert message.get_all("License-File") == ["LICENSE", "LICENSES/vendored.txt"]
    assert message.get_all("Requires-Dist") == [
        "numpy>=1.26",
        "torch<2.14,>=2.13",
        'pytest>=8; extra == "test"',
    ]
    assert message["Provides-Extra"] == "test"
    assert message["Project-URL"] == "Source, https://example.org/src"
    assert message["Requires-Python"] == ">=3.10"
    assert message["Description-Content-Type"] == "text/markdown"
    assert message.get_payload() == "# Demo\n\nLong text.\n"
    assert metadata.entry_points_text() == (
        "[console_scripts]\nmy-ext = my_ext.cli:main\n\n"
        "[gui_scripts]\nmy-ext-gui = my_ext.gui:main\n\n"
        "[torch.ops]\nfast = my_ext.ops\n"
    )
    assert metadata.license_files == [
        ("LICENSE", root / "LICENSE"),
        ("LICENSES/vendored.txt", root / "LICENSES" / "vendored.txt"),
    ]
    assert metadata.referenced_files == [
        root / "LICENSE",
        root / "LICENSES" / "vendored.txt",
        root / "README.md",
    ]


def test_minimal_project_has_no_entry_points(root: Path) -> None:
    pyproject = {"project": {"name": "x", "version": "1.0.0-RC1"}}
    metadata = build_metadata(pyproject, root, version=None)
    assert metadata.version == "1.0.0rc1"
    assert metadata.entry_points_text() is None
    # no license-files: the root's LICENSE ships by PEP 639's default globs (LICENSES/ is a
    # folder, not a match); core metadata 2.4 then, 2.2 at least without it
    assert metadata.license_files == [("LICENSE", root / "LICENSE")]
    assert parse(metadata.metadata_bytes())["Metadata-Version"] == "2.4"
    (root / "LICENSE").unlink()
    bare = build_metadata(pyproject, root, version=None)
    assert bare.license_files == []
    assert parse(bare.metadata_bytes())["Metadata-Version"] == "2.2"


def test_dynamic_metadata_is_declared(root: Path) -> None:
    pyproject = full_pyproject()
    metadata = build_metadata(pyproject, root, version="1.0", dynamic_metadata=["Requires-Dist"])
    assert parse(metadata.metadata_bytes())["Dynamic"] == "Requires-Dist"


def test_dynamic_version_needs_a_value(root: Path) -> None:
    said = "is listed in project.dynamic but no version source gave one"
    with pytest.raises(ConfigError, match=said) as caught:
        build_metadata(full_pyproject(), root, version=None)
    assert caught.value.key == "project.version"
    said = "a dynamic version was computed but 'version' is not listed"
    with pytest.raises(ConfigError, match=said) as caught:
        build_metadata({"project": {"name": "x", "version": "1.0"}}, root, version="2.0")
    assert caught.value.key == "project.dynamic"


def test_pyproject_metadata_errors_become_config_errors(root: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("MISSING.md")) as caught:
        build_metadata(full_pyproject(readme="MISSING.md"), root, version="1.0")
    assert caught.value.key == "project.readme.file"


@pytest.mark.parametrize(
    ("version", "mode", "expected"),
    [
        ("2.13.0+cpu", "minor", "torch<2.14,>=2.13"),
        ("2.13.1+cu130", "minor", "torch<2.14,>=2.13"),
        ("2.13.0+cpu", "exact", "torch==2.13.0"),
        ("2.14.0.dev20260101+cu130", "minor", "torch<2.15,>=2.14.0.dev0"),
        ("2.14.0.dev20260101+cu130", "exact", "torch==2.14.0.dev20260101"),
        ("2.13.0", "none", None),
    ],
)
def test_torch_pin(version: str, mode: str, expected: str | None) -> None:
    pin = torch_pin(version, mode)  # type: ignore[arg-type]
    assert (None if pin is None else str(pin)) == expected
    if pin is not None:
        assert pin.specifier.contains(version, prereleases=True)


def test_torch_pin_needs_a_pep440_version() -> None:
    with pytest.raises(ToolchainError, match="not-a-version"):
        torch_pin("not-a-version", "minor")


def test_merge_folds_the_pin_into_the_users_torch_line() -> None:
    user = [Requirement("numpy"), Requirement("Torch[opt]>=2.0; sys_platform == 'linux'")]
    merged = merge_requirements(user, [Requirement("torch<2.14,>=2.13")])
    assert [str(requirement) for requirement in merged] == [
        "numpy",
        'Torch[opt]<2.14,>=2.13; sys_platform == "linux"',  # the looser >=2.0 is implied
    ]
    assert str(user[1]) == 'Torch[opt]>=2.0; sys_platform == "linux"'  # inputs untouched


def test_merge_appends_when_the_user_has_no_torch_line_and_keeps_urls() -> None:
    pin = Requirement("torch==2.13.0")
    merged = merge_requirements([Requirement("numpy")], [pin])
    assert [str(r) for r in merged] == ["numpy", "torch==2.13.0"]
    url = Requirement("torch @ https://example.org/torch.whl")
    merged = merge_requirements([url], [pin])
    assert [str(r) for r in merged] == ["torch @ https://example.org/torch.whl"]


def test_read_version_by_ast(tmp_path: Path) -> None:
    file = tmp_path / "__init__.py"
    file.write_text(
        '"""Doc."""\nimport os\n__version__ = "0.1"\n__version__ = version = "1.2.3"\n'
        'if os:\n    __version__ = "9"\n'
    )
    assert read_version(file, None) == "1.2.3"
    file.write_text('__version__: str = "2.0"\n')
    assert read_version(file, None, "+cu130") == "2.0+cu130"


def test_read_version_by_pattern(tmp_path: Path) -> None:
    file = tmp_path / "version.txt"
    file.write_text("name = demo\nVERSION = '3.4.5'\n")
    assert read_version(file, r"^VERSION = '([^']+)'") == "3.4.5"
    assert read_version(file, r"^VERSION = '([^']+)'", ".post1") == "3.4.5.post1"


@pytest.mark.parametrize(
    ("text", "pattern", "suffix", "key"),
    [
        ("x = 1\n", None, None, "tool.torch-ext.version.file"),
        ("__version__ = get()\n", None, None, "tool.torch-ext.version.file"),
        ("__version__ = 'banana'\n", None, None, "tool.torch-ext.version.file"),
        ("def (:\n", None, None, "tool.torch-ext.version.file"),
        ("__version__ = '1.0'\n", None, "+cu 130", "tool.torch-ext.version.suffix-env"),
        ("V=1\n", r"V=(\d)(\d)?", None, "tool.torch-ext.version.pattern"),
        ("V=1\n", r"W=(\d)", None, "tool.torch-ext.version.pattern"),
        ("V=1\n", r"V=(\d", None, "tool.torch-ext.version.pattern"),
    ],
)
def test_bad_versions_name_the_key(
    tmp_path: Path, text: str, pattern: str | None, suffix: str | None, key: str
) -> None:
    file = tmp_path / "v.py"
    file.write_text(text)
    with pytest.raises(ConfigError, match=f"^{re.escape(key)}: ") as caught:
        read_version(file, pattern, suffix)
    assert caught.value.key == key


def test_missing_version_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read") as caught:
        read_version(tmp_path / "absent.py", None)
    assert caught.value.key == "tool.torch-ext.version.file"


def test_license_expression_is_checked_and_canonical(root: Path) -> None:
    project = {"name": "x", "version": "1", "license": "mit or apache-2.0"}
    metadata = build_metadata({"project": project}, root, version=None)
    assert parse(metadata.metadata_bytes())["License-Expression"] == "MIT OR Apache-2.0"
    said = "'Nope-License' is not a valid SPDX license expression"
    with pytest.raises(ConfigError, match=said) as caught:
        project["license"] = "Nope-License"
        build_metadata({"project": project}, root, version=None)
    assert caught.value.key == "project.license"

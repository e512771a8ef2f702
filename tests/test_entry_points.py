"""Entry point groups, names and object references are checked against the specification before
anything is written: entry_points.txt is always well-formed. Nothing compiles here."""

from __future__ import annotations

import re
import zipfile
from importlib.metadata import PathDistribution
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.backend import pipeline
from pep517_torch.errors import ConfigError
from tests.config_helpers import LINUX_CPU, resolve
from tests.conftest import count

ROOT_FILES = {"pkg/__init__.py": ""}


BAD = [
    ({"scripts": {"bad\nname": "pkg.cli:main"}}, 'project.scripts."bad\\nname"', "line"),
    ({"scripts": {"has space": "pkg.cli:main"}}, 'project.scripts."has space"', "letters, digits"),
    ({"scripts": {"../../evil": "pkg.cli:main"}}, 'project.scripts."../../evil"', "letters, digits"),
    ({"gui-scripts": {"": "pkg.cli:main"}}, 'project.gui-scripts.""', "empty"),
    ({"scripts": {"tool": "pkg.cli:main\n[evil]\nx = y"}}, "project.scripts.tool", "object reference"),
    ({"scripts": {"tool": "pkg.cli:"}}, "project.scripts.tool", "object reference"),
    ({"scripts": {"tool": "pkg..cli:main"}}, "project.scripts.tool", "object reference"),
    ({"scripts": {"tool": "1pkg.cli:main"}}, "project.scripts.tool", "object reference"),
    ({"scripts": {"tool": "pkg.cli:main [extra!]"}}, "project.scripts.tool", "object reference"),
    ({"scripts": {"tool": "pkg.cli:main:other"}}, "project.scripts.tool", "object reference"),
    ({"entry-points": {"my.plugins": {"a=b": "pkg:x"}}}, 'project.entry-points."my.plugins"."a=b"', "'='"),
    ({"entry-points": {"grp": {"[sec]": "pkg:x"}}}, 'project.entry-points.grp."[sec]"', "'['"),
    ({"entry-points": {"grp": {"#c": "pkg:x"}}}, 'project.entry-points.grp."#c"', "comment"),
    ({"entry-points": {"grp": {" pad": "pkg:x"}}}, 'project.entry-points.grp." pad"', "whitespace"),
    ({"entry-points": {"grp": {"tab\tbed": "pkg:x"}}}, 'project.entry-points.grp."tab\\tbed"', "control"),
    ({"entry-points": {"grp": {"ok": "pkg x"}}}, "project.entry-points.grp.ok", "object reference"),
    ({"entry-points": {"bad group": {"a": "pkg:x"}}}, 'project.entry-points."bad group"', "group name"),
    ({"entry-points": {"g\n": {"a": "pkg:x"}}}, 'project.entry-points."g\\n"', "group name"),
    ({"entry-points": {"console_scripts": {"a": "pkg:x"}}}, "project.entry-points.console_scripts",
     "[project.scripts]"),
]


@pytest.mark.parametrize(("table", "key", "words"), BAD)
def test_bad_entry_points_are_config_errors_naming_the_key(
    root: Path, table: dict[str, Any], key: str, words: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)) as caught:
        resolve(root, {}, project={"name": "eps", "version": "1.0", **table}, facts=LINUX_CPU)
    assert caught.value.key == key
    assert "\n" not in str(caught.value)
    count("invalid entry point groups, names and references refused")


GOOD = {
    "scripts": {"tool": "pkg.cli:main", "tool-2.x": "pkg.cli:Main.run", "ünï": "pkg"},
    "gui-scripts": {"gtool": "pkg.gui : main [gui]"},
    "entry-points": {
        "pytest11": {"my plugin": "pkg.plugin"},  # any name but the spec's few exceptions
        "my.plugins": {"x:y": "pkg.plugins:X", "with-extras": "pkg:x [a, b.c]"},
    },
}


def test_valid_entry_points_round_trip_through_importlib_metadata(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    toml = ['[project]\nname = "eps"\nversion = "1.0"\n[tool.torch-ext]\npackages = ["pkg"]']
    for table, entries in [("scripts", GOOD["scripts"]), ("gui-scripts", GOOD["gui-scripts"]),
                           *((f'entry-points."{g}"', e) for g, e in GOOD["entry-points"].items())]:
        toml.append(f"[project.{table}]")
        toml += [f'"{name}" = "{value}"' for name, value in entries.items()]
    (root / "pyproject.toml").write_text("\n".join(toml) + "\n", encoding="utf-8")
    wheel = tmp_path / "out" / pipeline.build_wheel(root, tmp_path / "out", None)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "site")
    found = PathDistribution(tmp_path / "site" / "eps-1.0.dist-info").entry_points
    groups = {"console_scripts": GOOD["scripts"], "gui_scripts": GOOD["gui-scripts"], **GOOD["entry-points"]}
    expected = {(group, name, value) for group, entries in groups.items() for name, value in entries.items()}
    assert {(ep.group, ep.name, ep.value) for ep in found} == expected


def test_a_newline_in_a_script_name_writes_no_wheel(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "eps"\nversion = "1.0"\n[project.scripts]\n"bad\\nname" = "pkg:main"\n')
    for hook in (pipeline.build_wheel, pipeline.build_sdist):
        with pytest.raises(ConfigError, match="contains a line break") as caught:
            hook(root, tmp_path / "out", None)
        assert caught.value.key == 'project.scripts."bad\\nname"'
    assert not (tmp_path / "out").exists()

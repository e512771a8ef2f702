"""``setup.cfg``: the ``[metadata]`` (and simple ``[options]``) that setuptools adds to setup().

setuptools fills each setup() keyword the setup.py left empty from setup.cfg, so the keywords
read here go where setup() gave nothing. ``file:`` directives are read; ``attr:`` is resolved
statically (a literal assigned at module level), as setuptools tries first.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path
from typing import Any

from .metadata import Notes

ALIASES = {"home_page": "url", "summary": "description", "classifier": "classifiers",
           "platform": "platforms"}
OPTIONS = ("python_requires", "install_requires")
# [options] that only steer setuptools itself (they change nothing in the wheel).
SILENT_OPTIONS = frozenset({"zip_safe", "test_suite", "tests_require", "use_2to3",
                            "eager_resources", "dependency_links"})
OPTION_TABLES = {"options.extras_require": "extras_require", "options.entry_points": "entry_points"}


def _file_directive(root: Path, text: str, key: str, notes: Notes) -> str | None:
    parts = []
    for name in (n.strip() for n in text.removeprefix("file:").split(",")):
        try:
            parts.append((root / name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            notes.append(("project", f"setup.cfg {key} = file: {name} cannot be read: dropped"))
            return None
    return "\n".join(parts)


def _attr_directive(root: Path, text: str, key: str, notes: Notes) -> str | None:
    dotted = text.removeprefix("attr:").strip()
    module, _, name = dotted.rpartition(".")
    parts = module.split(".")
    for base in (root, root / "src"):
        for candidate in (base.joinpath(*parts, "__init__.py"), base.joinpath(*parts[:-1],
                          parts[-1] + ".py")):
            try:
                tree = ast.parse(candidate.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in tree.body:
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                        and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)):
                    return str(node.value.value)
    notes.append(("project", f"setup.cfg {key} = attr: {dotted} is not a literal migrate can"
                  " read: dropped"))
    return None


def _value(root: Path, key: str, text: str, notes: Notes) -> Any:
    text = text.strip()
    if text.startswith("file:"):
        return _file_directive(root, text, key, notes)
    if text.startswith("attr:"):
        return _attr_directive(root, text, key, notes)
    if key == "project_urls":
        pairs = (line.partition("=") for line in text.splitlines() if "=" in line)
        return {name.strip(): url.strip() for name, _, url in pairs}
    return text


def read_setup_cfg(root: Path, notes: Notes) -> dict[str, Any]:
    """setup() keywords that ``root/setup.cfg`` gives (empty without one)."""
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        if not parser.read(root / "setup.cfg", encoding="utf-8"):
            return {}
    except (configparser.Error, UnicodeDecodeError) as exc:
        notes.append(("project", f"setup.cfg cannot be read ({exc.__class__.__name__}): ignored"))
        return {}
    found: dict[str, Any] = {}
    if parser.has_section("metadata"):
        for raw, text in parser.items("metadata"):
            key = ALIASES.get(raw.replace("-", "_"), raw.replace("-", "_"))
            found[key] = _value(root, key, text, notes)
    if parser.has_section("options"):
        left = []
        for raw, text in parser.items("options"):
            key = raw.replace("-", "_")
            if key in OPTIONS:
                found[key] = _value(root, key, text, notes)
            elif key not in SILENT_OPTIONS:
                left.append(key)
        if left:
            notes.append(("tool", f"setup.cfg [options] {', '.join(left)}: not converted"
                          " (setup.py's own keywords are)"))
    for section, key in OPTION_TABLES.items():
        if parser.has_section(section):
            items = parser.items(section)
            found[key] = dict(items) if key == "extras_require" else {
                k: [line for line in v.splitlines() if line.strip()] for k, v in items}
    return {key: value for key, value in found.items() if value is not None}


def with_setup_cfg(kwargs: dict[str, Any], root: Path, notes: Notes) -> dict[str, Any]:
    """``kwargs`` with each keyword setup() left empty filled from setup.cfg."""
    merged = dict(kwargs)
    for key, value in read_setup_cfg(root, notes).items():
        if not merged.get(key):
            merged[key] = value
    return merged

"""setup() metadata keywords -> a PEP 621 ``[project]`` table (plain data) plus notes."""

from __future__ import annotations

import ast
import configparser
import glob
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from .license_classifiers import license_classifiers, spdx_of

# setuptools' default license_files patterns (they land in .dist-info/licenses).
DEFAULT_LICENSE_FILES = ("LICEN[CS]E*", "COPYING*", "NOTICE*", "AUTHORS*")
README_TYPES = {".md": "text/markdown", ".rst": "text/x-rst", ".txt": "text/plain"}
VERSION_FILES = ("__init__.py", "version.py", "_version.py", "__version__.py")
PLAIN_VERSION_FILES = ("VERSION", "VERSION.txt", "version.txt")
PLAIN_VERSION_PATTERN = r"(\S+)"
# Keywords that only steer setuptools itself; silently dropped.
SETUPTOOLS_ONLY = frozenset(
    {"zip_safe", "include_package_data", "cmdclass", "ext_modules", "options", "packages",
     "package_dir", "py_modules", "package_data", "distclass", "script_name", "script_args",
     "long_description_content_type", "exclude_package_data", "setup_requires", "tests_require",
     "test_suite", "namespace_packages", "use_2to3", "eager_resources", "dependency_links"}
)
HANDLED = frozenset(
    {"name", "version", "description", "long_description", "author", "author_email",
     "maintainer", "maintainer_email", "license", "license_file", "license_files", "url",
     "download_url", "project_urls", "keywords", "classifiers", "python_requires",
     "install_requires", "extras_require", "entry_points", "platforms", "use_scm_version"}
)

Notes = list[tuple[str, str]]  # (anchor, text)


def _as_list(value: Any) -> list[str]:
    """A setup() list-ish value (list, tuple, or newline/comma separated string)."""
    if value is None:
        return []
    if isinstance(value, str):
        lines = (line.split("#", 1)[0].strip() for line in value.splitlines())
        return [line for line in lines if line]
    return [str(item) for item in value]


def _people(names: Any, emails: Any) -> list[dict[str, str]]:
    name_list = [n.strip() for n in str(names or "").split(",") if n.strip()]
    email_list = [e.strip() for e in str(emails or "").split(",") if e.strip()]
    if len(name_list) == len(email_list):
        return [{"name": n, "email": e} for n, e in zip(name_list, email_list, strict=True)]
    people = [{"name": n} for n in name_list]
    return people + [{"email": e} for e in email_list]


def _with_marker(requirement: str, marker: str) -> str:
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        return f"{requirement}; {marker}"
    if parsed.marker is None:
        return f"{requirement}; {marker}"
    base = requirement.split(";", 1)[0].strip()
    return f"{base}; ({parsed.marker}) and ({marker})"


def _entry_points(value: Any, notes: Notes) -> dict[str, dict[str, str]]:
    groups: dict[str, list[str]] = {}
    if isinstance(value, str):
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        parser.read_string(value)
        for section in parser.sections():
            groups[section] = [f"{k} = {v}" for k, v in parser.items(section)]
    else:
        for group, entries in dict(value).items():
            groups[group] = _as_list(entries)
    result: dict[str, dict[str, str]] = {}
    for group, entries in groups.items():
        table: dict[str, str] = {}
        for entry in entries:
            name, sep, target = entry.partition("=")
            if not sep:
                notes.append(("project", f"entry point {entry!r} in {group} has no '=': dropped"))
                continue
            table[name.strip()] = target.strip()
        result[group] = table
    return result


def _readme(root: Path, text: str, content_type: str | None) -> str | dict[str, str]:
    """A readme file whose text is the long_description, else the text itself."""
    for candidate in sorted(root.iterdir()):
        if not candidate.is_file() or candidate.suffix.lower() not in README_TYPES:
            continue
        try:
            if candidate.read_text(encoding="utf-8").strip() == text.strip():
                implied = README_TYPES[candidate.suffix.lower()]
                if content_type in (None, implied):
                    return candidate.name
                return {"file": candidate.name, "content-type": content_type}
        except (OSError, UnicodeDecodeError):
            continue
    return {"text": text, "content-type": content_type or "text/x-rst"}


def _license(value: str, classifiers: list[str], notes: Notes) -> str | dict[str, str]:
    try:
        from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
    except ImportError:  # packaging < 24.2
        return {"text": value}
    try:
        expression = canonicalize_license_expression(value)
    except InvalidLicenseExpression:
        notes.append(("project:license", f"license {value!r} is not an SPDX expression: kept as"
                      " text"))
        return {"text": value}
    if any(c.startswith("License ::") for c in classifiers):
        notes.append(("project:classifiers", "'License ::' classifiers dropped: PEP 639 forbids"
                      " them next to an SPDX license expression"))
    return str(expression)


def _classifier_license(project: dict[str, Any], classifiers: list[str], globs: list[str],
                        explicit: bool, root: Path, notes: Notes) -> tuple[list[str], list[str]]:
    """No `license` keyword, License classifiers: the classifiers and license-files to write.

    Core metadata 2.4 (which `license-files` needs) deprecates License classifiers, so every
    build would warn about them: a classifier that states one license becomes the SPDX
    `license`; one that does not is dropped beside explicit license files, or else kept
    without `license-files` (the build ships the same default files without warning)."""
    named = license_classifiers(classifiers)
    others = [c for c in classifiers if c not in named]
    files = [p for pattern in globs for p in sorted(root.glob(pattern)) if p.is_file()]
    spdx = spdx_of(named, files)
    listed = ", ".join(repr(c) for c in named)
    if spdx is not None:
        project["license"] = spdx
        notes.append(("project:license", f"license = {spdx!r}: what {listed} states; the"
                      " classifier is dropped (PEP 639: License classifiers are deprecated from"
                      " core metadata 2.4 on and not allowed beside an SPDX expression)"))
        return others, globs
    fix = "set license to the SPDX expression of your license (PEP 639)"
    if explicit:
        notes.append(("project:classifiers", f"{listed} dropped: it names no single SPDX"
                      " license, and beside license-files every build would warn that License"
                      f" classifiers are deprecated; {fix}"))
        return others, globs
    notes.append(("project:classifiers", f"{listed} kept: it names no single SPDX license;"
                  " license-files is not written (the build ships the same default license"
                  " files), as beside it every build would warn that License classifiers are"
                  f" deprecated; better: {fix} and drop the classifier"))
    return classifiers, []


def _files_beside_a_table(merged: dict[str, Any], theirs: dict[str, Any]) -> Notes:
    """PEP 639 forbids `license-files` beside a `license` that is not an SPDX expression (a
    `{ file = ... }` or `{ text = ... }` table): after the merge, the one setup.py gave goes
    (the file's own two stay, for the validation to name)."""
    if "license-files" not in merged or not isinstance(merged.get("license"), dict):
        return []
    better = ("better: set license to the SPDX expression of your license, and list its files"
              " in license-files")
    if "license-files" not in theirs:
        files = ", ".join(map(str, merged.pop("license-files")))
        return [("project:license-files", f"license-files ({files}) not written: PEP 639"
                 " forbids it beside pyproject.toml's license table, whose text the metadata"
                 f" carries as License; {better}")]
    if "license" not in theirs:
        merged.pop("license")
        return [("project:license", "setup.py's license (not an SPDX expression) not written:"
                 f" PEP 639 forbids it beside pyproject.toml's license-files; {better}")]
    return []


def _default_globs(root: Path) -> list[str]:
    return [p for p in DEFAULT_LICENSE_FILES if glob.glob(p, root_dir=root)]


def settle_license(merged: dict[str, Any], theirs: dict[str, Any], root: Path) -> Notes:
    """After the merge with an existing ``[project]`` (``theirs``), whose static keys won: its
    License classifiers beside a license expression or license-files of ours get the rule of
    :func:`_classifier_license` (a `license` of its own stays as the file has it); and
    license-files never stays beside a license table (:func:`_files_beside_a_table`)."""
    notes = _files_beside_a_table(merged, theirs)
    classifiers = list(merged.get("classifiers") or [])
    if "license" in theirs or not license_classifiers(classifiers):
        return notes
    merged.pop("license", None)
    globs = list(merged.pop("license-files", None) or _default_globs(root))
    explicit = "license-files" in theirs or globs != _default_globs(root)
    classifiers, globs = _classifier_license(merged, classifiers, globs, explicit, root, notes)
    merged["classifiers"] = classifiers
    if globs:
        merged["license-files"] = globs
    before = list(merged)  # license and license-files go back before the classifiers
    for key in ("license", "license-files"):
        if key in merged and key in before:
            before.remove(key)
            before.insert(before.index("classifiers"), key)
    reordered = {key: merged[key] for key in before}
    merged.clear()
    merged.update(reordered)
    return notes


def settle_version(merged: dict[str, Any], existing: dict[str, Any], tool: dict[str, Any]) -> Notes:
    """An existing pyproject.toml whose version is dynamic and comes from setuptools-scm (its
    `[tool.setuptools_scm]`, which the merge keeps) stays so: setup.py's version (setuptools'
    0.0.0 when setuptools-scm gave it, or one read from a file) does not replace it, and
    pep517_torch asks setuptools-scm as setuptools did."""
    theirs = existing.get("project", {})
    dynamic = theirs.get("dynamic", [])
    scm = isinstance(existing.get("tool"), dict) and "setuptools_scm" in existing["tool"]
    if not (scm and isinstance(dynamic, list) and "version" in dynamic and "version" not in theirs):
        return []
    merged.pop("version", None)
    tool.pop("version", None)
    merged["dynamic"] = ["version", *(k for k in merged.get("dynamic", []) if k != "version")]
    return [("project:version", "version: dynamic, from git through setuptools-scm, as"
             " [tool.setuptools_scm] (kept) says: pep517_torch asks it as setuptools did, and an"
             " sdist carries the version in PKG-INFO")]


def scm_version_keyword(kwargs: dict[str, Any], project: dict[str, Any], tool: dict[str, Any],
                        notes: Notes) -> None:
    """``use_scm_version=`` (setuptools-scm's setup() keyword): a dynamic version from
    setuptools-scm instead of setuptools' 0.0.0; its options belong in `[tool.setuptools_scm]`."""
    given = kwargs.get("use_scm_version")
    if not given:
        return
    project.pop("version", None)
    project["dynamic"] = ["version", *(k for k in project.get("dynamic", []) if k != "version")]
    tool["version"] = {"provider": "setuptools-scm"}
    notes[:] = [note for note in notes if note[0] != "project:version"]
    if isinstance(given, dict) and given:
        options = ", ".join(f"{key} = {value!r}" for key, value in given.items())
        notes.append(("tool", f"use_scm_version's options ({options}) go into a"
                      " [tool.setuptools_scm] table, where setuptools-scm reads them"))


def version_source(root: Path, packages: Iterable[Path], version: str) -> dict[str, str] | None:
    """``[tool.torch-ext.version]`` for a file that holds ``version``: a package's module-level
    ``__version__`` literal, or a ``VERSION`` file in the root holding only it."""
    for name in PLAIN_VERSION_FILES:
        try:
            if (root / name).read_text(encoding="utf-8").strip() == version:
                return {"file": name, "pattern": PLAIN_VERSION_PATTERN}
        except (OSError, UnicodeDecodeError):
            continue
    for directory in packages:
        for name in VERSION_FILES:
            path = directory / name
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                continue
            found = None
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
                ):
                    found = node.value
            if isinstance(found, ast.Constant) and found.value == version:
                return {"file": path.relative_to(root).as_posix()}
    return None


def project_table(kwargs: dict[str, Any], root: Path, notes: Notes) -> dict[str, Any]:
    """The ``[project]`` table; keywords that do not convert are reported in ``notes``."""
    project: dict[str, Any] = {}
    name = kwargs.get("name")
    if name:
        project["name"] = str(name)
    else:
        project["name"] = root.name
        notes.append(("project:name", f"setup() has no name: {root.name!r} (the directory) is"
                      " used"))
    version = kwargs.get("version")
    project["version"] = str(version) if version is not None else "0.0.0"
    if version is None:
        notes.append(("project:version", "setup() has no version: setuptools' default 0.0.0 is"
                      " used"))
    if kwargs.get("description"):
        project["description"] = " ".join(str(kwargs["description"]).split())
    if kwargs.get("long_description"):
        project["readme"] = _readme(
            root, str(kwargs["long_description"]), kwargs.get("long_description_content_type")
        )
    classifiers = _as_list(kwargs.get("classifiers"))
    explicit = _as_list(kwargs.get("license_files")) or _as_list(kwargs.get("license_file"))
    license_globs = explicit or _default_globs(root)
    if kwargs.get("license"):
        project["license"] = _license(str(kwargs["license"]), classifiers, notes)
        if isinstance(project["license"], str):
            classifiers = [c for c in classifiers if not c.startswith("License ::")]
    elif license_classifiers(classifiers):
        classifiers, license_globs = _classifier_license(project, classifiers, license_globs,
                                                         bool(explicit), root, notes)
    if license_globs and not isinstance(project.get("license"), dict):
        project["license-files"] = license_globs
    for key, names, emails in (("authors", "author", "author_email"),
                               ("maintainers", "maintainer", "maintainer_email")):
        people = _people(kwargs.get(names), kwargs.get(emails))
        if people:
            project[key] = people
    keywords = kwargs.get("keywords")
    if keywords:
        project["keywords"] = (
            [k for k in str(keywords).replace(",", " ").split() if k]
            if isinstance(keywords, str) else [str(k) for k in keywords]
        )
    if classifiers:
        project["classifiers"] = classifiers
    if kwargs.get("python_requires"):
        project["requires-python"] = str(kwargs["python_requires"])
    dependencies = _as_list(kwargs.get("install_requires"))
    optional: dict[str, list[str]] = {}
    for extra, requirements in dict(kwargs.get("extras_require") or {}).items():
        extra_name, _, marker = str(extra).partition(":")
        for requirement in _as_list(requirements):
            requirement = _with_marker(requirement, marker) if marker else requirement
            if extra_name:
                optional.setdefault(extra_name, []).append(requirement)
            else:
                dependencies.append(requirement)
    if dependencies:
        project["dependencies"] = dependencies
    if optional:
        project["optional-dependencies"] = optional
    urls = {"Homepage": kwargs.get("url"), "Download": kwargs.get("download_url")}
    urls.update(dict(kwargs.get("project_urls") or {}))
    if any(urls.values()):
        project["urls"] = {k: str(v) for k, v in urls.items() if v}
    if kwargs.get("entry_points"):
        groups = _entry_points(kwargs["entry_points"], notes)
        for group, key in (("console_scripts", "scripts"), ("gui_scripts", "gui-scripts")):
            if groups.get(group):
                project[key] = groups.pop(group)
        if any(groups.values()):
            project["entry-points"] = {g: t for g, t in groups.items() if t}
    _report_leftovers(kwargs, notes)
    return project


def _report_leftovers(kwargs: dict[str, Any], notes: Notes) -> None:
    what = {
        "scripts": "script files are not shipped: turn them into [project.scripts] entry points",
        "data_files": "data_files are not shipped: move the files into a package"
        " (tool.torch-ext.package-data)",
        "setup_requires": "setup_requires: add what the build needs to [build-system].requires",
        "include_package_data": "include_package_data: files from MANIFEST.in are not shipped;"
        " list them in tool.torch-ext.package-data",
        "exclude_package_data": "exclude_package_data is not converted",
        "namespace_packages": "namespace_packages is not converted",
        "platforms": "platforms is not converted (no [project] field)",
    }
    for key, text in what.items():
        if kwargs.get(key):
            notes.append(("project" if key != "setup_requires" else "build-system", text))
    unknown = sorted(set(kwargs) - HANDLED - SETUPTOOLS_ONLY - set(what))
    if unknown:
        notes.append(("project", "setup() keywords not converted: " + ", ".join(unknown)))


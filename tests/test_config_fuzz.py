"""Property tests: generated `[tool.torch-ext]` tables, -C dicts and environments.

Three kinds of example are drawn: valid ones (must resolve), ones with one targeted defect
(must raise ConfigError naming exactly the key at fault) and random mutations (random keys,
types and nesting anywhere in the table or the -C dict). For the mutations the generated JSON
schema is the oracle: when it rejects the table the parser must too, and whenever the parser
accepts a table the schema must accept it. In every case no exception but ConfigError may
escape, and ConfigError.key must name a path present in the input, a -C key or a variable.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from validate_pyproject.api import Validator
from validate_pyproject.errors import ValidationError
from validate_pyproject.plugins import PluginWrapper

from pep517_torch.config import Facts, resolve_project
from pep517_torch.config.schema import tool_schema
from pep517_torch.errors import ConfigError
from tests.config_helpers import VARS

FILES = (
    "demo/__init__.py",
    "demo/sub/__init__.py",
    "demo/data.json",
    "csrc/a.cpp",
    "csrc/b.cpp",
    "csrc/nested/c.cc",
    "csrc/k.cu",
    "include/pch.h",
    "single.py",
)
NAMES = ["demo._a", "demo._b", "demo.sub._c", "_top", "demo._d"]
SOURCE_GLOBS = ["csrc/a.cpp", "csrc/*.cpp", "csrc/**/*.cc", "csrc/**/*.cpp", "csrc/../csrc/b.cpp"]
CUDA_GLOBS = ["csrc/k.cu", "csrc/*.cu", "csrc/**/*.cu"]
INCLUDE_DIRS = ["include", "csrc", "/usr/include", "csrc/.."]
LIBRARY_DIRS = ["/opt/lib", "include"]
ARCHES = ["7.5", "8.0", "8.6+PTX", "9.0a", "10.0"]
SPECIFIERS = ["", ">=2.0", "<3", ">=2.13,<2.14", "==2.13.*", "!=2.12.0", ">=3.11"]
BOOL_WORDS = ["true", "False", "1", "0", "yes", "NO", "on", "off"]
BUILD_DIRS = [
    "build",
    "out/{python_tag}-{cuda}-{build_type}",
    "build/{wheel_tag}-torch{torch_version}",
]

# one line (see line_break), and UTF-8 text: no lone surrogate (an undecodable byte of a name)
text = st.text(st.characters(exclude_characters="\n\r\x00", exclude_categories=("Cs",)), max_size=10)
flags = st.lists(text, max_size=3)
# an sdist glob: relative, inside the project (config.checks.relative_glob)
sdist_globs = st.lists(text.filter(lambda s: not s.startswith("/") and "\\" not in s and ".." not in s.split("/")), max_size=3)
# a -l name: not a flag, not a path, not empty (config.checks.library_name)
library_names = st.lists(text.filter(lambda s: s and not s.startswith("-") and "/" not in s), max_size=3)
macros = st.dictionaries(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True),
    st.one_of(text, st.integers(), st.booleans()),
    max_size=3,
)
arch_list = st.one_of(
    st.lists(st.sampled_from(ARCHES), max_size=3),
    st.lists(st.sampled_from(ARCHES), max_size=3).map(";".join),
)
limited_api = st.one_of(st.booleans(), st.sampled_from(["cp38", "cp310", "cp312", "cp313"]))
ENV_VALUES = ["1", "0", ""]
env_test = st.fixed_dictionaries(
    {},
    optional={
        "not": st.one_of(
            st.sampled_from(ENV_VALUES), st.lists(st.sampled_from(ENV_VALUES), min_size=1, max_size=2)
        ),
        "unset": st.booleans(),
    },
).filter(bool)
condition = st.fixed_dictionaries(
    {},
    optional={
        "env": st.dictionaries(
            st.sampled_from(["A", "B", "FORCE_CUDA"]),
            st.one_of(st.booleans(), st.sampled_from(ENV_VALUES), env_test),
            max_size=2,
        ),
        "cuda": st.booleans(),
        "torch-cuda": st.one_of(st.booleans(), st.sampled_from([">=12.8", "<13", "==13.0"])),
        "platform": st.sampled_from(["linux", "win*", "darwin", "*"]),
        "platform-machine": st.sampled_from(["x86_64", "aarch*", "*"]),
        "torch": st.sampled_from(SPECIFIERS),
        "python": st.sampled_from(SPECIFIERS),
    },
)
cuda_variant = st.fixed_dictionaries(
    {},
    optional={
        "sources": st.lists(st.sampled_from(CUDA_GLOBS), max_size=2),
        "include-dirs": st.lists(st.sampled_from(INCLUDE_DIRS), max_size=2),
        "define-macros": macros,
        "extra-cflags": flags,
        "extra-cuda-cflags": flags,
        "extra-ldflags": flags,
        "libraries": library_names,
        "library-dirs": st.lists(st.sampled_from(LIBRARY_DIRS), max_size=2),
    },
)
# extension keys an override may replace / append without making a valid table invalid
safe_replace = {
    "enabled": st.booleans(),
    "openmp": st.booleans(),
    "extra-cflags": flags,
    "define-macros": macros,
    "libraries": library_names,
    "strip": st.booleans(),
    "pch": st.booleans(),
    "python-abi-suffix": st.booleans(),
    "py-limited-api": limited_api,
    "kind": st.sampled_from(["module", "library"]),
}
safe_append = {
    "sources": st.lists(st.sampled_from(SOURCE_GLOBS), max_size=2),
    "libraries": library_names,
    "extra-cflags": flags,
    "define-macros": macros,
    "include-dirs": st.lists(st.sampled_from(INCLUDE_DIRS), max_size=2),
}
scalar_settings = {
    "build-type": st.sampled_from(["release", "debug", "relwithdebinfo", "none"]),
    "jobs": st.integers(1, 64),
    "verbose": st.booleans(),
    "strip": st.booleans(),
    "pch": st.booleans(),
    "cuda": st.sampled_from(["auto", True, False]),
    "compiler-launcher": st.sampled_from(["auto", "none", "ccache"]),
    "torch-requirement": st.sampled_from(["minor", "exact", "none"]),
    "torch-import-check": st.sampled_from(["auto", True, False]),
    "allow-cuda-version-mismatch": st.booleans(),
}


def extension(name: str) -> st.SearchStrategy[dict[str, Any]]:
    def no_cuda_table_without_cuda(ext: dict[str, Any]) -> dict[str, Any]:
        if ext.get("with-cuda") is False:
            ext.pop("cuda", None)
        return ext

    return st.fixed_dictionaries(
        {
            "name": st.just(name),
            "sources": st.lists(st.sampled_from(SOURCE_GLOBS), min_size=1, max_size=3),
        },
        optional={
            "include-dirs": st.lists(st.sampled_from(INCLUDE_DIRS), max_size=3),
            "define-macros": macros,
            "extra-cflags": flags,
            "extra-cuda-cflags": flags,
            "extra-ldflags": flags,
            "libraries": library_names,
            "library-dirs": st.lists(st.sampled_from(LIBRARY_DIRS), max_size=2),
            "runtime-library-dirs": flags,
            "with-cuda": st.sampled_from(["auto", True, False]),
            "py-limited-api": limited_api,
            "cuda-arch-list": arch_list,
            "kind": st.sampled_from(["module", "library"]),
            "python-abi-suffix": st.booleans(),
            "openmp": st.booleans(),
            "strip": st.booleans(),
            "pch": st.booleans(),
            "pch-header": st.just("include/pch.h"),
            "enabled": st.booleans(),
            "if": condition,
            "cuda": cuda_variant,
        },
    ).map(no_cuda_table_without_cuda)


def patch(keys: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=keys)


def override(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    selectors = st.sampled_from([*names, "*"])
    return st.fixed_dictionaries(
        {"if": condition},
        optional={
            **scalar_settings,
            "sdist-include": sdist_globs,
            "cuda-arch-list": arch_list,
            "extension": st.dictionaries(selectors, patch(safe_replace), max_size=2),
            "append": st.fixed_dictionaries(
                {},
                optional={
                    "sdist-include": sdist_globs,
                    "sdist-exclude": sdist_globs,
                    "cuda-arch-list": arch_list,
                    "extension": st.dictionaries(selectors, patch(safe_append), max_size=2),
                },
            ),
        },
    )


def tool_table(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"extension": st.tuples(*map(extension, names)).map(list)},
        optional={
            **scalar_settings,
            "packages": st.sampled_from([["demo"], ["demo", "demo.sub"]]),
            "package-dir": st.sampled_from([".", {"": "."}, {}]),
            "py-modules": st.sampled_from([[], ["single"]]),
            "package-data": st.just({"demo": ["*.json"]}),
            "sdist-include": sdist_globs,
            "sdist-exclude": sdist_globs,
            "build-dir": st.sampled_from(BUILD_DIRS),
            "cuda-arch-list": arch_list,
            "pch-header": st.just("include/pch.h"),
            "version": st.fixed_dictionaries(
                {},
                optional={
                    "file": st.just("demo/__init__.py"),
                    "pattern": st.just("v = '(.*)'"),
                    "suffix-env": st.just("SUFFIX"),
                },
            ),
            "overrides": st.lists(override(names), max_size=3),
        },
    )


config_settings = st.fixed_dictionaries(
    {},
    optional={
        "build-dir": st.sampled_from(BUILD_DIRS),
        "cuda-arch-list": st.one_of(
            st.lists(st.sampled_from(ARCHES), max_size=3).map(";".join),
            st.lists(st.sampled_from(ARCHES), min_size=1, max_size=3),
        ),
        "verbose": st.sampled_from(BOOL_WORDS),
        "jobs": st.integers(1, 64).map(str),
        "build-type": st.sampled_from(["release", "Debug", "RELWITHDEBINFO", "none"]),
        "compiler-launcher": st.sampled_from(["auto", "none", "ccache"]),
        "pch": st.sampled_from(BOOL_WORDS),
        "torch-requirement": st.sampled_from(["minor", "exact", "none"]),
        "torch-import-check": st.sampled_from(["auto", *BOOL_WORDS]),
        "cuda": st.sampled_from(["auto", *BOOL_WORDS]),
        "strip": st.sampled_from(BOOL_WORDS),
        "allow-cuda-version-mismatch": st.sampled_from(BOOL_WORDS),
    },
)
environment = st.fixed_dictionaries(
    {},
    optional={
        "A": st.sampled_from(["", "1", "x"]),
        "FORCE_CUDA": st.sampled_from(["", "1", "0"]),
        "MAX_JOBS": st.one_of(st.integers(1, 64).map(str), st.just("")),
        "TORCH_CUDA_ARCH_LIST": st.lists(st.sampled_from(ARCHES), max_size=3).map(" ".join),
        "CXX": text,
        "PATH": st.just("/usr/bin"),
    },
)
facts_fields = st.fixed_dictionaries(
    {
        "platform": st.sampled_from(["linux", "win32", "darwin"]),
        "machine": st.sampled_from(["x86_64", "aarch64"]),
        "python_version": st.sampled_from(["3.10.2", "3.11.4", "3.13.0"]),
        "torch_version": st.sampled_from(
            [None, "2.13.0+cpu", "2.12.1", "2.14.0.dev20250101+cu130"]
        ),
        "torch_cuda": st.sampled_from([None, "12.8", "13.0"]),
        "nvcc_available": st.booleans(),
    }
)
toml_values = st.recursive(
    st.one_of(st.booleans(), st.integers(-5, 70), st.floats(allow_nan=False), text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=6,
)


@dataclass
class Case:
    tool: dict[str, Any]
    config_settings: dict[str, Any]
    env: dict[str, str]
    facts: dict[str, Any]
    expected_key: str | None = None
    notes: list[str] = field(default_factory=list)

    def pyproject(self) -> dict[str, Any]:
        return {
            "project": {"name": "demo", "dynamic": ["version"]},
            "tool": {"torch-ext": self.tool},
        }


@st.composite
def valid_cases(draw: st.DrawFn) -> Case:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3))
    return Case(
        tool=draw(tool_table(names)),
        config_settings=draw(config_settings),
        env=draw(environment),
        facts=draw(facts_fields),
    )


# --------------------------------------------------------------------------- targeted defects

EXT = "tool.torch-ext.extension"


def _quote(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def _some_extension(case: Case, draw: st.DrawFn, *, built: bool = False) -> int:
    """Index of an extension to break (one is added when there is none)."""
    if not case.tool["extension"]:
        case.tool["extension"].append({"name": "demo._new", "sources": ["csrc/a.cpp"]})
    index = draw(st.integers(0, len(case.tool["extension"]) - 1))
    if built:  # a skipped extension's files are never looked at
        case.tool["extension"][index].pop("if", None)
        case.tool["extension"][index].pop("enabled", None)
        for override in case.tool.get("overrides", []):
            for patch in override.get("extension", {}).values():
                patch.pop("enabled", None)
    return index


def unknown_key(case: Case, draw: st.DrawFn) -> str:
    tables: list[tuple[str, dict[str, Any]]] = [("tool.torch-ext", case.tool)]
    for i, ext in enumerate(case.tool["extension"]):
        tables.append((f"{EXT}[{i}]", ext))
        for sub in ("if", "cuda"):
            if sub in ext:
                tables.append((f"{EXT}[{i}].{sub}", ext[sub]))
    for i, ov in enumerate(case.tool.get("overrides", [])):
        tables += [
            (f"tool.torch-ext.overrides[{i}]", ov),
            (f"tool.torch-ext.overrides[{i}].if", ov["if"]),
        ]
        if "append" in ov:
            tables.append((f"tool.torch-ext.overrides[{i}].append", ov["append"]))
    if "version" in case.tool:
        tables.append(("tool.torch-ext.version", case.tool["version"]))
    path, table = draw(st.sampled_from(tables))
    key = "zz" + draw(text)
    table[key] = draw(toml_values)
    return f"{path}.{_quote(key)}"


def wrong_type(case: Case, draw: st.DrawFn) -> str:
    index = _some_extension(case, draw)
    where, key, value = draw(
        st.sampled_from(
            [
                ("tool", "jobs", "4"), ("tool", "verbose", 1), ("tool", "build-type", True),
                ("tool", "packages", "demo"), ("tool", "cuda-arch-list", 8.0),
                ("ext", "openmp", "yes"), ("ext", "sources", "csrc/a.cpp"),
                ("ext", "define-macros", ["A"]), ("ext", "with-cuda", 1), ("ext", "kind", "exe"),
                ("ext", "extra-cflags", [1]), ("ext", "if", True),
            ]
        )
    )
    if where == "tool":
        case.tool[key] = value
        return f"tool.torch-ext.{key}" + ("" if key != "extra-cflags" else "[0]")
    case.tool["extension"][index][key] = value
    return f"{EXT}[{index}].{key}" + ("[0]" if key == "extra-cflags" else "")


def empty_sources(case: Case, draw: st.DrawFn) -> str:
    index = _some_extension(case, draw)
    case.tool["extension"][index]["sources"] = []
    return f"{EXT}[{index}].sources"


def _add_source(case: Case, draw: st.DrawFn, pattern: str) -> str:
    index = _some_extension(case, draw, built=True)
    sources = case.tool["extension"][index]["sources"]
    position = draw(st.integers(0, len(sources)))
    sources.insert(position, pattern)
    return f"{EXT}[{index}].sources[{position}]"


def glob_matching_nothing(case: Case, draw: st.DrawFn) -> str:
    return _add_source(case, draw, draw(st.sampled_from(["nomatch/*.cpp", "csrc/*.cxx", "csrc"])))


def source_escaping(case: Case, draw: st.DrawFn) -> str:
    return _add_source(case, draw, draw(st.sampled_from(["../outside/*.cpp", "links/*.cpp"])))


def include_escaping(case: Case, draw: st.DrawFn) -> str:
    index = _some_extension(case, draw, built=True)
    dirs = case.tool["extension"][index].setdefault("include-dirs", [])
    dirs.append(draw(st.sampled_from(["../outside", "links/outdir", "csrc/../.."])))
    return f"{EXT}[{index}].include-dirs[{len(dirs) - 1}]"


def duplicate_name(case: Case, draw: st.DrawFn) -> str:
    index = _some_extension(case, draw)
    case.tool["extension"].append(copy.deepcopy(case.tool["extension"][index]))
    return f"{EXT}[{len(case.tool['extension']) - 1}].name"


def bad_module_name(case: Case, draw: st.DrawFn) -> str:
    index = _some_extension(case, draw)
    case.tool["extension"][index]["name"] = draw(
        st.sampled_from(["1abc", "demo.class", "a..b", "my-ext", "", ".x", "demo._C "])
    )
    return f"{EXT}[{index}].name"


def cuda_table_without_cuda(case: Case, draw: st.DrawFn) -> str:
    index = _some_extension(case, draw)
    ext = case.tool["extension"][index]
    ext["with-cuda"] = False
    ext.setdefault("cuda", {})
    return f"{EXT}[{index}].cuda"


def override_unknown_extension(case: Case, draw: st.DrawFn) -> str:
    overrides = case.tool.setdefault("overrides", [])
    name = "zz" + draw(text)
    where = draw(st.sampled_from(["extension", "append"]))
    patch: dict[str, Any] = {"extension": {name: {}}}
    overrides.append({"if": {}, **({"append": patch} if where == "append" else patch)})
    prefix = f"tool.torch-ext.overrides[{len(overrides) - 1}]"
    return f"{prefix}{'.append' if where == 'append' else ''}.extension.{_quote(name)}"


def override_unknown_condition(case: Case, draw: st.DrawFn) -> str:
    overrides = case.tool.setdefault("overrides", [])
    field_name = draw(st.sampled_from(["os", "gpu", "cuda-version", "Platform", "env-var"]))
    overrides.append({"if": {field_name: True}})
    return f"tool.torch-ext.overrides[{len(overrides) - 1}].if.{field_name}"


def bad_limited_api(case: Case, draw: st.DrawFn) -> str:
    index = _some_extension(case, draw)
    case.tool["extension"][index]["py-limited-api"] = draw(
        st.sampled_from(["cp37", "cp3", "abi3", "cp27", "310"])
    )
    return f"{EXT}[{index}].py-limited-api"


def bad_jobs(case: Case, draw: st.DrawFn) -> str:
    case.tool["jobs"] = draw(st.one_of(st.integers(-3, 0), st.integers(4097, 2**70)))
    return "tool.torch-ext.jobs"


def line_break(case: Case, draw: st.DrawFn) -> str:
    """Every string that reaches build.ninja must be one line."""
    broken = draw(text) + draw(st.sampled_from(["\n", "\r", "\x00"])) + draw(text)
    where = draw(st.sampled_from(["extension", "-C", "env"]))
    if where == "-C":
        key = draw(st.sampled_from(["build-dir", "compiler-launcher"]))
        case.config_settings[key] = broken
        return key
    if where == "env":
        variable = draw(st.sampled_from(["CXX", "CC", "CUDA_HOME", "CUDA_PATH"]))
        case.env[variable] = broken
        return variable
    index = _some_extension(case, draw)
    key = draw(st.sampled_from(["extra-cflags", "extra-ldflags", "libraries", "include-dirs",
                                "runtime-library-dirs"]))
    case.tool["extension"][index][key] = [broken]
    return f"{EXT}[{index}].{key}[0]"


def bad_arch_list(case: Case, draw: st.DrawFn) -> str:
    """Arch-list syntax is checked as the setting is read, CUDA or not."""
    entry = draw(st.sampled_from(["sm_80", "all", "9", "Hoper", "8.0+ptx+ptx"]))
    if draw(st.booleans()):
        case.env["TORCH_CUDA_ARCH_LIST"] = f"8.0;{entry}"
        case.config_settings.pop("cuda-arch-list", None)
        return "TORCH_CUDA_ARCH_LIST"
    index = _some_extension(case, draw)
    case.tool["extension"][index]["cuda-arch-list"] = ["8.0", entry]
    case.config_settings.pop("cuda-arch-list", None)
    case.env.pop("TORCH_CUDA_ARCH_LIST", None)
    return f"{EXT}[{index}].cuda-arch-list[1]"


def bad_specifier(case: Case, draw: st.DrawFn) -> str:
    index = _some_extension(case, draw)
    which = draw(st.sampled_from(["torch", "python", "torch-cuda"]))
    case.tool["extension"][index]["if"] = {
        which: draw(st.sampled_from(["2.5", "~=2", ">>1", "latest"]))
    }
    return f"{EXT}[{index}].if.{which}"


def bad_env_test(case: Case, draw: st.DrawFn) -> str:
    """An `if.env.NAME` table that says nothing or says it wrongly, in an extension or override."""
    test, suffix = draw(
        st.sampled_from([
            ({}, ""), ({"not": []}, ".not"), ({"not": 0}, ".not"), ({"not": [True]}, ".not[0]"),
            ({"unset": "yes"}, ".unset"), ({"nott": "0"}, ".nott"), ({"not": {}}, ".not"),
        ])
    )
    name = draw(st.sampled_from(["A", "FORCE_CUDA", "with space"]))
    if draw(st.booleans()):
        index = _some_extension(case, draw)
        case.tool["extension"][index]["if"] = {"env": {name: test}}
        return f"{EXT}[{index}].if.env.{_quote(name)}{suffix}"
    overrides = case.tool.setdefault("overrides", [])
    overrides.insert(0, {"if": {"env": {name: test}}})
    return f"tool.torch-ext.overrides[0].if.env.{_quote(name)}{suffix}"


def bad_build_dir(case: Case, draw: st.DrawFn) -> str:
    case.config_settings.pop("build-dir", None)
    case.tool["build-dir"] = draw(
        st.sampled_from(["out/{platform}", "out/{", "{python_tag!r}", "{}", "."])
    )
    return "tool.torch-ext.build-dir"


def package_data_matching_nothing(case: Case, draw: st.DrawFn) -> str:
    case.tool["package-data"] = {
        "demo": ["*.json", draw(st.sampled_from(["*.none", "../single.py"]))]
    }
    return "tool.torch-ext.package-data.demo[1]"


def missing_package(case: Case, draw: st.DrawFn) -> str:
    case.tool["packages"] = [
        "demo",
        draw(st.sampled_from(["nothere", "demo.nothere", "demo.data.json"])),
    ]
    return "tool.torch-ext.packages[1]"


def unknown_config_setting(case: Case, draw: st.DrawFn) -> str:
    key = draw(st.one_of(st.just("build_dir"), st.just("jbos"), text.map(lambda t: "zz" + t)))
    case.config_settings[key] = draw(st.one_of(text, st.lists(text, max_size=2)))
    return key


def bad_config_value(case: Case, draw: st.DrawFn) -> str:
    key, value = draw(
        st.sampled_from(
            [
                ("jobs", "0"), ("jobs", "x"), ("jobs", ""), ("jobs", ["1", "2"]),
                ("verbose", "maybe"), ("build-type", "fast"), ("cuda", "sometimes"), ("pch", ""),
                ("torch-requirement", "any"), ("build-dir", "{nope}"), ("strip", "2"),
            ]
        )
    )
    case.config_settings[key] = value
    return key


def bad_max_jobs(case: Case, draw: st.DrawFn) -> str:
    case.env["MAX_JOBS"] = draw(
        st.sampled_from(["abc", "0", "-3", "1.5", "4 jobs", "4097", "99999999999999999999"])
    )
    return "MAX_JOBS"


DEFECTS: list[Callable[[Case, st.DrawFn], str]] = [
    unknown_key, wrong_type, empty_sources, glob_matching_nothing, source_escaping,
    include_escaping, duplicate_name, bad_module_name, cuda_table_without_cuda,
    override_unknown_extension, override_unknown_condition, bad_limited_api, bad_jobs,
    bad_specifier, bad_env_test, bad_build_dir, package_data_matching_nothing, missing_package,
    unknown_config_setting, bad_config_value, bad_max_jobs, line_break, bad_arch_list,
]


# --------------------------------------------------------------------------- random mutation


def containers(node: Any) -> list[Any]:
    """Every table and array in ``node``, itself included."""
    if isinstance(node, dict):
        return [node, *(c for child in node.values() for c in containers(child))]
    if isinstance(node, list):
        return [node, *(c for child in node for c in containers(child))]
    return []


def mutate(case: Case, draw: st.DrawFn) -> None:
    if draw(st.integers(0, 4)) == 0:  # the -C dict
        case.config_settings[
            draw(st.one_of(text, st.sampled_from(list(case.config_settings) or ["jobs"])))
        ] = draw(st.one_of(text, st.lists(text, max_size=2)))
        return
    node = draw(st.sampled_from(containers(case.tool)))
    value = draw(toml_values)
    if isinstance(node, dict):
        keys = list(node)
        if keys and draw(st.booleans()):
            key = draw(st.sampled_from(keys))
            if draw(st.integers(0, 3)) == 0:
                del node[key]
                return
        else:
            key = draw(text)
        node[key] = value
    elif node and draw(st.booleans()):
        node[draw(st.integers(0, len(node) - 1))] = value
    else:
        node.append(value)


# --------------------------------------------------------------------------- the property

TOKEN = re.compile(
    r'\.?(?:(?P<bare>[A-Za-z0-9_-]+)|(?P<quoted>"(?:[^"\\]|\\.)*"))|\[(?P<index>\d+)\]'
)


def path_exists(key: str, case: Case) -> bool:
    if key in case.config_settings or key in case.env:
        return True
    node: Any = case.pyproject()
    position = 0
    while position < len(key):
        match = TOKEN.match(key, position)
        if match is None or match.end() == position:
            return False
        position = match.end()
        if match["index"] is not None:
            if not isinstance(node, list) or int(match["index"]) >= len(node):
                return False
            node = node[int(match["index"])]
        else:
            name = match["bare"] if match["bare"] is not None else json.loads(match["quoted"])
            if not isinstance(node, dict) or name not in node:
                return False
            node = node[name]
    return True


@pytest.fixture(scope="module")
def validator() -> Validator:
    return Validator(plugins=[PluginWrapper("torch-ext", tool_schema)])


@pytest.fixture(scope="module")
def project_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("fuzz")
    root = base / "project"
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("v = '1.0'\n")
    (base / "outside").mkdir()
    (base / "outside/x.cpp").write_text("")
    (root / "links").mkdir()
    (root / "links/evil.cpp").symlink_to(base / "outside/x.cpp")
    (root / "links/outdir").symlink_to(base / "outside", target_is_directory=True)
    return root


def schema_accepts(validator: Validator, case: Case) -> bool:
    try:
        validator(json.loads(json.dumps(case.pyproject())))
    except ValidationError:
        return False
    return True


def check_case(
    case: Case, kind: str, root: Path, validator: Validator, counts: Counter[str]
) -> None:
    facts = Facts(env=case.env, **case.facts)
    try:
        resolved = resolve_project(root, case.pyproject(), case.config_settings, facts, VARS)
    except ConfigError as error:
        assert error.key is not None, f"{kind}: ConfigError without a key: {error}"
        assert path_exists(error.key, case), f"{kind}: {error.key!r} is not in the input: {error}"
        if kind == "valid":
            raise AssertionError(f"a valid table was refused: {error}") from error
        if kind == "targeted":
            assert error.key == case.expected_key, f"expected {case.expected_key}, got {error}"
            counts["invalid"] += 1
            counts["invalid (targeted defect)"] += 1
        elif not schema_accepts(validator, case):
            counts["invalid"] += 1
            counts["invalid (mutation, schema agrees)"] += 1
        else:
            counts["mutation refused by the parser only"] += 1
        return
    assert kind != "targeted", f"defect {case.expected_key} was not reported"
    assert schema_accepts(validator, case), "the parser accepted what the schema refuses"
    built_or_skipped = [s.name for s in resolved.extensions] + [n for n, _ in resolved.skipped]
    if kind == "valid":
        assert sorted(built_or_skipped) == sorted(e["name"] for e in case.tool["extension"])
    counts["valid"] += 1
    if kind == "mutation":
        counts["valid (mutation)"] += 1


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, Case]:
    case = draw(valid_cases())
    kind = draw(st.sampled_from(["valid", "targeted", "mutation"]))
    if kind == "targeted":
        defect = draw(st.sampled_from(DEFECTS))
        case.expected_key = defect(case, draw)
        event(f"defect: {defect.__name__}")
    elif kind == "mutation":
        mutate(case, draw)
    event(kind)
    return kind, case


TRIED: Counter[str] = Counter()  # over the whole session, by kind of example


def report(what: str, n: int) -> None:
    """Add to the "cases tried" summary of tests/conftest.py when it offers one."""
    try:
        from tests.conftest import count
    except ImportError:
        return
    count(what, n)


def run_fuzz(max_examples: int, root: Path, validator: Validator) -> Counter[str]:
    counts: Counter[str] = Counter()

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(cases())
    def run(kind_and_case: tuple[str, Case]) -> None:
        kind, case = kind_and_case
        check_case(case, kind, root, validator, counts)

    run()
    TRIED.update(counts)
    for what in ("valid", "invalid"):
        report(f"config fuzz: {what} tables / -C dicts", counts[what])
    print(f"config fuzz: {dict(counts)}")
    return counts


def test_fuzz_config(project_root: Path, validator: Validator) -> None:
    counts = run_fuzz(300, project_root, validator)
    assert counts["valid"] >= 60 and counts["invalid"] >= 60, counts


@pytest.mark.slow
def test_fuzz_config_at_scale(project_root: Path, validator: Validator) -> None:
    counts = run_fuzz(1500, project_root, validator)
    assert counts["valid"] >= 300 and counts["invalid"] >= 300, counts

"""Parsing `[tool.torch-ext]` into the settings model: every key, and every kind of bad input."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config import parse_settings, read_pyproject
from pep517_torch.config.extension_model import Condition, CudaVariant, ExtensionSettings
from pep517_torch.config.model import VersionSettings
from pep517_torch.errors import ConfigError

PROJECT = {"name": "demo", "version": "1.0"}


def parse(tool: dict[str, Any], project: dict[str, Any] | None = None) -> Any:
    return parse_settings({"project": project or PROJECT, "tool": {"torch-ext": tool}})


def parse_error(
    tool: dict[str, Any], project: dict[str, Any] | None = None, *, match: str
) -> ConfigError:
    """The ConfigError parsing ``tool`` raises, whose message ``match`` (a regex) finds."""
    with pytest.raises(ConfigError, match=match) as info:
        parse(tool, project)
    return info.value


EXT = {"name": "demo._C", "sources": ["csrc/a.cpp"]}
E0 = "tool.torch-ext.extension[0]"
O0 = "tool.torch-ext.overrides[0]"


def ext(**keys: Any) -> dict[str, Any]:
    """A tool table with one extension; keyword names are TOML keys in snake_case."""
    return {"extension": [{**EXT, **{k.rstrip("_").replace("_", "-"): v for k, v in keys.items()}}]}


def test_defaults() -> None:
    settings = parse({})
    assert settings.packages is None
    assert settings.package_dir == {}
    assert settings.build_dir == "build/{wheel_tag}-torch{torch_version}"
    assert settings.torch_requirement == "minor"
    assert settings.torch_import_check == "auto"
    assert settings.build_type == "release"
    assert (settings.pch, settings.strip, settings.verbose) == (True, False, False)
    assert settings.cuda == "auto"
    assert settings.compiler_launcher == "auto"
    assert settings.extension == [] and settings.overrides == []


def test_every_project_key() -> None:
    tool = {
        "packages": ["demo", "demo.sub"],
        "package-dir": {"": "src", "other": "lib/other"},
        "py-modules": ["single"],
        "package-data": {"demo": ["*.json"]},
        "sdist-include": ["extra/**"],
        "sdist-exclude": ["big/**"],
        "build-dir": "out/{python_tag}",
        "cuda-arch-list": "8.0;9.0",
        "torch-requirement": "exact",
        "torch-import-check": True,
        "jobs": 4,
        "verbose": True,
        "build-type": "relwithdebinfo",
        "strip": True,
        "pch": False,
        "pch-header": "include/pch.h",
        "compiler-launcher": "ccache",
        "cuda": False,
        "allow-cuda-version-mismatch": True,
        "version": {"file": "v.py", "pattern": r"V = '(.*)'", "suffix-env": "SUFFIX"},
    }
    s = parse(tool, {"name": "demo", "dynamic": ["version"]})
    assert s.packages == ["demo", "demo.sub"]
    assert s.package_dir == {"": "src", "other": "lib/other"}
    assert s.py_modules == ["single"]
    assert s.package_data == {"demo": ["*.json"]}
    assert (s.sdist_include, s.sdist_exclude) == (["extra/**"], ["big/**"])
    assert s.build_dir == "out/{python_tag}"
    assert s.cuda_arch_list == "8.0;9.0"
    assert (s.torch_requirement, s.torch_import_check, s.jobs) == ("exact", True, 4)
    assert (s.verbose, s.build_type, s.strip, s.pch) == (True, "relwithdebinfo", True, False)
    assert (s.pch_header, s.compiler_launcher, s.cuda) == ("include/pch.h", "ccache", False)
    assert s.allow_cuda_version_mismatch is True
    assert s.version == VersionSettings(file="v.py", pattern=r"V = '(.*)'", suffix_env="SUFFIX")
    assert parse({"package-dir": "src"}).package_dir == "src"
    assert parse({"cuda-arch-list": ["8.0", "9.0+PTX"]}).cuda_arch_list == ["8.0", "9.0+PTX"]


def test_every_extension_key() -> None:
    ext = {
        **EXT,
        "include-dirs": ["include"],
        "define-macros": {"A": "x", "B": 1, "C": True, "D": False},
        "extra-cflags": ["-Wall"],
        "extra-cuda-cflags": ["--use_fast_math"],
        "extra-ldflags": ["-Wl,--as-needed"],
        "libraries": ["m"],
        "library-dirs": ["/opt/lib"],
        "runtime-library-dirs": ["$ORIGIN"],
        "with-cuda": True,
        "py-limited-api": "cp311",
        "cuda-arch-list": ["8.0"],
        "kind": "library",
        "python-abi-suffix": False,
        "openmp": True,
        "strip": True,
        "pch": False,
        "pch-header": "include/pch.h",
        "if": {
            "env": {"A": True, "B": False, "C": "x"},
            "cuda": True,
            "platform": "linux*",
            "platform-machine": "x86_64",
            "torch": ">=2.5",
            "python": ">=3.10",
        },
        "cuda": {
            "sources": ["csrc/k.cu"],
            "include-dirs": ["cuinc"],
            "define-macros": {"WITH_CUDA": True},
            "extra-cflags": ["-DX"],
            "extra-cuda-cflags": ["-lineinfo"],
            "extra-ldflags": ["-lcudart"],
            "libraries": ["cublas"],
            "library-dirs": ["/usr/local/cuda/lib64"],
        },
    }
    (parsed,) = parse({"extension": [ext]}).extension
    assert isinstance(parsed, ExtensionSettings)
    assert parsed.define_macros == {"A": "x", "B": 1, "C": True, "D": False}
    assert parsed.with_cuda is True and parsed.py_limited_api == "cp311"
    assert (parsed.kind, parsed.python_abi_suffix, parsed.openmp) == ("library", False, True)
    assert parsed.if_ == Condition(
        env={"A": True, "B": False, "C": "x"},
        cuda=True,
        platform="linux*",
        platform_machine="x86_64",
        torch=">=2.5",
        python=">=3.10",
    )
    assert isinstance(parsed.cuda, CudaVariant) and parsed.cuda.libraries == ["cublas"]
    assert parsed.runtime_library_dirs == ["$ORIGIN"]


def test_override_parsing() -> None:
    tool = {
        "extension": [EXT],
        "overrides": [
            {
                "if": {"env": {"DEBUG": True}},
                "build-type": "debug",
                "extension": {"*": {"openmp": True}, "demo._C": {"extra-cflags": ["-g"]}},
                "append": {"sdist-include": ["x"], "extension": {"*": {"libraries": ["m"]}}},
            }
        ],
    }
    (override,) = parse(tool).overrides
    assert override.settings == {"build_type": "debug"}
    assert override.extension == {"*": {"openmp": True}, "demo._C": {"extra_cflags": ["-g"]}}
    assert override.append is not None
    assert override.append.settings == {"sdist_include": ["x"]}
    assert override.append.extension == {"*": {"libraries": ["m"]}}


@pytest.mark.parametrize(
    ("tool", "key", "fragment"),
    [
        ({"bulid-dir": "x"}, "tool.torch-ext.bulid-dir", "did you mean 'build-dir'"),
        ({"build_dir": "x"}, "tool.torch-ext.build_dir", "did you mean 'build-dir'"),
        (
            {"extension": [EXT, {**EXT, "name": "b", "extra-cflag": []}]},
            "tool.torch-ext.extension[1].extra-cflag",
            "did you mean 'extra-cflags'",
        ),
        (
            {"extension": [{**EXT, "cuda": {"source": []}}]},
            "tool.torch-ext.extension[0].cuda.source",
            "did you mean 'sources'",
        ),
        ({"zzzzzz": 1}, "tool.torch-ext.zzzzzz", "valid keys"),
        (
            {"overrides": [{"if": {"cdua": True}}]},
            "tool.torch-ext.overrides[0].if.cdua",
            "valid keys in tool.torch-ext.overrides[0].if: env, cuda, platform",
        ),
        (
            {"extension": [{**EXT, "if": {"os": "linux"}}]},
            "tool.torch-ext.extension[0].if.os",
            "valid keys",
        ),
        (
            {"overrides": [{"if": {}, "extension": {"*": {"name": "x"}}}]},
            'tool.torch-ext.overrides[0].extension."*".name',
            "cannot be set here",
        ),
        (
            {"overrides": [{"if": {}, "overrides": []}]},
            "tool.torch-ext.overrides[0].overrides",
            "cannot be set here",
        ),
        (
            {"overrides": [{"if": {}, "append": {"jobs": 2}}]},
            "tool.torch-ext.overrides[0].append.jobs",
            "cannot be appended",
        ),
    ],
)
def test_unknown_keys(tool: dict[str, Any], key: str, fragment: str) -> None:
    error = parse_error(tool, match=re.escape(fragment))
    assert error.key == key


@pytest.mark.parametrize(
    ("tool", "key", "fragment"),
    [
        ({"jobs": "4"}, "tool.torch-ext.jobs", 'expected an integer, got string "4"'),
        ({"jobs": True}, "tool.torch-ext.jobs", "expected an integer, got boolean true"),
        ({"jobs": 0}, "tool.torch-ext.jobs", "at least 1"),
        ({"jobs": 1.5}, "tool.torch-ext.jobs", "got float"),
        ({"verbose": 1}, "tool.torch-ext.verbose", "expected a boolean, got integer 1"),
        ({"packages": "demo"}, "tool.torch-ext.packages", "expected an array of strings"),
        ({"packages": ["demo", 3]}, "tool.torch-ext.packages[1]", "expected a string"),
        ({"packages": ["my-pkg"]}, "tool.torch-ext.packages[0]", "not a valid module name"),
        ({"build-type": "fast"}, "tool.torch-ext.build-type", 'one of "release"'),
        ({"cuda": "yes"}, "tool.torch-ext.cuda", '"auto" or a boolean'),
        ({"cuda-arch-list": 8.0}, "tool.torch-ext.cuda-arch-list", "an array of strings or"),
        ({"package-dir": ["src"]}, "tool.torch-ext.package-dir", "a string or a table"),
        ({"package-data": {"demo": "*.json"}}, "tool.torch-ext.package-data.demo", "array"),
        ({"version": "1.0"}, "tool.torch-ext.version", "expected a table"),
        ({"version": {"pattern": "(a)(b)"}}, "tool.torch-ext.version.pattern", "one group"),
        ({"version": {"pattern": "("}}, "tool.torch-ext.version.pattern", "invalid regular"),
        ({"extension": {"name": "x"}}, "tool.torch-ext.extension", "expected an array"),
        ({"extension": ["x"]}, "tool.torch-ext.extension[0]", "expected a table"),
        ({"extension": [{"sources": ["a.cpp"]}]}, "tool.torch-ext.extension[0]", "'name'"),
        ({"extension": [{"name": "a"}]}, "tool.torch-ext.extension[0]", "'sources'"),
        (ext(sources=[]), "tool.torch-ext.extension[0].sources", "at least"),
        (ext(name="1x"), "tool.torch-ext.extension[0].name", "module name"),
        (ext(name="a.class"), "tool.torch-ext.extension[0].name", "keyword"),
        (ext(name="a..b"), "tool.torch-ext.extension[0].name", "module"),
        (ext(py_limited_api="cp37"), f"{E0}.py-limited-api", "cp38 or newer"),
        (ext(py_limited_api="abi3"), f"{E0}.py-limited-api", "cp38 or newer"),
        (ext(py_limited_api=310), f"{E0}.py-limited-api", "a boolean or a string"),
        (ext(define_macros={"A": 1.5}), f"{E0}.define-macros.A", "got float"),
        # setuptools' shape, as a migrating user writes it: the table to write instead
        (ext(define_macros=[["A", "1"], ["B", 2], ["C"]]), f"{E0}.define-macros",
         'expected a table, got an array of pairs: write it as {A = "1", B = 2, C = true}'),
        (ext(define_macros={"A-B": 1}), f"{E0}.define-macros.A-B", "not a valid name"),
        (ext(define_macros={"a b": 1}), f'{E0}.define-macros."a b"', "not a valid name"),
        (ext(kind="executable"), f"{E0}.kind", '"module", "library"'),
        (ext(if_={"torch": "2.5"}), f"{E0}.if.torch", "specifier"),
        (ext(if_={"env": {"A": 1}}), f"{E0}.if.env.A", "a boolean or a string"),
        (ext(if_=True), f"{E0}.if", "expected a table"),
        ({"overrides": [{}]}, "tool.torch-ext.overrides[0]", "missing required key 'if'"),
        ({"overrides": [{"if": {"python": "3"}}]}, f"{O0}.if.python", "specifier"),
        ({"overrides": [{"if": {}, "jobs": 0}]}, f"{O0}.jobs", "at least 1"),
        (
            {"overrides": [{"if": {}, "extension": {"*": {"sources": []}}}]},
            f'{O0}.extension."*".sources',
            "at least",
        ),
    ],
)
def test_wrong_values(tool: dict[str, Any], key: str, fragment: str) -> None:
    error = parse_error(tool, match=re.escape(fragment))
    assert error.key == key, str(error)


def test_override_extension_names_must_exist() -> None:
    tool = {"extension": [EXT], "overrides": [{"if": {}, "extension": {"demo._D": {}}}]}
    said = "no extension is named 'demo._D' (extensions: demo._C)"
    error = parse_error(tool, match=re.escape(said))
    assert error.key == 'tool.torch-ext.overrides[0].extension."demo._D"'
    tool["overrides"] = [{"if": {}, "append": {"extension": {"nope": {"libraries": ["m"]}}}}]
    error = parse_error(tool, match=re.escape("no extension is named 'nope' (extensions: demo._C)"))
    assert error.key == "tool.torch-ext.overrides[0].append.extension.nope"


@pytest.mark.parametrize(
    ("project", "key", "fragment"),
    [
        ({"version": "1.0"}, "project", "missing required key 'name'"),
        ({"name": "demo"}, "project", "missing required key 'version'"),
        ({"name": "", "version": "1"}, "project.name", "non-empty string"),
        ({"name": "demo", "version": 1}, "project.version", "expected a string"),
        ({"name": "demo", "version": "one"}, "project.version", "PEP 440"),
        ({"name": "demo", "version": "1", "dynamic": ["version"]}, "project.version", "dynamic"),
        ({"name": "demo", "dynamic": ["name"]}, "project.dynamic", "cannot be dynamic"),
    ],
)
def test_project_table(project: dict[str, Any], key: str, fragment: str) -> None:
    error = parse_error({}, project, match=re.escape(fragment))
    assert error.key == key, str(error)


@pytest.mark.parametrize("array", [[["A", 1.5]], ["A"], [["A", "1", "2"]], [[1, "1"]], []])
def test_an_array_that_is_not_setuptools_pairs_gets_no_table_to_write(array: list[Any]) -> None:
    error = parse_error(ext(define_macros=array), match="expected a table")
    assert str(error) == f"{E0}.define-macros: expected a table, got an array"


def test_project_table_missing_and_dynamic_version() -> None:
    with pytest.raises(ConfigError, match=r"no \[project\] table") as info:
        parse_settings({"tool": {}})
    assert info.value.key == "project"
    assert parse({}, {"name": "demo", "dynamic": ["version"]}).version is None
    with pytest.raises(ConfigError, match="expected a table, got an array") as info:
        parse_settings({"project": PROJECT, "tool": {"torch-ext": []}})
    assert info.value.key == "tool.torch-ext"


def test_read_pyproject(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no pyproject\.toml"):
        read_pyproject(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n')
    assert read_pyproject(tmp_path)["project"] == {"name": "x", "version": "1"}


def test_read_malformed_pyproject_names_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = = "1"\n')
    with pytest.raises(ConfigError, match=re.escape("line 3, column 11")) as info:
        read_pyproject(tmp_path)
    assert "pyproject.toml" in str(info.value)
    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nname = "\xff"\n')
    with pytest.raises(ConfigError, match="UTF-8"):
        read_pyproject(tmp_path)

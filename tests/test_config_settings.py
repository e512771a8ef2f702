"""Precedence: -C config settings > environment > pyproject (after overrides)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pep517_torch.config import config_setting_fields
from pep517_torch.errors import ConfigError
from tests.config_helpers import resolve, resolve_error

EXT = {"name": "demo._C", "sources": ["a.cpp"]}
ROOT_FILES = dict.fromkeys(["demo/__init__.py", "a.cpp"], "")


def test_config_setting_keys() -> None:
    assert set(config_setting_fields()) == {
        "build-dir", "cuda-arch-list", "verbose", "jobs", "build-type", "compiler-launcher",
        "pch", "torch-requirement", "torch-import-check", "cuda", "strip",
        "allow-cuda-version-mismatch", "pch-cache-size", "local-version", "platform-tag", "unity",
        "variant", "max-wheel-size", "cuda-compress-mode", "ops-check", "stubs",
    }


def test_every_config_setting(root: Path) -> None:
    settings = {
        "build-dir": "b/{build_type}",
        "cuda-arch-list": "8.0;9.0 10.0,12.0",
        "verbose": "YES",
        "jobs": "7",
        "build-type": "Debug",
        "compiler-launcher": "none",
        "pch": "off",
        "torch-requirement": "exact",
        "torch-import-check": "1",
        "cuda": "true",
        "strip": "on",
        "allow-cuda-version-mismatch": "True",
    }
    resolved = resolve(root, {"extension": [EXT]}, settings)
    options = resolved.options
    assert options.build_dir == root / "b/debug"
    assert options.cuda_arch_list == ("8.0", "9.0", "10.0", "12.0")
    assert (options.verbose, options.jobs, options.compiler_launcher) == (True, 7, "none")
    assert (options.pch, options.allow_cuda_version_mismatch) == (False, True)
    assert (resolved.torch_requirement, resolved.torch_import_check) == ("exact", True)
    assert resolved.cuda_enabled
    (spec,) = resolved.extensions
    assert (spec.build_type.value, spec.strip, spec.pch) == ("debug", True, False)


@pytest.mark.parametrize(
    ("tool", "env", "settings", "expected"),
    [
        ({}, {}, {}, None),
        ({"jobs": 2}, {}, {}, 2),
        ({"jobs": 2}, {"MAX_JOBS": "3"}, {}, 3),
        ({"jobs": 2}, {"MAX_JOBS": "3"}, {"jobs": "4"}, 4),
        ({}, {"MAX_JOBS": "3"}, {"jobs": "4"}, 4),
        ({"jobs": 2}, {"MAX_JOBS": ""}, {}, 2),
        ({"jobs": 2, "overrides": [{"if": {}, "jobs": 5}]}, {}, {}, 5),
        ({"jobs": 2, "overrides": [{"if": {}, "jobs": 5}]}, {"MAX_JOBS": "3"}, {}, 3),
    ],
)
def test_jobs_precedence(
    root: Path,
    tool: dict[str, Any],
    env: dict[str, str],
    settings: dict[str, str],
    expected: int | None,
) -> None:
    assert resolve(root, tool, settings, env=env).options.jobs == expected


def test_arch_list_precedence(root: Path) -> None:
    tool = {
        "cuda-arch-list": "7.5",
        "extension": [EXT, {**EXT, "name": "demo._D", "cuda-arch-list": ["9.0"]}],
    }
    resolved = resolve(root, tool)
    assert resolved.options.cuda_arch_list is None
    assert [s.cuda_arch_list for s in resolved.extensions] == [("7.5",), ("9.0",)]
    # the environment and -C go to BuildOptions, which the compile core lets win over specs
    resolved = resolve(root, tool, env={"TORCH_CUDA_ARCH_LIST": "8.0 8.6+PTX"})
    assert resolved.options.cuda_arch_list == ("8.0", "8.6+PTX")
    assert [s.cuda_arch_list for s in resolved.extensions] == [("7.5",), ("9.0",)]
    resolved = resolve(
        root, tool, {"cuda-arch-list": ["8.0", "9.0a"]}, env={"TORCH_CUDA_ARCH_LIST": "8.6"}
    )
    assert resolved.options.cuda_arch_list == ("8.0", "9.0a")
    assert resolve(root, tool, {"cuda-arch-list": ""}).options.cuda_arch_list is None


def test_cuda_setting_and_auto(root: Path) -> None:
    assert not resolve(root, {}).cuda_enabled
    assert resolve(root, {}, torch_cuda="13.0", nvcc_available=True).cuda_enabled
    assert not resolve(root, {}, torch_cuda="13.0", nvcc_available=False).cuda_enabled
    assert not resolve(root, {"cuda": False}, torch_cuda="13.0", nvcc_available=True).cuda_enabled
    assert resolve(root, {"cuda": True}).cuda_enabled
    assert not resolve(root, {"cuda": True}, {"cuda": "no"}).cuda_enabled
    assert resolve(
        root, {"cuda": False}, {"cuda": "auto"}, torch_cuda="12.8", nvcc_available=True
    ).cuda_enabled


def test_environment_is_taken_from_facts_only(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_JOBS", "abc")
    monkeypatch.setenv("CXX", "from-os-environ")
    resolved = resolve(root, {}, env={"CC": "clang", "PATH": "/bin", "OTHER": "x"})
    assert resolved.options.jobs is None
    assert resolved.options.env == {"CC": "clang", "PATH": "/bin"}


@pytest.mark.parametrize(
    ("settings", "key", "fragment"),
    [
        ({"jbos": "1"}, "jbos", "unknown config setting 'jbos' (did you mean 'jobs'?)"),
        ({"build_type": "debug"}, "build_type", "did you mean 'build-type'"),
        ({"zzz": "1"}, "zzz", "unknown config setting 'zzz' (valid: build-dir"),
        ({"packages": "x"}, "packages", "cannot be given with -C"),
        ({"jobs": "0"}, "jobs", "at least 1"),
        ({"jobs": "99999999999999999999"}, "jobs", "must be at most 4096, got 99999999999999999999"),
        ({"jobs": "many"}, "jobs", "expected an integer"),
        ({"jobs": ["1", "2"]}, "jobs", "given 2 times"),
        ({"verbose": "maybe"}, "verbose", "expected a boolean"),
        ({"build-type": "fast"}, "build-type", 'one of "release"'),
        ({"cuda": "sometimes"}, "cuda", '"auto" or a boolean'),
        ({"torch-requirement": "any"}, "torch-requirement", "one of"),
        ({"pch": 1}, "pch", "expected a string or a list of strings"),
    ],
)
def test_bad_config_settings(root: Path, settings: dict[str, Any], key: str, fragment: str) -> None:
    error = resolve_error(root, {}, settings, match=re.escape(fragment))
    assert error.key == key


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5", "4097", "99999999999999999999"])
def test_bad_max_jobs(root: Path, value: str) -> None:
    error = resolve_error(root, {}, env={"MAX_JOBS": value}, match=re.escape(value))
    assert error.key == "MAX_JOBS"


def test_jobs_are_bounded_in_toml_too(root: Path) -> None:
    """ninja reads -j and pool depths as C ints: an unbounded value ended in 'invalid pool
    depth' after the build directory was written."""
    error = resolve_error(root, {"jobs": 2**40}, match="must be at most 4096")
    assert str(error) == "tool.torch-ext.jobs: must be at most 4096, got 1099511627776"
    assert resolve(root, {"jobs": 4096}).options.jobs == 4096


def test_config_settings_none_and_repeated_lists(root: Path) -> None:
    assert resolve(root, {}, None).options.jobs is None
    assert resolve(root, {}, {"jobs": ["3"]}).options.jobs == 3


def test_environment_options_for_the_faces_without_a_pyproject() -> None:
    """The JIT and setup.py read the same variables as wheel builds, through one function."""
    from pep517_torch.config.layers import environment_options

    env = {"MAX_JOBS": "3", "TORCH_CUDA_ARCH_LIST": "8.0", "PEP517_TORCH_COMPILER_LAUNCHER": "distcc",
           "PEP517_TORCH_PCH_CACHE_SIZE": "1.5G"}
    keys = (("cuda_arch_list", "TORCH_CUDA_ARCH_LIST"), ("jobs", "MAX_JOBS"),
            ("unity", "PEP517_TORCH_UNITY"), ("compiler_launcher", "PEP517_TORCH_COMPILER_LAUNCHER"),
            ("pch_cache_size", "PEP517_TORCH_PCH_CACHE_SIZE"))  # what those faces' messages say
    assert environment_options(env) == {
        "jobs": 3, "cuda_arch_list": ("8.0",), "compiler_launcher": "distcc",
        "pch_cache_size": 3 * 1024**3 // 2, "keys": keys,
    }
    assert environment_options({}) == {"keys": keys}
    assert environment_options({"TORCH_CUDA_ARCH_LIST": "8.0;9.0+PTX"})["cuda_arch_list"] == (
        "8.0", "9.0+PTX"
    )
    with pytest.raises(ConfigError, match=r"^PEP517_TORCH_PCH_CACHE_SIZE: 'big' is not a size"):
        environment_options({"PEP517_TORCH_PCH_CACHE_SIZE": "big"})


def test_a_new_environment_setting_needs_only_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A setting with `env` metadata is read by every face, named in their messages, part of
    the JIT's stamp and known to migrate, with no list edited: they derive from the model."""
    import dataclasses

    from pep517_torch.config import layers
    from pep517_torch.config.fields import setting
    from pep517_torch.config.model import ProjectSettings
    from pep517_torch.jit import stamp
    from pep517_torch.migrate.convert.settings_keys import backend_variables

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class WithNewSetting(ProjectSettings):
        fancy_level: int = setting(0, help="x", config_setting=True, env="PEP517_TORCH_FANCY")

    monkeypatch.setattr(layers, "ProjectSettings", WithNewSetting)
    env = {"PEP517_TORCH_FANCY": "3"}
    assert layers.environment_layer(env)["fancy_level"].value == 3
    options = layers.environment_options(env)
    assert options["fancy_level"] == 3
    assert ("fancy_level", "PEP517_TORCH_FANCY") in options["keys"]
    assert "PEP517_TORCH_FANCY" in layers.artifact_env()
    assert stamp.recorded_env(env, cuda=True)["PEP517_TORCH_FANCY"] == "3"  # a stamp keeps its value
    assert "PEP517_TORCH_FANCY" in backend_variables()
    with pytest.raises(ConfigError, match="^PEP517_TORCH_FANCY: "):
        layers.environment_layer({"PEP517_TORCH_FANCY": "lots"})


def test_variant_size_and_compression_settings(root: Path) -> None:
    """variant, max-wheel-size and cuda-compress-mode (#38): -C over pyproject, sizes as
    pch-cache-size reads them, one line per bad value naming its key."""
    resolved = resolve(root, {"extension": [EXT], "max-wheel-size": "100M"},
                       {"variant": "torch", "cuda-compress-mode": "size"})
    assert (resolved.variant, resolved.max_wheel_size) == ("torch", 100 * 1024**2)
    assert resolved.options.cuda_compress_mode == "size"
    assert dict(resolved.options.keys)["cuda_compress_mode"] == "cuda-compress-mode"
    plain = resolve(root, {"extension": [EXT]}, {})
    assert (plain.variant, plain.max_wheel_size, plain.options.cuda_compress_mode) == (
        "none", None, None)
    for tool, settings, key in (
        ({"max-wheel-size": "100 MB please"}, {}, "tool.torch-ext.max-wheel-size"),
        ({}, {"cuda-compress-mode": "tiny"}, "cuda-compress-mode"),
        ({"variant": "cuda"}, {}, "tool.torch-ext.variant"),
        ({"variant": "torch", "local-version": "torch"}, {}, "tool.torch-ext.variant"),
    ):
        error = resolve_error(root, {"extension": [EXT], **tool}, settings, match=".")
        assert str(error).startswith(f"{key}: ") and "\n" not in str(error), str(error)

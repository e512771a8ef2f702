"""Wheel tags and extension suffixes for the running interpreter."""

from __future__ import annotations

import sys
import sysconfig

import pytest
from packaging.tags import parse_tag, sys_tags

from pep517_torch.core.toolchain.tools import ext_suffix
from pep517_torch.distribution.tags import extensions_wheel_tag, platform_tag, python_tag, wheel_tag
from pep517_torch.errors import ConfigError

CPYTHON = f"cp{sys.version_info.major}{sys.version_info.minor}"
LINUX_X86_64_CPYTHON = (
    sys.implementation.name == "cpython" and sysconfig.get_platform() == "linux-x86_64"
)


def test_pure_python() -> None:
    assert wheel_tag(native_code=False) == "py3-none-any"
    assert wheel_tag(native_code=False, limited_api="cp310") == "py3-none-any"


def test_python_tag() -> None:
    assert python_tag() == CPYTHON


def test_native_and_abi3_tags_install_here() -> None:
    installable = set(sys_tags())
    assert set(parse_tag(wheel_tag(native_code=True))) <= installable
    assert set(parse_tag(wheel_tag(native_code=True, limited_api="cp310"))) <= installable


@pytest.mark.skipif(not LINUX_X86_64_CPYTHON, reason="exact names for CPython on linux-x86_64")
def test_exact_tags_on_linux_x86_64() -> None:
    assert platform_tag() == "linux_x86_64"
    assert wheel_tag(native_code=True) == f"{CPYTHON}-{CPYTHON}-linux_x86_64"
    assert wheel_tag(native_code=True, limited_api="cp310") == "cp310-abi3-linux_x86_64"
    assert ext_suffix(None, True) == f".cpython-{CPYTHON[2:]}-x86_64-linux-gnu.so"


def test_ext_suffixes() -> None:
    assert ext_suffix(None, True) == sysconfig.get_config_var("EXT_SUFFIX")
    if sys.platform != "win32":
        assert ext_suffix("cp310", True) == ".abi3.so"
        assert ext_suffix("cp310", False) == ".so"  # python-abi-suffix = false wins
        assert ext_suffix(None, False) == ".so"


@pytest.mark.parametrize("bad", ["310", "cp2", "py310", "cp310 "])
def test_bad_limited_api_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="cp310"):
        wheel_tag(native_code=True, limited_api=bad)


def test_the_tag_of_a_set_of_extensions() -> None:
    assert extensions_wheel_tag([]) == "py3-none-any"
    assert extensions_wheel_tag([None, "cp39"]) == wheel_tag(native_code=True)
    assert extensions_wheel_tag(["cp39", "cp310", "cp38"]) == wheel_tag(native_code=True, limited_api="cp310")
    with pytest.raises(ConfigError, match="'3.10' is not a supported limited-API target"):
        extensions_wheel_tag(["cp39", "3.10"])

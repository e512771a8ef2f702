"""Machine facts are looked up once and only when asked (issue 25 item 1): nvcc runs only when
`cuda = "auto"` with a CUDA torch, or a condition, needs it; nothing is compiled here."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.config import Facts
from pep517_torch.backend.discovery import Discovery
from pep517_torch.core.cuda import toolkit as cuda
from tests.config_helpers import resolve

EXT = {"name": "demo._a", "sources": ["a.cpp"]}
ROOT_FILES = dict.fromkeys(["demo/__init__.py", "a.cpp"], "")
TORCH_2_13 = Facts(env={}, torch_version="2.13.0")


class Lookup:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> tuple[bool, str | None]:
        self.calls += 1
        return True, "13.0"


def test_a_cpu_torch_never_asks_for_nvcc(root: Path) -> None:
    lookup = Lookup()
    resolved = resolve(root, {"extension": [EXT]}, facts=TORCH_2_13, nvcc_lookup=lookup)
    assert lookup.calls == 0 and not resolved.cuda_enabled
    # An explicit `cuda = true` does not ask either: nothing depends on what nvcc is.
    resolve(root, {"cuda": True, "extension": [EXT]}, facts=TORCH_2_13, torch_cuda="13.0",
            nvcc_lookup=lookup)
    assert lookup.calls == 0


def test_cuda_auto_with_a_cuda_torch_asks_and_a_failing_condition_says_why(root: Path) -> None:
    lookup = Lookup()
    resolved = resolve(root, {"extension": [EXT]}, facts=TORCH_2_13, torch_cuda="13.0",
                       nvcc_lookup=lookup)
    assert lookup.calls >= 1 and resolved.cuda_enabled
    skipped = resolve(root, {"extension": [{**EXT, "if": {"cuda": False}}]}, facts=TORCH_2_13,
                      torch_cuda="13.0", nvcc_lookup=Lookup())
    assert skipped.skipped == (("demo._a", "tool.torch-ext.extension[0].if.cuda = false does not"
                                " hold (torch 2.13.0 is a CUDA 13.0 build and nvcc 13.0 was found,"
                                " so CUDA is on)"),)


def test_the_glue_looks_nvcc_up_once_and_hands_the_toolkit_on(monkeypatch: pytest.MonkeyPatch) -> None:
    found: list[dict[str, str]] = []
    toolkit = object()

    def find_cuda(env: dict[str, str]) -> object:
        found.append(env)
        return None if len(found) > 1 else toolkit

    monkeypatch.setattr(cuda, "find_cuda", find_cuda)
    discovery = Discovery({"PATH": "/usr/bin"}, None)
    assert discovery.toolkit is None and found == []  # nothing asked yet
    facts = discovery.facts()
    # the fake toolkit has no version: it was looked up
    with pytest.raises(AttributeError, match="has no attribute 'version_str'"):
        facts.nvcc()
    assert len(found) == 1 and discovery.toolkit is toolkit

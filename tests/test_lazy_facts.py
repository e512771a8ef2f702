"""Machine facts are looked up once and only when asked (issue 25 item 1): nvcc runs only when
`cuda = "auto"` with a CUDA torch, or a condition, needs it; nothing is compiled here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pep517_torch.discovery import Discovery
from pep517_torch.config import Facts, resolve_project
from pep517_torch.core import cuda

VARS = {"wheel_tag": "py3-none-any", "python_tag": "py3", "torch_version": "2.13.0"}
EXT = {"name": "demo._a", "sources": ["a.cpp"]}


class Lookup:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> tuple[bool, str | None]:
        self.calls += 1
        return True, "13.0"


def resolve(root: Path, tool: dict[str, Any], lookup: Lookup, torch_cuda: str | None) -> Any:
    (root / "demo").mkdir(exist_ok=True)
    (root / "demo" / "__init__.py").write_text("")
    (root / "a.cpp").write_text("")
    pyproject = {"project": {"name": "demo", "version": "1"}, "tool": {"torch-ext": tool}}
    facts = Facts(env={}, torch_version="2.13.0", torch_cuda=torch_cuda, nvcc_lookup=lookup)
    return resolve_project(root, pyproject, None, facts, VARS)


def test_a_cpu_torch_never_asks_for_nvcc(tmp_path: Path) -> None:
    lookup = Lookup()
    resolved = resolve(tmp_path, {"extension": [EXT]}, lookup, torch_cuda=None)
    assert lookup.calls == 0 and not resolved.cuda_enabled
    # An explicit `cuda = true` does not ask either: nothing depends on what nvcc is.
    resolve(tmp_path, {"cuda": True, "extension": [EXT]}, lookup, torch_cuda="13.0")
    assert lookup.calls == 0


def test_cuda_auto_with_a_cuda_torch_asks_and_a_failing_condition_says_why(tmp_path: Path) -> None:
    lookup = Lookup()
    resolved = resolve(tmp_path, {"extension": [EXT]}, lookup, torch_cuda="13.0")
    assert lookup.calls >= 1 and resolved.cuda_enabled
    skipped = resolve(tmp_path, {"extension": [{**EXT, "if": {"cuda": False}}]}, Lookup(), "13.0")
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
    with pytest.raises(AttributeError):  # the fake toolkit has no version: it was looked up
        facts.nvcc()
    assert len(found) == 1 and discovery.toolkit is toolkit

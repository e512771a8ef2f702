"""What an ExtensionSpec refuses (core/spec.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pep517_torch.core.spec import ExtensionSpec
from pep517_torch.errors import ConfigError
from tests.conftest import write


def test_spec_validation(tmp_path: Path) -> None:
    source = [write(tmp_path / "a.cpp", "int f() { return 0; }\n")]
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ConfigError, match="valid module name"):
        ExtensionSpec("not-valid", tuple(source))
    with pytest.raises(ConfigError, match="no sources"):
        ExtensionSpec("m", ())
    with pytest.raises(ConfigError, match=r"is not a C\+\+ or CUDA source"):
        ExtensionSpec("m", (tmp_path / "notes.txt",))
    with pytest.raises(ConfigError, match="^with_cuda: .*CUDA is off"):
        ExtensionSpec("m", (tmp_path / "k.cu",), with_cuda=False)

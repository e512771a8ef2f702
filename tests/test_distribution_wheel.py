"""The wheel writer: layout, RECORD, installability, determinism, atomicity."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pep517_torch.distribution.metadata import ProjectMetadata, build_metadata
from pep517_torch.distribution.wheel import WheelWriter

BIN = Path(sys.executable).parent
Built = tuple[Path, ProjectMetadata]  # a source tree and its metadata
PURE = "py3-none-any"
PIP_INSTALL = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index"]


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, ProjectMetadata]:
    root = tmp_path / "src"
    (root / "demo_pkg" / "sub").mkdir(parents=True)
    (root / "demo_pkg" / "__init__.py").write_text("def main():\n    print('demo says hi')\n")
    (root / "demo_pkg" / "sub" / "__init__.py").write_text("")
    (root / "demo_pkg" / "py.typed").write_text("")
    (root / "LICENSE").write_text("Permission is granted.\n")
    (root / "README.md").write_text("# Demo\n")
    pyproject = {
        "project": {
            "name": "Demo.Pkg",
            "version": "1.0",
            "readme": "README.md",
            "license": "MIT",
            "license-files": ["LICENSE"],
            "scripts": {"demo": "demo_pkg:main"},
            "entry-points": {"demo.plugins": {"one": "demo_pkg.sub"}},
        }
    }
    return root, build_metadata(pyproject, root, version=None)


def build(out_dir: Path, root: Path, metadata: ProjectMetadata, epoch: int = 1700000000) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    name, version = metadata.name, metadata.version
    with WheelWriter(out_dir, name, version, PURE, source_date_epoch=epoch) as writer:
        for path in sorted((root / "demo_pkg").rglob("*")):
            if path.is_file():
                writer.add_file(path.relative_to(root).as_posix(), path)
        writer.add_bytes("demo_pkg/tool.sh", b"#!/bin/sh\necho tool\n", executable=True)
        writer.finish(metadata)
    return writer.path


def read_record(archive: zipfile.ZipFile, dist_info: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(archive.read(f"{dist_info}/RECORD").decode())))


def test_layout_and_dist_info(tmp_path: Path, project: Built) -> None:
    wheel = build(tmp_path / "out", *project)
    assert wheel.name == "demo_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert names == [
            "demo_pkg/__init__.py",
            "demo_pkg/py.typed",
            "demo_pkg/sub/__init__.py",
            "demo_pkg/tool.sh",
            "demo_pkg-1.0.dist-info/METADATA",
            "demo_pkg-1.0.dist-info/WHEEL",
            "demo_pkg-1.0.dist-info/entry_points.txt",
            "demo_pkg-1.0.dist-info/licenses/LICENSE",
            "demo_pkg-1.0.dist-info/RECORD",
        ]
        wheel_file = archive.read("demo_pkg-1.0.dist-info/WHEEL").decode()
        assert wheel_file.startswith("Wheel-Version: 1.0\nGenerator: pep517_torch ")
        assert "Root-Is-Purelib: true\nTag: py3-none-any\n" in wheel_file
        assert archive.read("demo_pkg-1.0.dist-info/entry_points.txt").decode() == (
            "[console_scripts]\ndemo = demo_pkg:main\n\n[demo.plugins]\none = demo_pkg.sub\n"
        )
        metadata = archive.read("demo_pkg-1.0.dist-info/METADATA").decode()
        assert "License-Expression: MIT\nLicense-File: LICENSE\n" in metadata
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
        assert modes["demo_pkg/tool.sh"] == 0o100755
        assert modes["demo_pkg/__init__.py"] == 0o100644
        assert {info.date_time for info in archive.infolist()} == {(2023, 11, 14, 22, 13, 20)}
        assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_DEFLATED}


def test_record_hashes_and_sizes_match(tmp_path: Path, project: Built) -> None:
    wheel = build(tmp_path / "out", *project)
    with zipfile.ZipFile(wheel) as archive:
        rows = read_record(archive, "demo_pkg-1.0.dist-info")
        assert rows[-1] == ["demo_pkg-1.0.dist-info/RECORD", "", ""]
        assert [row[0] for row in rows] == archive.namelist()
        for name, digest, size in rows[:-1]:
            data = archive.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, size) == (f"sha256={expected}", str(len(data)))


def test_native_tag_is_not_purelib(tmp_path: Path, project: Built) -> None:
    root, metadata = project
    tag = "cp311-cp311-linux_x86_64"
    with WheelWriter(tmp_path, "demo-pkg", "1.0", tag, source_date_epoch=None) as writer:
        writer.add_bytes("demo_pkg/_C.so", b"\x7fELF")
        writer.finish(metadata)
    assert writer.path.name == f"demo_pkg-1.0-{tag}.whl"
    with zipfile.ZipFile(writer.path) as archive:
        wheel_file = archive.read("demo_pkg-1.0.dist-info/WHEEL").decode()
        assert {info.date_time for info in archive.infolist()} == {(2016, 1, 1, 0, 0, 0)}
    assert f"Root-Is-Purelib: false\nTag: {tag}\n" in wheel_file


def test_pip_installs_it(tmp_path: Path, project: Built) -> None:
    wheel = build(tmp_path / "out", *project)
    target = tmp_path / "target"
    subprocess.run(
        [*PIP_INSTALL, "-q", "--target", target, wheel], check=True
    )
    assert (target / "demo_pkg" / "sub" / "__init__.py").is_file()
    assert (target / "demo_pkg-1.0.dist-info" / "licenses" / "LICENSE").is_file()
    assert os.access(target / "demo_pkg" / "tool.sh", os.X_OK)
    script = target / "bin" / "demo"
    assert script.is_file()
    environment = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run([script], env=environment, capture_output=True, text=True, check=True)
    assert result.stdout == "demo says hi\n"


def test_check_wheel_contents_passes(tmp_path: Path, project: Built) -> None:
    wheel = build(tmp_path / "out", *project)
    result = subprocess.run([BIN / "check-wheel-contents", wheel], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_two_builds_are_byte_identical(tmp_path: Path, project: Built) -> None:
    root, metadata = project
    first = build(tmp_path / "one", root, metadata).read_bytes()
    os.utime(root / "demo_pkg" / "__init__.py", (1, 1))  # file times must not leak in
    (root / "demo_pkg" / "py.typed").chmod(0o600)  # nor exact permission bits
    assert build(tmp_path / "two", root, metadata).read_bytes() == first


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("after_finish", [False, True])
def test_failure_leaves_no_file(
    tmp_path: Path, project: Built, error: type[BaseException], after_finish: bool
) -> None:
    root, metadata = project
    with pytest.raises(error, match="^the test's own error$"):  # passed on, not replaced
        with WheelWriter(tmp_path, "demo_pkg", "1.0", PURE, source_date_epoch=None) as writer:
            writer.add_file("demo_pkg/__init__.py", root / "demo_pkg" / "__init__.py")
            if after_finish:
                writer.finish(metadata)
            raise error("the test's own error")
    assert list(tmp_path.iterdir()) == [root]


def test_missing_file_during_finish_leaves_no_file(tmp_path: Path, project: Built) -> None:
    root, metadata = project
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FileNotFoundError, match=re.escape(str(root / "gone.py"))):
        with WheelWriter(out, "demo_pkg", "1.0", PURE, source_date_epoch=None) as writer:
            writer.add_file("demo_pkg/__init__.py", root / "demo_pkg" / "__init__.py")
            writer.add_file("demo_pkg/gone.py", root / "gone.py")
            writer.finish(metadata)
    assert list(out.iterdir()) == []


def test_leaving_without_finish_is_a_bug(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="finish"):
        with WheelWriter(tmp_path, "demo_pkg", "1.0", PURE, source_date_epoch=None):
            pass
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "arcname",
    [
        "/etc/passwd", "../evil.py", "pkg/../../evil.py", "pkg\\evil.py", "pkg//x.py", "./x.py",
        "C:/x.py", "", "pkg/",
    ],
)
def test_unsafe_arcnames_are_refused(tmp_path: Path, arcname: str) -> None:
    writer = WheelWriter(tmp_path, "demo_pkg", "1.0", PURE, source_date_epoch=None)
    said = f"^{re.escape(repr(arcname))} is not a safe relative archive name"
    with pytest.raises(ValueError, match=said):
        writer.add_bytes(arcname, b"")


def test_duplicates_and_dist_info_members_are_refused(tmp_path: Path) -> None:
    writer = WheelWriter(tmp_path, "demo_pkg", "1.0", PURE, source_date_epoch=None)
    writer.add_bytes("x.py", b"")
    with pytest.raises(ValueError, match="already"):
        writer.add_bytes("x.py", b"")
    with pytest.raises(ValueError, match="finish"):
        writer.add_bytes("demo_pkg-1.0.dist-info/METADATA", b"")


def test_metadata_must_match_the_wheel(tmp_path: Path, project: Built) -> None:
    _, metadata = project
    with pytest.raises(ValueError, match="metadata is for"):
        with WheelWriter(tmp_path, "demo_pkg", "2.0", PURE, source_date_epoch=None) as writer:
            writer.finish(metadata)


def test_corrupted_member_is_rejected_by_pip(tmp_path: Path, project: Built) -> None:
    wheel = build(tmp_path / "out", *project)
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("demo_pkg/__init__.py")
    # The compressed bytes start after the 30-byte local header, the name and the extra field.
    offset = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 2
    data[offset] ^= 0xFF
    wheel.write_bytes(bytes(data))
    result = subprocess.run(
        [*PIP_INSTALL, "--target", tmp_path / "t", wheel],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    # zip's own check, not RECORD's:
    assert "Bad CRC-32 for file 'demo_pkg/__init__.py'" in result.stderr
    assert not (tmp_path / "t" / "demo_pkg" / "__init__.py").exists()


def test_record_mismatch_is_detected(tmp_path: Path, project: Built) -> None:
    """A member changed consistently (valid zip CRC, stale RECORD).

    pip 23.2 and uv 0.13 install such a wheel without complaint (neither checks RECORD
    hashes), so the checker here is `wheel unpack`, which does.
    """
    wheel = build(tmp_path / "out", *project)
    tampered = tmp_path / "tampered" / wheel.name
    tampered.parent.mkdir()
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(tampered, "w") as destination:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "demo_pkg/__init__.py":
                data = data.replace(b"hi", b"ho")
            destination.writestr(info, data)
    unpack = [sys.executable, "-m", "wheel", "unpack", "-d"]
    assert subprocess.run([*unpack, tmp_path / "u1", wheel], capture_output=True).returncode == 0
    result = subprocess.run([*unpack, tmp_path / "u2", tampered], capture_output=True, text=True)
    assert result.returncode != 0
    assert "Hash mismatch for file 'demo_pkg/__init__.py'" in result.stderr + result.stdout


def test_prepare_metadata_writes_what_the_wheel_holds(tmp_path: Path, project: Built) -> None:
    """One list of .dist-info files for prepare_metadata_for_build_wheel and the wheel: pip
    compares the two, and a difference fails the install."""
    root, metadata = project
    name = metadata.write_dist_info(tmp_path / "prepared")
    prepared = {p.relative_to(tmp_path / "prepared").as_posix(): p.read_bytes()
                for p in (tmp_path / "prepared").rglob("*") if p.is_file()}
    with zipfile.ZipFile(build(tmp_path / "out", root, metadata)) as archive:
        packed = {n: archive.read(n) for n in archive.namelist() if n.startswith(f"{name}/")}
    del packed[f"{name}/WHEEL"], packed[f"{name}/RECORD"]
    assert prepared == packed
    assert sorted(prepared) == [f"{name}/METADATA", f"{name}/entry_points.txt",
                                f"{name}/licenses/LICENSE"]

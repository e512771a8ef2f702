"""`python -m pep517_torch index DIR` (issue 34 items 4 and 5): contained (it writes only
inside DIR, never through a symlink, and removes only what it wrote), every value it reads
from a wheel checked, one line per thing it skips; a find-links page and a PEP 503 simple
repository per torch variant, which real pip and real uv install from. Compiles nothing: the
wheels are written with the wheel writer, with fake build records."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import urllib.parse
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pep517_torch.cli import main
from pep517_torch.distribution.index import (BUILD_RECORD, MANIFEST, BuildTorch, RecordError,
                                             read_record)
from pep517_torch.distribution.metadata import build_metadata
from pep517_torch.distribution.wheel import WheelWriter

CPU, CUDA = "2.13.0+cpu", "2.14.1+cu130"
UV = Path(sys.executable).parent / "uv"


def make_wheel(folder: Path, name: str = "my_ops", version: str = "1.0", *,
               record: bytes | None = None, dependencies: tuple[str, ...] = (),
               tag: str = "py3-none-any") -> Path:
    """A wheel with a module saying its version, and ``record`` as its build record."""
    folder.mkdir(parents=True, exist_ok=True)
    pyproject = {"project": {"name": name, "version": version, "requires-python": ">=3.8",
                             "dependencies": list(dependencies)}}
    metadata = build_metadata(pyproject, folder, version=None)
    if record is not None:
        metadata.extra_dist_info[BUILD_RECORD] = record
    module = name.lower().replace("-", "_")
    with WheelWriter(folder, name, version, tag, source_date_epoch=1700000000) as writer:
        writer.add_bytes(f"{module}/__init__.py", f"BUILT = {version!r}\n".encode())
        writer.finish(metadata)
    return writer.path


def built_for(torch: str, cuda: str | None = None) -> bytes:
    return json.dumps({"torch": torch, "torch_cuda": cuda}).encode()


def run_index(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["index", str(directory)])
    out, err = capsys.readouterr()
    return status, out, err


def tree(root: Path) -> dict[str, str]:
    """Every entry under root: a file's sha256, a link's target, a folder's 'dir'."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        found[key] = (f"-> {os.readlink(path)}" if path.is_symlink() else "dir" if path.is_dir()
                      else hashlib.sha256(path.read_bytes()).hexdigest())
    return found


@pytest.fixture
def house(tmp_path: Path) -> Path:
    """A wheelhouse: one project built for two torches, a second project, a pure wheel."""
    folder = tmp_path / "wheelhouse"
    make_wheel(folder, "My_Ops", "1.0+pt213cpu", record=built_for(CPU))
    make_wheel(folder, "My_Ops", "1.0+pt214cu130", record=built_for(CUDA, "13.0"))
    make_wheel(folder, "other.ops", "2.0", record=built_for("2.13.0", None))
    make_wheel(folder, "pure", "1.0")
    return folder


# -- the record: one reading, every field checked ------------------------------------------


@pytest.mark.parametrize(("text", "variant"), [
    ('{"torch": "2.14.1+cu130", "torch_cuda": "13.0"}', "2.14.1+cu130"),
    ('{"torch": "2.13.0", "torch_cuda": null}', "2.13.0+cpu"),
    ('{"torch": "2.13.0", "torch_cuda": "12.8"}', "2.13.0+cu128"),
    ('{"torch": "2.15.0.dev20260101+cpu", "torch_cuda": null}', "2.15.0.dev20260101+cpu"),
    ('{"torch": "2.6.0a0+git1234abc"}', "2.6.0a0+git1234abc"),
])
def test_a_record_names_its_variant(text: str, variant: str) -> None:
    assert read_record(text.encode()).variant == variant


@pytest.mark.parametrize(("text", "says"), [
    ('{"torch": "x/../../NAME", "torch_cuda": null}', "'torch' is not a version: 'x/../../NAME'"),
    ('{"torch": "2.13.0+../../x"}', "'torch' is not a version"),
    ('{"torch": "2.13.0+CPU"}', "local label of [a-z0-9.]"),
    ('{"torch": "2.13.0+cu_130"}', "local label of [a-z0-9.]"),
    ('{"torch": "1!2.13.0"}', "'torch' is not a torch version"),
    ('{"torch": 2.13}', "'torch' must be a torch version string, got 2.13"),
    ('{"torch_cuda": "13.0"}', "'torch' must be a torch version string, got None"),
    ('{"torch": "2.13.0", "torch_cuda": "13"}', "'torch_cuda' must be MAJOR.MINOR or null"),
    ('{"torch": "2.13.0", "torch_cuda": "../13.0"}', "'torch_cuda' must be MAJOR.MINOR"),
    ('["2.13.0"]', "not a JSON object but list"),
    ("torch 2.13.0", "not JSON"),
    (b"\xff\xfe".decode("latin-1"), "not JSON"),
    ("[" * 60_000, "not JSON (maximum recursion depth"),  # under 64 KiB: was a traceback
])
def test_a_bad_record_is_refused_naming_the_field(text: str, says: str) -> None:
    with pytest.raises(RecordError, match=re.escape(says)):
        read_record(text.encode("latin-1"))


# -- pages and simple repositories ---------------------------------------------------------


def test_each_variant_gets_a_find_links_page_and_a_simple_repository(
        house: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_index(house, capsys)
    assert (status, err) == (0, "")
    cpu_wheel, cuda_wheel = "my_ops-1.0+pt213cpu-py3-none-any.whl", "my_ops-1.0+pt214cu130-py3-none-any.whl"
    other = "other_ops-2.0-py3-none-any.whl"
    sha = {name: hashlib.sha256((house / name).read_bytes()).hexdigest()
           for name in (cpu_wheel, cuda_wheel, other)}
    # find-links pages beside the wheels, as before
    page = (house / f"torch-{CPU}.html").read_text()
    assert re.findall(r'href="([^"]+)"', page) == [
        f"my_ops-1.0%2Bpt213cpu-py3-none-any.whl#sha256={sha[cpu_wheel]}",
        f"{other}#sha256={sha[other]}"]
    assert re.findall(r'href="([^"]+)"', (house / f"torch-{CUDA}.html").read_text()) == [
        f"my_ops-1.0%2Bpt214cu130-py3-none-any.whl#sha256={sha[cuda_wheel]}"]
    # the simple repositories: PEP 503 names, relative links to the wheels in DIR (no copies)
    for variant, projects in ((CPU, ["my-ops", "other-ops"]), (CUDA, ["my-ops"])):
        root = (house / f"torch-{variant}" / "index.html").read_text()
        assert '<meta name="pypi:repository-version" content="1.0">' in root
        assert re.findall(r'href="([^"]+)"', root) == [f"{p}/" for p in projects]
    project = (house / f"torch-{CPU}" / "my-ops" / "index.html").read_text()
    assert re.findall(r'<a href="([^"]+)" data-requires-python="([^"]+)">', project) == [
        (f"../../my_ops-1.0%2Bpt213cpu-py3-none-any.whl#sha256={sha[cpu_wheel]}", "&gt;=3.8")]
    assert '<meta name="pypi:repository-version" content="1.0">' in project
    assert sorted(p.name for p in house.glob("*.whl")) == sorted(
        [cpu_wheel, cuda_wheel, other, "pure-1.0-py3-none-any.whl"])
    assert not list(house.rglob("*/*.whl"))  # no copies in the repositories
    overview = (house / "index.html").read_text()
    assert re.findall(r'href="([^"]+)"', overview) == [
        "torch-2.13.0%2Bcpu.html", "torch-2.13.0%2Bcpu/", "torch-2.14.1%2Bcu130.html",
        "torch-2.14.1%2Bcu130/"]
    assert out.splitlines() == [
        f"pep517_torch: {house}/torch-{CPU}.html: 2 wheels built for torch {CPU} (pip install -f"
        f" {house}/torch-{CPU}.html)",
        f"pep517_torch: {house}/torch-{CPU}/: the simple repository of 2 wheels built for torch"
        f" {CPU} (pip install --index-url {(house / f'torch-{CPU}').as_uri()}/)",
        f"pep517_torch: {house}/torch-{CUDA}.html: 1 wheel built for torch {CUDA} (pip install -f"
        f" {house}/torch-{CUDA}.html)",
        f"pep517_torch: {house}/torch-{CUDA}/: the simple repository of 1 wheel built for torch"
        f" {CUDA} (pip install --index-url {(house / f'torch-{CUDA}').as_uri()}/)",
        "pep517_torch: pure-1.0-py3-none-any.whl: no torch build record (not built against"
        " torch by pep517_torch): on no variant page",
        f"pep517_torch: wrote {house}/index.html",
    ]
    # a second run changes nothing
    before = {p: p.stat().st_mtime_ns for p in house.rglob("*")}
    assert run_index(house, capsys)[0] == 0
    assert {p: p.stat().st_mtime_ns for p in house.rglob("*")} == before


def test_pages_of_a_variant_gone_are_removed_and_files_not_ours_stay(
        house: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (house / "torch-custom.html").write_text("<a href='x.whl'>mine</a>\n")
    (house / f"torch-{CUDA}" ).mkdir()
    (house / f"torch-{CUDA}" / "notes.txt").write_text("mine\n")  # a file of the user's there
    assert run_index(house, capsys)[0] == 0
    (house / f"torch-{CPU}.html").write_text("edited by hand\n")  # ours, then changed: theirs
    for wheel in house.glob("*pt214cu130*.whl"):
        wheel.unlink()
    for wheel in house.glob("*pt213cpu*.whl"):
        wheel.unlink()
    status, out, err = run_index(house, capsys)
    assert status == 0
    assert (house / "torch-custom.html").read_text() == "<a href='x.whl'>mine</a>\n"
    assert (house / f"torch-{CPU}.html").read_text() == "edited by hand\n"
    assert err.splitlines() == [
        f"pep517_torch: {house}/torch-{CPU}.html: not written by index (or changed since): left"
        " as it is; remove it to have it written"]
    assert not (house / f"torch-{CUDA}.html").exists()
    assert not (house / f"torch-{CUDA}" / "my-ops").exists()  # ours, removed with its folder
    assert (house / f"torch-{CUDA}" / "notes.txt").read_text() == "mine\n"  # not ours: kept
    assert (f"pep517_torch: removed {house}/torch-{CUDA}.html (index wrote it; no wheel here is"
            " left for it to list)") in out
    assert sorted(re.findall(r'href="([^"]+)"', (house / "index.html").read_text())) == [
        "torch-2.13.0%2Bcpu/"]  # the page in the way is not linked
    # the user's removal gives the page back to index
    (house / f"torch-{CPU}.html").unlink()
    assert run_index(house, capsys)[2] == ""
    assert "other_ops-2.0" in (house / f"torch-{CPU}.html").read_text()


def test_a_symlink_is_never_written_through(house: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.html").write_text("precious\n")
    (house / "index.html").symlink_to(outside / "precious.html")
    (house / f"torch-{CUDA}.html").symlink_to(outside / "precious.html")
    (house / f"torch-{CPU}").symlink_to(outside, target_is_directory=True)
    (house / MANIFEST).symlink_to(outside / "manifest.json")
    before = tree(outside)
    status, _, err = run_index(house, capsys)
    assert status == 0
    assert tree(outside) == before  # nothing written, made or removed there
    assert sorted(err.splitlines()) == sorted([
        f"pep517_torch: {house}/{MANIFEST}: a symlink (a state file is never read through one): ignored, no"
        " file of this folder counted as ours",
        f"pep517_torch: {house}/torch-{CPU}: a symlink (never written through): left as it is",
        f"pep517_torch: {house}/torch-{CUDA}.html: a symlink (never written through): left as it is",
        f"pep517_torch: {house}/index.html: a symlink (never written through): left as it is",
    ])
    assert (house / f"torch-{CPU}.html").is_file() and (house / f"torch-{CUDA}" / "index.html").is_file()
    assert (house / "index.html").is_symlink() and not (house / MANIFEST).is_symlink()
    assert run_index(house, capsys)[0] == 0 and tree(outside) == before  # and again


def test_a_manifest_naming_paths_outside_is_ignored(house: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.html"
    victim.write_text("x")
    digest = hashlib.sha256(b"x").hexdigest()
    (house / MANIFEST).write_text(json.dumps({"generator": "pep517_torch index",
                                              "files": {"../victim.html": [digest]},
                                              "folders": ["..", "/tmp"]}))
    status, _, err = run_index(house, capsys)
    assert status == 0 and victim.read_text() == "x"
    assert err == (f"pep517_torch: {house}/{MANIFEST}: not index's manifest (names"
                   " '../victim.html', not a file index writes): ignored, no file of this folder"
                   " counted as ours\n")


def links_resolve(house: Path) -> list[str]:
    """Every href of every page under ``house``, each checked to name a file that is there."""
    hrefs = []
    for page in house.rglob("*.html"):
        for href in re.findall(r'href="([^"]+)"', page.read_text()):
            target = page.parent / urllib.parse.unquote(html.unescape(href).split("#")[0])
            assert target.exists(), f"{page} links {href}, which is not there"
            hrefs.append(href)
    return hrefs


def test_a_forged_manifest_never_costs_a_wheel_and_no_page_links_a_missing_file(
        house: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43 item 1: a manifest naming the wheels with their real hashes (a forged one, or
    one copied from elsewhere) deleted them and left pages linking them."""
    assert run_index(house, capsys)[0] == 0
    wheels = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in house.glob("*.whl")}
    manifest = json.loads((house / MANIFEST).read_text())
    manifest["files"].update({name: [sha] for name, sha in wheels.items()})
    (house / MANIFEST).write_text(json.dumps(manifest))
    for page in [*house.glob("*.html"), *house.rglob("torch-*/**/index.html")]:
        page.unlink()  # pages that would link the wheels again, once written
    status, out, err = run_index(house, capsys)
    assert status == 0
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in house.glob("*.whl")} == wheels  # every wheel, untouched
    assert "removed" not in out
    assert re.fullmatch(re.escape(f"pep517_torch: {house}/{MANIFEST}: not index's manifest (names")
                        + r" '[^']+\.whl', not a file index writes\): ignored, no file of this"
                        r" folder counted as ours\n", err), err
    assert len(links_resolve(house)) == 13  # overview 4, find-links 3, roots 3, projects 3
    # the pages it wrote are its own again: wheels gone, their pages go, none links a ghost
    for wheel in house.glob("*pt214cu130*.whl"):
        wheel.unlink()
    status, out, err = run_index(house, capsys)
    assert (status, err) == (0, "")
    assert f"pep517_torch: removed {house}/torch-{CUDA}.html" in out
    assert not (house / f"torch-{CUDA}").exists() and len(links_resolve(house)) == 8
    assert len(list(house.glob("*.whl"))) == 3


@pytest.mark.parametrize("manifest", [
    "fifo", "dev-zero", "folder", "huge", "deep", "bad-utf8", "list", "no-generator",
    "bad-hash", "wheel-folder"])
def test_a_manifest_that_is_not_ours_is_named_in_one_line_and_read_as_absent(
        house: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: str) -> None:
    """Read as a regular file only (never a FIFO that blocks, never /dev/zero through a
    link), bounded, every field checked: a bad one is one line, and no file counts as ours."""
    assert run_index(house, capsys)[0] == 0
    target = house / MANIFEST
    good = json.loads(target.read_text())
    target.unlink()
    page = next(iter(sorted(good["files"])))
    if manifest == "fifo":
        os.mkfifo(target)
    elif manifest == "dev-zero":
        target.symlink_to("/dev/zero")
    elif manifest == "folder":
        target.mkdir()
    else:
        target.write_bytes({
            "huge": b'{"generator": "pep517_torch index", "x": "' + b"y" * (5 << 20) + b'"}',
            "deep": b"[" * 100_000 + b"]" * 100_000,
            "bad-utf8": b'{"generator": "\xff"}',
            "list": b"[]",
            "no-generator": json.dumps({**good, "generator": "x"}).encode(),
            "bad-hash": json.dumps({**good, "files": {page: ["../x"]}}).encode(),
            "wheel-folder": json.dumps({**good, "folders": ["pure-1.0-py3-none-any.whl"]}).encode(),
        }[manifest])
    (house / "index.html").write_text("edited\n")  # ours by the good manifest: not by this one
    status, out, err = run_index(house, capsys)
    lines = err.splitlines()
    if manifest == "folder":  # nowhere to keep what it writes: one line, nothing written
        assert (status, lines) == (1, [
            f"pep517_torch: error: {target}: a folder is in the way: index keeps its list of the"
            " files it wrote there; remove it"])
        assert (house / "index.html").read_text() == "edited\n"
        return
    assert status == 0, err
    assert lines[0].startswith(f"pep517_torch: {house}/{MANIFEST}: ")
    assert lines[0].endswith(": ignored, no file of this folder counted as ours")
    assert f"{house}/index.html: not written by index" in err  # nothing counted as ours
    assert (house / "index.html").read_text() == "edited\n" and "Traceback" not in err
    assert len(list(house.glob("*.whl"))) == 4


def test_index_of_a_folder_without_a_wheel_says_so_and_fails(
        house: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43 item 8: an empty index.html was written without a word, exit 0."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("mine\n")
    status, out, err = run_index(empty, capsys)
    assert (status, out) == (1, "")
    assert err == f"pep517_torch: error: {empty}: no wheel (*.whl) here: no page written\n"
    assert [p.name for p in empty.iterdir()] == ["notes.txt"]  # no page, no manifest
    # the wheels of an indexed folder gone: its pages go with them, then the same line
    assert run_index(house, capsys)[0] == 0
    for wheel in house.glob("*.whl"):
        wheel.unlink()
    status, out, err = run_index(house, capsys)
    assert status == 1
    assert err == f"pep517_torch: error: {house}: no wheel (*.whl) here: no page written\n"
    assert out.count("pep517_torch: removed ") == 8
    assert sorted(p.name for p in house.iterdir()) == [MANIFEST]


def test_whatever_is_not_a_usable_wheel_is_skipped_in_one_line(
        house: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = house / "my_ops-1.0+pt213cpu-py3-none-any.whl"
    (house / "not a wheel.whl").write_bytes(good.read_bytes())
    (house / "truncated-1.0-py3-none-any.whl").write_bytes(good.read_bytes()[:300])
    (house / "folder-1.0-py3-none-any.whl").mkdir()
    (house / "torch-dir.html").mkdir()
    (house / f"torch-{CUDA}.html").mkdir()  # a folder where a page goes
    (house / "zero-1.0-py3-none-any.whl").symlink_to("/dev/zero")
    os.mkfifo(house / "fifo-1.0-py3-none-any.whl")
    bad = tmp_path / "bad"
    hostile = make_wheel(bad, "hostile", "1.0", record=built_for("x/../../NAME"))
    listish = make_wheel(bad, "listish", "1.0", record=b'["2.13.0"]')
    notjson = make_wheel(bad, "notjson", "1.0", record=b"torch = 2.13.0")
    for wheel in (hostile, listish, notjson):
        os.replace(wheel, house / wheel.name)
    # a record that inflates to 200 MB (a zip bomb's trick), and a wheel whose dist-info lies
    with zipfile.ZipFile(house / "bomb-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n")
        zf.writestr(f"bomb-1.0.dist-info/{BUILD_RECORD}", b"{" + b" " * (200 << 20) + b"}")
    with zipfile.ZipFile(house / "liar-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("liar-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: other\nVersion: 1.0\n")
    with zipfile.ZipFile(house / "renamed-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("renamed-2.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: renamed\nVersion: 2.0\n")
    outside_before = tree(tmp_path / "bad")
    status, out, err = run_index(house, capsys)
    assert status == 0
    record = BUILD_RECORD
    lines = err.splitlines()
    assert lines == [
        f"pep517_torch: skipped {house}/bomb-1.0-py3-none-any.whl: bomb-1.0.dist-info/{record}:"
        " over 16384 KiB, not a build record",
        f"pep517_torch: skipped {house}/fifo-1.0-py3-none-any.whl: not a file",
        f"pep517_torch: skipped {house}/folder-1.0-py3-none-any.whl: not a file",
        f"pep517_torch: skipped {house}/hostile-1.0-py3-none-any.whl: hostile-1.0.dist-info/"
        f"{record}: 'torch' is not a version: 'x/../../NAME'",
        f"pep517_torch: skipped {house}/liar-1.0-py3-none-any.whl: liar-1.0.dist-info/METADATA"
        " names 'other' '1.0', the file name liar 1.0",
        f"pep517_torch: skipped {house}/listish-1.0-py3-none-any.whl: listish-1.0.dist-info/"
        f"{record}: not a JSON object but list",
        lines[6],  # packaging's own words for the invalid name
        f"pep517_torch: skipped {house}/notjson-1.0-py3-none-any.whl: notjson-1.0.dist-info/"
        f"{record}: not JSON (Expecting value: line 1 column 1 (char 0))",
        f"pep517_torch: skipped {house}/renamed-1.0-py3-none-any.whl: renamed-2.0.dist-info names"
        " 'renamed' '2.0', the file name renamed 1.0",
        lines[9],
        f"pep517_torch: skipped {house}/zero-1.0-py3-none-any.whl: not a file",
        f"pep517_torch: {house}/torch-{CUDA}.html: a folder is in the way: left as it is",
    ]
    assert lines[6].startswith(f"pep517_torch: skipped {house}/not a wheel.whl: not a valid"
                               " wheel file name (")
    assert lines[9].startswith(f"pep517_torch: skipped {house}/truncated-1.0-py3-none-any.whl:"
                               " not a readable wheel (")
    assert "Traceback" not in out + err
    assert (house / "torch-dir.html").is_dir() and (house / f"torch-{CUDA}.html").is_dir()
    assert tree(tmp_path / "bad") == outside_before and not (tmp_path / "NAME").exists()
    assert not any("NAME" in str(p) for p in tmp_path.rglob("*"))
    listed = (house / f"torch-{CPU}.html").read_text()
    assert "my_ops-1.0%2Bpt213cpu" in listed and "not%20a%20wheel" not in listed
    assert [m for m in re.findall(r'href="\.\./\.\./([^"#]+)', "".join(
        p.read_text() for p in house.glob("torch-*/*/index.html")))] == [
        "my_ops-1.0%2Bpt213cpu-py3-none-any.whl", "other_ops-2.0-py3-none-any.whl",
        "my_ops-1.0%2Bpt214cu130-py3-none-any.whl"]


def test_index_of_a_missing_folder_is_one_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_index(tmp_path / "nope", capsys)
    assert (status, out, err) == (1, "", f"pep517_torch: error: {tmp_path}/nope: no such directory\n")
    (tmp_path / "file").write_text("")
    assert run_index(tmp_path / "file", capsys)[2] == (
        f"pep517_torch: error: {tmp_path}/file: not a directory\n")


def test_a_full_disk_is_one_line_no_half_page_and_the_next_run_heals(
        house: Path, tmpfs: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    disk = tmpfs("256k")
    for wheel in house.glob("*.whl"):
        shutil.copy(wheel, disk / wheel.name)
    filler = disk / "filler"
    failed = 0
    for pages_room in (1, 2, 3, 4, 5):  # each page takes a 4 KiB block of the tmpfs
        filler.unlink(missing_ok=True)
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        filler.write_bytes(b"\0" * max(free - pages_room * 4096, 0))
        status, out, err = run_index(disk, capsys)
        if status == 0:
            continue
        failed += 1
        assert status == 1 and err.startswith(f"pep517_torch: error: cannot write {disk}/")
        assert err.endswith(": No space left on device\n") and len(err.splitlines()) == 1
        assert not [p for p in disk.rglob("*") if p.name.endswith(".tmp")]
        for page in disk.rglob("*.html"):
            assert page.read_text().endswith("</html>\n")  # complete, or not there
    assert failed >= 2  # the disk filled at different points of the run
    filler.unlink()
    status, _, err = run_index(disk, capsys)
    assert (status, err) == (0, "")  # what the first run wrote is still counted as ours
    assert sorted(p.relative_to(disk).as_posix() for p in disk.rglob("*.html")) == [
        "index.html", f"torch-{CPU}.html", f"torch-{CPU}/index.html", f"torch-{CPU}/my-ops/index.html",
        f"torch-{CPU}/other-ops/index.html", f"torch-{CUDA}.html", f"torch-{CUDA}/index.html",
        f"torch-{CUDA}/my-ops/index.html"]


def test_the_record_has_one_reader() -> None:
    """wheels.py reads the record through read_record alone: a new field is one change."""
    source = (Path(__file__).parents[1] / "pep517_torch" / "distribution" / "index").glob("*.py")
    readers = [p.name for p in source if "json.loads" in p.read_text()
               and p.name not in ("record.py", "folder.py")]
    assert readers == []
    assert BuildTorch("2.13.0", "13.0").variant == "2.13.0+cu130"


# -- real pip and real uv install from the simple repositories -----------------------------


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """No configuration, index or find-links of this machine: only what the command names."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
            "UV_PYTHON_DOWNLOADS": "never"}


def _version_in(target: Path) -> str:
    return (target / "my_ops" / "__init__.py").read_text()


@pytest.mark.parametrize("spelling", ["as_uri", "plain"])
def test_pip_installs_the_matching_build_from_each_repository(
        house: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], spelling: str) -> None:
    assert run_index(house, capsys)[0] == 0
    for variant, label in ((CPU, "pt213cpu"), (CUDA, "pt214cu130")):
        repository = house / f"torch-{variant}"
        # the spelling (file://DIR/torch-2.14.1+cu130/) and pathlib's (%2B)
        url = repository.as_uri() + "/" if spelling == "as_uri" else f"file://{repository}/"
        target = tmp_path / f"target-{label}"
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target",
                               str(target), "--index-url", url, "My.Ops"],
                              capture_output=True, text=True, env=_clean_env(tmp_path), timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert _version_in(target) == f"BUILT = '1.0+{label}'\n"
    pure = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d",
                           str(tmp_path / "none"), "--index-url", f"file://{house}/torch-{CPU}/",
                           "pure"], capture_output=True, text=True, env=_clean_env(tmp_path),
                          timeout=300)
    assert pure.returncode != 0 and "No matching distribution found for pure" in pure.stderr


def test_pip_installs_with_its_torch_requirement_met_by_the_installed_torch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One real install, dependencies resolved: the wheel requires the torch it was built for,
    the venv has it (this environment's, seen through a .pth file), the repository offers only
    the matching build."""
    import torch

    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    house = tmp_path / "wheelhouse"
    label = f"pt{major}{minor}cpu"
    make_wheel(house, "my_ops", f"1.0+{label}", record=built_for(torch.__version__),
               dependencies=(f"torch>={major}.{minor},<{major}.{minor + 1}",))
    make_wheel(house, "my_ops", "1.0+pt99cu130", record=built_for("9.9.0+cu130", "13.0"),
               dependencies=("torch>=9.9",))
    assert run_index(house, capsys)[0] == 0
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(env_dir)}))
    (site / "this_torch.pth").write_text(str(Path(torch.__file__).parents[1]) + "\n")
    variant = torch.__version__ if "+" in torch.__version__ else f"{torch.__version__}+cpu"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"),
                           "install", "--index-url", (house / f"torch-{variant}").as_uri() + "/",
                           "my-ops"], capture_output=True, text=True, env=_clean_env(tmp_path),
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Requirement already satisfied: torch" in done.stdout
    shown = subprocess.run([str(env_dir / "bin" / "python"), "-c", "import importlib.metadata as m,"
                            " my_ops; print(m.version('my-ops'), my_ops.BUILT)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True)
    assert shown.stdout.split() == [f"1.0+{label}", f"1.0+{label}"]


def test_uv_pip_installs_the_matching_build(house: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    if not UV.exists():
        pytest.skip("needs uv (the test extras)")
    assert run_index(house, capsys)[0] == 0
    for variant, label in ((CPU, "pt213cpu"), (CUDA, "pt214cu130")):
        target = tmp_path / f"target-{label}"
        done = subprocess.run([str(UV), "pip", "install", "--offline", "--no-deps", "--target",
                               str(target), "--python", sys.executable, "--index-url",
                               (house / f"torch-{variant}").as_uri() + "/", "my-ops"],
                              capture_output=True, text=True, env=_clean_env(tmp_path), timeout=300)
        assert done.returncode == 0, done.stderr
        assert _version_in(target) == f"BUILT = '1.0+{label}'\n"


def test_a_uv_project_with_the_repository_as_its_index_syncs_the_matching_build(
        house: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`[[tool.uv.index]]` naming the CPU repository: uv locks and installs +pt213cpu, the
    only build that repository offers (a flat folder would offer +pt214cu130 too, the higher)."""
    if not UV.exists():
        pytest.skip("needs uv (the test extras)")
    assert run_index(house, capsys)[0] == 0
    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["my-ops"]\n\n[tool.uv]\npackage = false\n\n[[tool.uv.index]]\n'
        f'name = "torch-cpu"\nurl = "{(house / f"torch-{CPU}").as_uri()}/"\ndefault = true\n')
    env = {**_clean_env(tmp_path)}
    del env["UV_NO_CONFIG"]  # the project's own [tool.uv] is the point
    done = subprocess.run([str(UV), "sync", "--offline", "--python", sys.executable],
                          cwd=app, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lock = (app / "uv.lock").read_text()
    assert 'version = "1.0+pt213cpu"' in lock and "pt214cu130" not in lock
    shown = subprocess.run([str(app / ".venv" / "bin" / "python"), "-c",
                            "import my_ops; print(my_ops.BUILT)"], capture_output=True, text=True,
                           cwd=tmp_path, check=True)
    assert shown.stdout.strip() == "1.0+pt213cpu"

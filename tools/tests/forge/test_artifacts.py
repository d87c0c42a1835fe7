"""Unpacking another run's artifact (konfig.forge.artifacts): hostile zip archives."""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path

import pytest

from konfig.forge.artifacts import ArtifactError, unpack


def archive(*members: tuple[str, bytes] | zipfile.ZipInfo, data: bytes = b"x") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for member in members:
            if isinstance(member, zipfile.ZipInfo):
                out.writestr(member, data)
            else:
                out.writestr(*member)
    return buffer.getvalue()


def test_plain_files_in_folders_are_unpacked(tmp_path: Path) -> None:
    data = archive(("a.json", b"{}"), ("specs/appops/x/dev/spec.yaml", b"k: v\n"))
    written = unpack(data, tmp_path / "art", name="konfig-specs-0")
    assert written == ["a.json", "specs/appops/x/dev/spec.yaml"]
    assert (tmp_path / "art/specs/appops/x/dev/spec.yaml").read_bytes() == b"k: v\n"


@pytest.mark.parametrize("name", ["../up.json", "/etc/passwd", "a/../../up.json", "a\\..\\up.json"])
def test_a_member_outside_its_folder_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ArtifactError, match=r"is not a path inside it|backslash"):
        unpack(archive((name, b"x")), tmp_path / "art", name="konfig-offline")
    assert not (tmp_path / "up.json").exists()


def test_a_link_is_refused(tmp_path: Path) -> None:
    link = zipfile.ZipInfo("evil")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    with pytest.raises(ArtifactError, match="not a plain file"):
        unpack(archive(link, data=b"/etc/passwd"), tmp_path / "art", name="konfig-offline")


def test_the_size_counts_what_is_written_not_what_is_declared(tmp_path: Path) -> None:
    bomb = archive(("big", b"\0" * 5_000_000))  # a few KB compressed
    assert len(bomb) < 100_000
    with pytest.raises(ArtifactError, match="more than 1000000 bytes"):
        unpack(bomb, tmp_path / "art", name="konfig-specs-0", limit=1_000_000)


def test_not_a_zip_a_duplicate_and_an_existing_folder(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="not a zip archive"):
        unpack(b"<html>", tmp_path / "one", name="konfig-offline")
    twice = io.BytesIO()
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(twice, "w") as out:
        out.writestr("a.json", b"1")
        out.writestr("a.json", b"2")
    with pytest.raises(ArtifactError, match="in it twice"):
        unpack(twice.getvalue(), tmp_path / "two", name="konfig-offline")
    (tmp_path / "three").mkdir()
    with pytest.raises(FileExistsError):
        unpack(archive(("a", b"1")), tmp_path / "three", name="konfig-offline")

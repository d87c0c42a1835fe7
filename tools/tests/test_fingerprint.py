"""The digest of konfig's own files: code counts, the template a package carries not."""

from __future__ import annotations

from pathlib import Path

from konfig.fingerprint import files_digest


def test_the_packaged_template_is_not_part_of_the_digest(tmp_path: Path) -> None:
    package = tmp_path / "konfig"
    (package / "data" / "template" / "base").mkdir(parents=True)
    (package / "data" / "gen").mkdir(parents=True)
    (package / "cli.py").write_text("x = 1\n", encoding="utf-8")
    (package / "data" / "gen" / "schema.k.j2").write_text("a\n", encoding="utf-8")
    (package / "data" / "template" / "base" / "a.k").write_text("a = 1\n", encoding="utf-8")
    before = files_digest(package)
    (package / "data" / "template" / "base" / "a.k").write_text("a = 2\n", encoding="utf-8")
    (package / "data" / "template" / "new.k").write_text("b = 1\n", encoding="utf-8")
    assert files_digest(package) == before
    (package / "data" / "gen" / "schema.k.j2").write_text("b\n", encoding="utf-8")
    assert files_digest(package) != before

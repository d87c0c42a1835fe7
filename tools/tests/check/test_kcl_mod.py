"""kcl.mod that parses but means nothing is a finding (KCL ignores what it cannot read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from konfig.check.structure import check_kcl_mod

GOOD = '[package]\nname = "konfig"\nedition = "v0.11.0"\nversion = "0.1.0"\n'


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[package\nname = "k"\n', 1, "is not valid TOML"),
        ('[pakage]\nname = "k"\n', 1, "unknown table [pakage]"),
        ('[pakage]\nname = "k"\n', 1, "has no [package] table"),
        ('# a comment\n[package]\nversion = "1"\n', 2, "[package] in kcl.mod has no `name`"),
        (GOOD + '\n[dependencies]\nk8s = "1.31"\n[deps]\nx = 1\n', 8, "unknown table [deps]"),
    ],
)
def test_meaningless_kcl_mod(tmp_path: Path, text: str, line: int, message: str) -> None:
    (tmp_path / "kcl.mod").write_text(text)
    found = [(f.rule, f.file, f.line) for f in check_kcl_mod(tmp_path) if message in f.message]
    assert found == [("structure/kcl-mod", "kcl.mod", line)]


def test_a_good_kcl_mod_has_no_findings(tmp_path: Path) -> None:
    (tmp_path / "kcl.mod").write_text(GOOD + '\n[dependencies]\nk8s = "1.31"\n')
    assert check_kcl_mod(tmp_path) == []

"""Reading the stages' JSON: each document checked against its contract, once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from konfig import contracts
from konfig.report import inputs
from konfig.report.inputs import ReportInputError, read, validated


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = contracts.violations

    def counted(name: str, data: Any, **kwargs: Any) -> list[contracts.Violation]:
        calls.append(name)
        return real(name, data, **kwargs)

    monkeypatch.setattr(inputs.contracts, "violations", counted)
    return calls


def test_a_document_is_checked_against_a_contract_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `konfig report --offline-preview` checks each file, then the report reads it: the
    # contract's validation was most of the comment's CPU at 10,000 stacks, twice over
    calls = _counting(monkeypatch)
    path = tmp_path / "changed.json"
    path.write_text('{"stacks": [], "deleted_stacks": []}\n', encoding="utf-8")
    doc = read(path)
    assert doc is not None
    assert validated("changed", doc) is doc.data
    assert validated("changed", doc) is doc.data
    assert calls == ["changed"]
    # another contract is its own check; a new read of the file is checked again
    with pytest.raises(ReportInputError, match="compile"):
        validated("compile", doc)
    again = read(path)
    assert again is not None
    validated("changed", again)
    assert calls == ["changed", "compile", "changed"]


def test_a_document_that_breaks_its_contract_is_refused_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    path = tmp_path / "changed.json"
    path.write_text('{"stacks": "all of them"}\n', encoding="utf-8")
    doc = read(path)
    assert doc is not None
    for _ in range(2):
        with pytest.raises(ReportInputError, match=r"changed\.json:1"):
            validated("changed", doc)
    assert calls == ["changed", "changed"]

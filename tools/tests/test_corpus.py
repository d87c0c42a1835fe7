"""The bad-input corpus: each case under ``corpus/<case>/`` is a repository overlay
(``repo/``) on the template's real base/, and ``case.yaml`` names the command to run
and the finding it must give (rule, file, line). Every case must exit 1 with that
finding and leave the repository exactly as it was."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.repos import KonfigRunner, copy_template

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "case.yaml").is_file())


def _snapshot(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "<dir>"
        for p in sorted(root.rglob("*"))
    }


def _check_findings(out: str) -> list[tuple[str, str | None, int | None]]:
    return [(f["rule"], f["file"], f["line"]) for f in json.loads(out)]


def _test_findings(out: str) -> list[tuple[str, str | None, int | None]]:
    data = json.loads(out)
    found: list[tuple[str, str | None, int | None]] = []
    for stack in data["stacks"]:
        if stack["status"] == "compile-error":
            e = stack["error"]
            found.append(("compile/error", e["file"], e["line"]))
        elif stack["status"] not in ("passed", "unchanged"):
            found.append((f"golden/{stack['status']}", stack["golden"], stack.get("line")))
    for unit in data["unitTests"]:
        if not unit["passed"]:
            found.append(("kcl-test/failed", unit["file"], unit["line"]))
    return found


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES)
def test_corpus_case(case: str, tmp_path: Path, konfig: KonfigRunner) -> None:
    spec: dict[str, Any] = yaml.safe_load((CORPUS / case / "case.yaml").read_text())
    builder = copy_template(tmp_path / "repo")
    shutil.copytree(CORPUS / case / "repo", builder.root, dirs_exist_ok=True)
    before = _snapshot(builder.root)

    command = [str(a) for a in spec["command"]]
    if command[0] == "check":
        result = konfig(*command, "--format", "json", cwd=builder.root)
        findings = _check_findings(result.out)
    else:
        result = konfig(*command, "--json", cwd=builder.root)
        findings = _test_findings(result.out)

    expect = spec["expect"]
    wanted = (expect["rule"], expect["file"], expect["line"])
    assert result.code == 1, result.out + result.err
    assert wanted in findings, f"{wanted} not in {findings}"
    assert _snapshot(builder.root) == before, "the command changed the repository"

"""Reading a previous preview to re-use (``konfig preview --reuse``): hostile data, checked
against the preview contract; only clean results with a key are candidates, and only
under the same key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from konfig.contracts import ContractError
from konfig.errors import ConfigError
from konfig.pipeline.reusing import Previous, read_previous

HEAD = "a" * 40
KEY = "b" * 64


COUNTS = {"create": 0, "update": 1, "replace": 0, "delete": 0, "unchanged": 0, "conflict": 0}


def stack(path: str, **over: Any) -> dict[str, Any]:
    counts = dict(COUNTS)
    item: dict[str, Any] = {
        "path": path,
        "deleted": False,
        "status": "ok",
        "error": None,
        "counts": counts,
        "changes": [],
        "reuseKey": KEY,
        "reusedFrom": None,
    }
    item.update(over)
    return item


def doc(*stacks: dict[str, Any], head: str | None = HEAD, mode: str = "live") -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "kind": "KonfigPreview",
        "mode": {"name": mode}
        if mode == "live"
        else {"name": mode, "base": HEAD, "head": HEAD, "merge": HEAD},
        "hasChanges": True,
        "counts": COUNTS,
        "commits": {"base": None, "head": head},
        "stacks": list(stacks),
    }


def write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2))
    return path


def test_clean_results_with_a_key_are_candidates_under_the_same_key(tmp_path: Path) -> None:
    conflict = stack("appops/p/c")
    conflict["counts"] = {**conflict["counts"], "conflict": 1}
    files = [
        write(
            tmp_path,
            "0.json",
            doc(
                stack("appops/p/a"),
                stack("appops/p/err", status="error", error={"message": "boom"}),
                conflict,
                stack("appops/p/nokey", reuseKey=None),
                stack("appops/p/gone", deleted=True),
                # Terraform resources not previewed (no credentials): not the whole result
                stack(
                    "appops/p/partial",
                    notPreviewed=[
                        {
                            "id": "cyrilgdn/postgresql:postgresql_role:shop",
                            "runtime": "Terraform",
                            "reason": "not previewed: credentials PGPASSWORD missing",
                        }
                    ],
                ),
            ),
        ),
        write(tmp_path, "1.json", doc(stack("appops/p/b", reusedFrom="c" * 40))),
    ]
    previous = read_previous(files)
    assert previous.head == HEAD
    assert set(previous.entries) == {"appops/p/a", "appops/p/b"}
    a = previous.candidate("appops/p/a", KEY)
    assert a is not None and a.head == HEAD and a.counts()["update"] == 1
    b = previous.candidate("appops/p/b", KEY)
    assert b is not None and b.head == "c" * 40  # where it was previewed, through a chain
    assert previous.candidate("appops/p/a", "d" * 64) is None
    assert previous.candidate("appops/p/a", None) is None
    assert previous.candidate("appops/p/new", KEY) is None
    assert Previous(HEAD).candidate("appops/p/a", KEY) is None


def test_a_stack_in_two_parts_is_not_reused(tmp_path: Path) -> None:
    files = [
        write(tmp_path, "0.json", doc(stack("appops/p/a"))),
        write(tmp_path, "1.json", doc(stack("appops/p/a"), stack("appops/p/b"))),
    ]
    assert set(read_previous(files).entries) == {"appops/p/b"}


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (doc(stack("appops/p/a", reuseKey="not-a-key")), "reuseKey"),
        (doc(stack("appops/p/a", counts="many")), "counts"),
        (doc(stack("appops/p/a", status="maybe")), "status"),
        (doc(stack("appops/p/a"), mode="offline"), "only a live preview is re-used"),
        (doc(stack("appops/p/a"), head=None), "names no commit"),
        ({**doc(), "kind": "Other"}, "KonfigPreview"),
    ],
)
def test_a_document_that_breaks_the_contract_is_refused_with_its_file(
    tmp_path: Path, data: dict[str, Any], says: str
) -> None:
    path = write(tmp_path, "previous.json", data)
    with pytest.raises(ContractError) as caught:
        read_previous([path])
    assert str(path) in str(caught.value.file) and says in str(caught.value), str(caught.value)


def test_documents_of_different_commits_are_refused(tmp_path: Path) -> None:
    files = [
        write(tmp_path, "0.json", doc(stack("appops/p/a"))),
        write(tmp_path, "1.json", doc(stack("appops/p/b"), head="e" * 40)),
    ]
    with pytest.raises(ContractError, match="different commits"):
        read_previous(files)


def test_unreadable_and_non_json_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_previous([tmp_path / "missing.json"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"schemaVersion": 1,\n  oops}')
    with pytest.raises(ConfigError) as caught:
        read_previous([bad])
    assert caught.value.line == 2 and "is not JSON" in str(caught.value)

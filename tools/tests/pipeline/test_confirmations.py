"""The danger record a comment hides, the ``/konfig confirm`` grammar (comments are
hostile) and the verdict of ``konfig/dangers``."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from konfig.errors import UsageError
from konfig.pipeline.confirmations import (
    Confirmation,
    DangerRecord,
    Needed,
    commands_in,
    confirm_args,
    hidden,
    labels_after,
    may_confirm,
    read_record,
    verdict,
)

HEAD = "0123456789abcdef0123456789abcdef01234567"
NEEDED = Needed("appops/shop/prod", "3f2a9c0d1e2b4a5f", "cascade needs a confirmation")
RECORD = DangerRecord(HEAD, True, ("konfig/danger:cascade",), (NEEDED,))


def _packed(data: object) -> str:
    raw = json.dumps(data).encode()
    return f"<!-- konfig:dangers v1 {base64.b64encode(zlib.compress(raw)).decode()} -->"


def test_the_record_round_trips_through_a_comment_and_the_last_one_wins() -> None:
    older = DangerRecord("f" * 40, True)
    body = f"## Konfig preview\n{hidden(older)}\ntext\n{hidden(RECORD)}\n"
    assert read_record(body, where="c") == RECORD
    assert read_record("## no record here", where="c") is None


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"kind": "Other", "schemaVersion": 1}, "kind KonfigDangers"),
        ({**RECORD.to_dict(), "head": "$(id)"}, "head (a commit)"),
        ({**RECORD.to_dict(), "labels": ["bug"]}, "konfig/danger:<class>"),
        (
            {**RECORD.to_dict(), "needed": [{"stack": "../x", "digest": "1" * 16, "what": ""}]},
            "a stack path",
        ),
        (
            {**RECORD.to_dict(), "needed": [{"stack": "a/b", "digest": "ZZ", "what": ""}]},
            "16-digit digest",
        ),
    ],
)
def test_a_forged_or_broken_record_is_refused(data: object, words: str) -> None:
    with pytest.raises(UsageError, match="not a danger record") as exc:
        read_record(_packed(data), where="pull request #3's Konfig comment")
    assert words in str(exc.value) and "pull request #3" in str(exc.value)


def test_an_unreadable_or_huge_record_is_refused() -> None:
    with pytest.raises(UsageError, match="not readable"):
        read_record("<!-- konfig:dangers v1 AAAA -->", where="c")
    bomb = base64.b64encode(zlib.compress(b" " * (5 * 1024 * 1024), 9)).decode()
    with pytest.raises(UsageError, match="larger than"):
        read_record(f"<!-- konfig:dangers v1 {bomb} -->", where="c")


def test_only_the_exact_command_line_is_read() -> None:
    body = (
        "looks fine\n"
        "/konfig confirm appops/shop/prod 3f2a9c0d1e2b4a5f\n"
        "  /konfig confirm shop/dev 0000000000000000  \n"  # appops/ added
        "/konfig confirm ../../etc/passwd 3f2a9c0d1e2b4a5f\n"  # no '..'
        "/konfig confirm appops/x $(id)\n"
        "/konfig confirm appops/x 3F2A9C0D1E2B4A5F\n"  # lowercase hex only
        "please /konfig confirm appops/y 3f2a9c0d1e2b4a5f\n"  # not at the line's start
        "/konfig confirm appops/z 3f2a9c0d1e2b4a5f extra\n"
    )
    assert commands_in(body) == [
        ("appops/shop/prod", "3f2a9c0d1e2b4a5f"),
        ("appops/shop/dev", "0000000000000000"),
    ]


def test_who_may_confirm() -> None:
    assert may_confirm("write", "ann", "dev") and may_confirm("admin", "ann", "dev")
    assert may_confirm("owner", "ann", "dev")  # Gitea's answer for the repository's owner
    assert not may_confirm("read", "ann", "dev")
    assert not may_confirm("write", "Dev", "dev")  # the author, whatever the case


def test_the_verdict_counts_only_the_recorded_digest() -> None:
    other = Confirmation("ann", NEEDED.stack, "0" * 16)
    wrong_stack = Confirmation("ann", "appops/shop/dev", NEEDED.digest)
    waiting = verdict(RECORD, [other, wrong_stack])
    assert waiting.state == "failure"
    assert waiting.summary() == (
        "cascade needs a confirmation in appops/shop/prod: "
        "/konfig confirm appops/shop/prod 3f2a9c0d1e2b4a5f"
    )
    done = verdict(RECORD, [other, Confirmation("bob", NEEDED.stack, NEEDED.digest)])
    assert done.state == "success" and done.stacks[0].by == ("bob",)
    assert verdict(DangerRecord(HEAD, True), []).summary() == "no danger needs a confirmation"
    offline = verdict(DangerRecord(HEAD, False, (), (NEEDED,)), [])
    assert offline.state == "pending" and "live preview" in offline.summary()
    assert len(waiting.summary()) <= 140


def test_labels_keep_other_labels_and_apply_args_keep_every_digest() -> None:
    assert labels_after(["bug", "konfig/danger:cascade"], ["konfig/danger:data"]) == [
        "bug",
        "konfig/danger:data",
    ]
    assert labels_after(["bug", "konfig/danger:data"], ["konfig/danger:data"]) is None
    assert labels_after(["konfig/danger:data"], []) == []
    given = [
        Confirmation("ann", "appops/a", "1" * 16),
        Confirmation("bob", "appops/a", "1" * 16),
        Confirmation("ann", "appops/a", "2" * 16),
    ]
    assert confirm_args(given) == [f"appops/a={'1' * 16}", f"appops/a={'2' * 16}"]

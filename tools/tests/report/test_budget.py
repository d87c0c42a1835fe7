"""The comment budget counts what the forge counts: GitHub counts UTF-16 code units, so
a character beyond the Basic Multilingual Plane (an emoji) is two (issue 19, item 5)."""

from __future__ import annotations

from typing import Any

from konfig.report import comment, pull_request
from konfig.report.budget import COMMENT_LIMIT, DEFAULT_BUDGET, chars

EMOJI = "\U0001f600"


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def test_chars_counts_utf16_code_units() -> None:
    assert chars("plain") == 5
    assert chars("\u00e9\u4e2d") == 2  # in the BMP: one unit each
    assert chars(EMOJI) == 2
    assert chars(EMOJI * 40_000) == 80_000
    assert chars("\U0001f9d1\u200d\U0001f4bb") == 5  # a ZWJ sequence: 2 + 1 + 2
    assert chars("\ud83d") == 1  # a lone surrogate (from JSON) does not raise


def _preview_with(value: str) -> dict[str, Any]:
    diff = (
        "--- live/v1:ConfigMap:ns:greeting\n+++ planned/v1:ConfigMap:ns:greeting\n"
        f"@@ -1,2 +1,2 @@\n data:\n-  message: old\n+  message: {value}\n"
    )
    change = {
        "id": "v1:ConfigMap:ns:greeting",
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": "ns",
        "name": "greeting",
        "action": "update",
        "reason": "data changed",
        "validated": True,
        "fields": [],
        "diff": diff,
    }
    counts = {"create": 0, "update": 1, "replace": 0, "delete": 0, "unchanged": 0}
    stack = {
        "path": "appops/emoji/dev",
        "project": "emoji",
        "stack": "dev",
        "context": "admin",
        "deleted": False,
        "status": "ok",
        "error": None,
        "specDigest": "d" * 64,
        "priorCommit": None,
        "priorDigest": None,
        "counts": counts,
        "changes": [change],
    }
    return {
        "schemaVersion": 1,
        "kind": "KonfigPreview",
        "hasChanges": True,
        "counts": counts,
        "stacks": [stack],
    }


def test_a_40000_emoji_diff_stays_under_githubs_limit() -> None:
    value = EMOJI * 40_000
    inputs = pull_request.Inputs(previews=[_preview_with(value)])
    report = pull_request.build(inputs, sha="0" * 40)
    rendered = comment.render(report)
    assert len(rendered.text) < DEFAULT_BUDGET  # code points alone would have fit...
    assert _utf16(rendered.text) <= DEFAULT_BUDGET < COMMENT_LIMIT  # ...GitHub's count too
    assert rendered.truncated


def test_emoji_are_kept_whole_in_the_report() -> None:
    inputs = pull_request.Inputs(previews=[_preview_with(f"ok {EMOJI} \u00e9")])
    text = comment.render(pull_request.build(inputs, sha="0" * 40)).text
    assert f"message: ok {EMOJI} \u00e9" in text
    assert "\\U0001" not in text and "\\ud83d" not in text

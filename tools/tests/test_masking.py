"""Secret masking (konfig.masking): objects, free text and diffs from input files."""

from __future__ import annotations

import json

from kubeutil import b64, secret_with_data

from konfig.masking import (
    LAST_APPLIED,
    MASK,
    MASK_AFTER,
    MASK_BEFORE,
    mask_pair,
    mask_secret_diff,
    scrub,
    secret_values,
)


def test_secret_values_are_masked_with_before_and_after_when_changed() -> None:
    before, after = mask_pair(
        secret_with_data({"same": b64("s1"), "changed": b64("old"), "gone": b64("g")}),
        secret_with_data({"same": b64("s1"), "changed": b64("new"), "added": b64("a")}),
    )
    assert before is not None and after is not None
    assert before["data"] == {"same": MASK, "changed": MASK_BEFORE, "gone": MASK}
    assert after["data"] == {"same": MASK, "changed": MASK_AFTER, "added": MASK}


def test_last_applied_and_serialized_annotations_are_masked_on_any_kind() -> None:
    serialized = json.dumps({"apiVersion": "v1", "kind": "Secret", "data": {"p": b64("zzzz")}})
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "c",
            "annotations": {LAST_APPLIED: serialized, "copy": serialized, "note": "plain text"},
        },
    }
    _, after = mask_pair(None, cm)
    assert after is not None
    assert after["metadata"]["annotations"] == {
        LAST_APPLIED: MASK,
        "copy": MASK,
        "note": "plain text",
    }


def test_secret_values_and_scrub_cover_raw_and_encoded_forms() -> None:
    obj = secret_with_data({"p": b64("topsecret")})
    obj["stringData"] = {"q": "othersecret"}
    values = secret_values(obj)
    assert {"topsecret", b64("topsecret"), "othersecret", b64("othersecret")} <= values
    text = f"server said: invalid value {b64('topsecret')} and othersecret"
    cleaned = scrub(text, values)
    assert "topsecret" not in cleaned and "othersecret" not in cleaned
    assert b64("topsecret") not in cleaned
    assert cleaned.count(MASK) == 2


def test_non_secret_data_is_not_masked() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    _, after = mask_pair(None, cm)
    assert after is not None and after["data"] == {"k": "v"}


def test_mask_secret_diff_keeps_structure() -> None:
    diff = " data:\n-  a: Zm9v\n+  a: YmFy\n   b: '***'\n kind: Secret\n"
    assert mask_secret_diff(diff) == (" data:\n-  a: ***\n+  a: ***\n   b: '***'\n kind: Secret\n")

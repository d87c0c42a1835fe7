"""Secret masking (konfig.masking): objects, free text and diffs from input files."""

from __future__ import annotations

import base64
import json

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


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(data: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    meta: dict = {"name": "s", "namespace": "ns"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": data}


def test_secret_values_are_masked_with_before_and_after_when_changed() -> None:
    before, after = mask_pair(
        secret({"same": _b64("s1"), "changed": _b64("old"), "gone": _b64("g")}),
        secret({"same": _b64("s1"), "changed": _b64("new"), "added": _b64("a")}),
    )
    assert before is not None and after is not None
    assert before["data"] == {"same": MASK, "changed": MASK_BEFORE, "gone": MASK}
    assert after["data"] == {"same": MASK, "changed": MASK_AFTER, "added": MASK}


def test_last_applied_and_serialized_annotations_are_masked_on_any_kind() -> None:
    serialized = json.dumps({"apiVersion": "v1", "kind": "Secret", "data": {"p": _b64("zzzz")}})
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
    obj = secret({"p": _b64("topsecret")})
    obj["stringData"] = {"q": "othersecret"}
    values = secret_values(obj)
    assert {"topsecret", _b64("topsecret"), "othersecret", _b64("othersecret")} <= values
    text = f"server said: invalid value {_b64('topsecret')} and othersecret"
    cleaned = scrub(text, values)
    assert "topsecret" not in cleaned and "othersecret" not in cleaned
    assert _b64("topsecret") not in cleaned
    assert cleaned.count(MASK) == 2


def test_non_secret_data_is_not_masked() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    _, after = mask_pair(None, cm)
    assert after is not None and after["data"] == {"k": "v"}


def test_mask_secret_diff_keeps_structure() -> None:
    diff = " data:\n-  a: Zm9v\n+  a: YmFy\n   b: '***'\n kind: Secret\n"
    assert mask_secret_diff(diff) == (" data:\n-  a: ***\n+  a: ***\n   b: '***'\n kind: Secret\n")

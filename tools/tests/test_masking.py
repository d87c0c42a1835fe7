"""Secret masking (konfig.masking): objects, free text and diffs from input files."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubeutil import b64, secret_with_data

from konfig.masking import (
    LAST_APPLIED,
    MASK,
    MASK_AFTER,
    MASK_BEFORE,
    mask_field,
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


@pytest.mark.parametrize(
    ("api_version", "kind", "path", "before", "after", "expected"),
    [
        ("v1", "Secret", "data.password", "b2xk", "bmV3", ("*** (before)", "*** (after)")),
        ("v1", "Secret", 'data["tls.key"]', None, "a2V5", (None, "***")),
        ("v1", "Secret", "stringData.token", "same", "same", ("***", "***")),
        ("v1", "Secret", "data", "x", None, ("***", None)),
        ("v1", "Secret", "type", "Opaque", "kubernetes.io/tls", ("Opaque", "kubernetes.io/tls")),
        ("v1", "Secret", "metadata.labels.data", "a", "b", ("a", "b")),
        ("v1", "ConfigMap", "data.password", "a", "b", ("a", "b")),  # not a Secret
        (
            "apps/v1",
            "Deployment",
            f'metadata.annotations["{LAST_APPLIED}"]',
            '{"kind": "Secret"}',
            '{"kind": "Secret", "data": {}}',
            ("*** (before)", "*** (after)"),
        ),
        (
            "v1",
            "ConfigMap",
            "metadata.annotations.copy",
            None,
            '{"apiVersion": "v1", "kind": "Secret"}',
            (None, "***"),
        ),
        ("v1", "ConfigMap", "metadata.annotations.note", "old", "new", ("old", "new")),
    ],
)
def test_mask_field(
    api_version: str, kind: str, path: str, before: Any, after: Any, expected: tuple[Any, Any]
) -> None:
    assert mask_field(api_version, kind, path, before, after) == expected

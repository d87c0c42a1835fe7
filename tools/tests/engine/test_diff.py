"""Noise removal, masking and the field diff (pure functions)."""

from __future__ import annotations

import json

from kubeutil import b64, secret_with_data

from konfig.engine.diff import FieldChange, compare, field_changes, normalize
from konfig.masking import (
    MASK,
    MASK_AFTER,
    MASK_BEFORE,
)


def deployment(image: str = "nginx:1", replicas: int = 1) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "42",
            "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "konfig"}],
        },
        "spec": {
            "replicas": replicas,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "web", "image": image, "ports": [{"containerPort": 80}]},
                        {"name": "side", "image": "busybox"},
                    ]
                }
            },
        },
        "status": {"replicas": 1},
    }


def test_normalize_drops_server_noise_and_defaults_protocol() -> None:
    out = normalize(deployment())
    assert out is not None
    assert set(out["metadata"]) == {"name", "namespace"}
    assert "status" not in out
    port = out["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port == {"containerPort": 80, "protocol": "TCP"}


def test_normalize_does_not_touch_its_input() -> None:
    obj = deployment()
    normalize(obj)
    assert obj["metadata"]["uid"] == "u-1"
    assert "protocol" not in obj["spec"]["template"]["spec"]["containers"][0]["ports"][0]


def test_normalize_folds_secret_string_data_into_data() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"a": b64("x")},
        "stringData": {"b": "plain"},
    }
    out = normalize(secret)
    assert out is not None
    assert out["data"] == {"a": b64("x"), "b": b64("plain")}
    assert "stringData" not in out


def test_identical_objects_have_no_changes_despite_noise() -> None:
    live = deployment()
    dry = deployment()
    dry["metadata"]["resourceVersion"] = "43"
    dry["metadata"]["managedFields"] = [{"manager": "other"}]
    dry["status"] = {"replicas": 0}
    assert not compare(live, dry, name="x").changed


def test_field_changes_use_list_merge_keys_and_sorted_paths() -> None:
    changes = field_changes(normalize(deployment()), normalize(deployment("nginx:2", 3)))
    assert changes == (
        FieldChange("spec.replicas", 1, 3),
        FieldChange("spec.template.spec.containers[name=web].image", "nginx:1", "nginx:2"),
    )


def test_field_paths_quote_keys_with_dots() -> None:
    before = {"metadata": {"labels": {"app.kubernetes.io/name": "a"}}}
    after = {"metadata": {"labels": {"app.kubernetes.io/name": "b", "tier": "x"}}}
    assert field_changes(before, after) == (
        FieldChange('metadata.labels["app.kubernetes.io/name"]', "a", "b"),
        FieldChange("metadata.labels.tier", None, "x"),
    )


def test_create_and_delete_list_every_field() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    created = compare(None, obj, name="v1:ConfigMap:c")
    assert FieldChange("data.k", None, "v") in created.fields
    assert created.diff.startswith("--- live/v1:ConfigMap:c\n+++ planned/v1:ConfigMap:c\n")
    deleted = compare(obj, None, name="v1:ConfigMap:c")
    assert FieldChange("data.k", "v", None) in deleted.fields


def test_secret_diff_shows_key_changed_but_no_value() -> None:
    result = compare(
        secret_with_data({"password": b64("hunter2-old")}),
        secret_with_data({"password": b64("hunter2-new")}),
        name="v1:Secret:ns:s",
    )
    assert result.fields == (FieldChange("data.password", MASK_BEFORE, MASK_AFTER),)
    for needle in ("hunter2", b64("hunter2-old"), b64("hunter2-new")):
        assert needle not in result.diff
        assert needle not in json.dumps([f.to_dict() for f in result.fields])


def test_string_data_is_masked_after_folding() -> None:
    obj = secret_with_data({})
    obj["stringData"] = {"token": "canary-value"}
    result = compare(None, obj, name="x")
    assert "canary-value" not in result.diff
    assert b64("canary-value") not in result.diff
    assert FieldChange("data.token", None, MASK) in result.fields

"""Drift from managed fields, on plain objects (the cluster tests prove it live)."""

from __future__ import annotations

import base64
from typing import Any

from konfig.engine.drift import (
    describe_path,
    drifted_fields,
    is_drift_path,
    missing,
    object_drift,
    owned_fields,
)

APPLIED = {
    "f:metadata": {"f:labels": {"f:app": {}}},
    "f:spec": {
        "f:replicas": {},
        "f:selector": {},
        "f:template": {
            "f:spec": {
                "f:containers": {
                    'k:{"name":"web"}': {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {
                            'k:{"containerPort":80,"protocol":"TCP"}': {
                                ".": {},
                                "f:containerPort": {},
                            }
                        },
                    }
                }
            }
        },
    },
}


def managed(manager: str, fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": extra.pop("operation", "Apply"),
        "fieldsV1": fields,
        **extra,
    }


def deployment(
    *entries: dict[str, Any], replicas: int = 2, image: str = "nginx:1.27"
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "u1",
            "labels": {"app": "web"},
            "managedFields": list(entries),
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": image,
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        }
                    ]
                }
            },
        },
    }


def without(tree: dict[str, Any], *path: str) -> dict[str, Any]:
    import copy

    out = copy.deepcopy(tree)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


def test_owned_fields_is_konfigs_apply_entry_only() -> None:
    live = deployment(
        managed("kubectl", {"f:spec": {"f:replicas": {}}}, operation="Update", subresource="scale"),
        managed("konfig", APPLIED),
        managed("konfig", {"f:status": {}}, operation="Update", subresource="status"),
    )
    assert owned_fields(live) == APPLIED
    assert owned_fields(deployment(managed("kubectl", APPLIED))) is None
    assert owned_fields(None) is None


def test_in_sync_when_konfig_still_owns_every_field() -> None:
    live = deployment(managed("konfig", APPLIED))
    assert drifted_fields(APPLIED, live) == ()
    assert object_drift("id", APPLIED, "u1", live).state == "in_sync"


def test_a_scaled_and_re_imaged_deployment_names_both_fields_with_live_values() -> None:
    # What `kubectl scale` and `kubectl set image` leave: konfig lost both fields.
    now = without(without(APPLIED, "f:spec", "f:replicas"), "f:spec", "f:template", "f:spec",
                  "f:containers", 'k:{"name":"web"}', "f:image")  # fmt: skip
    live = deployment(
        managed("konfig", now),
        managed("kubectl", {"f:spec": {"f:replicas": {}}}, operation="Update", subresource="scale"),
        replicas=5,
        image="nginx:1.28",
    )
    drift = object_drift("apps/v1:Deployment:shop:web", APPLIED, "u1", live)
    assert drift.state == "drifted"
    assert [(f.path, f.live, f.removed) for f in drift.fields] == [
        ("spec.replicas", 5, False),
        ("spec.template.spec.containers[name=web].image", "nginx:1.28", False),
    ]
    assert drift.message == "2 fields changed outside Konfig since the last apply"


def test_a_removed_list_item_is_one_drifted_path() -> None:
    now = without(APPLIED, "f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"web"}')
    live = deployment(managed("konfig", now))
    live["spec"]["template"]["spec"]["containers"] = [{"name": "other", "image": "x:1"}]
    fields = drifted_fields(APPLIED, live)
    assert [(f.path, f.removed) for f in fields] == [
        ("spec.template.spec.containers[name=web]", True)
    ]


def test_deleted_recreated_and_unknown() -> None:
    assert object_drift("i", APPLIED, "u1", None).state == "deleted"
    other = deployment(managed("konfig", APPLIED))
    other["metadata"]["uid"] = "u2"
    recreated = object_drift("i", APPLIED, "u1", other)
    assert recreated.state == "recreated" and "u2" in recreated.message
    unknown = object_drift("i", None, "u1", deployment(managed("konfig", APPLIED)))
    assert unknown.state == "unknown" and not unknown.drifted


def test_secret_values_never_appear() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "shop", "managedFields": []},
        "data": {"password": base64.b64encode(b"hunter2-canary").decode()},
    }
    fields = drifted_fields({"f:data": {"f:password": {}}}, secret)
    assert [(f.path, f.live) for f in fields] == [("data.password", "***")]
    assert "hunter2" not in repr(fields)


def test_missing_reports_fields_and_whole_list_items() -> None:
    assert list(missing({"f:a": {"f:b": {}, "f:c": {}}}, {"f:a": {"f:b": {}}})) == [["f:a", "f:c"]]
    assert list(missing({"f:a": {"f:b": {}, 'k:{"name":"x"}': {".": {}}}}, None)) == [
        ["f:a", "f:b"],
        ["f:a", 'k:{"name":"x"}'],
    ]
    assert list(missing({"f:a": {".": {}, "f:b": {}}}, {"f:a": {"f:b": {}}})) == [["f:a"]]


def test_describe_path_uses_preview_notation_and_finds_set_items() -> None:
    obj = {"metadata": {"finalizers": ["a", "b"], "labels": {"app.kubernetes.io/name": "x"}}}
    assert describe_path(obj, ["f:metadata", "f:finalizers", 'v:"b"']) == (
        "metadata.finalizers[1]",
        "b",
    )
    assert describe_path(obj, ["f:metadata", "f:labels", "f:app.kubernetes.io/name"]) == (
        'metadata.labels["app.kubernetes.io/name"]',
        "x",
    )


def test_is_drift_path_matches_at_under_and_above() -> None:
    drift = {"spec.replicas", "spec.template.spec.containers[name=web]"}
    assert is_drift_path("spec.replicas", drift)
    assert is_drift_path("spec.template.spec.containers[name=web].image", drift)
    assert not is_drift_path("spec.replicasX", drift)
    assert not is_drift_path("spec.template.spec.containers[name=webx].image", drift)

"""Helpers shared by the tests that talk to the real local control plane."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterable
from typing import Any

from konfig.engine import inventory as inv
from konfig.engine.kube import Kube
from konfig.repo.layout import Stack, deleted_stack
from konfig.spec import Spec, spec_from_items


def unique(prefix: str = "p6") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_stack(name: str | None = None) -> Stack:
    """A stack address of its own (its inventory name is unique too)."""
    return deleted_stack(f"appops/{name or unique('proj')}/dev")


def spec_of(*manifests: dict[str, Any]) -> Spec:
    return spec_from_items({"attributes": m} for m in manifests)


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def configmap(ns: str, name: str = "cm", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": data or {"k": "v"},
    }


def secret(ns: str, name: str = "creds", **string_data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": string_data,
    }


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret_with_data(data: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    """A Secret (``ns/s``) with ``data`` as given (already base64), as plain data."""
    meta: dict = {"name": "s", "namespace": "ns"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": data}


def deployment(ns: str, name: str = "web", image: str = "nginx:1.27.3") -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": name, "image": image, "ports": [{"containerPort": 80}]}]
                },
            },
        },
    }


def service(ns: str, name: str = "web", cluster_ip: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 80}]}
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def job(ns: str, name: str = "migrate", image: str = "busybox:1.36") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": image, "command": ["true"]}],
                }
            }
        },
    }


def crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.lower(),
                "listKind": kind + "List",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def set_id(stack: Stack) -> str:
    return inv.applyset_id(inv.inventory_name(stack.path))


def apply_as_konfig(kube: Kube, stack: Stack, *manifests: dict[str, Any]) -> list[dict[str, Any]]:
    """What a konfig apply leaves behind: the manifests applied with the part-of label."""
    return [kube.apply(inv.label_member(m, set_id(stack)), dry_run=False) for m in manifests]


def inventory_of(
    stack: Stack, objects: Iterable[dict[str, Any]], ids: Iterable[str] = ()
) -> inv.Inventory:
    """An in-memory inventory owning ``objects`` (with their UIDs) and extra ``ids``."""
    members = [
        inv.Member(_id_of(o), str((o.get("metadata") or {}).get("uid") or "")) for o in objects
    ] + [inv.Member(i) for i in ids]
    return inv.Inventory(
        stack_path=stack.path,
        members=tuple(sorted(members)),
        commit="c0ffee",
        spec_digest="d1",
        applyset_id=set_id(stack),
    )


def _id_of(obj: dict[str, Any]) -> str:
    from konfig.ids import resource_id

    return resource_id(obj)


def snapshot(kube: Kube, refs: Iterable[tuple[str, str, str, str | None]]) -> dict[Any, Any]:
    """What a write would change, per (apiVersion, kind, name, namespace): absent, or the
    object's UID, generation, labels, data and spec. (Not resourceVersion: controllers
    and kwok keep writing status, which is not the preview's doing.)"""
    out: dict[Any, Any] = {}
    for api_version, kind, name, ns in refs:
        try:
            live = kube.get(api_version, kind, name, ns)
        except Exception as exc:  # an unknown kind is "absent" too
            out[(api_version, kind, name, ns)] = type(exc).__name__
            continue
        if live is None:
            out[(api_version, kind, name, ns)] = None
            continue
        meta = live.get("metadata") or {}
        out[(api_version, kind, name, ns)] = json.dumps(
            [
                meta.get("uid"),
                meta.get("generation"),
                meta.get("labels"),
                live.get("data"),
                live.get("spec"),
            ],
            sort_keys=True,
        )
    return out


def wait_for(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")

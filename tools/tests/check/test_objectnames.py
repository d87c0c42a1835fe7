"""Object name rules per kind (konfig.check.objectnames), with the API server as oracle."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.check.objectnames import name_problem
from konfig.check.privilege import is_bootstrap_rbac
from konfig.engine.kube import Kube, KubeApiError

RBAC = "rbac.authorization.k8s.io/v1"
NAMES = (
    "web",
    "web.v2",
    "1web",
    "Web",
    "-web",
    "web_1",
    "rw:one-colon",
    "system:auth-delegator",
    "x:Leader",
    "a/b",
    "a%b",
    "..",
    "a" * 52,
    "a" * 53,
    "a" * 63,
    "a" * 64,
    "a" * 254,
)


def _pod_template(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36"}],
        },
    }


def _manifest(kind: str, name: str, ns: str) -> dict[str, Any]:
    """A valid object of ``kind`` named ``name`` (except for its name)."""
    labels = {"app": "x"}
    meta = {"name": name, "namespace": ns}
    cluster_meta = {"name": name}
    always = _pod_template(labels)
    always["spec"]["restartPolicy"] = "Always"
    objects: dict[str, dict[str, Any]] = {
        "ConfigMap": {"apiVersion": "v1", "metadata": meta, "data": {"k": "v"}},
        "Secret": {"apiVersion": "v1", "metadata": meta, "stringData": {"k": "v"}},
        "ServiceAccount": {"apiVersion": "v1", "metadata": meta},
        "Service": {"apiVersion": "v1", "metadata": meta, "spec": {"ports": [{"port": 80}]}},
        "Namespace": {"apiVersion": "v1", "metadata": cluster_meta},
        "Role": {"apiVersion": RBAC, "metadata": meta, "rules": []},
        "ClusterRole": {"apiVersion": RBAC, "metadata": cluster_meta, "rules": []},
        "RoleBinding": {
            "apiVersion": RBAC,
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
        },
        "ClusterRoleBinding": {
            "apiVersion": RBAC,
            "metadata": cluster_meta,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "r",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
        },
        "Job": {
            "apiVersion": "batch/v1",
            "metadata": meta,
            "spec": {"template": _pod_template({})},
        },
        "CronJob": {
            "apiVersion": "batch/v1",
            "metadata": meta,
            "spec": {
                "schedule": "0 0 * * *",
                "jobTemplate": {"spec": {"template": _pod_template({})}},
            },
        },
        "Deployment": {
            "apiVersion": "apps/v1",
            "metadata": meta,
            "spec": {"selector": {"matchLabels": labels}, "template": always},
        },
        "StatefulSet": {
            "apiVersion": "apps/v1",
            "metadata": meta,
            "spec": {"selector": {"matchLabels": labels}, "template": always},
        },
        "DaemonSet": {
            "apiVersion": "apps/v1",
            "metadata": meta,
            "spec": {"selector": {"matchLabels": labels}, "template": always},
        },
        "IngressClass": {
            "apiVersion": "networking.k8s.io/v1",
            "metadata": cluster_meta,
            "spec": {"controller": "example.com/ingress"},
        },
        "CertificateSigningRequest": {
            "apiVersion": "certificates.k8s.io/v1",
            "metadata": cluster_meta,
            "spec": {
                "request": CSR,
                "signerName": "example.com/signer",
                "usages": ["digital signature"],
            },
        },
    }
    return {"kind": kind, **objects[kind]}


# A PEM certificate request (openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256
# -nodes -subj /CN=konfig-test), base64 as the API wants it: the CSR's content is valid.
CSR = (
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIUU1IZ0NBUUF3RmpFVU1CSUdBMVVF"
    "QXd3TGEyOXVabWxuTFhSbGMzUXdXVEFUQmdjcWhrak9QUUlCQmdncQpoa2pPUFFNQkJ3TkNBQVF2ejVl"
    "QkhNWjRQcmdreWlqN1ExOFcwRTkyb1ZUYk83TTNHMGJKYmZJWVBrcWdDbnE3CktIdmVBekZjcWIrK1Ar"
    "VFZPbExGRmJhMzlGbHpjUFdpakRDeW9BQXdDZ1lJS29aSXpqMEVBd0lEU0FBd1JRSWgKQUtuQXN6UnEw"
    "VGdqYklBSXI4WmtnTmhRY09HRjNSajl0TEtTY0VTZ01uT2pBaUJXeVc0QTJ6SHJmN0llQ1JvcwpjQnVX"
    "RTBDZmVadHBRY09LT3UzWU43d2xsdz09Ci0tLS0tRU5EIENFUlRJRklDQVRFIFJFUVVFU1QtLS0tLQo="
)


def test_rbac_names_may_hold_colons_and_upper_case() -> None:
    for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
        for name in ("system:aggregated-metrics-reader", "x:Leader", "metrics-server:system:a"):
            assert name_problem(RBAC, kind, name) is None
        assert name_problem(RBAC, kind, "a/b") == "may not contain '/'"
        assert name_problem(RBAC, kind, "..") == "may not be '..'"
    assert name_problem("v1", "ConfigMap", "system:x") is not None


def test_service_names_are_rfc_1035_labels() -> None:
    assert name_problem("v1", "Service", "web") is None
    assert "RFC 1035" in (name_problem("v1", "Service", "1web") or "")
    assert name_problem("v1", "Service", "web.v2") is not None
    assert name_problem("v1", "ConfigMap", "1web") is None  # a subdomain may start with 1


def test_crd_and_apiservice_names_follow_their_spec() -> None:
    crd = {"spec": {"group": "example.com", "names": {"plural": "widgets"}}}
    ext = "apiextensions.k8s.io/v1"
    assert name_problem(ext, "CustomResourceDefinition", "widgets.example.com", crd) is None
    assert "'widgets.example.com'" in (
        name_problem(ext, "CustomResourceDefinition", "widget.example.com", crd) or ""
    )
    api = {"spec": {"group": "metrics.k8s.io", "version": "v1beta1"}}
    reg = "apiregistration.k8s.io/v1"
    assert name_problem(reg, "APIService", "v1beta1.metrics.k8s.io", api) is None
    assert name_problem(reg, "APIService", "metrics", api) is not None


@pytest.mark.cluster
def test_the_rules_are_the_api_servers(cluster: Cluster, kube: Kube) -> None:
    """Every kind x name of the table: konfig's verdict is the API server's (dry-run)."""
    ns = unique("names")
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, dry_run=False)
    kinds = [
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Service",
        "Namespace",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "Job",
        "CronJob",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "IngressClass",
        "CertificateSigningRequest",
    ]
    disagreements: list[str] = []
    try:
        for kind in kinds:
            for name in NAMES:
                manifest = _manifest(kind, name, ns)
                try:
                    kube.apply(manifest, dry_run=True)
                    server = "accepted"
                except KubeApiError as exc:
                    server = f"refused ({exc.failure.status}: {exc.message[-200:]})"
                ours = name_problem(manifest["apiVersion"], kind, name, manifest)
                mine = "accepted" if ours is None else f"refused ({ours})"
                if (ours is None) != (server == "accepted"):
                    disagreements.append(f"{kind} {name[:40]!r}: server {server}, konfig {mine}")
            # a valid name is accepted: the manifests themselves are valid
            kube.apply(_manifest(kind, "web", ns), dry_run=True)
    finally:
        kube.delete("v1", "Namespace", ns, None, uid=None)
    assert not disagreements, "\n".join(disagreements)


def test_findings_on_yaml_objects_point_at_the_yaml_file_and_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    """A vendor's YAML read by main.k: check names the YAML file and the object's line
    (not main.k), for an item of a List document too; RBAC colons are no finding."""
    main = (
        "import file\nimport yaml\nimport base.pkg.models.frontend\n\n"
        "extras: frontend.Manifests {\n"
        '    manifests = yaml.decode_all(file.read("vendor.yaml"))\n}\n'
    )
    repo_builder.stack("shop", "dev", main=main)
    repo_builder.write(
        "appops/shop/dev/vendor.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\n"
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n"
        "  name: system:aggregated-metrics-reader\nrules: []\n---\n"
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n"
        "  metadata:\n    name: 1web\n    namespace: shop\n  spec:\n    ports: [{port: 80}]\n",
    )
    res = konfig("check", "shop/dev", "--format", "json", cwd=repo_builder.root)
    assert res.code == 1, res.out + res.err
    findings = json.loads(res.out)
    assert [(f["rule"], f["file"], f["line"]) for f in findings] == [
        ("spec/invalid-name", "appops/shop/dev/vendor.yaml", 18)
    ], findings


@pytest.mark.cluster
def test_system_rbac_is_the_api_servers_bootstrap_policy_not_every_system_name(
    cluster: Cluster,
) -> None:
    """spec/system-rbac refuses exactly the RBAC objects the API server reconciles
    (annotated rbac.authorization.kubernetes.io/autoupdate) among system:... names; a
    vendor's own system:... roles (metrics-server's) are not the server's."""
    for kind in ("clusterroles", "clusterrolebindings", "roles", "rolebindings"):
        res = cluster.kubectl("get", kind, "-A", "-o", "json")
        for item in json.loads(res.stdout)["items"]:
            meta = item["metadata"]
            ours = (meta.get("annotations") or {}).get(
                "rbac.authorization.kubernetes.io/autoupdate"
            )
            if ours == "true":
                assert is_bootstrap_rbac(item["kind"], meta["name"]), (kind, meta["name"])
            elif meta["name"].startswith("system:"):
                assert not is_bootstrap_rbac(item["kind"], meta["name"]), (kind, meta["name"])
    for name in ("system:aggregated-metrics-reader", "system:metrics-server"):
        assert not is_bootstrap_rbac("ClusterRole", name)
        assert not is_bootstrap_rbac("ClusterRoleBinding", name)

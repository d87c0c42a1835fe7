"""Pure parts of the inventory: naming, ApplySet id, manifest, parsing, ownership."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.inventory import Inventory, InventoryError, Member


def test_name_from_path_and_short_address() -> None:
    assert inv.inventory_name("appops/guestbook/dev") == "konfig.guestbook.dev"
    assert inv.inventory_name("guestbook/dev") == "konfig.guestbook.dev"
    assert inv.inventory_name("appops/a/envs/prod") == "konfig.a.envs.prod"


def test_name_of_a_path_that_is_no_valid_name_is_hashed_and_valid() -> None:
    name = inv.inventory_name("appops/Guest_Book/dev")
    digest = hashlib.sha256(b"appops/Guest_Book/dev").hexdigest()[:16]
    assert name == f"konfig-{digest}.guest-book.dev"
    assert inv.inventory_name("Guest_Book/dev") == name  # the same stack, however addressed
    with pytest.raises(InventoryError, match="appops/<project>/<stack>"):
        inv.inventory_name("appops/onlyproject")


# Paths whose names konfig used to share (konfig.<parts joined by .>), and some that
# look like a hashed name, or are too long for a plain one.
TRICKY = [
    "appops/p.x/y",
    "appops/p/x.y",
    "appops/p/x/y",
    "appops/p.x.y/z",
    "appops/p/x/y.z",
    "appops/p-a/db",
    "appops/p/a-db",
    "appops/P/x",
    "appops/p/X",
    "appops/p/x",
    "appops/konfig-0123456789abcdef/x",
    "appops/p/" + "s" * 250,
    "appops/p/" + "s" * 249 + "t",
    "appops/café/dev",
    "appops/cafe\u0301/dev".encode().decode("unicode_escape"),
]


def test_names_are_injective_and_valid_kubernetes_names() -> None:
    names = {path: inv.inventory_name(path) for path in TRICKY}
    assert len(set(names.values())) == len(TRICKY), names
    for path, name in names.items():
        assert len(name) <= 253 and inv._DNS_SUBDOMAIN.match(name), (path, name)
    # the plain form is kept where it was unambiguous: nothing to move there
    assert names["appops/p/x/y"] == "konfig.p.x.y" == inv.legacy_inventory_name("appops/p.x/y")
    assert names["appops/p-a/db"] == "konfig.p-a.db"
    assert names["appops/p.x/y"].startswith("konfig-") and names["appops/p.x/y"].endswith(".p-x.y")


def test_the_old_name_of_another_stack_is_refused_with_whose_it_is() -> None:
    """Before: "set data.stack back to 'appops/p/x/y'": the hint handed p.x/y's
    inventory (and its objects) to p/x/y."""
    old = inv.inventory_manifest("appops/p.x/y", [], commit="", spec_digest="", applied_at="")
    old["metadata"]["name"] = "konfig.p.x.y"  # what konfig wrote before
    old["metadata"]["labels"][inv.LABEL_ID] = inv.applyset_id("konfig.p.x.y")
    with pytest.raises(InventoryError) as caught:
        inv.parse_inventory(old, stack="appops/p/x/y")
    assert "is the inventory of 'appops/p.x/y', under the name konfig gave it before" in str(
        caught.value
    )
    hint = caught.value.hint or ""
    assert "apply 'appops/p.x/y' first" in hint and inv.inventory_name("appops/p.x/y") in hint
    assert "set data.stack" not in hint


def test_applyset_id_is_kubectls_formula() -> None:
    # kubectl pkg/cmd/apply/applyset.go: base64url(sha256("name.namespace.Kind.group")), no padding
    raw = hashlib.sha256(b"konfig.guestbook.dev.konfig-system.ConfigMap.").digest()
    expected = "applyset-" + base64.urlsafe_b64encode(raw).decode().rstrip("=") + "-v1"
    assert inv.applyset_id("konfig.guestbook.dev") == expected
    assert "=" not in expected
    assert inv.applyset_id("konfig.a.b") != inv.applyset_id("konfig.a.c")


def test_manifest_annotations_and_data() -> None:
    members = [
        Member("v1:Service:web:web", "u2"),
        Member("apps/v1:Deployment:web:web", "u1"),
        Member("v1:Namespace:web", ""),
        Member("v1:ConfigMap:other:cfg", ""),
        Member("v1:ConfigMap:konfig-system:x", ""),
    ]
    m = inv.inventory_manifest(
        "appops/g/dev", members, commit="abc", spec_digest="d1", applied_at="t"
    )
    assert m["kind"] == "ConfigMap"
    assert m["metadata"]["name"] == "konfig.g.dev"
    assert m["metadata"]["namespace"] == "konfig-system"
    assert m["metadata"]["labels"][inv.LABEL_ID] == inv.applyset_id("konfig.g.dev")
    ann = m["metadata"]["annotations"]
    assert ann[inv.ANNOTATION_GROUP_KINDS] == "ConfigMap,Deployment.apps,Namespace,Service"
    assert ann[inv.ANNOTATION_NAMESPACES] == "other,web"
    assert ann[inv.ANNOTATION_TOOLING].startswith("konfig/v")
    data = m["data"]
    assert json.loads(data["members"]) == [
        {"id": "apps/v1:Deployment:web:web", "uid": "u1"},
        {"id": "v1:ConfigMap:konfig-system:x", "uid": ""},
        {"id": "v1:ConfigMap:other:cfg", "uid": ""},
        {"id": "v1:Namespace:web", "uid": ""},
        {"id": "v1:Service:web:web", "uid": "u2"},
    ]
    assert (data["stack"], data["commit"], data["specDigest"], data["appliedAt"]) == (
        "appops/g/dev",
        "abc",
        "d1",
        "t",
    )


def test_parse_round_trip() -> None:
    members = [Member("v1:Namespace:web", "u0"), Member("apps/v1:Deployment:web:web", "u1")]
    m = inv.inventory_manifest("g/dev", members, commit="c", spec_digest="d", applied_at="t")
    parsed = inv.parse_inventory(m)
    assert parsed.stack_path == "appops/g/dev"
    assert parsed.members == tuple(sorted(members))
    assert parsed.applyset_id == inv.applyset_id("konfig.g.dev")
    assert (parsed.commit, parsed.spec_digest) == ("c", "d")


FIELDS = {
    "f:metadata": {"f:labels": {"f:app": {}}},
    "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
        'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}}}}}},
}  # fmt: skip


def test_applied_fields_round_trip_compressed() -> None:
    members = [Member("apps/v1:Deployment:web:web", "u1"), Member("v1:Namespace:web", "u0")]
    fields = {"apps/v1:Deployment:web:web": FIELDS, "v1:ConfigMap:gone:x": {"f:data": {}}}
    m = inv.inventory_manifest(
        "g/dev", members, commit="c", spec_digest="d", applied_at="t", applied_fields=fields
    )
    blob = m["binaryData"][inv.BINARY_APPLIED_FIELDS]
    assert base64.b64decode(blob)[:2] == b"\x1f\x8b"  # gzip
    parsed = inv.parse_inventory(m)
    # only members are kept; a member without a record has none (drift unknown)
    assert parsed.applied_fields == {"apps/v1:Deployment:web:web": FIELDS}
    # deterministic: the same record gives the same bytes (no needless writes)
    again = inv.inventory_manifest(
        "g/dev", members, commit="c", spec_digest="d", applied_at="t", applied_fields=fields
    )
    assert again["binaryData"] == m["binaryData"]


def test_old_inventories_still_read_and_bad_records_mean_unknown() -> None:
    m = inv.inventory_manifest("g/dev", [Member("v1:Namespace:web")], commit="c",
                               spec_digest="d", applied_at="t")  # fmt: skip
    assert m["binaryData"] == {}  # nothing recorded: sent empty, so an old record is dropped
    old = {k: v for k, v in m.items() if k != "binaryData"}  # written before the field existed
    for obj in (old, {**m, "binaryData": {inv.BINARY_APPLIED_FIELDS: "bm90IGd6aXA="}}):
        parsed = inv.parse_inventory(obj)
        assert parsed.applied_fields is None and parsed.commit == "c"
        assert parsed.ids() == {"v1:Namespace:web"}


def test_a_record_too_large_to_keep_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inv, "MAX_APPLIED_FIELDS", 10)
    m = inv.inventory_manifest(
        "g/dev", [Member("v1:Namespace:web")], commit="c", spec_digest="d", applied_at="t",
        applied_fields={"v1:Namespace:web": FIELDS},
    )  # fmt: skip
    assert m["binaryData"] == {}


def test_parse_rejects_foreign_configmap_and_bad_members() -> None:
    foreign = {"metadata": {"name": "konfig.g.dev", "namespace": "konfig-system"}, "data": {}}
    with pytest.raises(InventoryError, match="not a Konfig inventory"):
        inv.parse_inventory(foreign)
    m = inv.inventory_manifest("g/dev", [], commit="", spec_digest="", applied_at="")
    m["data"]["members"] = "{not json"
    with pytest.raises(InventoryError, match="not JSON"):
        inv.parse_inventory(m)


def test_parse_rejects_a_member_that_is_not_a_resource_id() -> None:
    m = inv.inventory_manifest("g/dev", [], commit="", spec_digest="", applied_at="")
    m["data"]["members"] = '[{"id": "a:b:c:d:e", "uid": ""}]'
    with pytest.raises(InventoryError, match="malformed resource id 'a:b:c:d:e'"):
        inv.parse_inventory(m)


def test_union_keeps_everything_and_prefers_known_uids() -> None:
    old = [Member("a:K:x", "u-old"), Member("a:K:y", "u-y")]
    new = [Member("a:K:x", ""), Member("a:K:z", "u-z")]
    assert inv.union_members(old, new) == (
        Member("a:K:x", "u-old"),
        Member("a:K:y", "u-y"),
        Member("a:K:z", "u-z"),
    )
    assert inv.union_members(old, [Member("a:K:x", "u-new")])[0] == Member("a:K:x", "u-new")


def test_ownership_is_proven_per_object() -> None:
    set_id = inv.applyset_id("konfig.g.dev")
    i = Inventory("appops/g/dev", (Member("apps/v1:Deployment:web:web", "u1"),), "", "", set_id)
    ours = {"metadata": {"uid": "u1", "labels": {inv.LABEL_PART_OF: set_id}}}
    assert i.owns("apps/v1:Deployment:web:web", ours)
    # not a member
    assert not i.owns("apps/v1:Deployment:web:other", ours)
    # someone else's label
    other = {"metadata": {"uid": "u1", "labels": {inv.LABEL_PART_OF: "applyset-x-v1"}}}
    assert not i.owns("apps/v1:Deployment:web:web", other)
    # recreated by someone else under the same name: UID differs
    recreated = {"metadata": {"uid": "u9", "labels": {inv.LABEL_PART_OF: set_id}}}
    assert not i.owns("apps/v1:Deployment:web:web", recreated)


def test_label_member_does_not_mutate() -> None:
    src = {"metadata": {"name": "a", "labels": {"x": "1"}}}
    out = inv.label_member(src, "applyset-abc-v1")
    assert out["metadata"]["labels"] == {"x": "1", inv.LABEL_PART_OF: "applyset-abc-v1"}
    assert src["metadata"]["labels"] == {"x": "1"}


@pytest.mark.cluster
def test_kubectl_accepts_the_parent_as_an_applyset(cluster: Any, tmp_path: Path) -> None:
    """kubectl validates the id label with its own formula: ours must match it."""
    from konfig.engine.kube import KubeTarget, connect

    def kubectl_applyset(name: str) -> subprocess.CompletedProcess[str]:
        manifest = tmp_path / "ns.yaml"
        manifest.write_text(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n")
        return subprocess.run(
            [
                "kubectl",
                f"--kubeconfig={cluster.kubeconfig}",
                "apply",
                "--server-side",
                "--prune",
                f"--applyset=configmaps/{name}",
                "-n",
                inv.NAMESPACE,
                "--dry-run=server",
                "-f",
                str(manifest),
            ],
            env=dict(os.environ, KUBECTL_APPLYSET="true"),
            capture_output=True,
            text=True,
        )

    ns = f"p7ks-{uuid.uuid4().hex[:8]}"
    path = f"appops/{ns}/dev"
    with connect(KubeTarget(str(cluster.kubeconfig), cluster.admin_context)) as kube:
        ours = inventory_store.write_inventory(
            kube, path, [Member(f"v1:ConfigMap:{ns}:a")], commit="c", spec_digest="d"
        )
        # kubectl recognises the parent and its id, and refuses to manage another tool's set
        res = kubectl_applyset(ours.name)
        assert res.returncode == 1
        assert 'is managed by tooling "konfig"' in res.stderr
        # the same parent with kubectl's own tooling annotation: kubectl accepts our id ...
        manifest = inv.inventory_manifest(
            path, ours.members, commit="c", spec_digest="d", applied_at="t"
        )
        manifest["metadata"]["annotations"][inv.ANNOTATION_TOOLING] = "kubectl/v1.32.4"
        kube.apply(manifest, dry_run=False, field_manager="test")
        res = kubectl_applyset(ours.name)
        assert res.returncode == 0, res.stderr
        # ... and rejects a wrong one, so the check above is a real check
        manifest["metadata"]["labels"][inv.LABEL_ID] = "applyset-wrong-v1"
        kube.apply(manifest, dry_run=False, field_manager="test", force=True)
        res = kubectl_applyset(ours.name)
        assert res.returncode == 1
        assert f"want: {ours.applyset_id}" in res.stderr
        inventory_store.delete_inventory(kube, path)
        assert inventory_store.read_inventory(kube, path) is None

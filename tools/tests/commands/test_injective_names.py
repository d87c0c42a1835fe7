"""Names are injective (issue 26, finding 6): two stack paths that konfig once named
alike (``appops/p.x/y`` and ``appops/p/x.y`` shared the inventory and Lease
``konfig.p.x.y``) each keep their own inventory, and an inventory left under its old
name moves to the new one with the next apply of the stack it records, nothing
orphaned or re-created; another stack whose name is that old name is refused until
then, with whose inventory it is. Against the real control plane."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.rawstacks import raw_stack, resource
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

NS = "konfig-system"


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def cm(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {"k": name},
    }


def stack_of(repo: RepoBuilder, project: str, name: str, objects: list[dict[str, Any]]) -> str:
    raw_stack(
        repo,
        project,
        name,
        [resource(o) for o in objects],
        stack_yaml=f"name: {name.rpartition('/')[2]}\nkubernetes:\n  context: admin\n",
    )
    return f"appops/{project}/{name}"


def ids(objects: list[dict[str, Any]]) -> set[str]:
    return {resource(o)["id"] for o in objects}


def test_two_stacks_that_shared_an_inventory_name_each_keep_their_own(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """Before: both were konfig.<p>.x.y; B's apply failed on A's inventory, with a hint
    to set its data.stack to B (handing A's objects to B)."""
    p = unique("dots")
    root, kc = repo_builder.root, f"--kubeconfig={cluster.kubeconfig}"
    a_objs = [namespace(f"{p}-a"), cm(f"{p}-a", "a")]
    b_objs = [namespace(f"{p}-b"), cm(f"{p}-b", "b")]
    a = stack_of(repo_builder, f"{p}.x", "y", a_objs)
    b = stack_of(repo_builder, p, "x.y", b_objs)

    res = konfig("apply", a, "--yes", "--no-wait", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    # B's preview lists its own objects only: nothing of A's as its own (no delete)
    res = konfig("preview", b, kc, "--format", "json", cwd=root)
    assert res.code == 0, res.out + res.err
    planned = {ch["id"]: ch["action"] for ch in json.loads(res.out)["stacks"][0]["changes"]}
    assert planned == dict.fromkeys(ids(b_objs), "create")
    res = konfig("apply", b, "--yes", "--no-wait", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err

    assert inv.inventory_name(a) != inv.inventory_name(b)
    for path, objs in ((a, a_objs), (b, b_objs)):
        stored = inventory_store.read_inventory(kube, path)
        assert stored is not None and stored.stack_path == path
        assert stored.ids() == ids(objs)
        lease = kube.get("coordination.k8s.io/v1", "Lease", inv.inventory_name(path), NS)
        assert lease is None  # released; and never shared: the names differ
    res = konfig("preview", b, kc, "--format", "json", cwd=root)
    planned = {ch["id"]: ch["action"] for ch in json.loads(res.out)["stacks"][0]["changes"]}
    assert planned == dict.fromkeys(ids(b_objs), "unchanged")
    for path in (a, b):
        res = konfig("destroy", path, "--yes", "--allow-dirty", kc, cwd=root)
        assert res.code == 0, res.out + res.err
    assert kube.get("v1", "ConfigMap", "a", f"{p}-a") is None


def test_an_inventory_under_its_old_name_moves_with_the_next_apply(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    p = unique("moved")
    root, kc = repo_builder.root, f"--kubeconfig={cluster.kubeconfig}"
    ns = f"{p}-ns"
    kept, dropped = cm(ns, "kept"), cm(ns, "dropped")
    a = stack_of(repo_builder, f"{p}.x", "y", [namespace(ns), kept])  # dropped: removed
    old = inv.legacy_inventory_name(a)
    assert old is not None and old != inv.inventory_name(a)
    # What konfig left before names were injective: the objects labelled with the old
    # name's ApplySet id, the inventory under the old name
    old_id = inv.applyset_id(old)
    members = []
    for obj in (namespace(ns), kept, dropped):
        live = kube.apply(inv.label_member(obj, old_id), dry_run=False, field_manager="konfig")
        members.append(inv.Member(resource(obj)["id"], live["metadata"]["uid"]))
    manifest = inv.inventory_manifest(
        a, members, commit="0" * 40, spec_digest="d", applied_at="2026-01-01T00:00:00Z"
    )
    manifest["metadata"]["name"] = old
    manifest["metadata"]["labels"][inv.LABEL_ID] = old_id
    inventory_store.ensure_namespace(kube)
    kube.apply(manifest, dry_run=False)
    uids = {m.id: m.uid for m in members}

    # the stack whose name now is that old name is refused, with whose inventory it is
    c = stack_of(repo_builder, p, "x/y", [cm(ns, "other")])  # appops/<p>/x/y
    assert inv.inventory_name(c) == old
    res = konfig("preview", c, kc, "--format", "json", cwd=root)
    assert res.code == 1, res.out + res.err
    error = json.loads(res.out)["stacks"][0]["error"]["message"]
    assert f"is the inventory of '{a}', under the name konfig gave it before" in error
    assert "set data.stack" not in res.out

    # A's preview reads its old inventory: its objects are its own (no conflict, no create)
    res = konfig("preview", a, kc, "--format", "json", cwd=root)
    assert res.code == 0, res.out + res.err
    planned = {ch["id"]: ch["action"] for ch in json.loads(res.out)["stacks"][0]["changes"]}
    assert planned == {
        resource(namespace(ns))["id"]: "update",  # the new ApplySet id
        resource(kept)["id"]: "update",
        resource(dropped)["id"]: "delete",
    }
    # a scan of the cluster's inventories sees the stack once, by its name now, while
    # both exist (an apply that wrote the new one and stopped before deleting the old)
    inventory_store.write_inventory(kube, a, members, commit="0" * 40, spec_digest="d")
    scanned = [i for i in inventory_store.list_inventories(kube) if i.stack_path == a]
    assert [i.name for i in scanned] == [inv.inventory_name(a)]
    res = konfig("apply", a, "--yes", "--no-wait", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err

    assert kube.get("v1", "ConfigMap", old, NS) is None  # the old name is gone
    stored = inventory_store.read_inventory(kube, a)
    assert stored is not None and stored.name == inv.inventory_name(a)
    assert stored.former_name == ""
    assert stored.ids() == ids([namespace(ns), kept])
    assert stored.commit != "0" * 40  # recorded by a complete apply
    new_id = inv.applyset_id(inv.inventory_name(a))
    for obj in (namespace(ns), kept):  # the same objects (not re-created), relabelled
        rid = resource(obj)["id"]
        meta = kube.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"],
                        obj["metadata"].get("namespace"))["metadata"]  # fmt: skip
        assert meta["uid"] == uids[rid] == stored.member(rid).uid  # type: ignore[union-attr]
        assert meta["labels"][inv.LABEL_PART_OF] == new_id
    assert kube.get("v1", "ConfigMap", "dropped", ns) is None  # pruned, not orphaned

    # now C has its name to itself
    res = konfig("preview", c, kc, "--format", "json", cwd=root)
    assert res.code == 0, res.out + res.err
    res = konfig("destroy", a, "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err

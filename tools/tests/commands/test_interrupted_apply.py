"""`kill -9` of `konfig apply` at several points, then a re-run (issue 14): it converges,
with no orphan and no lost ownership, on the real control plane.

Where konfig stops is chosen with a real mechanism, no test hook in konfig: a
validating admission webhook (:mod:`fixtures.webhook`) holds one write open — the
inventory's union, an object of the second level, the first prune delete — the test
kills konfig with SIGKILL while it waits inside that write, and the webhook then denies
the write, so it never happens. At every stop the invariants of the inventory protocol
hold: every object carrying the stack's ApplySet label is in the inventory, and every
object the inventory owned before is still in it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.webhook import Trap, holding_webhook
from kubeutil import unique

from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

RAW_MAIN = """\
import file
import yaml
import base.pkg.models.frontend

extras = frontend.Manifests {manifests = yaml.decode_all(file.read("objects.yaml"))}
"""
STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"


def objects(ns: str, version: int) -> list[dict[str, Any]]:
    """v1: ConfigMaps a, b, c; v2: a unchanged, b changed, c removed, d added."""
    names = {"a": "1", "b": "1", "c": "1"} if version == 1 else {"a": "1", "b": "2", "d": "1"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        *(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns},
                "data": {"v": value},
            }
            for name, value in names.items()
        ),
    ]


def ids(ns: str, version: int) -> set[str]:
    return {
        f"v1:Namespace:{ns}",
        *(f"v1:ConfigMap:{ns}:{n}" for n in (("a", "b", "c") if version == 1 else ("a", "b", "d"))),
    }


def labelled(kube: Kube, ns: str, set_id: str) -> dict[str, str]:
    """Every object carrying the stack's ApplySet label: id -> UID."""
    selector = f"{inv.LABEL_PART_OF}={set_id}"
    found = {
        f"v1:ConfigMap:{ns}:{o['metadata']['name']}": o["metadata"]["uid"]
        for o in kube.list("v1", "ConfigMap", ns, label_selector=selector)
        if not o["metadata"].get("deletionTimestamp")
    }
    namespace = kube.get("v1", "Namespace", ns, None)
    if namespace and namespace["metadata"].get("labels", {}).get(inv.LABEL_PART_OF) == set_id:
        found[f"v1:Namespace:{ns}"] = namespace["metadata"]["uid"]
    return found


POINTS = {
    # the first write of the apply: the union of the old and the new members
    "before-the-inventory-union": lambda name: Trap(("CREATE", "UPDATE"), "ConfigMap", name),
    # level 2 (the ConfigMaps, one at a time): b is updated, d is being created
    "between-objects": lambda name: Trap(("CREATE",), "ConfigMap", "d"),
    # every object applied; the first prune delete (c)
    "before-prune": lambda name: Trap(("DELETE",), "ConfigMap", "c"),
}


@pytest.mark.parametrize("point", list(POINTS))
def test_kill_9_then_a_rerun_converges(
    point: str,
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
) -> None:
    project, ns = unique("p14kill"), unique("p14k")
    path = f"appops/{project}/dev"
    name = inv.inventory_name(path)
    set_id = inv.applyset_id(name)
    root = repo_builder.root
    stack = repo_builder.stack(project, "dev", main=RAW_MAIN, stack_yaml=STACK_YAML)
    repo_builder.write(".gitignore", "/.cache/\n")
    (stack / "objects.yaml").write_text(yaml.safe_dump_all(objects(ns, 1)))
    git_init(root)
    v1 = git_commit(root, "v1")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", f"{project}/dev", "--yes", "--no-wait", kc, cwd=root)
    assert res.code == 0, res.err
    before = inventory_store.read_inventory(kube, path)
    assert before is not None and before.ids() == ids(ns, 1) and before.commit == v1

    (stack / "objects.yaml").write_text(yaml.safe_dump_all(objects(ns, 2)))
    v2 = git_commit(root, "v2")
    labels = [{inv.LABEL_PART_OF: set_id}, {inv.LABEL_ID: set_id}]
    with holding_webhook(cluster, labels) as hook:
        hook.arm(POINTS[point](name))
        proc = subprocess.Popen(
            [sys.executable, "-m", "konfig", "apply", f"{project}/dev", "--yes", "--no-wait",
             "--concurrency", "1", "--lease-duration", "3", kc],
            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            held = hook.wait_held(timeout=180)
        finally:
            proc.kill()  # SIGKILL: no handler, no cleanup, the Lease is not released
            out, err = proc.communicate(timeout=60)
            hook.deny()
        assert held, f"konfig never reached {point}:\n{out}\n{err}\n{hook.seen}"
        assert proc.returncode == -9

    # the invariants at the stop: no orphan, no lost ownership, the old commit kept
    stopped = inventory_store.read_inventory(kube, path)
    assert stopped is not None
    assert set(labelled(kube, ns, set_id)) <= stopped.ids(), "an object is not in the inventory"
    assert before.ids() <= stopped.ids(), "the inventory lost an object it owned"
    assert stopped.commit == v1 and not stopped.dirty
    if point != "before-the-inventory-union":
        assert stopped.ids() == ids(ns, 1) | ids(ns, 2)  # the union was written
    else:
        assert stopped == before
    pending = konfig("pending", "--json", kc, cwd=root)
    assert path in [s["path"] for s in json.loads(pending.out)["stacks"]]  # retried next

    # the re-run takes the dead holder's lock over and converges
    res = konfig("apply", f"{project}/dev", "--yes", "--no-wait", "--lock-timeout", "60", kc,
                 cwd=root)  # fmt: skip
    assert res.code == 0, res.out + res.err
    after = inventory_store.read_inventory(kube, path)
    assert after is not None
    assert after.ids() == ids(ns, 2) and (after.commit, after.dirty) == (v2, False)
    live = labelled(kube, ns, set_id)
    assert set(live) == ids(ns, 2)
    assert {m.id: m.uid for m in after.members} == live  # UIDs recorded, ownership proven
    assert kube.get("v1", "ConfigMap", "c", ns) is None
    b = kube.get("v1", "ConfigMap", "b", ns)
    assert b is not None and b["data"] == {"v": "2"}
    assert konfig("destroy", f"{project}/dev", "--yes", "--no-wait", kc, cwd=root).code == 0

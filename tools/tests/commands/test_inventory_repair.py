"""A hand-edited inventory (issue 19): preview, apply and destroy refuse it with a message
that names the ConfigMap and the broken field and says how to repair it, write nothing,
and the repair the message gives works.

The edits are made the way a person makes them, with kubectl against the real local
control plane; konfig runs in process.
"""

from __future__ import annotations

import json

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"

MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {{apiVersion = "v1", kind = "ConfigMap", metadata = {{name = "cfg", namespace = "{ns}"}}}}
    ]
}}
"""


def _patch(data: dict[str, str]) -> list[str]:
    return ["patch", "--type", "merge", "-p", json.dumps({"data": data})]


# (what the person did with kubectl, what konfig must say about it)
EDITS = {
    "members-not-json": (_patch({"members": '[{"id": "v1:Namespace:x"'}), "is not JSON"),
    "members-not-a-list": (_patch({"members": '{"id": "v1:Namespace:x"}'}), "must be a JSON list"),
    "member-without-id": (_patch({"members": '[{"uid": "1"}]'}), 'entry 1 has no "id" string'),
    "member-id-malformed": (
        _patch({"members": '[{"id": "ConfigMap/cfg", "uid": ""}]'}),
        "entry 1: malformed resource id 'ConfigMap/cfg'",
    ),
    "member-uid-not-a-string": (
        _patch({"members": '[{"id": "v1:Namespace:x", "uid": 7}]'}),
        '"uid" must be a string, not 7',
    ),
    "members-removed": (
        ["patch", "--type", "json", "-p", '[{"op": "remove", "path": "/data/members"}]'],
        "has no data.members",
    ),
    "stack-changed": (_patch({"stack": "appops/other/dev"}), "data.stack is 'appops/other/dev'"),
    "id-label-removed": (["label", inv.LABEL_ID + "-"], f"label {inv.LABEL_ID} is missing"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_hand_edited_inventory_is_refused_with_how_to_repair_it(
    edit: str, repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns = unique("p19inv")
    repo_builder.stack(ns, "dev", main=MAIN.format(ns=ns), stack_yaml=STACK_YAML)
    address = f"{ns}/dev"
    name = inv.inventory_name(f"appops/{address}")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    root = repo_builder.root
    assert konfig("apply", address, "--allow-dirty", "--yes", "--no-wait", kc, cwd=root).code == 0

    args, problem = EDITS[edit]
    cluster.kubectl("-n", inv.NAMESPACE, *args[:1], "configmap", name, *args[1:])
    before = kube.get("v1", "ConfigMap", name, inv.NAMESPACE)
    assert before is not None

    for command in (
        ["preview", address],
        ["apply", address, "--allow-dirty", "--yes"],
        ["destroy", address, "--allow-dirty", "--yes"],
    ):
        res = konfig(*command, kc, cwd=root)
        text = res.out + res.err
        assert res.code == 1, text
        assert "Traceback" not in text
        assert f"inventory ConfigMap konfig-system/{name}" in text, text
        assert problem in text, text
        assert "kubectl -n konfig-system" in text, text  # the way to repair it
    after = kube.get("v1", "ConfigMap", name, inv.NAMESPACE)
    assert after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    # the repair the message gives
    if edit == "id-label-removed":
        fix = f"kubectl -n konfig-system label --overwrite configmap {name} {inv.LABEL_ID}="
        assert fix in text
        cluster.kubectl(
            "-n", "konfig-system", "label", "--overwrite", "configmap", name,
            f"{inv.LABEL_ID}={inv.applyset_id(name)}",
        )  # fmt: skip
    elif edit == "stack-changed":
        assert f"set data.stack back to 'appops/{address}'" in text
        cluster.kubectl(
            "-n",
            "konfig-system",
            "patch",
            "configmap",
            name,
            *_patch({"stack": f"appops/{address}"})[1:],
        )
    else:
        assert f"kubectl -n konfig-system delete configmap {name}" in text
        assert f"kubectl get ConfigMap,Namespace -A -l {inv.LABEL_PART_OF}=" in text
        cluster.kubectl("-n", "konfig-system", "delete", "configmap", name)
    res = konfig("apply", address, "--allow-dirty", "--yes", "--no-wait", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    stored = inventory_store.read_inventory(kube, f"appops/{address}")
    assert stored is not None
    assert stored.ids() == {f"v1:Namespace:{ns}", f"v1:ConfigMap:{ns}:cfg"}
    assert konfig("destroy", address, "--allow-dirty", "--yes", kc, cwd=root).code == 0

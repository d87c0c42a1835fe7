"""A CustomResourceDefinition a stack stops declaring, while custom resources Konfig
does not own ("foreign") still exist: deleting it would delete them, cluster-wide. As a
Namespace's (test_danger_confirm): without a confirmation the CRD is kept and the
message says how to proceed; with the confirmation of the digest whose ``cascade``
count includes them, it goes with them and the result names them; a custom resource
added after the preview changes the count, so the old confirmation no longer holds.
Against the real control plane."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import crd, unique, wait_for

from konfig.engine.kube import Kube, KubeError

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"
MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {extra}
    ]
}}
"""


def kcl(obj: dict[str, Any]) -> str:
    """A manifest as a KCL dict literal (JSON, with KCL's booleans)."""
    return json.dumps(obj).replace(": true", ": True").replace(": false", ": False")


def test_a_confirmed_crd_cascade_takes_the_custom_resources_of_other_owners(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns = unique("dgcrd")
    group = f"{ns}.example.com"
    definition = crd(group, "Widget", "widgets")
    name = definition["metadata"]["name"]
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    path = f"appops/{ns}/dev"
    repo_builder.stack(ns, "dev", main=MAIN.format(ns=ns, extra=kcl(definition)),
                       stack_yaml=STACK_YAML)  # fmt: skip
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err

    def foreign(widget: str) -> None:  # someone else's custom resource, no inventory's label
        obj = {"apiVersion": f"{group}/v1", "kind": "Widget",
               "metadata": {"name": widget, "namespace": ns}, "spec": {}}  # fmt: skip

        def made() -> bool:
            try:
                kube.apply(obj, dry_run=False, field_manager="ops-team")
            except KubeError:  # the kind may not be served yet
                return False
            return True

        wait_for(made, f"Widget {widget} created")

    foreign("theirs")
    # the stack no longer declares the CRD; no policy asks for a confirmation: it is kept,
    # and the result says why and how to let it go
    repo_builder.stack(ns, "dev", main=MAIN.format(ns=ns, extra=""), stack_yaml=STACK_YAML)
    apply = ("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc)
    crd_id = f"apiextensions.k8s.io/v1:CustomResourceDefinition:{name}"
    res = konfig(*apply, "--json", cwd=root)
    assert res.code == 0, res.out + res.err
    (stack,) = json.loads(res.out)["stacks"]
    message = {o["id"]: o["message"] for o in stack["objects"]}[crd_id]
    assert message == (
        f"kept CustomResourceDefinition {name}: deleting it would delete custom resources of "
        f"other owners (Widget/theirs in {ns}); it stays in the inventory and is pruned once "
        "they are gone, or with them once its cascade is confirmed (konfig.yaml "
        "dangers.confirm: [cascade], then --confirm STACK=DIGEST as the preview names it: "
        "docs/danger.md)"
    ), message
    assert kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name, None)

    config = root / "konfig.yaml"
    config.write_text(
        config.read_text(encoding="utf-8") + "dangers:\n  confirm: [cascade]\n", encoding="utf-8"
    )

    def previewed() -> tuple[int, str]:
        res = konfig("preview", f"{ns}/dev", kc, "--format", "json", cwd=root)
        assert res.code == 0, res.out + res.err
        (stack,) = json.loads(res.out)["stacks"]
        gone = {c["id"]: c for c in stack["changes"]}[crd_id]
        assert gone["action"] == "delete", gone
        (cascade,) = [d for d in gone["dangers"] if d["class"] == "cascade"]
        digest = re.search(r"--confirm \S+=([0-9a-f]{16})", gone["refused"] or "")
        assert digest, gone
        return cascade["objects"], digest.group(1)

    count, digest = previewed()
    assert count == 1
    # without the confirmation: refused before any write
    res = konfig(*apply, cwd=root)
    assert res.code == 1 and "nothing was applied: danger/confirm: cascade" in res.err, res.err
    assert kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name, None)

    # one more of theirs after the preview: the count, so the digest, changes
    foreign("late")
    res = konfig(*apply, "--confirm", f"{path}={digest}", cwd=root)
    assert res.code == 1 and "nothing was applied: danger/confirm" in res.err, res.err
    count, late = previewed()
    assert count == 2 and late != digest

    # confirmed with the count that includes them: the CRD goes, with them
    res = konfig(*apply, "--confirm", f"{path}={late}", "--json", cwd=root)
    assert res.code == 0, res.out + res.err
    (stack,) = json.loads(res.out)["stacks"]
    message = {o["id"]: o["message"] for o in stack["objects"]}[crd_id]
    assert message == (
        f"deleted CustomResourceDefinition {name} (apiextensions.k8s.io/v1) with the 2 "
        f"objects of other owners it held (confirmed cascade): Widget/late in {ns}, "
        f"Widget/theirs in {ns}"
    ), message
    assert stack["ok"], stack
    gone = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name, None)
    assert gone is None or gone["metadata"].get("deletionTimestamp")

"""Ownership at pull-request time (issue 14): two stacks declaring one object, and objects
in the cluster that belong to another stack or to nobody in Konfig, are caught by
`konfig check` and `konfig preview`, not first by `konfig apply` after the merge."""

from __future__ import annotations

import json

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory_store
from konfig.engine.kube import Kube

CONTEXT = "name: dev\nkubernetes:\n  context: admin\n"


def two_stacks(repo: RepoBuilder, a: str, b: str, ns: str) -> None:
    """``a`` and ``b`` both declare the Namespace ``ns`` (and their own Deployment)."""
    for project in (a, b):
        repo.stack(
            project, "dev", main=SIMPLE_MAIN.format(name=project, namespace=ns), stack_yaml=CONTEXT
        )


def findings(out: str) -> dict[tuple[str, str | None, int | None], str]:
    return {(f["rule"], f["file"], f["line"]): f["message"] for f in json.loads(out)}


def test_check_reports_an_object_two_stacks_declare(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    """Before: `konfig check` found nothing and exited 0; only apply refused, after merge."""
    two_stacks(repo_builder, "guestbook", "shop", "guestbook-dev")
    res = konfig("check", "--format", "json", cwd=repo_builder.root)
    assert res.code == 1, res.out + res.err
    found = findings(res.out)
    rid = "v1:Namespace:guestbook-dev"
    # one finding at each stack's own file and line, naming the other stack's file
    mine = found[("ownership/shared-object", "appops/guestbook/dev/main.k", 5)]
    theirs = found[("ownership/shared-object", "appops/shop/dev/main.k", 5)]
    assert f"{rid} is also declared by appops/shop/dev (appops/shop/dev/main.k:5)" in mine
    assert f"{rid} is also declared by appops/guestbook/dev (appops/guestbook/dev/main.k:5)" in (
        theirs
    )
    assert "remove it from one of the two stacks" in mine
    # the Deployments have different names: not shared
    assert len([k for k in found if k[0] == "ownership/shared-object"]) == 2


def test_check_of_one_stack_reads_only_the_ids_of_the_others(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    two_stacks(repo_builder, "guestbook", "shop", "guestbook-dev")
    assert konfig("test", "--update", "--no-unit", cwd=repo_builder.root).code == 0
    # guestbook no longer compiles; its golden still says what it declares. Checking shop
    # must not compile it (no compile error of guestbook) and still find the clash.
    main = repo_builder.root / "appops/guestbook/dev/main.k"
    main.write_text(main.read_text() + "\nbroken = \n")
    res = konfig("check", "shop/dev", "--format", "json", cwd=repo_builder.root)
    assert res.code == 1
    found = findings(res.out)
    assert not [k for k in found if k[0] == "compile/error"], found
    (message,) = [m for k, m in found.items() if k[0] == "ownership/shared-object"]
    assert (
        "also declared by appops/guestbook/dev (appops/guestbook/dev/ci-test/stdout.golden.yaml:"
        in message
    )
    # stacks on different clusters never clash
    repo_builder.write("appops/shop/dev/stack.yaml", "name: dev\nkubernetes:\n  context: edge\n")
    res = konfig("check", "shop/dev", "--format", "json", cwd=repo_builder.root)
    assert not [k for k in findings(res.out) if k[0] == "ownership/shared-object"]


RAW_MAIN = """\
import file
import yaml
import base.pkg.models.frontend

extras = frontend.Manifests {manifests = yaml.decode_all(file.read("objects.yaml"))}
"""


def raw_stack(repo: RepoBuilder, project: str, docs: list[dict[str, object]], yml: str) -> None:
    path = repo.stack(project, "dev", main=RAW_MAIN, stack_yaml=yml)
    (path / "objects.yaml").write_text(yaml.safe_dump_all(docs))


def cm(ns: str, name: str, **annotations: str) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": ns}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


@pytest.mark.cluster
def test_preview_shows_conflicts_and_apply_refuses_them(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """Before: preview failed the whole stack with an error (another inventory) or showed a
    clean "adopt" (an unmanaged object); now each is a conflict naming its owner."""
    ns, a, b = unique("p14own"), unique("p14a"), unique("p14b")
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    raw_stack(repo_builder, a, [{"apiVersion": "v1", "kind": "Namespace",
              "metadata": {"name": ns}}, cm(ns, "shared")], CONTEXT)  # fmt: skip
    res = konfig("apply", f"{a}/dev", "--yes", "--no-wait", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.err
    cluster.kubectl("create", "configmap", "by-hand", "-n", ns, "--from-literal=k=v")

    # b declares a's ConfigMap, one made by hand, and one of its own
    raw_stack(repo_builder, b, [cm(ns, "shared"), cm(ns, "by-hand"), cm(ns, "mine")], CONTEXT)
    res = konfig("preview", f"{b}/dev", kc, "--format", "json", "--detailed-exitcode", cwd=root)
    assert res.code == 1, res.out + res.err  # a conflict is an error, not a change (2)
    doc = json.loads(res.out)
    assert doc["hasConflicts"] is True
    (stack,) = doc["stacks"]
    assert stack["status"] == "ok" and stack["counts"]["conflict"] == 2
    by_id = {c["id"]: c for c in stack["changes"]}
    shared, by_hand = by_id[f"v1:ConfigMap:{ns}:shared"], by_id[f"v1:ConfigMap:{ns}:by-hand"]
    assert (shared["action"], shared["owner"]) == ("conflict", f"appops/{a}/dev")
    assert f"owned by appops/{a}/dev" in shared["reason"]
    assert by_hand["action"] == "conflict"
    assert by_hand["owner"] == "unmanaged (kubectl-create)"
    assert "adoptUnmanaged: true" in by_hand["reason"]
    assert by_id[f"v1:ConfigMap:{ns}:mine"]["action"] == "create"

    text = konfig("preview", f"{b}/dev", kc, cwd=root)
    assert text.code == 1
    lines = [line for line in text.out.splitlines() if line.startswith("  ")]
    assert [line.split()[1] for line in lines[:3]] == ["conflict", "conflict", "create"]
    md = konfig("preview", f"{b}/dev", kc, "--format", "markdown", cwd=root)
    assert md.out.index("**Conflicts**") < md.out.index("| stack |")

    # apply refuses the stack before any write
    res = konfig("apply", f"{b}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 1
    assert "2 object(s) belong to someone else; nothing was applied" in res.err
    assert kube.get("v1", "ConfigMap", "mine", ns) is None
    assert inventory_store.read_inventory(kube, f"appops/{b}/dev") is None

    # b drops a's object and opts in to adopting the one made by hand: applied
    raw_stack(
        repo_builder,
        b,
        [cm(ns, "by-hand", **{"konfig.io/adopt": "true"}), cm(ns, "mine")],
        CONTEXT,
    )
    res = konfig("preview", f"{b}/dev", kc, "--detailed-exitcode", cwd=root)
    assert res.code == 2, res.out + res.err
    res = konfig("apply", f"{b}/dev", "--yes", "--no-wait", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.err
    stored = inventory_store.read_inventory(kube, f"appops/{b}/dev")
    assert stored is not None
    assert stored.ids() == {f"v1:ConfigMap:{ns}:by-hand", f"v1:ConfigMap:{ns}:mine"}
    for address in (b, a):
        res = konfig("destroy", f"{address}/dev", "--yes", "--allow-dirty", kc, cwd=root)
        assert res.code == 0, res.err

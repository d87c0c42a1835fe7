"""What a preview shows of the cluster is what the stack owns (issue 26): an object that
exists and belongs to another stack, or to no Konfig stack, is reported with its owner
or field managers and never with its live content, in the terminal, markdown and JSON
and in the pull-request comment (`konfig report`). Before, a stack that declared
another team's ConfigMap read its data through the preview's identity: the conflict's
diff held the live object (and the adopted one's, the live values it would replace).
Against the real control plane."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.rawstacks import raw_stack, resource
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

CONTEXT = "name: dev\nkubernetes:\n  context: admin\n"


def cm(ns: str, name: str, value: str, **annotations: str) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": ns}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"token": value}}


def test_a_preview_names_the_owner_of_an_object_never_its_live_content(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tmp_path: Path,
) -> None:
    ns, a, b = unique("unowned"), unique("owner"), unique("reader")
    canary = {what: f"canary-{what}-{secrets.token_hex(8)}" for what in ("a", "hand", "adopt")}
    root, kc = repo_builder.root, f"--kubeconfig={cluster.kubeconfig}"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    raw_stack(
        repo_builder, a, "dev", [resource(namespace), resource(cm(ns, "team", canary["a"]))],
        stack_yaml=CONTEXT,
    )  # fmt: skip
    res = konfig("apply", f"{a}/dev", "--yes", "--no-wait", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    # two objects another team made by hand (field manager team-b)
    for name, value in (("hand", canary["hand"]), ("adopt", canary["adopt"])):
        kube.apply(cm(ns, name, value), dry_run=False, field_manager="team-b")

    # b declares all three: a's, one made by hand, and one by hand it opts in to adopting
    raw_stack(
        repo_builder,
        b,
        "dev",
        [
            resource(cm(ns, "team", "mine")),
            resource(cm(ns, "hand", "mine")),
            resource(cm(ns, "adopt", "mine", **{"konfig.io/adopt": "true"})),
        ],
        stack_yaml=CONTEXT,
    )
    outputs: dict[str, str] = {}
    for fmt in ("text", "markdown", "json"):
        res = konfig("preview", f"{b}/dev", kc, "--format", fmt, cwd=root)
        assert res.code == 1, res.out + res.err  # the conflicts
        outputs[fmt] = res.out + res.err
    saved = tmp_path / "preview.json"
    saved.write_text(outputs["json"], encoding="utf-8")
    comment = konfig("report", "--preview", str(saved), "--sha", "0" * 40, cwd=root)
    assert comment.code in (0, 1), comment.out + comment.err
    outputs["comment"] = comment.out + comment.err
    for fmt, out in outputs.items():
        for value in canary.values():
            assert value not in out, f"{fmt} shows the live content {value!r}:\n{out}"

    changes = {c["name"]: c for c in json.loads(outputs["json"])["stacks"][0]["changes"]}
    team, hand, adopt = changes["team"], changes["hand"], changes["adopt"]
    assert (team["action"], team["owner"]) == ("conflict", f"appops/{a}/dev")
    assert (hand["action"], hand["owner"]) == ("conflict", "unmanaged (team-b)")
    assert adopt["action"] == "update"
    assert "managed by no Konfig stack (field managers: team-b)" in adopt["reason"]
    assert "its live content is not shown" in adopt["reason"]
    for change in (team, hand, adopt):
        assert (change["fields"], change["diff"]) == ([], ""), change
    # who owns each is in every format
    for fmt in ("text", "markdown", "comment"):
        assert f"appops/{a}/dev" in outputs[fmt] and "team-b" in outputs[fmt], outputs[fmt]

    # nothing was read into b's apply either: it refuses the conflicts, writes nothing
    res = konfig("apply", f"{b}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 1
    live = kube.get("v1", "ConfigMap", "team", ns)
    assert live is not None and live["data"] == {"token": canary["a"]}
    for name in ("hand", "adopt"):
        kube.delete("v1", "ConfigMap", name, ns, uid=None, propagation="Background")
    res = konfig("destroy", f"{a}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err

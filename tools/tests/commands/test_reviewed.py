"""The change digest against the real control plane: stable across previews, blind to
drift the change does not touch, carried hidden in the comment and read back."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.errors import UsageError
from konfig.pipeline.reviewed import MARKER, read_reviewed

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"


def preview(konfig: KonfigRunner, root: Path, cluster: Cluster, stack: str) -> dict[str, Any]:
    res = konfig(
        "--root", str(root), "preview", stack, "--format", "json",
        f"--kubeconfig={cluster.kubeconfig}",
    )  # fmt: skip
    assert res.code == 0, res.err
    doc: dict[str, Any] = json.loads(res.out)
    return doc


def test_digest_is_stable_and_blind_to_drift_the_change_does_not_touch(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster, tmp_path: Path
) -> None:
    p = unique("p27dg")
    ns, stack = f"{p}-dev", f"{p}/dev"
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(p, "dev", stack_yaml=STACK_YAML)
    root = repo_builder.root
    git_init(root)
    git_commit(root, "one stack")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    assert konfig("--root", str(root), "apply", "--yes", stack, kc).code == 0
    main = SIMPLE_MAIN.format(name=p, namespace=ns).replace("1.27.3", "1.27.4")
    repo_builder.write(f"appops/{p}/dev/main.k", main)
    git_commit(root, "new image")

    first = preview(konfig, root, cluster, stack)
    again = preview(konfig, root, cluster, stack)
    (entry,) = first["stacks"]
    review = entry["review"]
    assert first["commits"]["head"] and len(review["digest"]) == 64
    assert again["stacks"][0]["review"]["digest"] == review["digest"]
    deploy = f"apps/v1:Deployment:{ns}:{p}"
    (obj,) = review["objects"]
    assert obj["id"] == deploy and obj["action"] == "update"
    assert list(obj["fields"]) == [f"spec.template.spec.containers[name={p}].image"]
    assert [v["id"] for v in review["live"]] == [deploy] and review["live"][0]["resourceVersion"]

    # someone scales by hand: a field the change does not touch
    cluster.kubectl("scale", "deployment", p, "-n", ns, "--replicas=3")
    scaled = preview(konfig, root, cluster, stack)["stacks"][0]["review"]
    assert scaled["digest"] == review["digest"]
    assert {"id": deploy, "path": "spec.replicas"} in scaled["clusterDiffers"]
    assert scaled["live"][0]["resourceVersion"] != review["live"][0]["resourceVersion"]

    # the comment hides the record and shows what the cluster already differs in
    out = tmp_path / "preview.json"
    out.write_text(json.dumps(preview(konfig, root, cluster, stack)), encoding="utf-8")
    body, record = tmp_path / "comment.md", tmp_path / "reviewed.json"
    res = konfig(
        "report", "--preview", str(out), "--sha", "a" * 40, "--out", str(body),
        "--reviewed-out", str(record),
    )  # fmt: skip
    assert res.code == 0, res.err
    text = body.read_text(encoding="utf-8")
    assert f"<!-- {MARKER} v1 " in text
    assert f"change digest `{review['digest'][:12]}`" in text
    assert "the cluster already differs" in text and "spec.replicas" in text
    read = read_reviewed(text, where="the comment")
    assert read.stacks[f"appops/{stack}"].digest == review["digest"]
    saved = read_reviewed(record.read_text(encoding="utf-8"), where=str(record))
    assert saved.stacks == read.stacks and saved.head == first["commits"]["head"]

    # a record altered in the comment is refused, not trusted
    packed = text.split(f"<!-- {MARKER} v1 ")[1].split(" -->")[0]
    data = json.loads(zlib.decompress(base64.b64decode(packed)))
    data["stacks"][f"appops/{stack}"]["objects"] = []
    forged = base64.b64encode(zlib.compress(json.dumps(data).encode())).decode()
    with pytest.raises(UsageError, match="the record was altered"):
        read_reviewed(f"<!-- {MARKER} v1 {forged} -->", where="the comment")
    with pytest.raises(UsageError, match="not readable"):
        read_reviewed(f"<!-- {MARKER} v1 AAAA -->", where="the comment")

    # someone edits the image by hand: a field the change sets, so the change is another
    cluster.kubectl("set", "image", f"deployment/{p}", f"{p}=nginx:1.27.9", "-n", ns)
    edited = preview(konfig, root, cluster, stack)["stacks"][0]["review"]
    assert edited["digest"] != review["digest"]

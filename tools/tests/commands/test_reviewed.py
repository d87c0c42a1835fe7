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


def main_k(p: str, ns: str, image: str, replicas: int = 1) -> str:
    main = SIMPLE_MAIN.format(name=p, namespace=ns).replace("nginx:1.27.3", image)
    return main.replace("    ports =", f"    replicas = {replicas}\n    ports =")


def reviewed_comment(
    konfig: KonfigRunner, root: Path, cluster: Cluster, stacks: list[str], tmp: Path
) -> Path:
    """Preview, then the comment `konfig report` renders from it (the record hidden)."""
    res = konfig(
        "--root", str(root), "preview", *stacks, "--format", "json",
        f"--kubeconfig={cluster.kubeconfig}",
    )  # fmt: skip
    assert res.code == 0, res.err
    doc, body = tmp / "preview.json", tmp / "comment.md"
    doc.write_text(res.out, encoding="utf-8")
    made = konfig(
        "report", "--preview", str(doc), "--sha", "b" * 40, "--out", str(body), "--pr", "7"
    )  # fmt: skip
    assert made.code == 0, made.err
    return body


def image_of(cluster: Cluster, ns: str, name: str) -> str:
    out = cluster.kubectl(
        "get",
        "deployment",
        name,
        "-n",
        ns,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    )
    return str(out.stdout).strip()


def test_apply_reviewed_blocks_a_production_stack_whose_change_moved(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster, tmp_path: Path
) -> None:
    p = unique("p27ap")
    repo_builder.write(".gitignore", "/.cache/\n")
    for name in ("dev", "prod"):
        repo_builder.stack(p, name, stack_yaml=f"name: {name}\nkubernetes:\n  context: admin\n")
    root = repo_builder.root
    git_init(root)
    git_commit(root, "two stacks")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    stacks = [f"{p}/dev", f"{p}/prod"]
    assert konfig("--root", str(root), "apply", "--yes", *stacks, kc).code == 0

    # the pull request: a new image in both; its preview is reviewed
    for name in ("dev", "prod"):
        repo_builder.write(f"appops/{p}/{name}/main.k", main_k(p, f"{p}-{name}", "nginx:1.27.4"))
    git_commit(root, "pr: new image")
    comment = reviewed_comment(konfig, root, cluster, stacks, tmp_path)

    # main moved before the merge: another change reaches both stacks (replicas)
    for name in ("dev", "prod"):
        repo_builder.write(
            f"appops/{p}/{name}/main.k", main_k(p, f"{p}-{name}", "nginx:1.27.4", replicas=2)
        )
    git_commit(root, "main: two replicas")
    res = konfig("--root", str(root), "apply", "--yes", "--reviewed", str(comment), *stacks, kc)
    assert res.code == 1, res.err
    prod, dev = f"appops/{p}/prod", f"appops/{p}/dev"
    assert f"{prod}: changed since the review" in res.err
    assert f"now also: apps/v1:Deployment:{p}-prod:{p} spec.replicas" in res.err
    assert "not applied (stack.yaml apply.onReviewedChanged: block)" in res.err
    assert f"{dev}: changed since the review" in res.err and "applied anyway" in res.err
    assert image_of(cluster, f"{p}-prod", p) == "nginx:1.27.3"  # blocked: untouched
    assert image_of(cluster, f"{p}-dev", p) == "nginx:1.27.4"  # not production: applied

    # reviewed again; someone scales prod by hand: replicas is a field the change sets,
    # so the change is no longer the reviewed one (blocked)
    comment = reviewed_comment(konfig, root, cluster, [f"{p}/prod"], tmp_path)
    cluster.kubectl("scale", "deployment", p, "-n", f"{p}-prod", "--replicas=5")
    res = konfig(
        "--root", str(root), "apply", "--yes", "--reviewed", str(comment), f"{p}/prod", kc
    )  # fmt: skip
    assert res.code == 1 and f"no longer: apps/v1:Deployment:{p}-prod:{p} spec.replicas" in res.err
    cluster.kubectl("scale", "deployment", p, "-n", f"{p}-prod", "--replicas=1")

    # reviewed again; someone relabels prod's Service by hand (a field the change does not
    # set): still the reviewed change, applied with the versions just read as preconditions
    comment = reviewed_comment(konfig, root, cluster, [f"{p}/prod"], tmp_path)
    cluster.kubectl(
        "label", "service", p, "-n", f"{p}-prod", "app.kubernetes.io/name=hand-made", "--overwrite"
    )
    res = konfig(
        "--root", str(root), "apply", "--yes", "--reviewed", str(comment), f"{p}/prod", kc
    )  # fmt: skip
    assert res.code == 0, res.err
    assert f"{prod}: the reviewed change" in res.err
    assert "the cluster already differs, not by this change" in res.err

    # status says which change was applied and whether it was the reviewed one
    status = konfig("--root", str(root), "status", "--json", *stacks, kc)
    assert status.code == 0, status.err
    by_path = {s["path"]: s for s in json.loads(status.out)["stacks"]}
    assert by_path[prod]["review"]["status"] == "reviewed" and by_path[prod]["review"]["pr"] == 7
    assert by_path[dev]["review"]["status"] == "changed"
    text = konfig("--root", str(root), "status", *stacks, kc).out
    digest = by_path[prod]["review"]["digest"][:12]
    assert f"prod: applied change {digest} of pull request #7: the reviewed change" in text
    assert image_of(cluster, f"{p}-prod", p) == "nginx:1.27.4"

    # a forged record is refused before anything runs
    comment.write_text("<!-- konfig:reviewed v1 AAAA -->", encoding="utf-8")
    res = konfig("--root", str(root), "apply", "--yes", "--reviewed", str(comment), *stacks, kc)
    assert res.code == 2 and "the hidden record is not readable" in res.err


def test_on_reviewed_changed_is_checked_with_its_line(
    konfig: KonfigRunner, repo_builder: RepoBuilder
) -> None:
    repo_builder.stack(
        "shop", "prod", stack_yaml="name: prod\napply:\n  onReviewedChanged: maybe\n"
    )
    res = konfig("--root", str(repo_builder.root), "check", "shop/prod")
    assert res.code == 1
    assert "appops/shop/prod/stack.yaml:3" in res.out + res.err
    assert "`onReviewedChanged` is `block` or `apply`, not 'maybe'" in res.out + res.err


def test_a_refused_record_says_why_with_each_blocked_stack(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster, tmp_path: Path
) -> None:
    """`konfig reviewed` refused the record the comment pointed to (an expired artifact,
    other bytes): it wrote a record without stacks and the reason. apply blocks the
    production stack as unreviewed and says that reason, not "no reviewed preview"."""
    from konfig.pipeline.reviewed import Reviewed
    from konfig.report.reviewed import render_unreviewed

    p = unique("p27rf")
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(p, "prod", stack_yaml="name: prod\nkubernetes:\n  context: admin\n")
    root = repo_builder.root
    git_init(root)
    git_commit(root, "prod")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    assert konfig("--root", str(root), "apply", "--yes", f"{p}/prod", kc).code == 0
    repo_builder.write(f"appops/{p}/prod/main.k", main_k(p, f"{p}-prod", "nginx:1.27.4"))
    git_commit(root, "pr: new image")
    why = "artifact konfig-reviewed of run 31 is not there (expired or deleted)"
    record = tmp_path / "reviewed.json"
    record.write_text(json.dumps({**Reviewed(refused=why).to_dict(), "pr": 7}), encoding="utf-8")
    res = konfig(
        "--root", str(root), "apply", "--yes", "--json", "--reviewed", str(record), f"{p}/prod", kc
    )  # fmt: skip
    assert res.code == 1, res.err
    done = json.loads(res.out)
    review = done["stacks"][0]["review"]
    assert review["status"] == "unreviewed" and review["blocked"], review
    assert review["because"] == [f"the reviewed record of #7 was refused: {why}"]
    assert image_of(cluster, f"{p}-prod", p) == "nginx:1.27.3"  # blocked: untouched
    text = render_unreviewed([done], sha="b" * 40) or ""
    assert f"because the reviewed record of #7 was refused: {why}" in text, text

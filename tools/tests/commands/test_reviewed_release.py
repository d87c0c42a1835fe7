"""At merge, a stack whose change is not the reviewed one (issue 27 item 4): the apply
JSON says what differs and why (the commit of main that changed it since the reviewed
head, through the import graph), `konfig report --blocked-out` renders what the merged
pull request and the deploy issue are told, and `konfig apply --release STACK=DIGEST`
(apply.yml's workflow_dispatch) is the one way to apply a blocked stack as it is now:
only while its change digest is still the released one. Real control plane, real git."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from commands.test_reviewed import image_of, main_k, reviewed_comment
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig import contracts

pytestmark = pytest.mark.cluster


def test_a_blocked_stack_is_reported_with_why_and_released_only_at_its_digest(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster, tmp_path: Path
) -> None:
    p = unique("p27rl")
    repo_builder.write(".gitignore", "/.cache/\n")
    for name in ("dev", "prod"):
        repo_builder.stack(p, name, stack_yaml=f"name: {name}\nkubernetes:\n  context: admin\n")
    root = repo_builder.root
    git_init(root)
    git_commit(root, "two stacks")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    stacks = [f"{p}/dev", f"{p}/prod"]
    prod, dev = f"appops/{p}/prod", f"appops/{p}/dev"
    assert konfig("--root", str(root), "apply", "--yes", *stacks, kc).code == 0
    for name in ("dev", "prod"):
        repo_builder.write(f"appops/{p}/{name}/main.k", main_k(p, f"{p}-{name}", "nginx:1.27.4"))
    git_commit(root, "pr: new image")
    comment = reviewed_comment(konfig, root, cluster, stacks, tmp_path)
    # main moved before the merge (another change of both stacks), then the merge
    for name in ("dev", "prod"):
        repo_builder.write(
            f"appops/{p}/{name}/main.k", main_k(p, f"{p}-{name}", "nginx:1.27.4", replicas=2)
        )
    moved = git_commit(root, "main: two replicas")

    res = konfig(
        "--root", str(root), "apply", "--yes", "--json", "--reviewed", str(comment), *stacks, kc
    )  # fmt: skip
    assert res.code == 1, res.err
    doc: dict[str, Any] = json.loads(res.out)
    contracts.validate("apply", doc)
    review = {s["path"]: s["review"] for s in doc["stacks"]}
    assert review[prod]["status"] == "changed" and review[prod]["blocked"] is True
    assert review[prod]["pr"] == 7 and review[prod]["reviewedDigest"] != review[prod]["digest"]
    assert f"now also: apps/v1:Deployment:{p}-prod:{p} spec.replicas" in review[prod]["differences"]
    assert review[prod]["because"] and all(
        b.startswith(f"main@{moved[:12]} ") for b in review[prod]["because"]
    ), review[prod]["because"]
    assert review[dev]["status"] == "changed" and review[dev]["blocked"] is False
    assert image_of(cluster, f"{p}-prod", p) == "nginx:1.27.3"

    applied, blocked = tmp_path / "apply.json", tmp_path / "blocked.md"
    applied.write_text(res.out, encoding="utf-8")
    made = konfig(
        "report", "--apply", str(applied), "--sha", moved, "--blocked-out", str(blocked),
        "--out", str(tmp_path / "summary.md"),
    )  # fmt: skip
    assert made.code == 0, made.err
    text = blocked.read_text(encoding="utf-8")
    assert "1 stack not applied, not the reviewed change" in text
    assert f"### `{prod}`: **not applied**" in text
    assert f"### `{dev}`: applied anyway" in text
    assert f"reviewed in #7: digest `{review[prod]['reviewedDigest'][:12]}`" in text
    assert "spec.replicas" in text and f"because main@{moved[:12]} " in text
    digest = review[prod]["digest"]
    assert f"`stack: {prod}` and `digest: {digest}`" in text

    # released at another digest (the change moved again since the report): still blocked
    wrong = "0" * 64
    res = konfig(
        "--root", str(root), "apply", "--yes", "--json", "--release", f"{prod}={wrong}",
        f"{p}/prod", kc,
    )  # fmt: skip
    assert res.code == 1, res.err
    assert json.loads(res.out)["stacks"][0]["review"]["status"] == "unreviewed"
    assert image_of(cluster, f"{p}-prod", p) == "nginx:1.27.3"
    # released at the digest the report names: applied, and recorded as released
    res = konfig(
        "--root", str(root), "apply", "--yes", "--json", "--release", f"{prod}={digest}",
        f"{p}/prod", kc,
    )  # fmt: skip
    assert res.code == 0, res.err
    assert json.loads(res.out)["stacks"][0]["review"]["status"] == "released"
    assert image_of(cluster, f"{p}-prod", p) == "nginx:1.27.4"
    status = konfig("--root", str(root), "status", "--json", f"{p}/prod", kc)
    assert status.code == 0, status.err
    contracts.validate("status", json.loads(status.out))
    (item,) = json.loads(status.out)["stacks"]
    assert item["review"]["status"] == "released" and item["review"]["digest"] == digest
    text = konfig("--root", str(root), "status", f"{p}/prod", kc).out
    assert "released by hand at its digest" in text
    # a release that is no digest is a usage error, before anything runs
    bad = konfig("--root", str(root), "apply", "--yes", "--release", f"{prod}=abc", kc)
    assert bad.code == 2 and "not a change digest" in bad.err

    # every stack the reviewed change: nothing to tell
    none = tmp_path / "none.md"
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"ok": True, "stacks": []}), encoding="utf-8")
    made = konfig(
        "report", "--apply", str(ok), "--sha", moved, "--blocked-out", str(none),
        "--out", str(tmp_path / "s.md"),
    )  # fmt: skip
    assert made.code == 0 and not none.exists()

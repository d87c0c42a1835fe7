"""``konfig publish --reviewed FILE``: the merge publishes only the rendered folders the
pull request's reviewers saw (docs/pull.md), on real git repositories.

The record is the one the apply workflow gets from ``konfig reviewed`` (the contract
``review.schema.json``, its ``published`` digests as ``konfig preview`` puts them in the
preview JSON and ``konfig report`` in the comment; the whole chain from a live preview:
commands/test_pull_preview.py). Two pull stacks: ``prod`` (production: blocked by
default) and ``dev`` (``onReviewedChanged: apply``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from fixtures.repos import AUTHOR, KonfigRunner, RepoBuilder

from konfig import contracts


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **AUTHOR}, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip


def _record(path: Path, published: dict[str, str]) -> Path:
    record = {"schemaVersion": 1, "kind": "KonfigReviewed", "base": None, "head": None,
              "pr": 7, "stacks": {}, "published": published}  # fmt: skip
    contracts.validate("review", record)
    path.write_text(json.dumps(record))
    return path


def _set_image(root: Path, stack: str, image: str) -> None:
    main = root / f"appops/shop/{stack}/main.k"
    text = main.read_text()
    old = text.split('image = "', 1)[1].split('"', 1)[0]
    main.write_text(text.replace(f'image = "{old}"', f'image = "{image}"'))


def test_publish_refuses_a_folder_that_is_not_the_one_reviewed(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    root = repo_builder.root
    pull = "delivery:\n  mode: pull\n  target:\n    cluster: edge\n"
    repo_builder.stack("shop", "prod", stack_yaml=f"name: prod\n{pull}")
    repo_builder.stack(
        "shop", "dev", stack_yaml=f"name: dev\napply:\n  onReviewedChanged: apply\n{pull}"
    )
    _git(root, "init", "-q", "--initial-branch=main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "two pull stacks")
    assert konfig("publish", cwd=root).code == 0
    first = _git(root, "rev-parse", "rendered").strip()

    # the pull request changes prod's image; the review shows its folder and digest
    _set_image(root, "prod", "nginx:1.27.4")
    _git(root, "commit", "-q", "-am", "prod: 1.27.4")
    diff = json.loads(konfig("publish", "--diff", "--json", cwd=root).out)
    digests = {s["path"]: s["digest"] for s in diff["stacks"]}
    reviewed = _record(
        tmp_path / "reviewed.json", {"appops/shop/prod": digests["appops/shop/prod"]}
    )

    # before the merge, another change lands in prod and dev (not reviewed by this PR)
    _set_image(root, "prod", "nginx:1.27.5")
    _set_image(root, "dev", "nginx:1.27.5")
    _git(root, "commit", "-q", "-am", "another change")
    res = konfig("publish", "--reviewed", str(reviewed), "--json", cwd=root)
    assert res.code == 1, res.err
    assert (
        "appops/shop/prod: its rendered folder is sha256:" in res.err
        and f"not the {digests['appops/shop/prod']} reviewed" in res.err
        and "not published, its folder kept as it is (stack.yaml apply.onReviewedChanged: block)"
        in res.err
    ), res.err
    assert "appops/shop/dev: its rendered folder changes" in res.err
    assert "published anyway: stack.yaml apply.onReviewedChanged is apply" in res.err
    stacks = {s["path"]: s for s in json.loads(res.out)["stacks"]}
    assert stacks["appops/shop/prod"]["ok"] is False and stacks["appops/shop/prod"]["blocked"]
    assert stacks["appops/shop/dev"]["ok"] is True and stacks["appops/shop/dev"]["blocked"] is None
    deployment = "edge/shop/{0}/deployment.apps_shop-{0}_shop.yaml"
    # prod keeps the folder published before; dev (policy apply) got the new one
    assert "nginx:1.27.3" in _git(root, "show", "rendered:" + deployment.format("prod"))
    assert "nginx:1.27.5" in _git(root, "show", "rendered:" + deployment.format("dev"))

    # the reviewed bytes are published: back to the reviewed commit of prod
    _set_image(root, "prod", "nginx:1.27.4")
    _git(root, "commit", "-q", "-am", "back to the reviewed change")
    res = konfig("publish", "--reviewed", str(reviewed), cwd=root)
    assert res.code == 0, res.err
    assert f"appops/shop/prod: the reviewed rendered folder ({digests['appops/shop/prod']})" in (
        res.err
    )
    assert "nginx:1.27.4" in _git(root, "show", "rendered:" + deployment.format("prod"))
    assert _git(root, "rev-list", "--count", f"{first}..rendered").strip() == "2"

    # a direct push (an empty record): prod's change is unreviewed, blocked
    _set_image(root, "prod", "nginx:1.28.0")
    _git(root, "commit", "-q", "-am", "pushed directly")
    res = konfig("publish", "--reviewed", str(_record(tmp_path / "empty.json", {})), cwd=root)
    assert res.code == 1
    assert "appops/shop/prod: its rendered folder changes" in res.err
    assert "nginx:1.27.4" in _git(root, "show", "rendered:" + deployment.format("prod"))

    # a forged record is a usage error, before anything is rendered
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schemaVersion": 1, "kind": "KonfigReviewed", "stacks": {},
                               "published": {"appops/shop/prod": "md5:abc"}}))  # fmt: skip
    res = konfig("publish", "--reviewed", str(bad), cwd=root)
    assert res.code == 2 and "published" in res.err, res.err
    assert konfig("publish", "--diff", "--reviewed", str(reviewed), cwd=root).code == 2

"""``konfig dangers`` against Gitea's real API (the local forge): the danger labels and
the status ``konfig/dangers`` of a pull request follow the danger record Konfig's
comment hides and the ``/konfig confirm`` comments of the people who may confirm; a
push that changes the digest drops the confirmation; at merge the confirmations of the
merged pull request become ``konfig apply --confirm`` values.

The repository is a real Konfig repository whose konfig.yaml names the owners (the
shop project's owner ``ann``); the comments are real comments by real users of the
forge. Konfig's own comment is written with the token the command uses (as the
workflow's comment step does), its record made by :func:`confirmations.hidden`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fixtures.forge import Forge
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.forge.client import GitHub
from konfig.pipeline.confirmations import DangerRecord, Needed, hidden

pytestmark = pytest.mark.forge

STACK = "appops/shop/prod"


def _git(root: Path, *args: str) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    ).stdout


def _status(fg: Forge, repo: str, sha: str) -> dict[str, object]:
    statuses = fg.get(f"/repos/{repo}/commits/{sha}/statuses")
    mine = [s for s in statuses if s.get("context") == "konfig/dangers"]
    assert mine, statuses
    return max(mine, key=lambda s: int(s["id"]))


def _labels(fg: Forge, repo: str, number: int) -> list[str]:
    return sorted(x["name"] for x in fg.get(f"/repos/{repo}/issues/{number}/labels"))


def test_labels_status_and_confirmations_bound_to_the_digest_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    repo_builder: RepoBuilder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ann, dev, mallory = unique("ann"), unique("dev"), unique("mallory")
    tokens = {name: forge.create_user(name) for name in (ann, dev, mallory)}
    root = repo_builder.root
    config = root / "konfig.yaml"
    config.write_text(
        config.read_text()
        + "\nowners:\n  platform: [platform]\n  teams:\n"
        + f"    platform: [{forge.admin}]\n    shop: [{ann}, {dev}]\n"
    )
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.project("shop", yaml_text="name: shop\nowners: [shop]\n")
    repo_builder.stack("shop", "prod")
    git_init(root)
    git_commit(root, "main")
    repo = forge.import_repo(unique("dangers"), root, lambda *a, cwd: _git(cwd, *a))
    for user in (ann, dev, mallory):
        forge.request("PUT", f"/repos/{repo}/collaborators/{user}", {"permission": "write"})
    _git(root, "checkout", "-q", "-b", "drop")
    repo_builder.write(f"{STACK}/main.k", "# the namespace goes\n")
    head = git_commit(root, "a dangerous change")
    _git(root, "push", "-q", "origin", "drop")
    _git(root, "checkout", "-q", "main")  # who may confirm: the owners of main
    # the pull request's author (dev) owns the project too, but may not confirm it
    number = int(
        forge.request(
            "POST",
            f"/repos/{repo}/pulls",
            {"head": "drop", "base": "main", "title": "drop the namespace"},
            token=tokens[dev],
        )["number"]
    )
    forge.request("POST", f"/repos/{repo}/labels", {"name": "needs-docs", "color": "00ff00"})
    forge.request("POST", f"/repos/{repo}/issues/{number}/labels", {"labels": ["needs-docs"]})
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)

    def konfig_comment(record: DangerRecord) -> None:
        body = "<!-- konfig:preview -->\n## Konfig preview\n\n" + hidden(record) + "\n"
        mine = [
            c
            for c in forge.get(f"/repos/{repo}/issues/{number}/comments")
            if "konfig:preview" in c["body"]
        ]
        if mine:
            forge.request("PATCH", f"/repos/{repo}/issues/comments/{mine[0]['id']}", {"body": body})
        else:
            forge.request("POST", f"/repos/{repo}/issues/{number}/comments", {"body": body})

    def say(user: str, body: str) -> None:
        forge.request(
            "POST", f"/repos/{repo}/issues/{number}/comments", {"body": body}, token=tokens[user]
        )

    def dangers(sha: str) -> tuple[int, dict[str, object]]:
        result = konfig(
            "dangers",
            "--repo",
            repo,
            "--pr",
            str(number),
            "--head-sha",
            sha,
            "--post",
            "--api-url",
            forge.api_url,
            "--json",
            cwd=root,
        )
        assert result.code in (0, 1), result.err
        return result.code, json.loads(result.out)

    digest = "3f2a9c0d1e2b4a5f"
    konfig_comment(
        DangerRecord(
            head,
            True,
            ("konfig/danger:destroy", "konfig/danger:cascade"),
            (Needed(STACK, digest, "cascade needs a confirmation"),),
        )
    )
    # nobody confirmed: red, the command to write in the description, the labels set
    # (the repository's labels created), a label of someone else's kept
    code, verdict = dangers(head)
    assert code == 1 and verdict["state"] == "failure", verdict
    status = _status(forge, repo, head)
    assert status["status"] == "failure"
    assert f"/konfig confirm {STACK} {digest}" in str(status["description"])
    assert _labels(forge, repo, number) == [
        "konfig/danger:cascade",
        "konfig/danger:destroy",
        "needs-docs",
    ]

    # the author (an owner), a writer who owns nothing, a wrong digest, hostile lines:
    # none counts
    say(dev, f"/konfig confirm {STACK} {digest}")
    say(mallory, f"/konfig confirm {STACK} {digest}")
    say(ann, f"/konfig confirm {STACK} 0000000000000000")
    say(ann, f"/konfig confirm ../../{STACK} {digest}\n/konfig confirm {STACK} $(id) {digest}")
    code, verdict = dangers(head)
    assert code == 1 and verdict["stacks"] == [  # type: ignore[comparison-overlap]
        {
            "stack": STACK,
            "digest": digest,
            "what": "cascade needs a confirmation",
            "confirmedBy": [],
        }
    ]
    assert _status(forge, repo, head)["status"] == "failure"

    # the owner confirms this digest (the line among other words, `appops/` left out): green
    say(ann, f"checked the namespace: empty.\n/konfig confirm shop/prod {digest}\nthanks")
    code, verdict = dangers(head)
    assert code == 0 and verdict["state"] == "success", verdict
    assert verdict["stacks"][0]["confirmedBy"] == [ann]  # type: ignore[index]
    assert _status(forge, repo, head)["status"] == "success"

    # a push that changes the stack's change: another digest, the confirmation dropped;
    # the cascade is gone (the label removed), a data danger needs one now
    _git(root, "checkout", "-q", "drop")
    repo_builder.write(f"{STACK}/main.k", "# the volume goes\n")
    newer = git_commit(root, "another change")
    _git(root, "push", "-q", "origin", "drop")
    _git(root, "checkout", "-q", "main")
    forge.wait(
        "the pull request's head to move",
        lambda: forge.get(f"/repos/{repo}/pulls/{number}")["head"]["sha"] == newer,
        timeout=60,
    )
    # the old head's run, late: writes nothing (the newer run does)
    code, verdict = dangers(head)
    assert code == 0 and verdict["state"] is None and "newer run" in str(verdict["skipped"])
    assert _status(forge, repo, head)["status"] == "success"
    newer_digest = "a1b2c3d4e5f60718"
    konfig_comment(
        DangerRecord(
            newer,
            True,
            ("konfig/danger:data", "konfig/danger:destroy"),
            (Needed(STACK, newer_digest, "data needs a confirmation"),),
        )
    )
    code, verdict = dangers(newer)
    assert code == 1 and verdict["state"] == "failure"
    assert _status(forge, repo, newer)["status"] == "failure"
    assert _labels(forge, repo, number) == [
        "konfig/danger:data",
        "konfig/danger:destroy",
        "needs-docs",
    ]
    say(ann, f"/konfig confirm {STACK} {newer_digest}")
    assert dangers(newer)[0] == 0

    # merged: the confirmations of the merged pull request, for konfig apply --confirm
    forge.request("POST", f"/repos/{repo}/pulls/{number}/merge", {"Do": "merge"})
    merged = str(forge.get(f"/repos/{repo}/branches/main")["commit"]["id"])
    _git(root, "fetch", "-q", "origin", "main")
    out = root / ".cache" / "confirm.txt"
    result = konfig(
        "dangers",
        "--repo",
        repo,
        "--merged",
        merged,
        "--confirm-out",
        str(out),
        "--api-url",
        forge.api_url,
        cwd=root,
    )
    assert result.code == 0, result.err
    # every digest confirmed (apply takes the one that is the change's), the wrong one too:
    # only the comments of people who may confirm
    assert out.read_text().splitlines() == [
        f"{STACK}=0000000000000000",
        f"{STACK}={digest}",
        f"{STACK}={newer_digest}",
    ]

    # the forge's permissions (the way without konfig.yaml `owners`)
    with GitHub(forge.token, api_url=forge.api_url) as client:
        assert client.permission(repo, mallory) == "write"
        assert client.permission(repo, forge.admin) in ("owner", "admin")

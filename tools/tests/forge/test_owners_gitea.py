"""``konfig owners`` against Gitea's real API (the local forge): a base-model pull
request affecting two projects' production stacks gets the status ``konfig/owners``
green only once an owner of each project approved its head commit.

The repository is a real Konfig repository (the template's base models, two projects
whose prod stacks import ``base/pkg/lib/web``, a third that does not); its owners are
two users of the forge, each the owner of one project, and the platform team is the
admin. The reviews are real Gitea reviews by those users, read through
:mod:`konfig.forge.client`; the status and the sticky comment are read back from Gitea.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fixtures.forge import Forge
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

pytestmark = pytest.mark.forge

MAIN = """\
import base.pkg.models.frontend
import base.pkg.lib.web

app: frontend.Server {{
    name = "{p}"
    namespace = "{p}-{s}"
    image = "nginx:1.27.3"
    labels = web.labels
}}
"""


def _git(root: Path, *args: str) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    ).stdout


def _repository(builder: RepoBuilder, admin: str, shop: str, data: str) -> None:
    config = builder.root / "konfig.yaml"
    config.write_text(
        config.read_text()
        + "\nowners:\n  platform: [platform]\n  teams:\n"
        + f"    platform: [{admin}]\n    shop: [{shop}]\n    data: [{data}]\n"
    )
    builder.write(".gitignore", "/.cache/\n")
    builder.write("base/pkg/lib/web/web.k", 'labels: {str:str} = {"tier" = "web"}\n')
    builder.project("shop", yaml_text="name: shop\nowners: [shop]\n")
    builder.project("data", yaml_text="name: data\nowners: [data]\n")
    builder.project("misc", yaml_text="name: misc\nowners: [data]\n")
    for project in ("shop", "data"):
        for stack in ("dev", "prod"):
            builder.stack(project, stack, main=MAIN.format(p=project, s=stack))
    builder.stack("misc", "prod")  # does not import base/pkg/lib/web


def _review(fg: Forge, repo: str, number: int, token: str, sha: str) -> None:
    fg.request(
        "POST",
        f"/repos/{repo}/pulls/{number}/reviews",
        {"event": "APPROVED", "body": "lgtm", "commit_id": sha},
        token=token,
    )


def _status(fg: Forge, repo: str, sha: str) -> dict[str, object]:
    statuses = fg.get(f"/repos/{repo}/commits/{sha}/statuses")
    mine = [s for s in statuses if s.get("context") == "konfig/owners"]
    assert mine, statuses
    return max(mine, key=lambda s: int(s["id"]))


def test_a_base_model_pr_needs_an_owner_of_each_affected_production_stack_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    repo_builder: RepoBuilder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shop, data, outsider = unique("ann"), unique("dan"), unique("mallory")
    tokens = {name: forge.create_user(name) for name in (shop, data, outsider)}
    root = repo_builder.root
    _repository(repo_builder, forge.admin, shop, data)
    git_init(root)
    assert konfig("gen", "codeowners", cwd=root).code == 0
    assert konfig("check", "--no-policies", cwd=root).code == 0
    git_commit(root, "main")
    name = unique("owners")
    repo = forge.import_repo(name, root, lambda *a, cwd: _git(cwd, *a))
    for user in (shop, data, outsider):
        forge.request("PUT", f"/repos/{repo}/collaborators/{user}", {"permission": "write"})
    _git(root, "fetch", "-q", "origin")

    _git(root, "checkout", "-q", "-b", "platform-change")
    repo_builder.write("base/pkg/lib/web/web.k", 'labels: {str:str} = {"tier" = "frontend"}\n')
    head = git_commit(root, "a platform change reaching two projects")
    _git(root, "push", "-q", "origin", "platform-change")
    pr = forge.request(
        "POST",
        f"/repos/{repo}/pulls",
        {"head": "platform-change", "base": "main", "title": "web labels"},
    )
    number = int(pr["number"])
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)

    def owners() -> tuple[int, dict[str, object]]:
        result = konfig(
            "owners",
            "--base",
            "origin/main",
            "--repo",
            repo,
            "--pr",
            str(number),
            "--post",
            "--api-url",
            forge.api_url,
            "--json",
            cwd=root,
        )
        assert result.code in (0, 1), result.err
        return result.code, json.loads(result.out)

    # nobody approved: both prod stacks wait; misc/prod and the dev stacks need nobody
    code, verdict = owners()
    assert code == 1 and verdict["ok"] is False
    stacks = {s["path"]: s for s in verdict["stacks"]}  # type: ignore[attr-defined]
    assert sorted(stacks) == ["appops/data/prod", "appops/shop/prod"]
    assert stacks["appops/shop/prod"]["owners"] == [shop]
    assert _status(forge, repo, head)["status"] == "failure"
    comments = forge.get(f"/repos/{repo}/issues/{number}/comments")
    body = next(c["body"] for c in comments if "konfig:owners" in c["body"])
    assert f"@{shop}" in body and f"@{data}" in body and "`appops/data/prod`" in body

    # someone who owns neither project approves: nothing changes
    _review(forge, repo, number, tokens[outsider], head)
    assert owners()[0] == 1

    # one project's owner approves: still not green
    _review(forge, repo, number, tokens[shop], head)
    code, verdict = owners()
    assert code == 1
    stacks = {s["path"]: s for s in verdict["stacks"]}  # type: ignore[attr-defined]
    assert stacks["appops/shop/prod"]["approved_by"] == [shop]
    assert stacks["appops/data/prod"]["approved_by"] == []
    status = _status(forge, repo, head)
    assert status["status"] == "failure" and "data" in str(status["description"])

    # both: green, and one sticky comment
    _review(forge, repo, number, tokens[data], head)
    code, verdict = owners()
    assert code == 0 and verdict["ok"] is True
    assert _status(forge, repo, head)["status"] == "success"
    comments = forge.get(f"/repos/{repo}/issues/{number}/comments")
    assert len([c for c in comments if "konfig:owners" in c["body"]]) == 1

    # a new push: the approvals were of the old head and no longer count
    repo_builder.write("base/pkg/lib/web/web.k", 'labels: {str:str} = {"tier" = "front"}\n')
    newer = git_commit(root, "another change")
    _git(root, "push", "-q", "origin", "platform-change")
    forge.wait(
        "the pull request's head to move",
        lambda: forge.get(f"/repos/{repo}/pulls/{number}")["head"]["sha"] == newer,
        timeout=60,
    )
    code, verdict = owners()
    assert code == 1 and verdict["change"] == newer
    assert _status(forge, repo, newer)["status"] == "failure"


def test_the_approvals_of_a_merged_pull_request_for_the_audit_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    repo_builder: RepoBuilder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`konfig owners --merged SHA` (what apply.yml passes to `konfig apply --approvals`):
    the forge names the pull request merged as SHA; the change is SHA against its first
    parent; the approvals are the pull request's reviews of its head. A direct push has
    none."""
    shop, data = unique("ann"), unique("dan")
    tokens = {name: forge.create_user(name) for name in (shop, data)}
    root = repo_builder.root
    _repository(repo_builder, forge.admin, shop, data)
    git_init(root)
    assert konfig("gen", "codeowners", cwd=root).code == 0
    git_commit(root, "main")
    repo = forge.import_repo(unique("merged"), root, lambda *a, cwd: _git(cwd, *a))
    for user in (shop, data):
        forge.request("PUT", f"/repos/{repo}/collaborators/{user}", {"permission": "write"})
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)

    # a change to shop's prod stack only, approved by shop's owner (and by data's, who
    # owns nothing it affects), merged through the forge
    _git(root, "checkout", "-q", "-b", "shop-change")
    repo_builder.stack("shop", "prod", main=MAIN.format(p="shop", s="prod") + "# v2\n")
    head = git_commit(root, "shop prod v2")
    _git(root, "push", "-q", "origin", "shop-change")
    pr = forge.request(
        "POST", f"/repos/{repo}/pulls", {"head": "shop-change", "base": "main", "title": "v2"}
    )
    number = int(pr["number"])
    _review(forge, repo, number, tokens[shop], head)
    _review(forge, repo, number, tokens[data], head)
    forge.request("POST", f"/repos/{repo}/pulls/{number}/merge", {"Do": "merge"})
    merge = str(forge.get(f"/repos/{repo}/pulls/{number}")["merge_commit_sha"])
    _git(root, "checkout", "-q", "main")
    _git(root, "pull", "-q", "--ff-only", "origin", "main")
    assert _git(root, "rev-parse", "HEAD").strip() == merge

    def merged(sha: str) -> tuple[int, dict[str, Any]]:
        result = konfig(
            "owners", "--merged", sha, "--repo", repo, "--api-url", forge.api_url, "--json",
            cwd=root,
        )  # fmt: skip
        assert result.code in (0, 1), result.err
        return result.code, json.loads(result.out)

    code, verdict = merged(merge)
    assert code == 0, verdict
    assert (verdict["pr"], verdict["change"], verdict["ok"]) == (number, head, True)
    assert [(s["path"], s["approved_by"]) for s in verdict["stacks"]] == [
        ("appops/shop/prod", [shop])
    ]

    # a direct push changing data's prod stack: no pull request, nobody approved it
    repo_builder.stack("data", "prod", main=MAIN.format(p="data", s="prod") + "# v2\n")
    pushed = git_commit(root, "data prod v2, pushed")
    _git(root, "push", "-q", "origin", "main")
    code, verdict = merged(pushed)
    assert code == 1
    assert (verdict["pr"], verdict["change"], verdict["ok"]) == (None, pushed, False)
    assert [(s["path"], s["approved_by"]) for s in verdict["stacks"]] == [("appops/data/prod", [])]

    # --merged takes no --pr (the forge names the pull request)
    bad = konfig("owners", "--merged", merge, "--repo", repo, "--pr", "1", cwd=root)
    assert bad.code == 2 and "--merged" in bad.err

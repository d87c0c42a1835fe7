"""Approvals bind to change digests, not commits, against Gitea's real API (issue 27
item 2): ``konfig comment`` carries the earlier heads' digests in the hidden record of
the comment it rewrites and says what changed since; ``konfig approved`` sets
``konfig/reviewed`` and ``konfig owners`` counts an owner's approval of an earlier
commit for a stack whose digest has not changed since; a commit of main that changes a
stack of the pull request makes its preview stale.

The repository is a real Konfig repository on the local forge with two projects'
production stacks importing one base model; the reviews are real Gitea reviews by the
projects' owners. The previews' records are made by :func:`change_digest` from plans
(the preview against a cluster that makes them is tested in commands/test_reviewed.py):
the digests decide, whatever made them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.forge import Forge
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from forge.test_owners_gitea import _git, _repository, _review
from kubeutil import unique

from konfig.engine.diff import FieldChange
from konfig.engine.digest import change_digest
from konfig.engine.plan import Change, StackPlan
from konfig.pipeline.reviewed import Reviewed, hidden, read_reviewed

pytestmark = pytest.mark.forge

SHOP, DATA = "appops/shop/prod", "appops/data/prod"
IMAGE = "spec.template.spec.containers[name=web].image"


def _digest(stack: str, image: str) -> Any:
    desired = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    change = Change(
        id=f"apps/v1:Deployment:{stack.split('/')[1]}:web", api_version="apps/v1",
        kind="Deployment", namespace=stack.split("/")[1], name="web", action="update",
        reason="", validated=True, desired=desired, live=None,
        fields=(FieldChange(IMAGE, "nginx:1", image),), diff="",
    )  # fmt: skip
    return change_digest(StackPlan(stack, "admin", False, "a" * 64, None, None, (change,)))


def _preview_comment(
    konfig: KonfigRunner, fg: Forge, repo: str, number: int, head: str, images: dict[str, str],
    tmp: Path,
) -> str:  # fmt: skip
    """What the report job of preview-cluster.yml posts for ``head``: the body with the
    hidden record, through `konfig comment` (which carries the earlier heads)."""
    record = Reviewed({s: _digest(s, i) for s, i in images.items()}, "0" * 40, head, number)
    body = tmp / f"{head}.md"
    body.write_text(f"## Konfig preview for `{head[:12]}`\n\nthe diff\n\n{hidden(record)}\n")
    res = konfig(
        "comment", "--repo", repo, "--pr", str(number), "--body-file", str(body),
        "--head-sha", head, "--api-url", fg.api_url,
    )  # fmt: skip
    assert res.code == 0, res.err
    comments = fg.get(f"/repos/{repo}/issues/{number}/comments")
    (mine,) = [c for c in comments if "konfig:preview" in c["body"]]
    return str(mine["body"])


def _status(fg: Forge, repo: str, sha: str, context: str) -> dict[str, Any]:
    statuses = fg.get(f"/repos/{repo}/commits/{sha}/statuses")
    mine = [s for s in statuses if s.get("context") == context]
    assert mine, statuses
    return max(mine, key=lambda s: int(s["id"]))


def test_approvals_follow_the_change_digest_and_main_makes_a_preview_stale_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    repo_builder: RepoBuilder,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    shop, data = unique("ann"), unique("dan")
    tokens = {name: forge.create_user(name) for name in (shop, data)}
    root = repo_builder.root
    _repository(repo_builder, forge.admin, shop, data)
    git_init(root)
    assert konfig("gen", "codeowners", cwd=root).code == 0
    git_commit(root, "main")
    repo = forge.import_repo(unique("reviewed"), root, lambda *a, cwd: _git(cwd, *a))
    for user in (shop, data):
        forge.request("PUT", f"/repos/{repo}/collaborators/{user}", {"permission": "write"})
    _git(root, "fetch", "-q", "origin")
    _git(root, "checkout", "-q", "-b", "change")
    repo_builder.write("base/pkg/lib/web/web.k", 'labels: {str:str} = {"tier" = "frontend"}\n')
    first = git_commit(root, "a platform change reaching two projects")
    _git(root, "push", "-q", "origin", "change")
    number = int(
        forge.request(
            "POST", f"/repos/{repo}/pulls", {"head": "change", "base": "main", "title": "labels"}
        )["number"]
    )
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)

    def push(text: str) -> str:
        repo_builder.write("base/pkg/lib/web/web.k", text)
        sha = git_commit(root, "another push")
        _git(root, "push", "-q", "origin", "change")
        forge.wait(
            "the pull request's head to move",
            lambda: forge.get(f"/repos/{repo}/pulls/{number}")["head"]["sha"] == sha,
            timeout=60,
        )
        return sha

    def reviewed(head: str) -> tuple[int, dict[str, Any]]:
        res = konfig(
            "approved", "--repo", repo, "--pr", str(number), "--main", "origin/main",
            "--post", "--json", "--api-url", forge.api_url, cwd=root,
        )  # fmt: skip
        assert res.code in (0, 1), res.err
        out: dict[str, Any] = json.loads(res.out)
        assert out["head"] == head
        assert _status(forge, repo, head, "konfig/reviewed")["status"] == out["state"]
        return res.code, out

    def owners() -> dict[str, list[str]]:
        res = konfig(
            "owners", "--base", "origin/main", "--repo", repo, "--pr", str(number), "--post",
            "--api-url", forge.api_url, "--json", cwd=root,
        )  # fmt: skip
        assert res.code in (0, 1), res.err
        return {s["path"]: s["approved_by"] for s in json.loads(res.out)["stacks"]}

    # no preview of the head yet: pending
    code, out = reviewed(first)
    assert code == 1 and out["state"] == "pending"
    _preview_comment(konfig, forge, repo, number, first, {SHOP: "v2", DATA: "v2"}, tmp_path)
    code, out = reviewed(first)
    assert out["state"] == "failure" and out["description"].startswith("not approved")
    _review(forge, repo, number, tokens[shop], first)
    _review(forge, repo, number, tokens[data], first)
    code, out = reviewed(first)
    assert code == 0 and out["state"] == "success", out

    # a push that leaves shop's digest and changes data's: shop keeps its review
    second = push('labels: {str:str} = {"tier" = "front"}\n')
    body = _preview_comment(konfig, forge, repo, number, second, {SHOP: "v2", DATA: "v3"}, tmp_path)
    assert "Changed since the last review" in body and f"`{DATA}`" in body
    assert f"`{SHOP}`" not in body.split("Changed since the last review")[1].split("\n")[0]
    record = read_reviewed(body, where="the comment")
    assert [p.head for p in record.history] == [first] and record.head == second
    code, out = reviewed(second)
    stacks = {s["path"]: s for s in out["stacks"]}
    # both approved the first head: both approvals still hold for shop's, none for data's
    assert code == 1 and stacks[SHOP]["approvedBy"] == sorted([shop, data], key=str.lower)
    assert stacks[DATA]["approvedBy"] == []
    assert out["description"] == f"not approved as previewed now: {DATA}"
    assert owners() == {SHOP: [shop], DATA: []}
    assert _status(forge, repo, second, "konfig/owners")["status"] == "failure"

    # data's owner approves the new head: both green
    _review(forge, repo, number, tokens[data], second)
    code, out = reviewed(second)
    assert code == 0 and out["state"] == "success"
    assert owners() == {SHOP: [shop], DATA: [data]}
    assert _status(forge, repo, second, "konfig/owners")["status"] == "success"

    # main moves and changes the model both stacks import: the preview is stale
    _git(root, "checkout", "-q", "main")
    repo_builder.write("base/pkg/lib/web/web.k", 'labels: {str:str} = {"tier" = "edge"}\n')
    tip = git_commit(root, "main changes the model")
    _git(root, "push", "-q", "origin", "main")
    _git(root, "fetch", "-q", "origin")
    _git(root, "checkout", "-q", "change")
    code, out = reviewed(second)
    assert code == 1 and out["description"].startswith(f"stale: main@{tip[:10]} changed ")
    assert {s["path"]: s["staleBy"] for s in out["stacks"]} == {SHOP: tip, DATA: tip}


def test_a_push_to_main_marks_the_pull_requests_it_made_stale_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    repo_builder: RepoBuilder,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """PR B previewed shop's and data's prod stacks, PR C only misc's: a push to main
    that changes the model shop and data import marks B stale (status and one line in
    its comment, once), not C."""
    root = repo_builder.root
    _repository(repo_builder, forge.admin, forge.admin, forge.admin)
    git_init(root)
    assert konfig("gen", "codeowners", cwd=root).code == 0
    git_commit(root, "main")
    repo = forge.import_repo(unique("stale"), root, lambda *a, cwd: _git(cwd, *a))
    _git(root, "fetch", "-q", "origin")
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    heads: dict[str, tuple[int, str]] = {}
    for branch, path, images in (
        ("b", "base/pkg/lib/web/web.k", {SHOP: "v2", DATA: "v2"}),
        ("c", "appops/misc/prod/extra.k", {"appops/misc/prod": "v2"}),
    ):
        _git(root, "checkout", "-q", "-b", branch, "main")
        repo_builder.write(path, 'labels: {str:str} = {"tier" = "' + branch + '"}\n')
        head = git_commit(root, f"pull request {branch}")
        _git(root, "push", "-q", "origin", branch)
        number = int(
            forge.request(
                "POST", f"/repos/{repo}/pulls", {"head": branch, "base": "main", "title": branch}
            )["number"]
        )
        _preview_comment(konfig, forge, repo, number, head, images, tmp_path)
        heads[branch] = (number, head)

    _git(root, "checkout", "-q", "main")
    before = _git(root, "rev-parse", "HEAD").strip()
    repo_builder.write("base/pkg/lib/web/web.k", 'labels: {str:str} = {"tier" = "edge"}\n')
    tip = git_commit(root, "pull request A, merged")
    _git(root, "push", "-q", "origin", "main")

    def stale() -> dict[str, Any]:
        res = konfig(
            "stale", "--repo", repo, "--before", before, "--after", tip, "--post", "--json",
            "--api-url", forge.api_url, cwd=root,
        )  # fmt: skip
        assert res.code == 0, res.err
        out: dict[str, Any] = json.loads(res.out)
        return out

    out = stale()
    assert out["commit"] == tip and {SHOP, DATA} <= set(out["stacks"])
    number, head = heads["b"]
    assert out["pulls"] == [{"number": number, "head": head, "stacks": [DATA, SHOP]}]
    status = _status(forge, repo, head, "konfig/reviewed")
    assert status["status"] == "failure"
    assert status["description"] == f"stale: main@{tip[:10]} changed {DATA}, {SHOP}"
    comments = forge.get(f"/repos/{repo}/issues/{number}/comments")
    (body,) = [c["body"] for c in comments if "konfig:preview" in c["body"]]
    assert f"**Stale**: main@`{tip[:12]}` changed `{DATA}`, `{SHOP}`" in body
    assert body.splitlines()[1].startswith("## Konfig preview")  # the title stays first
    read_reviewed(body, where="the comment")  # the record is intact
    c_number, c_head = heads["c"]
    assert not [
        s
        for s in forge.get(f"/repos/{repo}/commits/{c_head}/statuses")
        if s.get("context") == "konfig/reviewed"
    ]
    # again (a re-run of the workflow): the same status, no second line
    stale()
    comments = forge.get(f"/repos/{repo}/issues/{number}/comments")
    (again,) = [c["body"] for c in comments if "konfig:preview" in c["body"]]
    assert again.count("**Stale**") == 1
    # the status konfig approved computes agrees (from git: main moved in its stacks)
    _git(root, "checkout", "-q", "b")
    res = konfig(
        "approved", "--repo", repo, "--pr", str(number), "--main", "origin/main", "--json",
        "--api-url", forge.api_url, cwd=root,
    )  # fmt: skip
    assert res.code == 1 and json.loads(res.out)["description"].startswith(
        f"stale: main@{tip[:10]}"
    )
    assert c_number != number


def _merge_queue_step(name: str) -> str:
    """The shell script of merge-queue.yml's step ``name`` (GitHub only: Gitea has no
    merge queue, so its scripts run here as its runner would, against Gitea's API)."""
    workflow = Path(__file__).resolve().parents[3] / ".github/workflows/merge-queue.yml"
    (job,) = yaml.safe_load(workflow.read_text(encoding="utf-8"))["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("name") == name]
    return str(step["run"])


def test_the_merge_queue_steps_set_the_pull_requests_status_on_the_queue_commit_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    repo_builder: RepoBuilder,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """merge-queue.yml's two scripts, as a `merge_group` run runs them on a queue branch
    (gh-readonly-queue/main/pr-N-<sha>) whose merge commit is pushed to the forge: the
    number from the branch, then ``konfig approved --pr-head`` against the queue's base,
    posting ``konfig/reviewed`` on the queue's commit. Green while main left the pull
    request's stacks alone; red (stale) on a queue built on a main that changed them."""
    ann = unique("ann")
    token = forge.create_user(ann)
    root = repo_builder.root
    _repository(repo_builder, forge.admin, ann, ann)
    git_init(root)
    assert konfig("gen", "codeowners", cwd=root).code == 0
    git_commit(root, "main")
    repo = forge.import_repo(unique("queue"), root, lambda *a, cwd: _git(cwd, *a))
    forge.request("PUT", f"/repos/{repo}/collaborators/{ann}", {"permission": "write"})
    _git(root, "checkout", "-q", "-b", "change")
    repo_builder.write("base/pkg/lib/web/web.k", 'labels: {str:str} = {"tier" = "queue"}\n')
    head = git_commit(root, "a platform change reaching two projects")
    _git(root, "push", "-q", "origin", "change")
    number = int(
        forge.request(
            "POST", f"/repos/{repo}/pulls", {"head": "change", "base": "main", "title": "queue"}
        )["number"]
    )
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    _preview_comment(konfig, forge, repo, number, head, {SHOP: "v2", DATA: "v2"}, tmp_path)
    _review(forge, repo, number, token, head)
    bin_dir = str(Path(sys.executable).parent)  # konfig, as actions/setup installs it

    def queue(base: str) -> tuple[str, str]:
        """GitHub's queue commit: ``base`` with the pull request merged, on its branch."""
        _git(root, "checkout", "-q", "--detach", base)
        _git(root, "-c", "user.name=queue", "-c", "user.email=queue@example.com",
             "merge", "-q", "--no-ff", "-m", "queue", "change")  # fmt: skip
        sha = _git(root, "rev-parse", "HEAD").strip()
        branch = f"gh-readonly-queue/main/pr-{number}-{base}"
        _git(root, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
        return sha, f"refs/heads/{branch}"

    def run(step: str, env: dict[str, str]) -> tuple[int, str, dict[str, str]]:
        out = tmp_path / "github_output"
        out.write_text("")
        done = subprocess.run(
            ["bash", "-e", "-c", _merge_queue_step(step)],
            cwd=root,
            env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path),
                 "NO_COLOR": "1", "GITHUB_OUTPUT": str(out), **env},
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        lines = out.read_text().splitlines()
        return done.returncode, done.stdout + done.stderr, dict(x.split("=", 1) for x in lines)

    def reviewed_as_queued(base: str) -> dict[str, Any]:
        sha, ref = queue(base)
        code, text, outputs = run(
            "Which pull request (the queue's branch names it)", {"HEAD_REF": ref}
        )
        assert code == 0 and outputs == {"number": str(number)}, text
        code, text, _ = run(
            "The pull request's konfig/reviewed against the queue's base",
            {
                "GITHUB_TOKEN": forge.token,
                "REPOSITORY": repo,
                "NUMBER": outputs["number"],
                "QUEUE_SHA": sha,
                "BASE_SHA": base,
                "API_URL": forge.api_url,
            },
        )
        assert code == 0, text  # red or green, the job stays green: the status says
        assert not [
            s
            for s in forge.get(f"/repos/{repo}/commits/{head}/statuses")
            if s.get("context") == "konfig/reviewed"
        ], "the status is the queue commit's, not the head's"
        return _status(forge, repo, sha, "konfig/reviewed")

    both = konfig(
        "approved", "--repo", repo, "--pr", str(number), "--head", head, "--pr-head",
        "--api-url", forge.api_url, cwd=root,
    )  # fmt: skip
    assert both.code == 2 and "--head and --pr-head both name the head" in both.err
    main = _git(root, "rev-parse", "main").strip()
    green = reviewed_as_queued(main)
    assert green["status"] == "success", green
    assert green["description"] == "2 stacks: approved as previewed"

    # main moves and changes the package both stacks import (another file of it: the
    # queue's merge has no conflict): the next queue drops the pull request
    _git(root, "checkout", "-q", "main")
    repo_builder.write("base/pkg/lib/web/tiers.k", 'tiers: [str] = ["edge"]\n')
    tip = git_commit(root, "main changes the model")
    _git(root, "push", "-q", "origin", "main")
    red = reviewed_as_queued(tip)
    assert red["status"] == "failure"
    assert red["description"] == f"stale: main@{tip[:10]} changed {DATA}, {SHOP}"

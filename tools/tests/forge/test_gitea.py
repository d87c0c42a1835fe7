"""``konfig comment`` and ``konfig issue`` against Gitea's real API (the local forge),
like the fake GitHub.

Gitea serves the REST subset the client uses under ``/api/v1``: the token's identity
(``GET /user``), a pull request's head, an issue's comments, create and edit. Unlike
GitHub (30 a page by default, at most 100, ``Link`` headers), Gitea answers an issue's
comments all at once and ignores ``page``/``limit`` there; the test puts more comments
before Konfig's than one page of either forge holds (Gitea's list page size is 50), so
a client that stopped after one page would miss it. Link-header pagination itself is
tested against the fake GitHub (tools/tests/forge/test_client.py): Gitea 1.26's
handler for this list (``routers/api/v1/repo/issue_comment.go``) has no paging to follow.
Which write requests were sent is counted in Gitea's router log: an unchanged body
sends none. The issue list is paged (at most 50 a page, ``limit``); Gitea's ``Link``
header has no space after its comma, which PyGithub's list did not follow, so the
drift issue test puts its issue behind more than a page of others.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from fixtures.forge import Forge
from fixtures.repos import CliResult, KonfigRunner
from kubeutil import unique

pytestmark = pytest.mark.forge
MARK = "<!-- konfig:preview -->"


def _pull_request(fg: Forge) -> tuple[str, int, str]:
    """A fresh repository with one open pull request: (repo, number, head sha)."""
    name = unique("comments")
    fg.request("POST", "/user/repos", {"name": name, "auto_init": True, "default_branch": "main"})
    repo = f"{fg.admin}/{name}"
    fg.request(
        "POST",
        f"/repos/{repo}/contents/change.txt",
        {
            "content": base64.b64encode(b"a change\n").decode(),
            "message": "a change",
            "new_branch": "topic",
        },
    )
    pr = fg.request("POST", f"/repos/{repo}/pulls", {"head": "topic", "base": "main", "title": "t"})
    return repo, int(pr["number"]), str(pr["head"]["sha"])


def _comment(
    konfig: KonfigRunner, fg: Forge, repo: str, number: int, body: Path, *extra: str
) -> CliResult:
    return konfig(
        "comment",
        "--repo",
        repo,
        "--pr",
        str(number),
        "--body-file",
        str(body),
        "--api-url",
        fg.api_url,
        *extra,
    )


def test_create_update_unchanged_and_pagination_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, number, head = _pull_request(forge)
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    comments_path = f"/repos/{repo}/issues/{number}/comments"

    # Another user writes more than a page of comments, some of them quoting Konfig's
    # marker: none of these may be taken for Konfig's comment.
    other = forge.create_user(unique("talker"))
    for i in range(55):
        text = f"{MARK}\nquoted {i}" if i % 10 == 0 else f"comment {i}"
        forge.request("POST", comments_path, {"body": text}, token=other)

    def writes() -> dict[str, int]:
        """The write requests Gitea has served on this pull request's comments."""
        return {
            "POST": forge.requests_served("POST", comments_path),
            "PATCH": forge.requests_served("PATCH", f"/repos/{repo}/issues/comments/{mine_id}"),
        }

    mine_id = 0
    before = writes()
    assert before["POST"] == 55

    body = tmp_path / "body.md"
    body.write_text("## Konfig preview\n\nfirst\n", encoding="utf-8")
    created = _comment(konfig, forge, repo, number, body)
    assert created.code == 0, created.err
    assert "comment created" in created.err
    assert f"(as {forge.admin}, from GET /user)" in created.err
    every = forge.paged(comments_path)
    assert len(every) == 56
    mine = [c for c in every if c["user"]["login"] == forge.admin]
    assert [c["body"] for c in mine] == [f"{MARK}\n## Konfig preview\n\nfirst\n"]
    assert every[-1]["id"] == mine[0]["id"]  # the 56th: beyond any first page
    mine_id = mine[0]["id"]
    assert writes() == {"POST": 56, "PATCH": 0}

    # Update in place: found after the others, edited, nothing new posted.
    body.write_text("## Konfig preview\n\nsecond\n", encoding="utf-8")
    updated = _comment(konfig, forge, repo, number, body, "--head-sha", head)
    assert updated.code == 0, updated.err
    assert "comment updated" in updated.err
    again = forge.get(f"/repos/{repo}/issues/comments/{mine[0]['id']}")
    assert again["body"] == f"{MARK}\n## Konfig preview\n\nsecond\n"
    assert len(forge.paged(comments_path)) == 56
    assert writes() == {"POST": 56, "PATCH": 1}

    # Unchanged: no write request at all (Gitea's router log counts them).
    unchanged = _comment(konfig, forge, repo, number, body)
    assert unchanged.code == 0 and "comment unchanged" in unchanged.err
    assert writes() == {"POST": 56, "PATCH": 1}
    after = forge.get(f"/repos/{repo}/issues/comments/{mine[0]['id']}")
    assert after["updated_at"] == again["updated_at"]

    # A run that a newer push overtook writes nothing.
    body.write_text("## Konfig preview\n\nstale\n", encoding="utf-8")
    stale = _comment(konfig, forge, repo, number, body, "--head-sha", "0" * 40)
    assert stale.code == 0 and "not written" in stale.err and head in stale.err
    assert forge.get(f"/repos/{repo}/issues/comments/{mine[0]['id']}")["body"].endswith("second\n")
    assert writes() == {"POST": 56, "PATCH": 1}


def test_two_comments_of_two_runs_become_one_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gitea sends a failed run's ``workflow_run`` twice (the emitter's and the runner's
    notification), so two privileged runs can both find no comment and both create one.
    The next write keeps the oldest and deletes the copy, through Gitea's real API."""
    repo, number, _ = _pull_request(forge)
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    comments_path = f"/repos/{repo}/issues/{number}/comments"
    first = forge.request("POST", comments_path, {"body": f"{MARK}\nrun one"})
    forge.request("POST", comments_path, {"body": f"{MARK}\nrun two"})
    talker = unique("talker")
    forge.request(
        "POST", comments_path, {"body": f"{MARK}\nquoted"}, token=forge.create_user(talker)
    )
    body = tmp_path / "body.md"
    body.write_text("## Konfig preview\n\nthe one\n", encoding="utf-8")
    res = _comment(konfig, forge, repo, number, body)
    assert res.code == 0, res.err
    assert (
        "deleted 1 duplicate comment(s)" in res.err and f"kept the oldest, {first['id']}" in res.err
    )
    left = [(c["id"], c["user"]["login"], c["body"]) for c in forge.paged(comments_path)]
    assert left == [
        (first["id"], forge.admin, f"{MARK}\n## Konfig preview\n\nthe one\n"),
        (left[1][0], talker, f"{MARK}\nquoted"),
    ], left


def test_gitea_errors_are_clear(
    forge: Forge,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = tmp_path / "body.md"
    body.write_text("x\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_TOKEN", "not-a-token")
    denied = _comment(konfig, forge, f"{forge.admin}/nothing", 1, body)
    assert denied.code == 1 and "HTTP 401" in denied.err, denied.err
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    missing = _comment(konfig, forge, f"{forge.admin}/{unique('absent')}", 1, body)
    assert missing.code == 1 and "HTTP 404" in missing.err and "--repo" in missing.err


DRIFT_MARK = "<!-- konfig:drift -->"


def test_drift_issue_created_updated_closed_and_created_again_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``konfig issue`` (actions/drift) against Gitea: one issue, found by marker and
    author among the open issues (all pages, pull requests skipped); an unchanged body
    sends nothing; --resolved comments and closes it. Only open issues are searched, so
    drift that comes back after the close opens a new issue; the closed one stays closed.
    """
    repo, pr_number, _ = _pull_request(forge)
    # The admin's own pull request carries the marker: Gitea's issue list includes pull
    # requests, which must not be taken for the drift issue.
    forge.request("PATCH", f"/repos/{repo}/pulls/{pr_number}", {"body": f"{DRIFT_MARK}\na pr"})
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    issues_path = f"/repos/{repo}/issues"
    body = tmp_path / "drift.md"

    def issue(*args: str) -> CliResult:
        return konfig("issue", "--repo", repo, "--api-url", forge.api_url, *args)

    def writes(number: int) -> dict[str, int]:
        """Write requests Gitea served: issues created, edits and comments on ``number``."""
        return {
            "POST": forge.requests_served("POST", issues_path),
            "PATCH": forge.requests_served("PATCH", f"{issues_path}/{number}"),
            "COMMENT": forge.requests_served("POST", f"{issues_path}/{number}/comments"),
        }

    def mine() -> list[dict[str, Any]]:
        every = forge.paged(f"{issues_path}?state=all&type=issues")
        return [i for i in every if i["user"]["login"] == forge.admin]

    # Created: exactly one issue, with the marker line first.
    body.write_text("## Drift\n\n1 object\n", encoding="utf-8")
    posts_before = forge.requests_served("POST", issues_path)
    created = issue("--body-file", str(body))
    assert created.code == 0, created.err
    assert "issue created" in created.err
    (first,) = mine()
    number = int(first["number"])
    assert number != pr_number
    assert (first["state"], first["body"]) == ("open", f"{DRIFT_MARK}\n## Drift\n\n1 object\n")
    assert first["title"] == "Konfig: the clusters drifted from main"
    assert writes(number) == {"POST": posts_before + 1, "PATCH": 0, "COMMENT": 0}

    # Another user opens more issues than one page holds (Gitea: 50 at most), some
    # quoting the marker: ours, the oldest, is on the last page and theirs stay as they are.
    other = forge.create_user(unique("reporter"))
    for i in range(52):
        text = f"{DRIFT_MARK}\nquoted {i}" if i % 10 == 0 else f"issue {i}"
        forge.request("POST", issues_path, {"title": f"other {i}", "body": text}, token=other)
    posts = posts_before + 1 + 52

    # Changed body: the same issue edited in place, one PATCH, nothing created.
    body.write_text("## Drift\n\n2 objects\n", encoding="utf-8")
    updated = issue("--body-file", str(body))
    assert updated.code == 0, updated.err
    assert "issue updated" in updated.err and f"/issues/{number}" in updated.err
    edited = forge.get(f"{issues_path}/{number}")
    assert (edited["state"], edited["body"]) == ("open", f"{DRIFT_MARK}\n## Drift\n\n2 objects\n")
    assert writes(number) == {"POST": posts, "PATCH": 1, "COMMENT": 0}

    # Unchanged body: no write request at all.
    unchanged = issue("--body-file", str(body))
    assert unchanged.code == 0 and "issue unchanged" in unchanged.err, unchanged.err
    assert writes(number) == {"POST": posts, "PATCH": 1, "COMMENT": 0}
    assert forge.get(f"{issues_path}/{number}")["updated_at"] == edited["updated_at"]

    # Drift gone: a closing comment (with the marker), then closed.
    closed = issue("--resolved", "--comment", "No drift any more.")
    assert closed.code == 0 and "issue closed" in closed.err, closed.err
    assert forge.get(f"{issues_path}/{number}")["state"] == "closed"
    comments = forge.paged(f"{issues_path}/{number}/comments")
    assert [c["body"] for c in comments] == [f"{DRIFT_MARK}\nNo drift any more."]
    assert writes(number) == {"POST": posts, "PATCH": 2, "COMMENT": 1}

    # Still no drift: nothing open to close, nothing sent.
    idle = issue("--resolved")
    assert idle.code == 0 and "issue none" in idle.err, idle.err
    assert writes(number) == {"POST": posts, "PATCH": 2, "COMMENT": 1}

    # Drift again: a new issue; the closed one is neither reopened nor edited.
    body.write_text("## Drift\n\n3 objects\n", encoding="utf-8")
    again = issue("--body-file", str(body))
    assert again.code == 0 and "issue created" in again.err, again.err
    old, new = sorted(mine(), key=lambda i: int(i["number"]))
    assert (old["number"], old["state"]) == (number, "closed")
    assert old["body"] == f"{DRIFT_MARK}\n## Drift\n\n2 objects\n"
    assert (new["state"], new["body"]) == ("open", f"{DRIFT_MARK}\n## Drift\n\n3 objects\n")
    assert writes(number) == {"POST": posts + 1, "PATCH": 2, "COMMENT": 1}

    # The other user's issues and the pull request were never touched.
    theirs = [
        i
        for i in forge.paged(f"{issues_path}?state=all&type=issues")
        if i["user"]["login"] != forge.admin
    ]
    assert len(theirs) == 52 and all(i["state"] == "open" and not i["comments"] for i in theirs)
    pr = forge.get(f"/repos/{repo}/pulls/{pr_number}")
    assert (pr["state"], pr["body"], pr["comments"]) == ("open", f"{DRIFT_MARK}\na pr", 0)


def _pr(konfig: KonfigRunner, fg: Forge, repo: str, head: str, out: Path, *extra: str) -> CliResult:
    out.write_text("", encoding="utf-8")
    return konfig(
        "pr", "--repo", repo, "--head-sha", head, "--api-url", fg.api_url, "--github-output",
        *extra,
    )  # fmt: skip


def _outputs(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: dict[str, str] = {}
    for i, line in enumerate(lines):
        if "<<KONFIG_EOF_" in line:
            found[line.split("<<", 1)[0]] = lines[i + 1]
    return found


def test_pr_finds_the_pull_request_of_a_commit_and_whether_it_is_a_fork_on_gitea(
    forge: Forge, konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The privileged half of the pipeline learns only a commit (workflow_run's
    head_sha): `konfig pr` asks Gitea which open pull request has it as head, from
    which repository and on which base."""
    repo, number, head = _pull_request(forge)
    out = tmp_path / "output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    base = forge.get(f"/repos/{repo}/branches/main")["commit"]["id"]

    same = _pr(konfig, forge, repo, head, out, "--base-ref", "main")
    assert same.code == 0, same.err
    assert _outputs(out) == {
        "found": "true",
        "number": str(number),
        "fork": "false",
        "live": "true",
        "base-sha": base,
        "base-ref": "main",
        "head-sha": head,
    }
    assert f"pull request #{number} at {head} (from this repository)" in same.err

    # Another base branch, or a commit no open pull request has: exit 1, found=false.
    other = _pr(konfig, forge, repo, head, out, "--base-ref", "release")
    assert other.code == 1 and _outputs(out) == {"found": "false"}
    gone = _pr(konfig, forge, repo, "f" * 40, out)
    assert gone.code == 1 and "no open pull request has head" in gone.err
    bad = _pr(konfig, forge, repo, "HEAD", out)
    assert bad.code == 2 and "not a full commit id" in bad.err

    # A pull request from a fork.
    user = unique("forker")
    token = forge.create_user(user)
    fork = forge.request("POST", f"/repos/{repo}/forks", {}, token=token, expect=(202,))
    fork_repo = str(fork["full_name"])
    forge.wait(
        "the fork to be ready",
        lambda: forge.exists(f"/repos/{fork_repo}/branches/main", token=token),
        timeout=60,
    )
    forge.request(
        "POST",
        f"/repos/{fork_repo}/contents/fork.txt",
        {"content": base64.b64encode(b"x\n").decode(), "message": "x", "new_branch": "f"},
        token=token,
    )
    pr = forge.request(
        "POST",
        f"/repos/{repo}/pulls",
        {"head": f"{user}:f", "base": "main", "title": "from a fork"},
        token=token,
    )
    forked = _pr(konfig, forge, repo, str(pr["head"]["sha"]), out)
    assert forked.code == 0, forked.err
    got = _outputs(out)
    assert (got["number"], got["fork"], got["live"]) == (str(pr["number"]), "true", "false")
    assert f"from the fork {fork_repo}" in forked.err

    # A maintainer's label opts the fork's pull request into the live preview; another
    # label, or the label on a run that does not name it, does not.
    labels = {
        name: forge.request("POST", f"/repos/{repo}/labels", {"name": name, "color": "#00aa00"})
        for name in ("konfig/live-preview", "other")
    }
    forge.request(
        "POST", f"/repos/{repo}/issues/{pr['number']}/labels", {"labels": [labels["other"]["id"]]}
    )
    head_sha = str(pr["head"]["sha"])
    other = _pr(konfig, forge, repo, head_sha, out, "--live-label", "konfig/live-preview")
    assert other.code == 0 and _outputs(out)["live"] == "false", other.err
    forge.request(
        "POST",
        f"/repos/{repo}/issues/{pr['number']}/labels",
        {"labels": [labels["konfig/live-preview"]["id"]]},
    )
    labelled = _pr(konfig, forge, repo, head_sha, out, "--live-label", "konfig/live-preview")
    assert labelled.code == 0 and _outputs(out)["live"] == "true", labelled.err
    assert "carries the label konfig/live-preview" in labelled.err
    unnamed = _pr(konfig, forge, repo, head_sha, out)
    assert unnamed.code == 0 and _outputs(out)["live"] == "false", unnamed.err


def test_reviewed_record_of_a_merge_commit_on_gitea(
    forge: Forge,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`konfig reviewed` finds the pull request merged as a commit and reads the record
    from Konfig's own comment, never from another user's copy of it."""
    import json

    from konfig.engine.digest import change_digest
    from konfig.engine.plan import StackPlan
    from konfig.pipeline.reviewed import Reviewed, hidden

    repo, number, _head = _pull_request(forge)
    monkeypatch.setenv("GITHUB_TOKEN", forge.token)
    ours = Reviewed(
        {
            "appops/shop/prod": change_digest(
                StackPlan("appops/shop/prod", None, False, None, None, None, ())
            )
        }
    )
    theirs = Reviewed(
        {
            "appops/shop/dev": change_digest(
                StackPlan("appops/shop/dev", None, False, None, None, None, ())
            )
        }
    )
    other = forge.create_user(unique("forger"))
    comments = f"/repos/{repo}/issues/{number}/comments"
    forge.request("POST", comments, {"body": f"{MARK}\n{hidden(theirs)}"}, token=other)
    body = tmp_path / "body.md"
    body.write_text(f"## Konfig preview\n\n{hidden(ours)}\n", encoding="utf-8")
    assert _comment(konfig, forge, repo, number, body).code == 0
    forge.request("POST", f"/repos/{repo}/pulls/{number}/merge", {"Do": "merge"})
    merged = forge.get(f"/repos/{repo}/pulls/{number}")
    sha = str(merged["merge_commit_sha"])

    out = tmp_path / "reviewed.json"
    res = konfig(
        "reviewed", "--repo", repo, "--commit", sha, "--out", str(out), "--api-url", forge.api_url
    )
    assert res.code == 0, res.err
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["pr"] == number and list(record["stacks"]) == ["appops/shop/prod"]

    # a commit no pull request was merged as (the pull request's own head, as a direct
    # push would be): an empty record, said so
    res = konfig(
        "reviewed", "--repo", repo, "--commit", _head, "--out", str(out), "--api-url", forge.api_url
    )
    assert res.code == 0 and "a direct push" in res.err, (
        res.err,
        merged["merge_commit_sha"],
        _head,
    )
    assert json.loads(out.read_text(encoding="utf-8"))["stacks"] == {}

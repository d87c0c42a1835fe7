"""Issue 27's acceptance on the local Gitea and control plane, through the repository's
own workflows (preview.yml, preview-cluster.yml, review.yml -> owners.yml, stale.yml,
apply.yml), unmodified.

The repository is the one ``konfig init --no-examples`` makes, with three stacks of one
project applied to the control plane: ``prod`` and ``dev`` import one package of the
repository (``base/pkg/lib/images``: their image's registry, and a greeting), ``prod-api``
does not. Pull request B gives prod's and dev's web the greeting (an environment
variable) and prod-api a new text; pull request A changes the greeting (an input of
prod and dev, which B's change reads; A's change by itself renders nothing new, so the
two merge without a conflict, goldens included). Pull request C changes prod-api's text.

- B's live preview sets ``konfig/reviewed`` red before any review (the privileged half's
  ``reviewed`` job); the approval turns it green (review.yml -> owners.yml);
- a push to B that leaves every change digest as it was (a comment) is green again after
  its live preview, with no new review, the comment saying so; a push to C after its
  approval that changes its digest is red, the comment naming the stack;
- A merges: stale.yml makes B's status and comment say stale (not C's);
- someone scales prod-api by hand (a field B does not touch);
- B merges without a new preview: prod (production) is not applied, its change now is
  not the reviewed one (A's greeting), and the difference is posted on B and in the
  deploy issue; dev (not production) applies and says it changed since the review;
  prod-api applies: the scaling is drift its digest does not count;
- the release: apply.yml dispatched with prod and the digest the report names applies
  it; ``konfig status`` tells released, changed and reviewed apart.

Timings go to hack/forge.d/README.md (by hand, with the load).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.forge import Forge
from kubeutil import unique
from test_forge_e2e import E2E, GIT_ENV, RUN_TIMEOUT, _logs_for, _preview_seen, konfig_cli

pytestmark = [pytest.mark.forge, pytest.mark.cluster, pytest.mark.timeout(3600)]

CONTEXT = "konfig/reviewed"
LIB = "base/pkg/lib/images/images.k"
BLOCKED = "<!-- konfig:blocked -->"

WEB = """\
import base.pkg.models.frontend
import base.pkg.lib.images

app: frontend.Server {{
    name = "web"
    namespace = "{ns}"
    image = images.registry + "/nginx:1.27.3"
    ports = [{{port = 80}}]{env}
}}
"""
GREETED = '\n    env = {"GREETING" = images.greeting}'
API = """\
import base.pkg.models.frontend

app: frontend.Server {{
    name = "api"
    namespace = "{ns}"
    image = "nginx:1.27.3"
    args = ["{text}"]
    ports = [{{port = 80}}]
}}
"""


def _images(greeting: str) -> str:
    return f'registry = "docker.io/library"\ngreeting = "{greeting}"\n'


def _latest(forge: Forge, repo: str, sha: str) -> dict[str, Any] | None:
    found = [
        s for s in forge.get(f"/repos/{repo}/commits/{sha}/statuses") if s.get("context") == CONTEXT
    ]
    return max(found, key=lambda s: int(s["id"])) if found else None


def _wait_status(state: E2E, sha: str, status: str, words: str, what: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        found = _latest(state.forge, state.repo, sha)
        ok = found and found["status"] == status and words in str(found["description"])
        return found if ok else None

    return state.forge.wait(
        what, check, timeout=RUN_TIMEOUT, interval=2, logs=lambda: _logs_for(state, sha)
    )


def _wait_comment(
    state: E2E, number: int, head: str, test: Callable[[str], bool], what: str
) -> str:
    def check() -> str | None:
        comments = state.konfig_comments(number)
        if comments and _preview_seen(comments[0]["body"], head) and test(comments[0]["body"]):
            return str(comments[0]["body"])
        return None

    return state.forge.wait(
        what, check, timeout=RUN_TIMEOUT, interval=2, logs=lambda: _logs_for(state, head)
    )


def _dispatch(state: E2E, workflow: str, inputs: dict[str, str]) -> dict[str, Any]:
    """Run ``workflow`` on main from the Actions page with ``inputs`` and wait for it."""
    path = f"/repos/{state.repo}/actions/workflows/{workflow}"
    details = state.forge.request(
        "POST", f"{path}/dispatches?return_run_details=true", {"ref": "main", "inputs": inputs}
    )
    run_id = int(details["workflow_run_id"])

    def done() -> dict[str, Any] | None:
        run: dict[str, Any] = state.forge.get(f"/repos/{state.repo}/actions/runs/{run_id}")
        if run.get("status") != "completed":
            return None
        jobs = state.forge.jobs(state.repo, run_id)
        return run if all(j.get("status") == "completed" for j in jobs) else None

    return state.forge.wait(
        f"the dispatched {workflow} run {run_id}",
        done,
        timeout=RUN_TIMEOUT,
        interval=1,
        logs=lambda: state.forge.run_logs(state.repo, run_id),
    )


def _reviewed_job_log(state: E2E, words: str) -> str:
    """The log of the privileged half's ``reviewed`` job that set the status of the pull
    request whose stacks ``words`` names (preview-requested.yml's for one shard of work,
    preview-cluster.yml's after a fan-out: both workflow_run runs, recorded at main)."""
    halves = ("preview-requested.yml", "preview-cluster.yml")

    def find() -> str | None:
        for run in state.forge.runs(state.repo, event="workflow_run"):
            if Path(str(run.get("path", "")).split("@")[0]).name not in halves:
                continue
            for job in state.forge.jobs(state.repo, int(run["id"])):
                if job["name"] != "reviewed" or job.get("conclusion") != "success":
                    continue
                log = state.forge.job_log(state.repo, int(job["id"]))
                if words in log:
                    return log
        return None

    return state.forge.wait(
        f"the reviewed job naming {words}", find, timeout=RUN_TIMEOUT, interval=2
    )


def _decisions(forge: Forge, repo: str, number: int) -> list[tuple[str, str]]:
    """The reviews submitted on a pull request (Gitea also lists the review requests
    CODEOWNERS made), as (state, commit)."""
    reviews = forge.get(f"/repos/{repo}/pulls/{number}/reviews")
    return [
        (str(r["state"]), str(r["commit_id"]))
        for r in reviews
        if r.get("state") in ("APPROVED", "REQUEST_CHANGES")
    ]


def _section(body: str, stack: str) -> str:
    """The part of the blocked report about ``stack`` (its ### heading to the next)."""
    parts = re.split(r"(?m)^### ", body)
    found = [p for p in parts if p.startswith(f"`{stack}`")]
    assert len(found) == 1, body
    return found[0]


def _deployment(state: E2E, ns: str, name: str) -> dict[str, Any]:
    out = state.kubectl("-n", ns, "get", "deployment", name, "-o", "json").stdout
    spec: dict[str, Any] = json.loads(out)["spec"]
    return spec


def _greeting(state: E2E, ns: str) -> str | None:
    (container,) = _deployment(state, ns, "web")["template"]["spec"]["containers"]
    found = [e["value"] for e in container.get("env") or [] if e["name"] == "GREETING"]
    return found[0] if found else None


def test_the_merge_applies_what_was_reviewed(
    forge: Forge, cluster: Cluster, tmp_path: Path
) -> None:
    t_start, cpu_start = time.monotonic(), forge.cpu_seconds()
    timings: dict[str, float] = {}
    work = tmp_path / "config"
    keys: dict[str, Path] = {}
    recipients: dict[str, str] = {}
    for env in ("prod", "dev"):
        keys[env] = tmp_path / f"{env}.key"
        made = konfig_cli(
            "secrets", "keygen", "-o", str(keys[env]), cwd=tmp_path, kubeconfig=Path(os.devnull)
        )
        assert made.returncode == 0, made.stderr
        recipients[env] = made.stdout.strip()
    init = konfig_cli(
        "init", str(work), "--name", "reviewed", "--no-examples",
        "--age-recipient", recipients["prod"], "--age-recipient", recipients["dev"],
        cwd=tmp_path, kubeconfig=Path(os.devnull), extra_env={"CI": "1", **GIT_ENV},
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    state = E2E(forge, "", work, cluster, cluster, None, "")  # type: ignore[arg-type]

    # main: ann owns the project (the admin opens the pull requests, ann reviews them);
    # the three stacks, as the cluster runs them
    ann = unique("ann")
    ann_token = forge.create_user(ann)
    project = unique("rv")
    prod, dev, api = (f"appops/{project}/{s}" for s in ("prod", "dev", "prod-api"))
    ns = {prod: f"{project}-prod", dev: f"{project}-dev", api: f"{project}-api"}
    settings = work / "konfig.yaml"
    text = settings.read_text(encoding="utf-8")
    for line, login in (
        ("platform-team: [platform-admin]", forge.admin),
        ("shop-team: [shop-dev]", ann),
    ):
        assert f"    {line}\n" in text, line
        text = text.replace(f"    {line}\n", f"    {line.split(':')[0]}: [{login}]\n")
    settings.write_text(text, encoding="utf-8")

    def stack_files(path: str, production: bool, main: str) -> dict[str, str]:
        name = path.rsplit("/", 1)[1]
        return {
            f"{path}/stack.yaml": (
                f"name: {name}\nproduction: {str(production).lower()}\n"
                "kubernetes:\n  context: admin\n"
            ),
            f"{path}/ci-test/settings.yaml": "kcl_options:\n  - key: env\n    value: dev\n",
            f"{path}/main.k": main,
        }

    files = {
        f"appops/{project}/project.yaml": f"name: {project}\nowners: [shop-team]\n",
        LIB: _images("hello"),
        **stack_files(prod, True, WEB.format(ns=ns[prod], env="")),
        **stack_files(dev, False, WEB.format(ns=ns[dev], env="")),
        **stack_files(api, True, API.format(ns=ns[api], text="hello")),
    }
    for rel, body in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(body, encoding="utf-8")
    for args in (("gen", "codeowners"), ("test", "--update", prod, dev, api), ("check",)):
        res = konfig_cli(*args, cwd=work, kubeconfig=Path(os.devnull))
        assert res.returncode == 0, f"konfig {' '.join(args)}:\n{res.stdout}{res.stderr}"
    state.git("add", "-A")
    state.git("commit", "-qm", f"{project}: three stacks, two of them import images")
    main = state.git("rev-parse", "HEAD")
    applied = konfig_cli(
        "apply", "--yes", "--commit", main, prod, dev, api, cwd=work,
        kubeconfig=cluster.kubeconfig,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert _greeting(state, ns[prod]) is None

    repo = state.repo = forge.import_repo(unique("reviewed"), work, state.git)
    forge.request("PUT", f"/repos/{repo}/actions/workflows/drift.yml/disable", expect=(204,))
    forge.request("PUT", f"/repos/{repo}/collaborators/{ann}", {"permission": "write"})
    kubeconfig = cluster.kubeconfig.read_text(encoding="utf-8")
    for name in ("KONFIG_PREVIEW_KUBECONFIG", "KONFIG_APPLY_KUBECONFIG", "KONFIG_DRIFT_KUBECONFIG"):
        forge.set_secret(repo, name, kubeconfig)
    forge.set_secret(repo, "KONFIG_PREVIEW_SOPS_AGE_KEY", keys["dev"].read_text())
    forge.set_secret(repo, "SOPS_AGE_KEY", keys["dev"].read_text() + keys["prod"].read_text())

    # B: prod's and dev's web greet (images.greeting), prod-api a new text; C: prod-api
    t0 = time.monotonic()
    b1 = state.change(
        "b",
        {
            f"{prod}/main.k": WEB.format(ns=ns[prod], env=GREETED),
            f"{dev}/main.k": WEB.format(ns=ns[dev], env=GREETED),
            f"{api}/main.k": API.format(ns=ns[api], text="hello, reviewed"),
        },
        "web greets, api says hello, reviewed",
        goldens=(prod, dev, api),
    )
    pr_b = state.open_pr("b", "web greets, a new api text", b1)
    c1 = state.change(
        "c", {f"{api}/main.k": API.format(ns=ns[api], text="hello, c")}, "api c", goldens=(api,)
    )
    pr_c = state.open_pr("c", "api says hello, c", c1)

    # the live preview's own job sets konfig/reviewed: red, before any review
    red = _wait_status(
        state, b1, "failure", "not approved as previewed now: ", "B red after its live preview"
    )
    timings["PR opened -> konfig/reviewed (live preview)"] = time.monotonic() - t0
    assert prod in str(red["description"]), red
    assert _decisions(forge, repo, pr_b.number) == []
    log = _reviewed_job_log(state, f"{prod}: digest")
    assert f"{CONTEXT}: failure: not approved as previewed now" in log, log[-3000:]
    _wait_status(state, c1, "failure", f"not approved as previewed now: {api}", "C red")

    # ann approves both heads: green (review.yml -> owners.yml)
    t1 = time.monotonic()
    for pr, head in ((pr_b, b1), (pr_c, c1)):
        forge.request(
            "POST",
            f"/repos/{repo}/pulls/{pr.number}/reviews",
            {"event": "APPROVED", "body": "lgtm", "commit_id": head},
            token=ann_token,
        )
    for head in (b1, c1):
        _wait_status(state, head, "success", "approved as previewed", "green after the approval")
    timings["approval -> konfig/reviewed green"] = time.monotonic() - t1

    # a push that changes no digest keeps the review; one that does drops it
    t2 = time.monotonic()
    commented = WEB.format(ns=ns[prod], env=GREETED).replace(
        "app: frontend.Server", "# web says what images.greeting says\napp: frontend.Server"
    )
    b2 = state.change("b", {f"{prod}/main.k": commented}, "a comment")
    c2 = state.change(
        "c", {f"{api}/main.k": API.format(ns=ns[api], text="hello, c2")}, "c2", goldens=(api,)
    )
    kept = _wait_status(
        state, b2, "success", "approved as previewed", "B kept its review (a comment)"
    )
    timings["push (digests unchanged) -> konfig/reviewed green, no review"] = time.monotonic() - t2
    assert kept["description"] == "3 stacks: approved as previewed", kept
    body_b = _wait_comment(
        state, pr_b.number, b2, lambda b: "Unchanged since the last review" in b, "B's comment"
    )
    assert f"Unchanged since the last review (`{b1[:12]}`): 3 stacks unchanged" in body_b
    assert _decisions(forge, repo, pr_b.number) == [("APPROVED", b1)]  # no new review
    _wait_status(state, c2, "failure", f"not approved as previewed now: {api}", "C lost its review")
    body_c = _wait_comment(
        state, pr_c.number, c2, lambda b: "Changed since the last review" in b, "C's comment"
    )
    assert f"**Changed since the last review** (`{c1[:12]}`): `{api}`" in body_c

    # A merges (the greeting): B is stale (stale.yml), C is not
    t3 = time.monotonic()
    a1 = state.change("a", {LIB: _images("hi")}, "web says hi")
    pr_a = state.open_pr("a", "web says hi", a1)
    merged_a = state.merge(pr_a)
    stale = _wait_status(
        state, b2, "failure", f"stale: main@{merged_a[:10]} changed ", "B stale after A's merge"
    )
    timings["merge A -> B stale"] = time.monotonic() - t3
    assert prod in str(stale["description"]) and dev in str(stale["description"])
    assert api not in str(stale["description"]), stale
    body_b = _wait_comment(
        state, pr_b.number, b2, lambda b: "**Stale**" in b, "B's comment says stale"
    )
    stale_line = [line for line in body_b.splitlines() if "**Stale**" in line]
    assert stale_line and f"main@`{merged_a[:12]}` changed" in stale_line[0], body_b
    assert f"`{prod}`" in stale_line[0] and f"`{api}`" not in stale_line[0]
    stale_run = state.wait_run("stale.yml", merged_a, "push")
    assert stale_run["conclusion"] == "success", state.logs(stale_run)[-4000:]
    latest_c = _latest(forge, repo, c2)
    assert latest_c and str(latest_c["description"]).startswith("not approved"), latest_c
    run_a = state.wait_run("apply.yml", merged_a, "push")
    timings["merge A -> apply done"] = time.monotonic() - t3
    assert run_a["conclusion"] == "success", state.logs(run_a)[-4000:]
    assert _greeting(state, ns[prod]) is None  # A by itself renders nothing new

    # someone scales prod-api by hand: a field B does not change
    state.kubectl("-n", ns[api], "scale", "deployment", "api", "--replicas=3")

    # B merges without a new preview
    t4 = time.monotonic()
    merged_b = state.merge(pr_b)
    run_b = state.wait_run("apply.yml", merged_b, "push")
    timings["merge B -> apply done (prod blocked)"] = time.monotonic() - t4
    log_b = state.logs(run_b)
    assert run_b["conclusion"] == "failure", log_b[-4000:]  # a stack was not applied
    assert _greeting(state, ns[prod]) is None  # not applied
    assert _greeting(state, ns[dev]) == "hi"  # applied anyway, as it is now
    api_spec = _deployment(state, ns[api], "api")
    assert api_spec["template"]["spec"]["containers"][0]["args"] == ["hello, reviewed"]
    assert api_spec["replicas"] == 1  # applied as the stack declares, the drift undone

    [told] = [
        c
        for c in forge.paged(f"/repos/{repo}/issues/{pr_b.number}/comments")
        if BLOCKED in (c.get("body") or "")
    ]
    report = str(told["body"])
    assert "1 stack not applied, not the reviewed change" in report, report
    blocked = _section(report, prod)
    assert blocked.startswith(f"`{prod}`: **not applied**"), report
    assert f"reviewed in #{pr_b.number}" in blocked and "GREETING" in blocked, blocked
    assert f"because main@{merged_a[:12]}" in blocked, blocked
    digest = re.search(r"`digest: ([0-9a-f]{64})`", blocked)
    assert digest, blocked
    assert _section(report, dev).startswith(
        f"`{dev}`: applied anyway (onReviewedChanged: apply)"
    ), report
    assert f"`{api}`" not in report
    issues = forge.paged(f"/repos/{repo}/issues?state=open&type=issues")
    [issue] = [i for i in issues if BLOCKED in (i.get("body") or "")]
    assert issue["title"] == "Konfig: a merged change was not the reviewed one"
    assert f"`{prod}`: **not applied**" in issue["body"] and digest.group(1) in issue["body"]

    # the release: a dispatch with the stack and the digest the report names
    t5 = time.monotonic()
    release = _dispatch(state, "apply.yml", {"stack": prod, "digest": digest.group(1)})
    timings["release dispatch -> applied"] = time.monotonic() - t5
    assert release["conclusion"] == "success", state.forge.run_logs(repo, int(release["id"]))
    assert _greeting(state, ns[prod]) == "hi"

    state.git("fetch", "-q", "origin", "main")
    state.git("checkout", "-q", "origin/main")
    res = konfig_cli("status", prod, dev, api, "--json", cwd=work, kubeconfig=cluster.kubeconfig)
    assert res.returncode == 0, res.stdout + res.stderr
    review = {s["path"]: s["review"] for s in json.loads(res.stdout)["stacks"]}
    assert review[prod]["status"] == "released" and review[prod]["digest"] == digest.group(1)
    assert review[dev]["status"] == "changed" and review[dev]["pr"] == pr_b.number
    assert review[api]["status"] == "reviewed" and review[api]["pr"] == pr_b.number

    print(
        "\nforge reviewed e2e (s): "
        + json.dumps({k: round(v) for k, v in timings.items()})
        + f", whole test {time.monotonic() - t_start:.0f} s, forge CPU"
        + f" {forge.cpu_seconds() - cpu_start:.1f} s, load {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )

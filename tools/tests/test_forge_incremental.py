"""Forge e2e of the incremental re-preview (issue 33 item 2): a pull request of two stacks,
then a push that changes one of them. The second run previews that one again and
re-uses the other's result from the first run's artifact (its Spec and live objects
unchanged), and the comment says so; its unprivileged jobs restore the compile cache
of the first push's run and take the base-side Specs from apply.yml's push run on main.

Reuses test_forge_e2e's set-up (the repository on the local Gitea, the example stacks
applied to this module's own control plane) and its helpers.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any

import pytest
from test_forge_e2e import (  # noqa: F401 (fixtures, used by name)
    DEV,
    E2E,
    ECHO_DEV,
    RUN_TIMEOUT,
    _logs_for,
    _preview_seen,
    _visible,
    e2e,
    e2e_cluster,
    e2e_edge,
)

pytestmark = [pytest.mark.forge, pytest.mark.cluster, pytest.mark.timeout(3600)]

TIMINGS: dict[str, float] = {}


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, f"{old!r} not found"
    return text.replace(old, new, 1)


def _live_comment(state: E2E, number: int, head: str) -> dict[str, Any]:
    return state.forge.wait(
        f"the live preview comment for {head[:12]}",
        lambda: next(
            (c for c in state.konfig_comments(number) if _preview_seen(c["body"], head)), None
        ),
        timeout=RUN_TIMEOUT,
        interval=0.5,
        logs=lambda: _logs_for(state, head),
    )


def _previews(state: E2E, head: str) -> dict[str, dict[str, Any]]:
    """Each stack's entry in the preview artifacts of the cluster run for ``head``."""
    texts = state.artifact_texts(state.cluster_run(head))
    found: dict[str, dict[str, Any]] = {}
    for name, text in texts.items():
        if re.fullmatch(r"konfig-preview-\d+/preview\.json", name):
            doc = json.loads(text)
            assert doc["commits"]["head"] == head, (name, doc["commits"])
            for item in doc["stacks"]:
                assert item["path"] not in found, f"{item['path']} previewed twice"
                found[item["path"]] = item
    return found


def test_a_push_that_changes_one_of_two_stacks_re_previews_one_and_reuses_the_other(
    e2e: E2E,  # noqa: F811 (the fixture imported above)
) -> None:
    # First a push to main (a file no stack reads): apply.yml's run on it uploads the
    # base-side Specs (konfig-base-specs) that the pull request's runs take on Gitea.
    base = e2e.change("main", {"NOTES.md": "incremental re-preview\n"}, "notes")
    applied = e2e.wait_run("apply.yml", base, "push")
    assert "konfig-base-specs" in e2e.artifacts(applied), e2e.logs(applied)
    guestbook = (e2e.work / DEV / "main.k").read_text(encoding="utf-8")
    echo = (e2e.work / ECHO_DEV / "main.k").read_text(encoding="utf-8")
    g2 = _replace(
        guestbook,
        'frontend_app: frontend.Server {\n    namespace = "guestbook-dev"\n',
        'frontend_app: frontend.Server {\n    namespace = "guestbook-dev"\n    replicas = 2\n',
    )
    e2 = _replace(echo, 'env = {ECHO_ENV = "dev"}', 'env = {ECHO_ENV = "dev", GREETING = "hi"}')
    head1 = e2e.change(
        "two-stacks",
        {f"{DEV}/main.k": g2, f"{ECHO_DEV}/main.k": e2},
        "guestbook dev: 2 frontends; http-echo dev: a greeting",
        goldens=(DEV, ECHO_DEV),
    )
    t0 = time.monotonic()
    pr = e2e.open_pr("two-stacks", "two stacks", head1)
    first = _live_comment(e2e, pr.number, head1)
    TIMINGS["PR opened -> live comment (2 stacks previewed)"] = time.monotonic() - t0
    TIMINGS["load average (1 min) at the first comment"] = os.getloadavg()[0]
    body1 = first["body"]
    if _visible(body1)[0] != "live preview against the clusters":
        run = e2e.cluster_run(head1)
        jobs = e2e.jobs(run)
        failed = [j for j in jobs.values() if j.get("conclusion") == "failure"]
        logs = ""
        for job in failed:
            text = e2e.forge.job_log(e2e.repo, int(job["id"]))
            at = text.find("Failure - ")
            logs += f"\n--- {job['name']}:\n" + text[max(0, at - 6000) : at + 500]
        pytest.fail(f"not the live preview:\n{body1}\nfailed jobs' logs:\n{logs}")
    assert DEV in body1 and ECHO_DEV in body1 and "re-used" not in body1, body1
    previews1 = _previews(e2e, head1)
    assert set(previews1) == {DEV, ECHO_DEV}
    for path in (DEV, ECHO_DEV):
        assert previews1[path]["reusedFrom"] is None and len(previews1[path]["reuseKey"]) == 64
        assert previews1[path]["counts"]["update"] >= 1, previews1[path]

    # The second push changes guestbook/dev only.
    g3 = _replace(g2, "replicas = 2", "replicas = 3")
    head2 = e2e.change("two-stacks", {f"{DEV}/main.k": g3}, "guestbook dev: 3", goldens=(DEV,))
    t1 = time.monotonic()
    second = _live_comment(e2e, pr.number, head2)
    TIMINGS["second push -> live comment (1 previewed, 1 re-used)"] = time.monotonic() - t1
    TIMINGS["load average (1 min) at the second comment"] = os.getloadavg()[0]
    assert int(second["id"]) == int(first["id"]) and len(e2e.konfig_comments(pr.number)) == 1
    body2 = second["body"]
    assert (
        f"♻️ 1 stack re-used from `{head1[:12]}` "
        "(Spec and live objects unchanged since that commit's preview)"
    ) in body2, body2
    # both stacks still in the comment, the re-used one with the change it had
    assert DEV in body2 and ECHO_DEV in body2 and "GREETING" in body2, body2
    previews2 = _previews(e2e, head2)
    assert previews2[ECHO_DEV]["reusedFrom"] == head1
    assert previews2[ECHO_DEV]["reuseKey"] == previews1[ECHO_DEV]["reuseKey"]
    assert previews2[ECHO_DEV]["changes"] == previews1[ECHO_DEV]["changes"]
    assert previews2[DEV]["reusedFrom"] is None
    assert previews2[DEV]["reuseKey"] != previews1[DEV]["reuseKey"]
    replicas = [
        f["after"]
        for c in previews2[DEV]["changes"]
        for f in c.get("fields") or []
        if f["path"] == "spec.replicas"
    ]
    assert replicas == [3], previews2[DEV]["changes"]
    logs = e2e.logs(e2e.cluster_run(head2))
    # (one stack a shard in this repository: the two are in different shards, or one)
    assert re.search(rf"1 of [12] stacks re-used from {head1[:12]}: {ECHO_DEV}\b", logs), logs
    _assert_the_compile_cache_was_carried(e2e, pr.number, head1, head2, applied)
    print("\nforge incremental timings (s):", json.dumps(TIMINGS, indent=1), file=sys.stderr)


def _cache_entries(state: E2E, run: dict[str, Any]) -> dict[str, str]:
    """The compile cache entries ``run``'s jobs uploaded (konfig-verify-<shard>'s
    compile-cache/): key -> stack."""
    found: dict[str, str] = {}
    for name, text in state.artifact_texts(run).items():
        if re.fullmatch(r"konfig-verify-\d+/compile-cache/[0-9a-f]{2}/[0-9a-f]{64}\.json", name):
            entry = json.loads(text)
            found[entry["key"]] = entry["stack"]
    return found


def _assert_the_compile_cache_was_carried(
    state: E2E, number: int, head1: str, head2: str, applied: dict[str, Any]
) -> None:
    """Issue 33 item 2: the second push's unprivileged run restored the compile cache of
    the first push's run (the pull request's own, found through the forge's API) and took
    the base-side Specs from apply.yml's push run on main at the base commit."""
    run1 = state.wait_run("preview.yml", head1, "pull_request")
    run2 = state.wait_run("preview.yml", head2, "pull_request")
    logs2 = state.logs(run2)
    found = re.findall(
        rf"konfig-verify-\d+ of an earlier preview\.yml run of #{number}: (\w+)", logs2
    )
    assert found and set(found) == {str(run1["id"])}, logs2
    restored = sum(int(n) for n in re.findall(r"(\d+) compile cache entries restored", logs2))
    entries1, entries2 = _cache_entries(state, run1), _cache_entries(state, run2)
    # guestbook/dev at the first head: the second run compiles it at the second head only,
    # so its entry in the second run's cache is one it restored
    dev1 = {key for key, stack in entries1.items() if stack == DEV}
    assert dev1 and dev1 <= set(entries2), (entries1, entries2)
    assert {key for key, stack in entries2.items() if stack == DEV} - dev1, entries2
    assert restored >= len(entries1) > 0, (restored, entries1)
    TIMINGS["compile cache entries restored by the second push's run"] = restored
    # the base side: the artifact of apply.yml's push run on main at the base commit
    base_runs = set(
        re.findall(
            r"konfig-base-specs of a apply\.yml run on a push to main at (\w+): (\w+)", logs2
        )
    )
    assert base_runs == {(applied["head_sha"][:12], str(applied["id"]))}, logs2
    # both downloaded by konfig, as data, in the step that found them
    assert re.search(r"downloaded konfig-base-specs \(\d+ files", logs2), logs2
    assert re.search(r"downloaded konfig-verify-\d+ \(\d+ files", logs2), logs2
    assert applied["event"] == "push" and applied["path"] == "apply.yml@refs/heads/main"

"""Forge e2e of issue 29 item 5: a pull request whose stacks take several shards gets its
offline comment while the unprivileged run still works, not once it completed.

Each verify shard of preview.yml computes and uploads its offline part
(konfig-offline-I) before its compile, test and check; preview-requested.yml's `small`
job (started when that run is requested) waits for the part of every shard that has
work, by its own counts, downloads each as data and posts the merged offline comment;
preview-cluster.yml (the run completed) then updates that same comment, and its live
fan-out replaces it with the live preview.

Reuses test_forge_e2e's set-up (the repository on the local Gitea, the example stacks
applied to this module's own control plane) and its helpers.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_forge_e2e import (  # noqa: F401 (fixtures, used by name)
    DEV,
    E2E,
    ECHO_DEV,
    RUN_TIMEOUT,
    _logs_for,
    _offline_first,
    _preview_seen,
    _visible,
    e2e,
    e2e_cluster,
    e2e_edge,
)

from konfig.pipeline import sharding

pytestmark = [pytest.mark.forge, pytest.mark.cluster, pytest.mark.timeout(3600)]

PROD = "appops/guestbook/prod"


def _requested_job(state: E2E, head: str) -> dict[str, Any]:
    """preview-requested.yml's `preview and report` job for ``head``."""
    for run in state.cluster_runs(head):
        if Path(str(run.get("path", "")).split("@")[0]).name == "preview-requested.yml":
            return state.jobs(run)["preview and report"]
    raise AssertionError(f"no preview-requested.yml run for {head}")


def test_several_shards_get_the_merged_offline_comment_from_the_requested_run(
    e2e: E2E,  # noqa: F811 (the fixture imported above)
) -> None:
    """Two guestbook stacks (a change to their base) and http-echo/dev: the repository's
    `sharding` (one stack a shard) spreads them over three shards, more than one with
    work. The first Konfig comment is the offline preview of all three stacks, posted by
    the requested run's `small` job from every used shard's konfig-offline-I (its log
    names them); the live preview then replaces it in the same comment."""
    base = e2e.work / "appops/guestbook/base/base.k"
    text = base.read_text().replace(
        'env = {GET_HOSTS_FROM = "dns"}', 'env = {GET_HOSTS_FROM = "dns", TRACE = "on"}'
    )
    assert "TRACE" in text
    echo = e2e.work / ECHO_DEV / "main.k"
    echo_text = echo.read_text().replace('ECHO_ENV = "dev"', 'ECHO_ENV = "dev", TRACE = "on"')
    assert "TRACE" in echo_text
    stacks = [DEV, PROD, ECHO_DEV]
    used = sorted({sharding.shard_of(s, 3) for s in stacks})
    assert len(used) > 1, used  # several shards of work: the test's stacks must spread
    head = e2e.change(
        "offline-shards",
        {"appops/guestbook/base/base.k": text, f"{ECHO_DEV}/main.k": echo_text},
        "guestbook, http-echo dev: trace",
        goldens=tuple(stacks),
    )
    pr = e2e.open_pr("offline-shards", "guestbook, http-echo: trace", head)
    t0 = time.monotonic()
    seen: list[tuple[int, str, float]] = []  # (comment id, body, seconds after the PR)

    def live_posted() -> dict[str, Any] | None:
        comments = e2e.konfig_comments(pr.number)
        if comments:
            c = comments[0]
            if not seen or seen[-1][1] != c["body"]:
                seen.append((int(c["id"]), c["body"], time.monotonic() - t0))
            if _preview_seen(c["body"], head):
                return c
        return None

    final = e2e.forge.wait(
        "the live preview comment",
        live_posted,
        timeout=RUN_TIMEOUT,
        interval=0.3,
        logs=lambda: _logs_for(e2e, head),
    )
    offline = [(body, at) for _, body, at in seen if _offline_first(body, head)]
    assert offline, [body[:300] for _, body, _ in seen]
    first, at = offline[0]
    # every shard's part merged: each stack of the three, and the change
    for stack in stacks:
        assert f"`{stack}`" in first, (stack, first)
    assert "TRACE" in first, first
    # one comment, updated in place; the live preview last
    assert {cid for cid, _, _ in seen} == {int(final["id"])}
    assert _visible(final["body"])[0] == "live preview against the clusters", final["body"]
    for stack in stacks:
        assert f"`{stack}`" in final["body"], (stack, final["body"])

    # the unprivileged run: every used shard uploaded its part
    run = e2e.wait_run("preview.yml", head, "pull_request")
    assert run["conclusion"] == "success", e2e.logs(run)
    parts = {f"konfig-offline-{i}" for i in used}
    artifacts = e2e.artifacts(run)
    assert {a for a in artifacts if a.startswith("konfig-offline")} == parts, artifacts
    # the requested run's `small` job waited for exactly those parts and wrote the first
    # comment (before this change it stopped after the changed stacks for several shards,
    # and the first comment came from preview-cluster.yml once the run completed)
    job = _requested_job(e2e, head)
    log = e2e.forge.job_log(e2e.repo, int(job["id"]))
    waited = re.search(rf"run {run['id']} uploaded (konfig-offline-[^(]*) \(", log)
    assert waited, log
    assert set(waited.group(1).split(", ")) == parts, waited.group(0)
    assert re.search(r"comment (created|updated): ", log), log
    print(
        f"\noffline comment {at:.1f} s after the PR was opened "
        f"(live {seen[-1][2]:.1f} s); {waited.group(0)}",
        file=sys.stderr,
    )
    e2e.forge.request("PATCH", f"/repos/{e2e.repo}/pulls/{pr.number}", {"state": "closed"})

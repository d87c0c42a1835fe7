"""Drift stays labelled when changes are grouped: 1,200 stacks whose replicas someone
changed in the cluster show `spec.replicas: 5 → 1 (drift: …) in 1,200 Deployments`, kept
apart from the same change made by the pull request; the per-stack view says it too."""

from __future__ import annotations

from typing import Any

from fleet import Fleet, change, deployment

from konfig.report import comment, pull_request, records

SHA = "0123456789abcdef0123456789abcdef01234567"


def set_replicas(n: int) -> Any:
    def edit(obj: dict[str, Any]) -> None:
        obj["spec"]["replicas"] = n

    return edit


def drifted(preview: dict[str, Any], paths: set[str]) -> dict[str, Any]:
    """Mark the fields at ``paths`` drifted, as the preview marks a field someone
    changed in the cluster since Konfig's last apply."""
    for stack in preview["stacks"]:
        for item in stack["changes"]:
            for field in item["fields"]:
                if field["path"] in paths:
                    field["drift"] = True
    return preview


def report_of(*previews: dict[str, Any]) -> records.Report:
    return pull_request.build(pull_request.Inputs(previews=list(previews)), sha=SHA)


class LiveAtFive(Fleet):
    """Every stack's Deployment runs 5 replicas in the cluster; the stacks declare 1."""

    def _standard(self, project: str, env: str) -> list[dict[str, Any]]:
        live = deployment(project, env, replicas=5)
        return [change(live, deployment(project, env, replicas=1))]


def live_at_5() -> Fleet:
    return LiveAtFive(400)


def test_1200_drifted_deployments_keep_the_word_drift_when_grouped() -> None:
    preview = drifted(live_at_5().preview(), {"spec.replicas"})
    rendered = comment.render(report_of(preview))
    assert rendered.layout == "grouped"
    assert (
        "- `spec.replicas`: `5` → `1` (drift: the cluster already differs; apply sets it "
        "back) in 1,200 Deployments across 1,200 stacks" in rendered.text
    )


def test_drift_and_the_same_change_by_the_pr_are_two_groups() -> None:
    fleet = live_at_5()
    preview = fleet.preview()
    # the first 600 stacks: someone scaled them to 5; the others: the PR changes 5 → 1
    first = {s["path"] for s in preview["stacks"][:600]}
    for stack in preview["stacks"]:
        if stack["path"] in first:
            drifted({"stacks": [stack]}, {"spec.replicas"})
    text = comment.render(report_of(preview)).text
    assert "(drift: the cluster already differs; apply sets it back) in 600 Deployments" in text
    assert "- `spec.replicas`: `5` → `1` in 600 Deployments" in text


def test_the_per_stack_view_says_drift() -> None:
    preview = drifted(Fleet(1, envs=("prod",), edits=[set_replicas(3)]).preview(),
                      {"spec.replicas"})  # fmt: skip
    text = comment.render(report_of(preview), layout="stacks").text
    assert "(drift: the cluster already differs in `spec.replicas`; apply sets it back)" in text

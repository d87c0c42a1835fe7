"""The danger table of the PR comment: at the top, class × stack counts, through every
step of the size ladder (the preview JSON from ``fleet``, each change classified by
engine.danger as the preview does). Goldens: ``golden/dangers-*.md``
(``KONFIG_UPDATE_GOLDEN=1`` rewrites them)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, change, preview_doc, set_image, stack_doc

from konfig.report import comment, pull_request, records

GOLDEN = Path(__file__).parent / "golden"
SHA = "0123456789abcdef0123456789abcdef01234567"
RUN = "https://github.example/acme/config/actions/runs/42"
NEW = "nginx:1.27.4"
CASCADE = "appops/app050/dev"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.md"
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (KONFIG_UPDATE_GOLDEN=1)"


def inputs(fleet: Fleet) -> pull_request.Inputs:
    return pull_request.Inputs(previews=[fleet.preview()], changed=fleet.changed())


def with_namespace_deleted(project: str, env: str) -> list[dict[str, Any]]:
    """The common rollout, and the stack's old Namespace (12 objects in it) deleted."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{project}-old"}}
    return [
        *Fleet(0, edits=[set_image(NEW)], dangers=True).standard(project, env),
        change(ns, None, dangers=True, held=12),
    ]


def fleet() -> Fleet:
    return Fleet(100, edits=[set_image(NEW)], dangers=True,
                 special={CASCADE: with_namespace_deleted})  # fmt: skip


def report() -> records.Report:
    return pull_request.build(inputs(fleet()), sha=SHA, run_url=RUN)


def table_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("### ⚠️ Dangers")
    return lines[start : start + 8]


def test_300_rollouts_and_one_cascade_golden() -> None:
    r = report()
    assert [(d.name, d.changes, len(d.stacks)) for d in r.dangers] == [
        ("destroy", 1, 1), ("rollout", 300, 300), ("cascade", 1, 1)
    ]  # fmt: skip
    rendered = comment.render(r)
    assert rendered.layout == "grouped" and not rendered.truncated
    lines = rendered.text.splitlines()
    assert lines.index("### ⚠️ Dangers") < 20
    table = "\n".join(table_lines(rendered.text))
    assert "| **rollout** | 300 | 300: `appops/app000/dev`, `appops/app000/prod`" in table
    assert "… and 297 more |" in table
    assert (
        "| **cascade** | 1 | 1: `appops/app050/dev` | Namespace app050-old: deleting it "
        "deletes it and the 12 objects it holds |" in table
    )
    check_golden("dangers-300-rollouts-one-cascade", rendered.text)


@pytest.mark.parametrize("budget", [65_536, 20_000, 8_000, 4_000, 3_000])
@pytest.mark.parametrize("layout", ["grouped", "stacks"])
def test_the_danger_table_survives_every_step_of_the_size_ladder(
    budget: int, layout: comment.Layout
) -> None:
    rendered = comment.render(report(), budget=budget, layout=layout)
    assert len(rendered.text) <= budget
    lines = rendered.text.splitlines()
    assert lines.index("### ⚠️ Dangers") < 20
    table = table_lines(rendered.text)
    assert [line.split(" | ")[0] for line in table[4:7]] == [
        "| **destroy**", "| **rollout**", "| **cascade**"
    ]  # fmt: skip


def test_per_stack_sections_name_each_change_s_dangers() -> None:
    rendered = comment.render(report(), layout="stacks", budget=400_000)
    assert "| delete | `Namespace app050-old` | not in the plan any more: prune " in rendered.text
    assert "**⚠️ destroy, cascade** |" in rendered.text
    assert rendered.text.count("**⚠️ rollout** |") == 300


def test_no_dangers_no_table() -> None:
    quiet = Fleet(2, edits=[lambda d: d["spec"].update(replicas=3)], dangers=True)
    r = pull_request.build(inputs(quiet), sha=SHA, run_url=RUN)
    assert r.dangers == ()
    assert "Dangers" not in comment.render(r).text


def test_a_rename_reads_as_one_in_the_comment() -> None:
    old = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "web", "namespace": "shop-dev"}, "data": {"a": "1"}}  # fmt: skip
    new = copy.deepcopy(old)
    new["metadata"]["name"] = "frontend"
    gone, made = change(old, None, dangers=True), change(None, new, dangers=True)
    rename = {"from": gone["id"], "to": made["id"], "fields": []}
    gone["rename"] = made["rename"] = rename
    preview = preview_doc([stack_doc("appops/shop/dev", [gone, made])])
    r = pull_request.build(pull_request.Inputs(previews=[preview]), sha=SHA, run_url=RUN)
    text = comment.render(r, layout="stacks").text
    assert text.count("**rename web → frontend**: ") == 2


def test_labels_and_the_check_follow_the_policy() -> None:
    from konfig import contracts
    from konfig.engine.danger import assess
    from konfig.engine.guards import DangerGuard, DangerPolicy, mark_unconfirmed
    from konfig.engine.plan import Change, StackPlan

    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop-old"}}
    gone = Change("v1:Namespace:shop-old", "v1", "Namespace", None, "shop-old", "delete",
                  "removed from the stack: apply prunes it", False, None, ns, (), "")  # fmt: skip
    plan = assess(StackPlan("appops/shop/prod", "prod", False, None, None, None, (gone,)))
    policy = DangerGuard(DangerPolicy.of({"confirm": ["cascade"]}))
    marked = mark_unconfirmed(plan, policy).changes[0].to_dict()
    preview = preview_doc([stack_doc("appops/shop/prod", [marked])])
    r = pull_request.build(pull_request.Inputs(previews=[preview]), sha=SHA, run_url=RUN)
    assert r.labels == ("konfig/danger:destroy", "konfig/danger:cascade")
    assert r.danger_conclusion == "action_required"
    ((path, digest, what),) = r.confirmations
    assert (path, what) == ("appops/shop/prod", "cascade needs a confirmation")
    text = comment.render(r).text
    assert (
        "- `appops/shop/prod`: cascade needs a confirmation: "
        f"`konfig apply --confirm appops/shop/prod={digest}`" in text
    )
    data = comment.to_json(r)
    assert contracts.violations("report", data) == []
    assert data["dangerCheck"]["conclusion"] == "action_required"
    assert data["labels"] == ["konfig/danger:destroy", "konfig/danger:cascade"]
    # without the policy: the same dangers, labelled, and nothing to confirm
    unmarked = plan.changes[0].to_dict()
    r2 = pull_request.build(
        pull_request.Inputs(previews=[preview_doc([stack_doc("appops/shop/prod", [unmarked])])]),
        sha=SHA,
    )
    assert (r2.labels, r2.danger_conclusion) == (r.labels, "success")
    assert "Apply refuses" not in comment.render(r2).text

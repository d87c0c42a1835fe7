"""Approvals bind to change digests, not commits (issue 27 item 2): the reviewed record
keeps each previewed head's digests across pushes, an approval holds for a stack while
its digest stays the one approved, and ``konfig/reviewed`` is green only then."""

from __future__ import annotations

import json
from typing import Any

import pytest

from konfig import contracts
from konfig.engine.diff import FieldChange
from konfig.engine.digest import change_digest
from konfig.engine.drift import DriftedField, ObjectDrift
from konfig.engine.plan import Change, StackPlan
from konfig.errors import UsageError
from konfig.pipeline.reviewed import (
    HISTORY,
    Reviewed,
    approvals_holding,
    carry,
    hidden,
    read_reviewed,
    review_state,
)
from konfig.report.reviewed import CHANGED_TAG, carried_body

PROD, DEV = "appops/shop/prod", "appops/shop/dev"
A, B, C, D = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)
IMAGE = "spec.template.spec.containers[name=web].image"
DEPLOY = "apps/v1:Deployment:shop:web"


def deployment(image: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}},
    }


def image_update(new: str = "nginx:2", *extra: FieldChange, **kw: Any) -> Change:
    live = deployment("nginx:1") | {"metadata": {"name": "web", "uid": "u-1"}}
    return Change(
        id=DEPLOY, api_version="apps/v1", kind="Deployment", namespace="shop", name="web",
        action="update", reason="", validated=True, desired=deployment(new), live=live,
        fields=(FieldChange(IMAGE, "nginx:1", new), *extra), diff="", **kw,
    )  # fmt: skip


def plan(*changes: Change, path: str = PROD) -> StackPlan:
    return StackPlan(path, "admin", False, "a" * 64, None, None, tuple(changes))


def record(head: str, images: dict[str, str]) -> Reviewed:
    """The record of a preview of ``head``: each stack's image change."""
    return Reviewed(
        {
            path: change_digest(plan(image_update(image), path=path))
            for path, image in images.items()
        },
        base="0" * 40,
        head=head,
        pr=7,
    )


def comment(rec: Reviewed, title: str = "## Konfig preview for `x`: 📝 changes") -> str:
    return f"<!-- konfig:preview -->\n{title}\n\nbody\n{hidden(rec)}\n"


def pushes(*steps: tuple[str, dict[str, str]]) -> Reviewed:
    """The record after the pull request's heads were previewed in order, each comment
    written over the one before (as `konfig comment` does)."""
    previous: str | None = None
    for head, images in steps:
        body = carried_body(previous, comment(record(head, images)))
        previous = body.text
    assert previous is not None
    return read_reviewed(previous, where="the comment")


def test_a_push_that_leaves_a_digest_keeps_the_approval_one_that_changes_it_drops_it() -> None:
    rec = pushes((A, {PROD: "nginx:2", DEV: "nginx:2"}), (B, {PROD: "nginx:2", DEV: "nginx:3"}))
    assert [p.head for p in rec.history] == [A] and rec.head == B
    holding = approvals_holding(rec, [("ann", A)])
    assert holding == {PROD: ("ann",), DEV: ()}
    state = review_state(rec, B, [("ann", A)])
    assert state.state == "failure" and DEV in state.description and PROD not in state.description
    # an approval of the head covers both
    assert review_state(rec, B, [("ann", A), ("bob", B)]).state == "success"


def test_an_approval_does_not_survive_a_change_and_back() -> None:
    """Nothing may have changed it after the approval: v2 approved at A, v3 at B,
    v2 again at C: the approval of A does not hold at C."""
    rec = pushes((A, {PROD: "nginx:2"}), (B, {PROD: "nginx:3"}), (C, {PROD: "nginx:2"}))
    assert [p.head for p in rec.history] == [A, B]
    assert approvals_holding(rec, [("ann", A)]) == {PROD: ()}
    assert approvals_holding(rec, [("ann", B)]) == {PROD: ()}
    # an approval of an unchanged run of heads holds from its first
    rec = pushes((A, {PROD: "nginx:2"}), (B, {PROD: "nginx:2"}), (C, {PROD: "nginx:2"}))
    assert approvals_holding(rec, [("ann", A)]) == {PROD: ("ann",)}


def test_the_comment_says_what_changed_since_the_last_review() -> None:
    first = carried_body(None, comment(record(A, {PROD: "nginx:2", DEV: "nginx:2"})))
    assert CHANGED_TAG not in first.text  # the first preview: nothing to compare
    second = carried_body(first.text, comment(record(B, {PROD: "nginx:2", DEV: "nginx:3"})))
    lines = second.text.splitlines()
    assert lines[1].startswith("## Konfig preview")  # the title stays first
    changed = next(line for line in lines if "Changed since the last review" in line)
    assert f"`{DEV}`" in changed and PROD not in changed and f"`{A[:12]}`" in changed
    assert "1 stack unchanged, reviews kept" in changed
    third = carried_body(second.text, comment(record(C, {PROD: "nginx:2", DEV: "nginx:3"})))
    assert "Unchanged since the last review (`" + B[:12] in third.text
    # the same body again (a re-run of the same head): the same text, no write
    assert carried_body(third.text, comment(record(C, {PROD: "nginx:2", DEV: "nginx:3"}))).text == (
        third.text
    )
    again = read_reviewed(third.text, where="c")
    assert [p.head for p in again.history] == [A, B]
    contracts.validate("review", again.to_dict())


def test_a_comment_without_a_live_preview_keeps_the_heads() -> None:
    """The offline comment of a new push replaces the live one: the heads previewed
    stay in a record of no stack (nothing of the new head is reviewed yet)."""
    live = carried_body(None, comment(record(A, {PROD: "nginx:2"})))
    offline = carried_body(live.text, "## Konfig preview (offline)\n\nno cluster\n")
    rec = read_reviewed(offline.text, where="c")
    assert rec.head is None and not rec.stacks and [p.head for p in rec.history] == [A]
    assert review_state(rec, B, [("ann", A)]).state == "pending"
    back = carried_body(offline.text, comment(record(B, {PROD: "nginx:2"})))
    rec = read_reviewed(back.text, where="c")
    assert approvals_holding(rec, [("ann", A)]) == {PROD: ("ann",)}
    assert "Unchanged since the last review (`" + A[:12] in back.text


def test_history_is_bounded_in_heads_and_in_the_comment_length() -> None:
    steps = [(f"{i:040x}", {PROD: "nginx:2"}) for i in range(HISTORY + 5)]
    rec = pushes(*steps)
    assert len(rec.history) == HISTORY and rec.history[-1].head == steps[-2][0]
    stacks = {f"appops/p{i:03d}/prod": "nginx:2" for i in range(40)}
    small = carried_body(None, comment(record(A, stacks)))
    body = comment(record(B, stacks))
    fits = carried_body(small.text, body, limit=len(small.text) + 200)
    assert len(read_reviewed(fits.text, where="c").history) == 0  # dropped to fit
    assert len(read_reviewed(carried_body(small.text, body).text, where="c").history) == 1


def test_a_hostile_earlier_record_is_dropped_not_trusted() -> None:
    good = comment(record(A, {PROD: "nginx:2"}))
    forged = good.replace(hidden(record(A, {PROD: "nginx:2"})), "<!-- konfig:reviewed v1 AAAA -->")
    out = carried_body(forged, comment(record(B, {PROD: "nginx:2"})))
    assert out.warning and "not readable" in out.warning
    assert read_reviewed(out.text, where="c").history == ()
    # a history entry breaking the contract (not a commit) is refused, naming the field
    data = record(B, {PROD: "nginx:2"}).to_dict()
    data["history"] = [{"head": "$(curl evil)", "digests": {}}]
    with pytest.raises(UsageError, match="history"):
        read_reviewed(json.dumps(data), where="the comment")
    data["history"] = [{"head": A, "digests": {}}] * (HISTORY + 1)
    with pytest.raises(UsageError, match="history"):
        read_reviewed(json.dumps(data), where="the comment")


def test_the_status_is_pending_stale_waiting_or_green() -> None:
    rec = record(B, {PROD: "nginx:2"})
    assert review_state(None, B, []).state == "pending"
    assert review_state(rec, C, [("ann", B)]).state == "pending"  # a newer head: not previewed
    waiting = review_state(rec, B, [])
    assert waiting.state == "failure" and waiting.description.startswith("not approved")
    stale = review_state(rec, B, [("ann", B)], {PROD: D})
    assert stale.state == "failure"
    assert stale.description == f"stale: main@{D[:10]} changed {PROD}"
    assert review_state(rec, B, [("ann", B)]).state == "success"
    nothing = Reviewed({PROD: change_digest(plan())}, head=B)
    assert review_state(nothing, B, []).state == "success"
    many = record(B, {f"appops/p{i:03d}/prod": "nginx:2" for i in range(30)})
    long = review_state(many, B, [])
    assert len(long.description) <= 140 and long.description.endswith("more")


def test_a_drifted_field_the_change_does_not_set_keeps_the_approval() -> None:
    """Between two previews someone changed replicas in the cluster: the change digest
    is the same (drift is not counted), so the approval of the first still holds."""
    first = Reviewed({PROD: change_digest(plan(image_update()))}, head=A)
    drift = ObjectDrift(DEPLOY, "drifted", (DriftedField("spec.replicas", 3, False),))
    drifted = image_update("nginx:2", FieldChange("spec.replicas", 3, 1, drift=True), drift=drift)
    second = Reviewed({PROD: change_digest(plan(drifted))}, head=B)
    assert second.stacks[PROD].cluster_differs == ((DEPLOY, "spec.replicas"),)
    rec = carry(first, second).reviewed
    assert approvals_holding(rec, [("ann", A)]) == {PROD: ("ann",)}

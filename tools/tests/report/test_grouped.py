"""Golden and budget tests of the grouped PR comment (many stacks, one change).

The preview JSON comes from ``fleet`` (each change computed by the real
comparison); goldens live in ``golden/grouped-*.md``. Rewrite them after an
intended change with ``KONFIG_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

from fleet import (
    Fleet,
    add_label,
    change,
    configmap,
    deployment,
    secret,
    set_image,
)

from konfig import contracts
from konfig.report import comment, pull_request
from konfig.report.budget import DEFAULT_BUDGET, SUMMARY_LIMIT_BYTES

GOLDEN = Path(__file__).parent / "golden"
SHA = "0123456789abcdef0123456789abcdef01234567"
RUN = "https://github.example/acme/config/actions/runs/42"
NEW = "nginx:1.27.4"
COMPILE_ERROR = (
    "expected int, got str(two)\n"
    "  --> appops/app002/prod/main.k:6:5\n"
    "   |\n"
    ' 6 |     replicas = "two"\n'
    "   |     ^ expected int, got str(two)"
)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.md"
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (KONFIG_UPDATE_GOLDEN=1)"


def inputs(fleet: Fleet, *, compile_errors: dict[str, str] | None = None) -> pull_request.Inputs:
    compiled = [
        {"path": p, "ok": False, "error": {"message": m, "file": f"{p}/main.k", "line": 6}}
        for p, m in (compile_errors or {}).items()
    ]
    return pull_request.Inputs(
        previews=[fleet.preview()],
        changed=fleet.changed(),
        compile=[compiled] if compiled else [],
    )


def render(fleet: Fleet, budget: int = DEFAULT_BUDGET, **kwargs: Any) -> comment.Rendered:
    report = pull_request.build(inputs(fleet, **kwargs), sha=SHA, run_url=RUN)
    return comment.render(report, budget=budget)


def older(project: str, env: str) -> list[dict[str, Any]]:
    """A stack that was behind: its image moves from 1.26.0, not 1.27.3."""
    live = deployment(project, env, image="nginx:1.26.0")
    planned = copy.deepcopy(live)
    set_image(NEW)(planned)
    return [change(live, planned)]


def drops_legacy(project: str, env: str) -> list[dict[str, Any]]:
    """The common change plus a ConfigMap that only this stack deletes."""
    gone = configmap(project, env, "legacy", {"mode": "old"})
    return [*Fleet(0, edits=[set_image(NEW)]).standard(project, env), change(gone, None)]


def compile_failure(path: str) -> dict[str, Any]:
    return {"message": f"compile failed: {COMPILE_ERROR}", "file": f"{path}/main.k", "line": 6}


def exceptions_fleet(projects: int = 100, extra: dict[str, Any] | None = None) -> Fleet:
    broken = "appops/app002/prod"
    return Fleet(
        projects,
        edits=[set_image(NEW)],
        special={
            "appops/app007/dev": older,
            "appops/app010/staging": drops_legacy,
            broken: compile_failure(broken),
            **(extra or {}),
        },
    )


def test_one_change_in_300_stacks() -> None:
    result = render(Fleet(100, edits=[set_image(NEW)]))
    text = result.text
    assert not result.truncated
    assert (
        "- `spec.template.spec.containers[name=main].image`: `nginx:1.27.3` → `nginx:1.27.4` "
        "in 300 Deployments across 300 stacks" in text
    )
    assert text.count("<details>") == 1  # the folded stack list, nothing per stack
    assert "<details><summary>The 300 stacks (every changed stack): 100 production-like" in text
    assert "- production-like: `prod` of 100 projects: `app000, app001," in text
    assert "### Exceptions" not in text
    assert len(text) < 6_000
    check_golden("grouped-one-change", text)


def test_300_stacks_with_three_exceptions() -> None:
    fleet = exceptions_fleet()
    result = render(fleet, compile_errors={"appops/app002/prod": COMPILE_ERROR})
    text = result.text
    assert not result.truncated
    assert "in 298 Deployments across 298 stacks" in text
    head = text.split("### Changes across stacks")[0]
    rows = [line for line in head.splitlines() if line.startswith("| ") and "`" in line]
    # What to look at first: the failure, then the delete, then the rest.
    assert rows[0].startswith("| ❌ | **compile error** | `appops/app002/prod` (production-like)")
    assert rows[1].startswith("| 🗑️ | delete ConfigMap `legacy` only here")
    assert any("differs from change 1" in r and "`appops/app007/dev`" in r for r in rows)
    exceptions = text.split("### Exceptions")[1]
    order = re.findall(r"<summary><code>([^<]+)</code>", exceptions)
    assert order == ["appops/app002/prod", "appops/app010/staging", "appops/app007/dev"]
    assert "`appops/app002/prod/main.k:6`: expected int, got str(two)" in exceptions
    assert (
        "`spec.template.spec.containers[name=main].image`: `nginx:1.26.0` → `nginx:1.27.4` "
        "(change 1: `nginx:1.27.3` → `nginx:1.27.4`)" in exceptions
    )
    assert "-  mode: old" in exceptions  # the delete's diff
    assert exceptions.count("expected int, got str(two)\n  -->") == 1
    check_golden("grouped-exceptions", text)


def test_two_unrelated_changes() -> None:
    paths = Fleet(40).paths()
    image, label = set(paths[:80]), set(paths[60:])

    def both(project: str, env: str) -> list[dict[str, Any]]:
        live = deployment(project, env)
        planned = copy.deepcopy(live)
        if f"appops/{project}/{env}" in image:
            set_image(NEW)(planned)
        if f"appops/{project}/{env}" in label:
            add_label("cost-center", "cc-42")(planned)
        return [change(live, planned)]

    result = render(Fleet(40, special=dict.fromkeys(paths, both)))
    text = result.text
    assert not result.truncated
    assert "**2** distinct changes across stacks, **0** stacks with exceptions" in text
    assert "in 80 Deployments across 80 stacks" in text
    assert "- `metadata.labels.cost-center`: (absent) → `cc-42`" in text
    assert "in 60 Deployments across 60 stacks." in text
    check_golden("grouped-two-changes", text)


def test_stacks_that_fail_the_same_way_are_one_exception() -> None:
    """A base-model bug breaks 30 stacks with one error: shown once, stacks folded."""
    base_error = (
        "expected int, got str(many)\n"
        "  --> base/pkg/models/frontend/server.k:74:5\n"
        "   |\n"
        " 74 |     replicas: int = defaults.replicas\n"
    )
    paths = Fleet(100).paths()
    broken = paths[:30]
    fleet = Fleet(100, edits=[set_image(NEW)])
    compiled = []
    for path in broken:
        fleet.special[path] = {
            "message": f"compile failed: {base_error}",
            "file": None,
            "line": None,
        }
        error = {"message": base_error, "file": "base/pkg/models/frontend/server.k", "line": 74}
        compiled.append({"path": path, "ok": False, "error": error})
    own = "appops/app050/dev"  # a stack-specific failure stays its own exception
    fleet.special[own] = {"message": "compile failed: boom", "file": None, "line": None}
    compiled.append({"path": own, "ok": False, "error": {"message": f"{own}/main.k: boom",
                     "file": f"{own}/main.k", "line": 1}})  # fmt: skip
    inputs = pull_request.Inputs(
        previews=[fleet.preview()], changed=fleet.changed(), compile=[compiled]
    )
    report = pull_request.build(inputs, sha=SHA, run_url=RUN)
    text = comment.render(report).text
    (fg,) = report.grouping.failure_groups
    assert len(fg.stacks) == 30 and len(fg.production) == 10
    assert report.grouping.failed == tuple(sorted([*broken, own]))
    assert [e.stack for e in report.grouping.exceptions] == [own]
    assert (
        "| ❌ | **compile error** at `base/pkg/models/frontend/server.k:74`: "
        "`expected int, got str(many)` | 30 stacks (10 production-like) |" in text
    )
    assert "**31** stacks with exceptions" in text
    assert "<summary>❌ compile error in 30 stacks (10 production-like): the same failure" in text
    assert text.count("replicas: int = defaults.replicas") == 1  # the message once
    assert f"<summary><code>{own}</code>: ❌ compile error</summary>" in text
    assert "in 269 Deployments across 269 stacks" in text
    data = comment.to_json(report)
    assert [len(g["stacks"]) for g in data["failureGroups"]] == [30]
    check_golden("grouped-failures", text)


def test_a_single_stack_pr_looks_as_before() -> None:
    """One stack: the per-stack layout, byte for byte what it always rendered."""
    fleet = Fleet(1, envs=("dev",), edits=[set_image(NEW)])
    report = pull_request.build(inputs(fleet), sha=SHA, run_url=RUN)
    auto = comment.render(report)
    assert auto.text == comment.render(report, layout="stacks").text
    assert "Identical changes are shown once" not in auto.text
    assert "| `appops/app000/dev` | imports base/pkg/models/frontend | 📝 changes |" in auto.text


def one_stack_of_three_changes(project: str, env: str) -> list[dict[str, Any]]:
    live = deployment(project, env)
    planned = copy.deepcopy(live)
    set_image(NEW)(planned)
    planned["spec"]["replicas"] = 3
    gone = configmap(project, env, "legacy", {"mode": "old"})
    new = secret(project, env, "db", {"password": "c2VjcmV0"})
    return [change(live, planned), change(gone, None), change(None, new)]


def test_a_single_stack_pr_matches_the_comment_from_before_grouping() -> None:
    """golden/single-stack.md was rendered by the code before grouping existed
    (commit 6b02eea, ``konfig.report.pull_request.render``) from this same input: an
    update, a delete and a created Secret in one stack. Today's default layout must
    still produce it byte for byte."""
    fleet = Fleet(1, envs=("prod",), special={"appops/app000/prod": one_stack_of_three_changes})
    report = pull_request.build(inputs(fleet), sha=SHA, run_url=RUN)
    result = comment.render(report)
    assert not result.truncated
    assert "### Changes across stacks" not in result.text
    assert "c2VjcmV0" not in result.text
    assert comment.to_json(report)["layout"] == "stacks"
    check_golden("single-stack", result.text)


def test_a_few_stacks_keep_the_per_stack_layout() -> None:
    report = pull_request.build(inputs(Fleet(3, edits=[set_image(NEW)])), sha=SHA)
    assert "Identical changes are shown once" not in comment.render(report).text
    grouped = comment.render(report, layout="grouped").text
    assert "in 9 Deployments across 9 stacks" in grouped


def test_2000_stacks_and_5_exceptions_fit_well_under_the_limit() -> None:
    extra = {
        "appops/app020/qa": older,
        "appops/app021/prod": drops_legacy,
    }
    fleet = exceptions_fleet(500, extra)
    fleet.envs = ("dev", "staging", "prod", "qa")
    result = render(fleet, compile_errors={"appops/app002/prod": COMPILE_ERROR})
    text = result.text
    assert len(fleet.paths()) == 2000
    assert not result.truncated and result.omitted == ()
    assert len(text) < 30_000, len(text)
    assert "Shortened" not in text
    for path in ("appops/app002/prod", "appops/app007/dev", "appops/app010/staging",
                 "appops/app020/qa", "appops/app021/prod"):  # fmt: skip
        assert f"<summary><code>{path}</code>" in text
    assert "in 1,997 Deployments across 1,997 stacks" in text  # 2 differ, 1 failed


def test_summary_has_the_groups_and_every_stack() -> None:
    report = pull_request.build(inputs(exceptions_fleet(20)), sha=SHA, run_url=RUN)
    full = comment.render_full(report, budget=SUMMARY_LIMIT_BYTES - 1024)
    assert "### Changes across stacks" in full.text
    assert "### Every stack" in full.text
    for path in exceptions_fleet(20).paths():
        assert f"| `{path}` |" in full.text
        if path != "appops/app002/prod":
            assert f"<summary><code>{path}</code>" in full.text
    assert full.text.count("+          image: nginx:1.27.4") >= 59


def test_a_tight_budget_drops_lists_then_diffs_and_says_so() -> None:
    fleet = exceptions_fleet(100)
    report = pull_request.build(inputs(fleet), sha=SHA, run_url=RUN)
    roomy = comment.render(report, budget=60_000)
    assert not roomy.truncated
    tight = comment.render(report, budget=4_000)
    assert len(tight.text) <= 4_000
    assert tight.truncated
    assert "Shortened to stay under GitHub's 65,536-character comment limit" in tight.text
    assert "- `spec.template.spec.containers[name=main].image`: `nginx:1.27.3`" in tight.text
    assert "The list of stacks is in the job summary" in tight.text or "Every changed" in tight.text
    for path in ("appops/app002/prod", "appops/app007/dev", "appops/app010/staging"):
        assert path in tight.text  # shown, or named in the footer


CANARY = "c2VjcmV0LWNhbmFyeS12YWx1ZQ=="  # base64 of the plain canary below
CANARY_PLAIN = "secret-canary-value"


def test_grouped_secret_changes_never_show_a_value() -> None:
    """300 stacks rotate one Secret key; the producer forgot to mask (a faulty input)."""
    paths = Fleet(100).paths()

    def rotate(project: str, env: str) -> list[dict[str, Any]]:
        live = secret(project, env, "db", {"password": "b2xk", "user": CANARY})
        planned = secret(project, env, "db", {"password": CANARY, "user": CANARY})
        new = secret(project, env, "api", {"token": CANARY, "plain": CANARY_PLAIN})
        return [
            change(live, planned, unmasked=True),
            change(None, new, unmasked=True),
        ]

    fleet = Fleet(100, special=dict.fromkeys(paths, rotate))
    doc = fleet.preview()
    assert CANARY in json.dumps(doc)  # the input really carries it
    report = pull_request.build(pull_request.Inputs(previews=[doc]), sha=SHA, run_url=RUN)
    shown = comment.render(report).text
    full = comment.render_full(report, budget=SUMMARY_LIMIT_BYTES - 1024).text
    data = json.dumps(comment.to_json(report))
    assert "Identical changes are shown once" in shown
    for text in (shown, full, data):
        assert CANARY not in text and CANARY_PLAIN not in text
        assert "c2VjcmV0" not in text
    assert "- `data.password`: `*** (before)` → `*** (after)` in 300 Secrets across 300 stacks" in (
        shown
    )


def test_production_comes_from_the_change_set_else_from_the_default_patterns() -> None:
    fleet = Fleet(2, edits=[set_image(NEW)])
    changed = fleet.changed()
    changed["stacks"][0]["production"] = True  # appops/app000/dev, by its stack.yaml
    changed["stacks"][2]["production"] = False  # appops/app000/prod, by its stack.yaml
    report = pull_request.build(
        pull_request.Inputs(previews=[fleet.preview()], changed=changed), sha=SHA
    )
    assert [s.path for s in report.stacks if s.production] == [
        "appops/app000/dev",
        "appops/app001/prod",
    ]
    alone = pull_request.build(pull_request.Inputs(previews=[fleet.preview()]), sha=SHA)
    assert [s.path for s in alone.stacks if s.production] == [
        "appops/app000/prod",
        "appops/app001/prod",
    ]
    custom = pull_request.build(
        pull_request.Inputs(previews=[fleet.preview()]), sha=SHA, production=("appops/app001/*",)
    )
    assert [s.path for s in custom.stacks if s.production] == [
        "appops/app001/dev",
        "appops/app001/prod",
        "appops/app001/staging",
    ]


def test_json_matches_its_schema_and_names_the_groups() -> None:
    fleet = exceptions_fleet(30)
    report = pull_request.build(
        inputs(fleet, compile_errors={"appops/app002/prod": COMPILE_ERROR}), sha=SHA
    )
    data = comment.to_json(report)
    assert contracts.violations("report", data) == []
    assert data["layout"] == "grouped" and data["status"] == "failed"
    shared = [g for g in data["groups"] if g["role"] == "shared"]
    assert len(shared) == 1 and shared[0]["number"] == 1 and len(shared[0]["stacks"]) == 88
    assert shared[0]["fields"] == [
        {"path": "spec.template.spec.containers[name=main].image",
         "before": "nginx:1.27.3", "after": NEW}
    ]  # fmt: skip
    assert [e["stack"] for e in data["exceptions"]] == [
        "appops/app002/prod",
        "appops/app010/staging",
        "appops/app007/dev",
    ]
    variant = next(g for g in data["groups"] if g["role"] == "variant")
    assert variant["variantOf"] == shared[0]["id"]
    prod = {s["path"]: s["production"] for s in data["stacks"]}
    assert prod["appops/app002/prod"] is True and prod["appops/app002/dev"] is False


def test_json_lists_what_a_preview_could_not_plan() -> None:
    fleet = Fleet(2)
    doc = fleet.preview()
    skipped = {
        "id": "postgresql:postgresql_role:app000-prod",
        "runtime": "Terraform",
        "reason": "not previewed: credentials APP000_PROD_PGHOST, APP000_PROD_PGPASSWORD missing",
    }
    for stack in doc["stacks"]:
        if stack["path"] == "appops/app000/prod":
            stack["notPreviewed"] = [skipped]
    data = comment.to_json(pull_request.build(pull_request.Inputs(previews=[doc]), sha=SHA))
    assert contracts.violations("report", data) == []
    listed = {s["path"]: s["notPreviewed"] for s in data["stacks"]}
    assert listed["appops/app000/prod"] == [{"id": skipped["id"], "reason": skipped["reason"]}]
    assert all(v == [] for p, v in listed.items() if p != "appops/app000/prod")


def test_a_failure_group_and_a_failed_stack_of_its_own_sort_together() -> None:
    """A failure group of non-production stacks beside a non-production stack failing its
    own way (no change group): both rows rank alike up to the tie-break, which compared a
    count with a path (TypeError in `konfig report`: a 1,000-stack live round on the forge
    got no comment)."""
    paths = Fleet(100).paths()
    broken = [p for p in paths if p.endswith("/dev")][:30]
    own = "appops/app050/dev"
    assert own not in broken
    fleet = Fleet(100, edits=[set_image(NEW)])
    compiled = []
    for path in broken:
        fleet.special[path] = {"message": "compile failed: boom", "file": None, "line": None}
        error = {"message": "boom", "file": "base/pkg/models/frontend/server.k", "line": 74}
        compiled.append({"path": path, "ok": False, "error": error})
    fleet.special[own] = {"message": "compile failed: its own", "file": None, "line": None}
    compiled.append({"path": own, "ok": False, "error": {"message": f"{own}/main.k: its own",
                     "file": f"{own}/main.k", "line": 1}})  # fmt: skip
    inputs = pull_request.Inputs(
        previews=[fleet.preview()], changed=fleet.changed(), compile=[compiled]
    )
    report = pull_request.build(inputs, sha=SHA, run_url=RUN)
    (fg,) = report.grouping.failure_groups
    assert len(fg.stacks) == 30 and not fg.production
    assert [e.stack for e in report.grouping.exceptions] == [own]
    text = comment.render(report).text
    # the group (30 stacks) first, then the one stack, both in "Look at these first"
    group_row = text.index("| ❌ | **compile error** at `base/pkg/models/frontend/server.k:74`")
    own_row = text.index(f"| `{own}` |")
    assert group_row < own_row, text

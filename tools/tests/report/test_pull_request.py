"""Golden tests of the PR report (``tools/tests/report/golden/<case>.md``).

Rewrite the goldens after an intended change with ``KONFIG_UPDATE_GOLDEN=1`` and
review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from konfig.report import applied, comment, pull_request
from konfig.report.budget import COMMENT_LIMIT, DEFAULT_BUDGET, utf8_bytes
from konfig.report.inputs import ReportInputError

GOLDEN = Path(__file__).parent / "golden"
SHA = "0123456789abcdef0123456789abcdef01234567"
RUN = "https://github.example/acme/config/actions/runs/42"
CANARY = "c2VjcmV0LWNhbmFyeS12YWx1ZQ=="  # never allowed anywhere in a report
CANARY_PLAIN = "s3cr3t-canary-value"

ZERO = {"create": 0, "update": 0, "replace": 0, "delete": 0, "unchanged": 0}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.md"
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (KONFIG_UPDATE_GOLDEN=1)"


def change(
    ns: str | None,
    kind: str,
    name: str,
    action: str,
    *,
    api: str = "v1",
    reason: str = "",
    diff: str = "",
    validated: bool = True,
) -> dict[str, Any]:
    ident = f"{api}:{kind}:{ns}:{name}" if ns else f"{api}:{kind}:{name}"
    return {
        "id": ident,
        "apiVersion": api,
        "kind": kind,
        "namespace": ns,
        "name": name,
        "action": action,
        "reason": reason,
        "validated": validated,
        "fields": [],
        "diff": diff,
    }


def stack(
    path: str, changes: list[dict[str, Any]], *, deleted: bool = False, error: Any = None
) -> dict[str, Any]:
    counts = dict(ZERO)
    for c in changes:
        counts[c["action"]] += 1
    parts = path.split("/")
    return {
        "path": path,
        "project": parts[1],
        "stack": "/".join(parts[2:]),
        "context": "admin",
        "deleted": deleted,
        "status": "error" if error else "ok",
        "error": error,
        "specDigest": None if (deleted or error) else "d" * 64,
        "priorCommit": None,
        "priorDigest": None,
        "counts": counts,
        "changes": [] if error else sorted(changes, key=lambda c: c["id"]),
    }


def preview(*stacks: dict[str, Any]) -> dict[str, Any]:
    totals = {a: sum(s["counts"][a] for s in stacks) for a in ZERO}
    return {
        "schemaVersion": 1,
        "kind": "KonfigPreview",
        "hasChanges": any(totals[a] for a in ("create", "update", "replace", "delete")),
        "counts": totals,
        "stacks": sorted(stacks, key=lambda s: s["path"]),
    }


def changed(*paths: str, reasons: str = "changed file in the stack", deleted: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    return {
        "base": "origin/main",
        "head": SHA,
        "merge_base": "f" * 40,
        "stacks": [{"path": p, "reasons": [f"{reasons}: {p}/main.k"]} for p in paths],
        "deleted_stacks": list(deleted),
        "projects": sorted({p.split("/")[1] for p in (*paths, *deleted)}),
    }


def deployment_diff(ns: str, name: str, before: int, after: int) -> str:
    return (
        f"--- live/apps/v1:Deployment:{ns}:{name}\n"
        f"+++ planned/apps/v1:Deployment:{ns}:{name}\n"
        "@@ -5,7 +5,7 @@\n"
        f"   name: {name}\n"
        f"   namespace: {ns}\n"
        " spec:\n"
        f"-  replicas: {before}\n"
        f"+  replicas: {after}\n"
        "   selector:\n"
        "     matchLabels:\n"
    )


def render(inputs: pull_request.Inputs, budget: int = DEFAULT_BUDGET) -> comment.Rendered:
    report = pull_request.build(inputs, sha=SHA, run_url=RUN)
    return comment.render(report, budget=budget)


def test_no_changes() -> None:
    path = "appops/guestbook/dev"
    result = render(
        pull_request.Inputs(
            previews=[
                preview(stack(path, [change("guestbook-dev", "Service", "web", "unchanged")]))
            ],
            changed=changed(path),
            compile=[[{"path": path, "ok": True, "resources": 3, "seconds": 0.01, "error": None}]],
        )
    )
    assert not result.truncated
    assert "✅ no changes" in result.text
    check_golden("no-changes", result.text)


def test_many_stacks() -> None:
    stacks = []
    for i in range(8):
        ns = f"shop-{i}"
        path = f"appops/shop/s{i}"
        items = [change(ns, "ConfigMap", "settings", "unchanged")]
        if i % 2 == 0:
            items.append(
                change(
                    ns,
                    "Deployment",
                    "web",
                    "update",
                    api="apps/v1",
                    reason="differs from the cluster in 1 field",
                    diff=deployment_diff(ns, "web", 1, i + 2),
                )
            )
        if i % 3 == 0:
            items.append(
                change(
                    ns,
                    "Widget",
                    "w",
                    "create",
                    api="example.com/v1",
                    reason="its CustomResourceDefinition is created by this plan",
                    validated=False,
                    diff=f"--- live/example.com/v1:Widget:{ns}:w\n+++ planned/example.com/v1:"
                    f"Widget:{ns}:w\n@@ -0,0 +1,3 @@\n+kind: Widget\n+metadata:\n+  name: w\n",
                )
            )
        stacks.append(stack(path, items))
    stacks.append(
        stack(
            "appops/legacy/prod",
            [
                change(
                    "legacy",
                    "Service",
                    "old",
                    "delete",
                    reason="stack deleted",
                    validated=False,
                    diff="--- live/v1:Service:legacy:old\n+++ planned/v1:Service:legacy:old\n"
                    "@@ -1,2 +0,0 @@\n-kind: Service\n-metadata: {name: old}\n",
                )
            ],
            deleted=True,
        )
    )
    paths = [s["path"] for s in stacks if not s["deleted"]]
    result = render(
        pull_request.Inputs(
            previews=[preview(*stacks[:4]), preview(*stacks[4:])],  # two matrix shards
            changed=changed(
                *paths, reasons="imports base/pkg/models", deleted=("appops/legacy/prod",)
            ),
        )
    )
    assert not result.truncated
    assert result.text.count("<details>") == 6  # 4 updated + 1 more created + deleted
    assert (
        "| `appops/shop/s1` | imports base/pkg/models: appops/shop/s1/main.k | ✅ no changes |"
        in (result.text)
    )
    assert "create (validated at apply)" in result.text
    check_golden("many-stacks", result.text)


def test_compile_failure() -> None:
    broken = "appops/broken/dev"
    good = "appops/alpha/dev"
    message = (
        "expected int, got str(two)\n"
        "  --> appops/broken/dev/main.k:6:5\n"
        "   |\n"
        ' 6 |     replicas = "two"\n'
        "   |     ^ expected int, got str(two)"
    )
    error = {"message": message, "file": f"{broken}/main.k", "line": 6, "column": 5}
    result = render(
        pull_request.Inputs(
            changed=changed(good, broken),
            compile=[
                [
                    {"path": good, "ok": True, "resources": 3, "seconds": 0.01, "error": None},
                    {"path": broken, "ok": False, "resources": 0, "seconds": 0.0, "error": error},
                ]
            ],
            tests=[
                {
                    "ok": False,
                    "stacks": [
                        {
                            "path": good,
                            "status": "passed",
                            "golden": "g",
                            "message": "",
                            "diffs": [],
                        },
                        {
                            "path": broken,
                            "status": "compile-error",
                            "error": {"message": message, "file": f"{broken}/main.k", "line": 6},
                        },
                    ],
                    "unitTests": [
                        {
                            "package": "base/pkg/models/frontend",
                            "name": "test_ports",
                            "passed": False,
                            "seconds": 0.001,
                            "file": "base/pkg/models/frontend/server_test.k",
                            "line": 12,
                            "message": "assert failed: port must be > 0",
                        }
                    ],
                }
            ],
            checks=[
                [
                    {
                        "rule": "policy/image-tag",
                        "severity": "error",
                        "message": "image nginx:latest uses a floating tag",
                        "file": f"{good}/main.k",
                        "line": 4,
                        "stack": good,
                        "resource": None,
                    },
                    {
                        "rule": "policy/replicas",
                        "severity": "warning",
                        "message": "a warning is not a failure",
                        "file": f"{good}/main.k",
                        "line": 5,
                        "stack": good,
                        "resource": None,
                    },
                ]
            ],
            previews=[
                preview(
                    stack(
                        broken,
                        [],
                        error={
                            "message": f"compile failed: {message}",
                            "file": f"{broken}/main.k",
                            "line": 6,
                        },
                    )
                )
            ],
        )
    )
    text = result.text
    assert "❌ failed" in text
    assert "`appops/broken/dev/main.k:6`" in text
    assert "`base/pkg/models/frontend/server_test.k:12`" in text
    assert "`appops/alpha/dev/main.k:4`" in text and "policy/image-tag" in text
    assert "a warning is not a failure" not in text
    # compile, test and preview all report the compile error: it is shown once
    assert text.count("expected int, got str(two)\n  -->") == 1
    assert "**preview**" not in text
    check_golden("compile-failure", text)


def test_secret_values_never_appear() -> None:
    ns = "pay-prod"
    masked = (
        f"--- live/v1:Secret:{ns}:db\n+++ planned/v1:Secret:{ns}:db\n@@ -1,6 +1,6 @@\n"
        " apiVersion: v1\n data:\n-  password: '*** (before)'\n+  password: '*** (after)'\n"
        "   user: '***'\n kind: Secret\n"
    )
    # A faulty (older) producer that forgot to mask: the report must mask anyway.
    leaky = (
        f"--- live/v1:Secret:{ns}:api\n+++ planned/v1:Secret:{ns}:api\n@@ -1,9 +1,9 @@\n"
        " apiVersion: v1\n data:\n"
        f"-  token: {CANARY}\n"
        f"+  token: {CANARY}x\n"
        " kind: Secret\n"
        " stringData:\n"
        "   cert: |\n"
        f"     {CANARY_PLAIN}\n"
        " metadata:\n"
        "   name: api\n"
    )
    result = render(
        pull_request.Inputs(
            previews=[
                preview(
                    stack(
                        "appops/pay/prod",
                        [
                            change(
                                ns, "Secret", "db", "update", reason="data changed", diff=masked
                            ),
                            change(
                                ns, "Secret", "api", "update", reason="data changed", diff=leaky
                            ),
                        ],
                    )
                )
            ],
            changed=changed("appops/pay/prod"),
        )
    )
    assert CANARY not in result.text and CANARY_PLAIN not in result.text
    assert "c2VjcmV0" not in result.text
    assert "password: '*** (before)'" in result.text
    assert "token: ***" in result.text
    assert "name: api" in result.text  # metadata after stringData is kept
    check_golden("secret", result.text)


def _big_inputs(stacks: int = 40, lines: int = 60) -> pull_request.Inputs:
    items = []
    for i in range(stacks):
        ns = f"big-{i:02d}"
        diff = f"--- live/v1:ConfigMap:{ns}:data\n+++ planned/v1:ConfigMap:{ns}:data\n@@ -1 +1 @@\n"
        diff += "".join(f"-  key{j}: old-value-{j:04d}-{'x' * 20}\n" for j in range(lines))
        diff += "".join(f"+  key{j}: new-value-{j:04d}-{'y' * 20}\n" for j in range(lines))
        items.append(
            stack(
                f"appops/big/s{i:02d}",
                [change(ns, "ConfigMap", "data", "update", reason="data changed", diff=diff)],
            )
        )
    return pull_request.Inputs(
        previews=[preview(*items)], changed=changed(*[s["path"] for s in items])
    )


def test_over_the_limit_keeps_whole_stacks_and_says_so() -> None:
    inputs = _big_inputs()
    report = pull_request.build(inputs, sha=SHA, run_url=RUN)
    # The per-stack layout (the job summary's, or --layout stacks); by default 40
    # stacks with the same change are grouped (test_grouped.py).
    unbounded = comment.render(report, budget=10_000_000, layout="stacks")
    assert len(unbounded.text) > COMMENT_LIMIT  # the case is really over the limit
    result = comment.render(report, layout="stacks")
    assert len(result.text) <= DEFAULT_BUDGET
    assert result.truncated and not result.cut
    assert "Truncated to stay under GitHub's 65,536-character comment limit" in result.text
    # Every stack is in the summary table; each section present is whole.
    for i in range(40):
        assert f"| `appops/big/s{i:02d}` |" in result.text
    sections = {
        f"appops/big/s{i:02d}": result.text.split(f"<code>appops/big/s{i:02d}</code>")[1].split(
            "</details>"
        )[0]
        for i in range(40)
        if f"<code>appops/big/s{i:02d}</code>" in result.text
    }
    whole = {p for p, text in sections.items() if f"+  key59: new-value-0059-{'y' * 20}\n" in text}
    assert whole and len(whole) < 40
    # What did not fit whole is named in the footer and has at most a compact section.
    assert set(result.omitted) == {f"appops/big/s{i:02d}" for i in range(40)} - whole
    for path in result.omitted:
        assert path not in sections or "see the job summary" in sections[path]
    assert f"Diffs not shown for {len(result.omitted)} stacks" in result.text
    check_golden("over-limit", result.text)


def test_one_huge_stack_is_cut_as_last_resort() -> None:
    report = pull_request.build(_big_inputs(stacks=1, lines=2000), sha=SHA, run_url=RUN)
    result = comment.render(report, budget=20_000)
    assert len(result.text) <= 20_000
    assert result.cut == ("appops/big/s00",)
    assert "Cut inside the section of `appops/big/s00`" in result.text
    assert result.text.count("```") % 2 == 0  # every fence is closed


def test_huge_summary_table_drops_quiet_rows_first() -> None:
    quiet = [stack(f"appops/q/s{i:04d}", []) for i in range(1500)]
    loud = stack(
        "appops/z/changed",
        [change("z", "ConfigMap", "c", "create", reason="new", diff="+a\n")],
    )
    inputs = pull_request.Inputs(previews=[preview(*quiet, loud)])
    result = comment.render(pull_request.build(inputs, sha=SHA), budget=30_000)
    assert len(result.text) <= 30_000
    assert "| `appops/z/changed` |" in result.text
    assert "1500 more stacks are not listed here" not in result.text  # some quiet rows fit
    assert re.search(r"\| … \| \d+ more stacks are not listed here", result.text)
    rows = re.findall(r"^\| `appops/q/", result.text, flags=re.M)
    assert 0 < len(rows) < 1500
    assert result.truncated


def test_summary_budget_counts_bytes() -> None:
    report = pull_request.build(_big_inputs(stacks=3), sha=SHA)
    result = comment.render(report, budget=8_000, measure=utf8_bytes)
    assert len(result.text.encode()) <= 8_000


def test_placeholder() -> None:
    text = comment.render_placeholder(SHA, RUN)
    assert text.startswith("## Konfig preview for `0123456789ab`: ⏳ running")
    assert RUN in text


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (pull_request.Inputs(previews=[{"kind": "Other"}]), "KonfigPreview"),
        (
            pull_request.Inputs(previews=[{"kind": "KonfigPreview", "schemaVersion": 2}]),
            "unsupported schemaVersion 2",
        ),
        (pull_request.Inputs(compile=[{"path": "x"}]), "compile: expected a list"),
        (pull_request.Inputs(checks=[{"nope": 1}]), "check: expected a list"),
    ],
)
def test_wrong_shapes_are_named(inputs: pull_request.Inputs, message: str) -> None:
    with pytest.raises(ReportInputError, match=message):
        pull_request.build(inputs, sha=SHA)


def _applied(path: str, ok: bool, **counts: int) -> dict[str, Any]:
    objects = [
        {"id": f"apps/v1:Deployment:{path.split('/')[1]}:web", "phase": "apply",
         "outcome": "failed", "message": "timed out after 120s waiting for Available: 0/2 ready"},
        {"id": f"v1:Service:{path.split('/')[1]}:web", "phase": "apply",
         "outcome": "skipped", "message": "depends on a failed object"},
    ] if not ok else []  # fmt: skip
    full = dict.fromkeys(applied.APPLY_COUNTS, 0) | counts
    return {
        "path": path,
        "ok": ok,
        "error": None if ok else "1 object failed, 1 skipped",
        "counts": full,
        "seconds": 12.345,
        "objects": objects,
        "inventory": {"name": "i", "applysetId": "a", "commit": SHA, "specDigest": "d",
                      "members": 3},
    }  # fmt: skip


def test_apply_report() -> None:
    report = applied.build_apply(
        [
            {
                "ok": False,
                "stacks": [
                    _applied("appops/web/prod", False, updated=1, failed=1, skipped=1),
                    _applied("appops/api/dev", True, created=3),
                ],
            }
        ],
        [{"ok": True, "stacks": [_applied("appops/old/dev", True, deleted=4)]}],
        sha=SHA,
        run_url=RUN,
    )
    text = applied.render_apply(report)
    assert "❌ failed" in text.splitlines()[0]
    assert "| `appops/old/dev` | destroy | ✅ ok | 0 | 0 | 0 | 4 |" in text
    assert "timed out after 120s waiting for Available" in text
    check_golden("apply", text)
    nothing = applied.render_apply(applied.build_apply([], sha=SHA))
    assert "Nothing to apply" in nothing and "✅ applied" in nothing


def test_pr_controlled_text_cannot_escape_its_markup() -> None:
    path = "appops/x/``evil`` <img src=x>|dev"
    inputs = pull_request.Inputs(
        changed={
            "stacks": [{"path": path, "reasons": ["<script>alert(1)</script> | col"]}],
            "deleted_stacks": [],
        },
        compile=[
            [
                {
                    "path": path,
                    "ok": False,
                    "error": {"message": "bad ```\n</details> <b>x</b>", "file": path, "line": 1},
                }
            ]
        ],
    )
    text = comment.render(pull_request.build(inputs, sha=SHA)).text
    assert "<script>" not in text
    # `<img ...>` only ever inside a code span (literal there) or escaped
    assert text.count("<img") == text.count("``` appops/x/``evil`` <img src=x>\\|dev") == 2
    assert "&lt;script&gt;alert(1)&lt;/script&gt; \\| col" in text
    assert "``` appops/x/``evil`` <img src=x>\\|dev ```" in text  # a code span
    assert "<summary><code>appops/x/``evil`` &lt;img src=x&gt;|dev</code>" in text
    assert "````text\nbad ```\n</details> <b>x</b>\n````" in text  # fenced, longer fence

"""The pull-request comment shows conflicts first (issue 14): a preview conflict (an object
of another stack, or of nobody in Konfig) and a check's ownership finding come above the
summary table, and their stacks' status is "conflict"."""

from __future__ import annotations

from typing import Any

from konfig.report import comment, pull_request
from konfig.report.previews import KIND, SCHEMA_VERSION

SHA = "0123456789abcdef0123456789abcdef01234567"


def _change(ns: str, name: str, action: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"v1:ConfigMap:{ns}:{name}",
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": ns,
        "name": name,
        "action": action,
        "reason": extra.pop("reason", "not in the cluster"),
        "validated": True,
        "fields": [],
        "diff": "",
        **extra,
    }


def _stack(path: str, changes: list[dict[str, Any]]) -> dict[str, Any]:
    counts = dict.fromkeys(("create", "update", "replace", "delete", "unchanged", "conflict"), 0)
    for c in changes:
        counts[c["action"]] += 1
    return {
        "path": path,
        "status": "ok",
        "error": None,
        "deleted": False,
        "counts": counts,
        "changes": changes,
    }


def test_conflicts_come_first() -> None:
    preview = {
        "kind": KIND,
        "schemaVersion": SCHEMA_VERSION,
        "hasChanges": True,
        "hasConflicts": True,
        "counts": {"create": 2, "update": 0, "replace": 0, "delete": 0, "unchanged": 0},
        "stacks": [
            _stack("appops/aaa/dev", [_change("a", "x", "create")]),
            _stack(
                "appops/zzz/dev",
                [
                    _change("z", "mine", "create"),
                    _change(
                        "z",
                        "shared",
                        "conflict",
                        owner="appops/aaa/dev",
                        reason="owned by appops/aaa/dev: konfig will not take it over",
                    ),
                ],
            ),
        ],
    }
    check = [
        {
            "rule": "ownership/shared-object",
            "severity": "error",
            "message": "v1:Namespace:web is also declared by appops/aaa/dev "
            "(appops/aaa/dev/main.k:5)",
            "file": "appops/mmm/dev/main.k",
            "line": 5,
            "stack": "appops/mmm/dev",
        }
    ]
    report = pull_request.build(pull_request.Inputs(previews=[preview], checks=[check]), sha=SHA)
    assert [s.status for s in report.stacks] == ["changes", "conflict", "conflict"]
    assert [c.stack for c in report.conflicts] == ["appops/mmm/dev", "appops/zzz/dev"]
    text = comment.render(report).text
    conflicts = text.index("### ⚠️ Conflicts")
    assert conflicts < text.index("| Stack |")  # above the summary table
    section = text[conflicts : text.index("| Stack |")]
    assert "`appops/zzz/dev`: `v1:ConfigMap:z:shared`: owned by appops/aaa/dev" in section
    assert "`appops/mmm/dev`: `appops/mmm/dev/main.k:5`: v1:Namespace:web is also declared" in (
        section
    )
    # the stacks' own rows and sections say so too
    assert "| `appops/zzz/dev` |  | ⚠️ conflict |" in text
    assert "<code>appops/zzz/dev</code>: ⚠️ conflict" in text

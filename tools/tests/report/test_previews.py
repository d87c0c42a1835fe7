"""Rendering previews (pure): JSON contract, text and markdown."""

from __future__ import annotations

import base64
import json

from konfig.engine.diff import compare
from konfig.engine.plan import Change, StackPlan
from konfig.pipeline.previewing import Preview, StackError, StackPreview
from konfig.report.previews import render_json, render_markdown, render_text

SECRET_VALUE = "s3cr3t-canary-value"


def change(rid: str, action: str, before: dict | None, after: dict | None, **kw: object) -> Change:
    api_version, kind, *rest = rid.split(":")
    namespace, name = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
    cmp = compare(before, after, name=rid)
    return Change(
        id=rid,
        api_version=api_version,
        kind=kind,
        namespace=namespace,
        name=name,
        action=action,  # type: ignore[arg-type]
        reason=str(kw.get("reason", "because")),
        validated=bool(kw.get("validated", True)),
        desired=after,
        live=before,
        fields=cmp.fields,
        diff=cmp.diff,
    )


def cm(value: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n"},
        "data": {"k": value},
    }


def sec(value: str) -> dict:
    data = {"password": base64.b64encode(value.encode()).decode()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "n"},
        "data": data,
    }


def sample() -> Preview:
    plan = StackPlan(
        path="appops/shop/prod",
        context="admin",
        deleted=False,
        spec_digest="d" * 64,
        prior_commit="abc",
        prior_digest="e" * 64,
        changes=(
            change(
                "v1:ConfigMap:n:c",
                "update",
                cm("1"),
                cm("2"),
                reason="differs from the cluster in 1 field",
            ),
            change("v1:Secret:n:s", "create", None, sec(SECRET_VALUE)),
            change("v1:Namespace:n", "unchanged", None, None),
        ),
    )
    broken = StackPreview(
        "appops/shop/dev",
        context="admin",
        error=StackError("compile failed: boom", "appops/shop/dev/main.k", 3),
    )
    return Preview.of([StackPreview(plan.path, plan=plan), broken])


def test_json_contract() -> None:
    doc = json.loads(render_json(sample()))
    assert doc["schemaVersion"] == 1 and doc["kind"] == "KonfigPreview"
    assert doc["hasChanges"] is True
    assert doc["counts"] == {
        "create": 1, "update": 1, "replace": 0, "delete": 0, "unchanged": 1, "conflict": 0
    }  # fmt: skip
    assert [s["path"] for s in doc["stacks"]] == ["appops/shop/dev", "appops/shop/prod"]
    dev, prod = doc["stacks"]
    assert dev["status"] == "error" and dev["changes"] == []
    assert dev["error"] == {
        "message": "compile failed: boom",
        "file": "appops/shop/dev/main.k",
        "line": 3,
    }
    assert (prod["project"], prod["stack"], prod["priorCommit"]) == ("shop", "prod", "abc")
    update = prod["changes"][0]
    assert update["fields"] == [{"path": "data.k", "before": "1", "after": "2"}]
    assert update["diff"].startswith("--- live/v1:ConfigMap:n:c\n+++ planned/v1:ConfigMap:n:c\n")
    assert "desired" not in update and "live" not in update


def test_no_format_contains_the_secret() -> None:
    encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
    preview = sample()
    for text in (render_json(preview), render_markdown(preview), render_text(preview, diff=True)):
        assert SECRET_VALUE not in text and encoded not in text


def test_error_messages_are_scrubbed_of_known_secret_values() -> None:
    preview = sample()
    leaky = StackPreview("appops/shop/qa", error=StackError(f"server said {SECRET_VALUE}"))
    preview = Preview.of([*preview.stacks, leaky])
    assert SECRET_VALUE not in render_text(preview)
    assert "server said ***" in render_text(preview)


def test_text_report() -> None:
    text = render_text(sample())
    assert text == (
        "appops/shop/dev (context admin): error\n"
        "  appops/shop/dev/main.k:3: compile failed: boom\n"
        "\n"
        "appops/shop/prod (context admin): 1 to create, 1 to update, 0 to replace, 0 to delete, "
        "1 unchanged\n"
        "    ~ update  v1:ConfigMap:n:c  (differs from the cluster in 1 field)\n"
        '        data.k: "1" → "2"\n'
        "    + create  v1:Secret:n:s  (because)\n"
        "\n"
        "Preview: 1 to create, 1 to update, 0 to replace, 0 to delete, 1 unchanged; "
        "1 stack failed\n"
    )


def test_text_colour_only_when_asked() -> None:
    assert "\x1b[" not in render_text(sample())
    assert "\x1b[" in render_text(sample(), color=True)


def test_markdown_report() -> None:
    md = render_markdown(sample())
    assert md.startswith("**Konfig preview**: errors.")
    assert "| `appops/shop/prod` | ok | 1 | 1 | 0 | 0 | 1 |" in md
    assert "| `appops/shop/dev` | error | 0 | 0 | 0 | 0 | 0 |" in md
    assert "| update | `v1:ConfigMap:n:c` | differs from the cluster in 1 field |" in md
    assert "```diff\n--- live/v1:ConfigMap:n:c" in md
    assert "<details open><summary>❌ `appops/shop/dev`" in md


def test_markdown_fence_outgrows_backticks_in_content() -> None:
    plan = StackPlan(
        "appops/a/b",
        None,
        False,
        None,
        None,
        None,
        (change("v1:ConfigMap:n:c", "update", cm("x"), cm("```")),),
    )
    md = render_markdown(Preview.of([StackPreview(plan.path, plan=plan)]))
    assert "````diff\n" in md


def test_no_changes() -> None:
    plan = StackPlan(
        "appops/a/b",
        "admin",
        False,
        None,
        None,
        None,
        (change("v1:Namespace:n", "unchanged", None, None),),
    )
    preview = Preview.of([StackPreview(plan.path, plan=plan)])
    assert not preview.has_changes
    assert render_text(preview).endswith("(no changes)\n")
    assert "No changes." in render_markdown(preview)


def test_text_shows_where_a_long_value_changed() -> None:
    """A long multi-line value changed in line 31: the text report shows that line on
    both sides (it used to cut both at the same place, before the change)."""
    before = "\n".join(f"setting{i} = value number {i} of the configuration" for i in range(60))
    after = before.replace("setting30 = value number 30", "setting30 = value number 3000")
    plan = StackPlan(
        "appops/shop/prod",
        "admin",
        False,
        "d" * 64,
        None,
        None,
        (change("v1:ConfigMap:n:c", "update", cm(before), cm(after)),),
    )
    text = render_text(Preview.of([StackPreview(plan.path, plan=plan)]))
    line = next(x for x in text.splitlines() if x.strip().startswith("data.k:"))
    assert 'line 31: "setting30 = value number 30 of the configuration"' in line
    assert 'line 31: "setting30 = value number 3000 of the configuration"' in line
    long_before, long_after = "x" * 200 + "a" + "y" * 50, "x" * 200 + "b" + "y" * 50
    plan = StackPlan(
        "appops/shop/prod",
        "admin",
        False,
        "d" * 64,
        None,
        None,
        (change("v1:ConfigMap:n:c", "update", cm(long_before), cm(long_after)),),
    )
    text = render_text(Preview.of([StackPreview(plan.path, plan=plan)]))
    line = next(x for x in text.splitlines() if x.strip().startswith("data.k:"))
    was, now = line.split(" → ")
    assert "xa" in was and "xb" in now and len(now) <= 80

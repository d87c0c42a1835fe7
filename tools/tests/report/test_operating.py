"""Golden tests of what operating shows: the status table, the drift report (text and
the issue's markdown), and the per-stack apply blocks (``golden/<case>``).

Rewrite the goldens after an intended change with ``KONFIG_UPDATE_GOLDEN=1`` and review
the diff.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from konfig import contracts
from konfig.engine.drift import DriftedField, ObjectDrift
from konfig.engine.health import Health
from konfig.engine.inventory import Inventory, Member, applyset_id
from konfig.engine.stackrun import Event, ObjectResult, StackResult
from konfig.engine.survey import InventoryStatus, ObjectStatus
from konfig.pipeline.status import (
    TERRAFORM_UNREAD,
    Cluster,
    StackStatus,
    StatusReport,
    TerraformMode,
)
from konfig.report import drift as drift_report
from konfig.report import status as status_report
from konfig.report.progress import StackLog, block, object_line, summary_lines
from konfig.tofu.observe import NOT_REFRESHED
from konfig.words import plural

GOLDEN = Path(__file__).parent / "golden"
HEAD = "4c1e2a0" + "0" * 33
OLD = "91be0d3" + "1" * 33


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (KONFIG_UPDATE_GOLDEN=1)"


def inventory(path: str, ids: list[str], commit: str) -> Inventory:
    name = "konfig." + ".".join(path.split("/")[1:])
    return Inventory(
        stack_path=path,
        members=tuple(Member(i, f"uid-{n}") for n, i in enumerate(ids)),
        commit=commit,
        spec_digest="d",
        applyset_id=applyset_id(name),
        applied_at="2026-11-23T18:50:02Z",
        name=name,
        applied_fields={},
    )


def ok(rid: str) -> ObjectStatus:
    return ObjectStatus(rid, Health("current", "ready"), ObjectDrift(rid, "in_sync"))


def report() -> StatusReport:
    dev_ids = ["apps/v1:Deployment:guestbook-dev:guestbook", "v1:Service:guestbook-dev:redis"]
    scaled = ObjectDrift(
        dev_ids[0],
        "drifted",
        (DriftedField("spec.replicas", 5, False),),
        "1 field changed outside Konfig since the last apply",
    )
    dev = InventoryStatus(
        inventory("appops/guestbook/dev", dev_ids, HEAD),
        (
            ObjectStatus(dev_ids[0], Health("current", "5/5 replicas available"), scaled),
            ObjectStatus(
                dev_ids[1],
                Health("not_found", "object not found"),
                ObjectDrift(dev_ids[1], "deleted", message="deleted outside Konfig"),
            ),
        ),
    )
    prod_id = "apps/v1:Deployment:guestbook-prod:guestbook"
    prod = InventoryStatus(
        inventory("appops/guestbook/prod", [prod_id], OLD),
        (
            ObjectStatus(
                prod_id,
                Health("failed", "progress deadline exceeded"),
                ObjectDrift(prod_id, "in_sync"),
            ),
        ),
    )
    old_id = "v1:Namespace:old-dev"
    orphan = InventoryStatus(inventory("appops/old/dev", [old_id], OLD), (ok(old_id),))
    edge_id = "apps/v1:Deployment:http-echo-edge:http-echo"
    edge = InventoryStatus(
        inventory("appops/http-echo/edge", [edge_id], OLD),
        (ObjectStatus(edge_id, Health("current", "ready"), ObjectDrift(edge_id, "unknown")),),
    )
    return StatusReport(
        HEAD,
        (Cluster("admin", "https://127.0.0.1:41731"), Cluster("edge", "https://127.0.0.1:38211")),
        (
            StackStatus("appops/guestbook/dev", "admin", "applied", dev, commits_behind=0),
            StackStatus(
                "appops/guestbook/prod",
                "admin",
                "applied",
                prod,
                commits_behind=3,
                pending=("since applied commit 91be0d3: appops/guestbook/prod/main.k changed",),
            ),
            StackStatus("appops/webshop/dev", "admin", "never-applied"),
            StackStatus(
                "appops/old/dev", "admin", "orphaned", orphan, commits_behind=3, orphan="deleted"
            ),
            StackStatus("appops/http-echo/edge", "edge", "applied", edge, commits_behind=3),
        ),
    )


def test_status_table() -> None:
    text = status_report.render_text(report())
    check_golden("status.txt", text)
    assert "\x1b[" not in text  # never terminal codes in plain text


def test_status_json_contract() -> None:
    text = status_report.render_json(report())
    doc = json.loads(text)
    assert not contracts.violations("status", doc, text=text)  # every kind of stack in it
    assert (doc["kind"], doc["schemaVersion"], doc["head"]) == ("KonfigStatus", 1, HEAD)
    assert doc["summary"] == {
        "stacks": 5, "applied": 3, "behind": 1, "neverApplied": 1, "orphaned": 1,
        "errors": 0, "unhealthy": 2, "progressing": 0, "drifted": 1,
    }  # fmt: skip
    dev = doc["stacks"][0]
    assert dev["drift"] == {"state": "drifted", "objects": 2, "fields": 1, "unknown": 0}
    assert dev["health"]["state"] == "missing" and dev["upToDate"] is True
    assert doc["stacks"][1]["upToDate"] is False and doc["stacks"][1]["commitsBehind"] == 3
    assert doc["stacks"][4]["drift"]["state"] == "unknown"


def drift() -> drift_report.DriftReport:
    planned = {
        ("appops/guestbook/dev", "apps/v1:Deployment:guestbook-dev:guestbook", "spec.replicas"): 3
    }
    return drift_report.DriftReport(report(), planned)


def test_drift_text_and_issue_markdown() -> None:
    check_golden("drift.txt", drift_report.render_text(drift()))
    markdown = drift_report.render_markdown(drift(), run_url="https://github.example/runs/7")
    check_golden("drift.md", markdown)
    text = drift_report.render_json(drift())
    doc = json.loads(text)
    assert not contracts.violations("drift", doc, text=text)
    assert doc["hasDrift"] is True and doc["summary"]["objects"] == 2
    (field,) = doc["stacks"][0]["objects"][0]["fields"]
    assert field == {"path": "spec.replicas", "live": 5, "removed": False, "planned": 3}


def test_no_drift_markdown_is_one_line() -> None:
    quiet = StatusReport(HEAD, (Cluster("admin", "https://x"),), ())
    text = drift_report.render_markdown(drift_report.DriftReport(quiet))
    assert text == "**Konfig drift check** at `4c1e2a000000`: no drift in 0 stacks.\n"


def terraform_report(mode: TerraformMode) -> StatusReport:
    """One in-sync stack with a database, its Terraform resources read as ``mode`` says."""
    path = "appops/shop/prod"
    kube_id = "apps/v1:Deployment:shop:shop"
    objects = [ok(kube_id)]
    if mode != "skip":
        for rid in ("cyrilgdn/postgresql:postgresql_database:shop",
                    "cyrilgdn/postgresql:postgresql_role:shop"):  # fmt: skip
            drift = (
                ObjectDrift(rid, "unknown", message=NOT_REFRESHED)
                if mode == "state"
                else ObjectDrift(rid, "in_sync")
            )
            objects.append(ObjectStatus(rid, Health("current", "applied"), drift))
    status = InventoryStatus(inventory(path, [kube_id], HEAD), tuple(objects))
    stack = StackStatus(path, "admin", "applied", status, commits_behind=0, terraform=mode)
    return StatusReport(HEAD, (Cluster("admin", "https://x"),), (stack,), mode)


def test_status_and_drift_without_the_refresh_never_say_no_drift() -> None:
    out: dict[str, str] = {}
    for mode in ("refresh", "state", "skip"):
        status = terraform_report(mode)
        table = status_report.render_text(status)
        doc = json.loads(status_report.render_json(status))
        assert not contracts.violations("status", doc)
        assert doc["terraform"] == {"mode": mode}
        assert doc["stacks"][0]["terraform"]["mode"] == mode
        report = drift_report.DriftReport(status)
        text = drift_report.render_json(report)
        drift_doc = json.loads(text)
        assert not contracts.violations("drift", drift_doc, text=text)
        assert drift_doc["hasDrift"] is False
        out[mode] = "\n".join(
            [table, drift_report.render_text(report), drift_report.render_markdown(report)]
        )
        assert drift_doc["terraform"] == {
            "mode": mode,
            "notChecked": [] if mode == "refresh" else ["appops/shop/prod"],
        }
        assert [s["state"] for s in drift_doc["stacks"]] == [
            "in-sync" if mode == "refresh" else "unknown"
        ]
    check_golden("terraform-modes.txt", "\n".join(f"## {m}\n{t}" for m, t in out.items()))
    assert "all healthy, no drift\n" in out["refresh"]
    assert "No drift in 1 stack." in out["refresh"]
    for mode in ("state", "skip"):
        assert "No drift in" not in out[mode] and "no drift in" not in out[mode]
        assert "No drift found in what was checked (1 stack)" in out[mode]
        assert "drift unknown in 1 stack" in out[mode]
        assert f"--terraform {mode}" in out[mode]


def test_a_state_that_could_not_be_read_is_not_taken_for_no_drift() -> None:
    refreshed = terraform_report("refresh")
    (stack,) = refreshed.stacks
    unread = replace(
        stack,
        status=replace(stack.status, objects=stack.status.objects[:1]),
        error=f"{TERRAFORM_UNREAD}: appops/shop/prod: the Terraform state cannot be read",
    )
    status = replace(refreshed, stacks=(unread,))
    assert unread.drift == "unknown"
    table = status_report.render_text(status)
    assert "unknown (Terraform resources not read)" in table, table
    assert "drift unknown in 1 stack" in table
    report = drift_report.DriftReport(status)
    text = drift_report.render_text(report)
    assert text.splitlines()[0] == (
        "appops/shop/prod: Terraform resources not checked: appops/shop/prod: the "
        "Terraform state cannot be read"
    )
    summary = (
        "No drift found in what was checked (1 stack); Terraform drift not checked in 1 stack."
    )
    assert summary in text, text
    doc = json.loads(drift_report.render_json(report))
    assert doc["terraform"] == {"mode": "refresh", "notChecked": ["appops/shop/prod"]}


def test_markdown_code_spans_survive_hostile_values() -> None:
    hostile = "`</details><img src=x>|"
    rid = "v1:ConfigMap:ns:c"
    st = InventoryStatus(
        inventory("appops/p/dev", [rid], HEAD),
        (
            ObjectStatus(
                rid,
                Health("current"),
                ObjectDrift(rid, "drifted", (DriftedField("data.k", hostile, False),), "x"),
            ),
        ),
    )
    rep = StatusReport(
        HEAD, (Cluster("admin"),), (StackStatus("appops/p/dev", "admin", "applied", st),)
    )
    markdown = drift_report.render_markdown(drift_report.DriftReport(rep))
    # the value sits inside a code span its own backtick cannot close: inert on GitHub
    assert '| `` "`</details><img src=x>\\|" `` |' in markdown
    assert markdown.count("</details>\n") == 1  # the section's own closing tag, on its line


def test_apply_blocks_name_every_object_and_count_right() -> None:
    log = StackLog("appops/guestbook/dev", "admin")
    for event in (
        Event("appops/guestbook/dev", "inventory", "inventory konfig.guestbook.dev: 1 member"),
        Event("appops/guestbook/dev", "level", "level 1/1: 2 objects"),
        Event(
            "appops/guestbook/dev",
            "object",
            "created Deployment web in namespace shop (apps/v1)",
            ObjectResult(
                "apps/v1:Deployment:shop:web",
                "created",
                "created Deployment web in namespace shop (apps/v1)",
            ),
        ),
        Event(
            "appops/guestbook/dev",
            "object",
            "failed: the server said 422",
            ObjectResult("v1:Service:shop:web", "failed", "failed: the server said 422"),
        ),
    ):
        log.add(event)
    result = StackResult(
        "appops/guestbook/dev",
        False,
        (
            ObjectResult("apps/v1:Deployment:shop:web", "created"),
            ObjectResult("v1:Service:shop:web", "failed"),
        ),
        "appops/guestbook/dev: 1 failed, 0 skipped",
        None,
        2.5,
    )
    check_golden("apply-block.txt", block("apply", log, result))
    assert object_line(
        ObjectResult("v1:ConfigMap:a:b", "unchanged", "unchanged ConfigMap b in namespace a (v1)")
    ) == ("  unchanged v1:ConfigMap:a:b")
    good = StackResult("appops/a/dev", True, (ObjectResult("v1:ConfigMap:a:b", "created"),))
    edge = StackResult("appops/e/dev", True, (ObjectResult("v1:ConfigMap:e:b", "unchanged"),))
    assert summary_lines(
        "Apply", [good, edge], {"appops/a/dev": "admin", "appops/e/dev": "edge"}
    ) == [
        "Apply complete: 1 created, 0 updated, 0 replaced, 0 deleted, 1 unchanged",
        "  cluster admin: 1 stack: 1 created",
        "  cluster edge: 1 stack: 1 unchanged",
    ]


def test_plural() -> None:
    assert [plural(n, "object") for n in (0, 1, 2)] == ["0 objects", "1 object", "2 objects"]
    assert plural(2, "orphaned inventory") == "2 orphaned inventories"
    assert plural(3, "class") == "3 classes" and plural(2, "day") == "2 days"

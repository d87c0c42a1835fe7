"""A noisy stack in the PR comment: the fields ignore rules kept out are listed (one
click away) and not counted as changes. The preview JSON is made by the engine's own
code (engine.ignore.ignore_fields, then the real comparison) from a live and a declared
Deployment; golden: ``golden/ignored-noisy-stack.md`` (``KONFIG_UPDATE_GOLDEN=1``)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from fleet import deployment, object_id, preview_doc, stack_doc

from konfig import contracts
from konfig.engine.diff import compare
from konfig.engine.ignore import autoscaled, ignore_fields, rules_from
from konfig.report import comment, pull_request

PATH = "appops/shop/prod"
GOLDEN = Path(__file__).parent / "golden"
SHA = "0123456789abcdef0123456789abcdef01234567"
RUN = "https://github.example/acme/config/actions/runs/42"


def check_golden(name: str, text: str, *, suffix: str = "md") -> None:
    path = GOLDEN / f"{name}.{suffix}"
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (KONFIG_UPDATE_GOLDEN=1)"


def noisy_change() -> dict[str, Any]:
    """A Deployment whose image the PR changes, with three noisy fields ignored: the
    replicas an HPA sets, the sidecar a mesh injects, an annotation a tool writes."""
    declared = deployment("shop", "prod", image="nginx:1.27.4", replicas=2)
    live = deployment("shop", "prod", replicas=6)
    live["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "7"}
    declared["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "1"}
    live["spec"]["template"]["spec"]["containers"].append(
        {"name": "istio-proxy", "image": "istio/proxyv2:1.22.1"}
    )
    containers = {"f:containers": {'k:{"name":"main"}': {}, 'k:{"name":"istio-proxy"}': {}}}
    live["metadata"]["managedFields"] = [
        {"manager": "konfig", "operation": "Apply",
         "fieldsV1": {"f:spec": {"f:template": {"f:spec": containers}}}},
        {"manager": "kube-controller-manager", "operation": "Update",
         "fieldsV1": {"f:spec": {"f:replicas": {}}, "f:metadata": {
             "f:annotations": {"f:deployment.kubernetes.io/revision": {}}}}},
    ]  # fmt: skip
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "shop", "namespace": "shop-prod"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": "shop"}}}  # fmt: skip
    rules = rules_from(
        [
            {"paths": ["/spec/template/spec/containers[name=istio-proxy]"],
             "reason": "injected by the mesh"},
            {"selector": {"kind": "Deployment"},
             "paths": ["/metadata/annotations/deployment.kubernetes.io~1revision"],
             "reason": "written by the Deployment controller"},
        ],
        "konfig.yaml",
    ) + autoscaled([hpa])  # fmt: skip
    sent, ignored = ignore_fields(declared, live, rules)
    planned = copy.deepcopy(live)  # what the dry-run returns: live, merged with what is sent
    planned["spec"]["template"]["spec"]["containers"][0]["image"] = sent["spec"]["template"][
        "spec"
    ]["containers"][0]["image"]
    comparison = compare(live, planned, name=object_id(live))
    return {
        "id": object_id(live), "apiVersion": "apps/v1", "kind": "Deployment",
        "namespace": "shop-prod", "name": "shop", "action": "update",
        "reason": "differs from the cluster in 1 field", "validated": True,
        "fields": [f.to_dict() for f in comparison.fields], "diff": comparison.diff,
        "ignored": [f.to_dict() for f in ignored],
    }  # fmt: skip


def test_a_noisy_stack_lists_ignored_fields_without_counting_them() -> None:
    change = noisy_change()
    assert [f["path"] for f in change["fields"]] == [
        "spec.template.spec.containers[name=main].image"
    ]
    assert {(f["path"], f["applied"]) for f in change["ignored"]} == {
        ("/spec/replicas", "left out"),
        ("/spec/template/spec/containers[name=istio-proxy]", "kept live"),
        ("/metadata/annotations/deployment.kubernetes.io~1revision", "left out"),
    }
    preview = preview_doc([stack_doc(PATH, [change])])
    report = pull_request.build(pull_request.Inputs(previews=[preview]), sha=SHA, run_url=RUN)
    (stack,) = report.stacks
    assert stack.counts["update"] == 1 and len(stack.changes) == 1 and len(stack.ignored) == 3
    text = comment.render(report).text
    assert "🙈 **3** fields ignored by rules, not counted as changes" in text
    assert "1 to update" in text
    assert "<summary>3 fields ignored by rules (not counted as changes)</summary>" in text
    assert (
        "| `Deployment shop-prod/shop` | `/spec/replicas` | `6` | `2` | left out | `automatic`"
        in text
    )
    check_golden("ignored-noisy-stack", text)


def proposed_preview(stacks: int = 1) -> dict[str, Any]:
    """A pull request that scales shop/prod to 0 and adds a rule ignoring replicas:
    previewed with the base's rules (none), so the change is a change, and the rule is
    listed as proposed (``ignoreRulesProposed``, as konfig preview --rules-from writes)."""
    docs = []
    for i in range(stacks):
        path = PATH if i == 0 else f"appops/shop{i}/prod"
        project = path.split("/")[1]
        live = deployment(project, "prod", replicas=3)
        declared = deployment(project, "prod", replicas=0)
        sent, ignored = ignore_fields(declared, live, ())  # the base declares no rule
        assert ignored == ()
        comparison = compare(live, sent, name=object_id(live))
        docs.append(
            stack_doc(
                path,
                [
                    {
                        "id": object_id(live),
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "namespace": f"{project}-prod",
                        "name": project,
                        "action": "update",
                        "reason": "differs from the cluster in 1 field",
                        "validated": True,
                        "fields": [f.to_dict() for f in comparison.fields],
                        "diff": comparison.diff,
                        "dangers": [
                            {"class": "capacity", "reason": f"Deployment {project}: replicas 3 → 0"}
                        ],
                    }
                ],
            )
        )
    preview = preview_doc(docs)
    preview["ignoreRulesProposed"] = [
        {"change": "added", "source": f"{PATH}/stack.yaml ignore[0]",
         "reason": "scaled by the | team", "selector": {"kind": "Deployment"},
         "paths": ["/spec/replicas"], "managers": [], "stacks": [PATH]},
        {"change": "removed", "source": "konfig.yaml ignore[2]",
         "reason": "injected by the mesh", "selector": {},
         "paths": ["/spec/template/spec/containers[name=istio-proxy]"],
         "managers": ["istio"], "stacks": [d["path"] for d in docs]},
    ]  # fmt: skip
    return preview


def test_rules_a_pull_request_adds_are_listed_in_their_own_section() -> None:
    preview = proposed_preview()
    report = pull_request.build(pull_request.Inputs(previews=[preview]), sha=SHA, run_url=RUN)
    (stack,) = report.stacks
    # the change the new rule would hide is shown and counted
    assert stack.counts["update"] == 1 and stack.ignored == ()
    assert [p.change for p in report.proposed_rules] == ["added", "removed"]
    text = comment.render(report).text
    assert "### 🙈 Ignore rules this change proposes" in text
    assert "1 to update" in text and "| **capacity** | 1 |" in text
    assert (
        "| **added** | appops/shop/prod/stack.yaml ignore[0]: Deployment /spec/replicas "
        "(scaled by the \\| team) | 1: `appops/shop/prod` |"
    ) in text
    assert text.index("⚠️ Dangers") < text.index("🙈 Ignore rules this change proposes")
    check_golden("ignore-rules-proposed", text)


def test_report_json_carries_them() -> None:
    """``konfig report --json``: the proposed rules, each once with its stacks, as data
    (contract report.schema.json); golden ``golden/ignore-rules-proposed.json``."""
    preview = proposed_preview(stacks=2)
    report = pull_request.build(pull_request.Inputs(previews=[preview]), sha=SHA, run_url=RUN)
    data = comment.to_json(report)
    assert contracts.violations("report", data) == []
    assert data["ignoreRulesProposed"] == [
        {
            "change": "added",
            "source": f"{PATH}/stack.yaml ignore[0]",
            "text": f"{PATH}/stack.yaml ignore[0]: Deployment /spec/replicas "
            "(scaled by the | team)",
            "reason": "scaled by the | team",
            "selector": {"kind": "Deployment"},
            "paths": ["/spec/replicas"],
            "managers": [],
            "stacks": [PATH],
        },
        {
            "change": "removed",
            "source": "konfig.yaml ignore[2]",
            "text": report.proposed_rules[1].text,
            "reason": "injected by the mesh",
            "selector": {},
            "paths": ["/spec/template/spec/containers[name=istio-proxy]"],
            "managers": ["istio"],
            "stacks": ["appops/shop/prod", "appops/shop1/prod"],
        },
    ]
    check_golden("ignore-rules-proposed", json.dumps(data, indent=2) + "\n", suffix="json")
    # none proposed: an empty list, not a missing key
    del preview["ignoreRulesProposed"]
    plain = pull_request.build(pull_request.Inputs(previews=[preview]), sha=SHA, run_url=RUN)
    assert comment.to_json(plain)["ignoreRulesProposed"] == []


def test_the_grouped_comment_lists_them_too() -> None:
    preview = proposed_preview(stacks=12)
    report = pull_request.build(pull_request.Inputs(previews=[preview]), sha=SHA, run_url=RUN)
    rendered = comment.render(report)
    assert rendered.layout == "grouped"
    assert "### 🙈 Ignore rules this change proposes" in rendered.text
    assert "| **removed** |" in rendered.text and "12: `appops/shop/prod`, " in rendered.text
    assert "… and 9 more |" in rendered.text

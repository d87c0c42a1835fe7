"""Ignore rules on plain data: pointers with merge keys, selectors, the automatic HPA
rule and Flux's apply semantics from the live object's field managers (the real
control plane: test_ignore_cluster.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from konfig import contracts
from konfig.engine.ignore import (
    POINTER_PATTERN,
    IgnoreRule,
    autoscaled,
    ignore_fields,
    locations,
    parse_pointer,
    proposed_rules,
    rules_from,
    stack_rules,
    with_base_rules,
)
from konfig.errors import KonfigError
from konfig.repo.layout import Stack, discover


def managed(manager: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields}


def web(replicas: int = 1, sidecar: bool = False, *managers: dict[str, Any]) -> dict[str, Any]:
    containers = [{"name": "web", "image": "nginx:1"}]
    if sidecar:
        containers.append({"name": "istio-proxy", "image": "istio/proxy:1.22"})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"team": "a"},
                     "managedFields": list(managers)},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": containers}}},
    }  # fmt: skip


REPLICAS = {"f:spec": {"f:replicas": {}}}


def rule(*paths: str, **selector: Any) -> IgnoreRule:
    return rules_from([{"selector": selector, "paths": list(paths), "reason": "r"}], "x.yaml")[0]


def test_pointers_with_merge_keys_and_escapes() -> None:
    (seg,) = parse_pointer("/metadata/annotations/a.b~1c")[2:]
    assert seg.key == "a.b/c"
    segs = parse_pointer("/spec/template/spec/containers[name=istio-proxy]/image")
    assert (segs[3].key, segs[3].item_key, segs[3].item_value) == (
        "containers",
        "name",
        "istio-proxy",
    )
    live = web(1, True)
    assert locations(live, segs) == [("spec", "template", "spec", "containers", 1, "image")]
    for bad in ("spec/replicas", "/spec//x", "/spec/containers[name]", "/a~2"):
        with pytest.raises(KonfigError, match="is not a JSON Pointer"):
            parse_pointer(bad)


def test_selector() -> None:
    obj = web()
    assert rule("/spec/replicas", group="apps", kind="Deployment").selects(obj)
    assert rule("/spec/replicas", labels={"team": "a"}, namespace="shop").selects(obj)
    assert not rule("/spec/replicas", group="", kind="Deployment").selects(obj)
    assert not rule("/spec/replicas", labels={"team": "b"}).selects(obj)
    assert not rule("/spec/replicas", name="api").selects(obj)


def test_another_managers_field_is_left_out_and_listed() -> None:
    live = web(
        5, False, managed("konfig", {"f:spec": {"f:template": {}}}), managed("hpa", REPLICAS)
    )
    out, ignored = ignore_fields(web(1), live, [rule("/spec/replicas", kind="Deployment")])
    assert "replicas" not in out["spec"]
    (f,) = ignored
    assert (f.path, f.live, f.declared, f.applied, f.rule) == (
        "/spec/replicas", 5, 1, "left out", "x.yaml ignore[0]"
    )  # fmt: skip


def test_a_field_only_konfig_owns_is_kept_live() -> None:
    live = web(3, False, managed("konfig", REPLICAS))
    out, ignored = ignore_fields(web(1), live, [rule("/spec/replicas")])
    assert out["spec"]["replicas"] == 3
    assert [(f.live, f.declared, f.applied) for f in ignored] == [(3, 1, "kept live")]


def test_a_sidecar_konfig_would_remove_is_kept_live() -> None:
    owned = {"f:spec": {"f:template": {"f:spec": {"f:containers": {
        'k:{"name":"web"}': {}, 'k:{"name":"istio-proxy"}': {}}}}}}  # fmt: skip
    live = web(1, True, managed("konfig", owned))
    out, ignored = ignore_fields(
        web(1), live, [rule("/spec/template/spec/containers[name=istio-proxy]")]
    )
    names = [c["name"] for c in out["spec"]["template"]["spec"]["containers"]]
    assert names == ["web", "istio-proxy"]
    assert [f.applied for f in ignored] == ["kept live"] and ignored[0].declared is None


def test_managers_limit_a_rule_and_absent_fields_are_applied() -> None:
    live = web(5, False, managed("hpa", REPLICAS))
    only_other = [rules_from([{"paths": ["/spec/replicas"], "managers": ["someone"],
                               "reason": "r"}], "x.yaml")[0]]  # fmt: skip
    out, ignored = ignore_fields(web(1), live, only_other)
    assert out["spec"]["replicas"] == 1 and ignored == ()
    # not in the cluster: a create is applied as declared
    assert ignore_fields(web(1), None, [rule("/spec/replicas")]) == (web(1), ())
    # the same value: nothing to list
    same = web(1, False, managed("hpa", REPLICAS))
    assert ignore_fields(web(1), same, [rule("/spec/replicas")])[1] == ()


def test_an_hpa_makes_its_targets_replicas_ignored() -> None:
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "web-hpa", "namespace": "shop"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": "web"}}}  # fmt: skip
    (auto,) = autoscaled([hpa, web()])
    assert (auto.reason, auto.source, auto.paths) == (
        "scaled by HorizontalPodAutoscaler web-hpa", "automatic", ("/spec/replicas",)
    )  # fmt: skip
    assert auto.selects(web())
    other = copy.deepcopy(web())
    other["metadata"]["namespace"] = "elsewhere"
    assert not auto.selects(other)


def test_an_ignored_secret_value_is_masked() -> None:
    live = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop",
            "managedFields": [managed("vault", {"f:data": {"f:pw": {}}})]},
            "data": {"pw": "bGl2ZS12YWx1ZQ=="}}  # fmt: skip
    desired = {"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "db", "namespace": "shop"},
               "data": {"pw": "ZGVjbGFyZWQ="}}  # fmt: skip
    out, (f,) = ignore_fields(desired, live, [rule("/data/pw")])
    assert "pw" not in out["data"]
    assert (f.live, f.declared) == ("*** (before)", "*** (after)")
    assert "bGl2ZS12YWx1ZQ" not in repr(f.to_dict()) and "ZGVjbGFyZWQ" not in repr(f.to_dict())


def test_the_contract_and_the_engine_read_pointers_alike() -> None:
    rule = contracts.schema("common")["$defs"]["ignoreRule"]
    assert rule["properties"]["paths"]["items"]["pattern"] == POINTER_PATTERN


# --- a pull request is previewed with the base branch's rules ---------------------------

REPLICAS_RULE = {"selector": {"kind": "Deployment"}, "paths": ["/spec/replicas"],
                 "reason": "scaled by hand"}  # fmt: skip
SIDECAR_RULE = {"paths": ["/spec/template/spec/containers[name=istio-proxy]"],
                "reason": "injected by the mesh"}  # fmt: skip


def checkout(root: Path, konfig: list[Any], project: list[Any], stack: list[Any] | None) -> Path:
    """A small repository: konfig.yaml, appops/shop/project.yaml and (unless None) the
    stack appops/shop/dev, each with the given ignore rules."""
    (root / "appops/shop").mkdir(parents=True)
    (root / "kcl.mod").write_text('[package]\nname = "t"\n', encoding="utf-8")
    (root / "konfig.yaml").write_text(yaml.safe_dump({"ignore": konfig} if konfig else {}))
    (root / "appops/shop/project.yaml").write_text(
        yaml.safe_dump({"name": "shop", **({"ignore": project} if project else {})})
    )
    if stack is not None:
        (root / "appops/shop/dev").mkdir()
        (root / "appops/shop/dev/stack.yaml").write_text(
            yaml.safe_dump({"name": "dev", **({"ignore": stack} if stack else {})})
        )
    return root


def dev(root: Path) -> Stack:
    return discover(root).stack("shop/dev")


def test_a_rule_the_change_adds_is_proposed_and_not_applied(tmp_path: Path) -> None:
    base = discover(checkout(tmp_path / "base", [], [], []))
    head = dev(checkout(tmp_path / "head", [], [], [REPLICAS_RULE]))
    as_base = with_base_rules(head, base)
    assert stack_rules(as_base) == ()  # previewed with the base's: none
    assert as_base.raw["name"] == "dev"  # everything else is the change's
    (p,) = proposed_rules(head, as_base)
    assert p.change == "added"
    assert p.to_dict() == {
        "change": "added",
        "source": "appops/shop/dev/stack.yaml ignore[0]",
        "reason": "scaled by hand",
        "selector": {"kind": "Deployment"},
        "paths": ["/spec/replicas"],
        "managers": [],
    }


def test_changed_removed_and_moved_rules(tmp_path: Path) -> None:
    wider = {**REPLICAS_RULE, "selector": {}}
    base = discover(checkout(tmp_path / "base", [SIDECAR_RULE], [REPLICAS_RULE], []))
    # project.yaml's rule widened in place; konfig.yaml's rule moved to the stack
    head = dev(checkout(tmp_path / "head", [], [wider], [SIDECAR_RULE]))
    as_base = with_base_rules(head, base)
    assert [r.source for r in stack_rules(as_base)] == [
        "konfig.yaml ignore[0]",
        "appops/shop/project.yaml ignore[0]",
    ]
    found = {(p.change, p.rule.source, p.rule.group) for p in proposed_rules(head, as_base)}
    assert found == {("changed", "appops/shop/project.yaml ignore[0]", None)}
    # dropped: listed as removed (and still applied in the preview: as_base keeps it)
    head = dev(checkout(tmp_path / "head2", [SIDECAR_RULE], [], []))
    (p,) = proposed_rules(head, with_base_rules(head, base))
    assert (p.change, p.rule.source) == ("removed", "appops/shop/project.yaml ignore[0]")


def test_a_stack_new_in_the_change_gets_the_bases_inherited_rules_only(tmp_path: Path) -> None:
    base = discover(checkout(tmp_path / "base", [SIDECAR_RULE], [], None))
    head = dev(checkout(tmp_path / "head", [SIDECAR_RULE], [], [REPLICAS_RULE]))
    as_base = with_base_rules(head, base)
    assert [r.source for r in stack_rules(as_base)] == ["konfig.yaml ignore[0]"]
    assert [(p.change, p.rule.source) for p in proposed_rules(head, as_base)] == [
        ("added", "appops/shop/dev/stack.yaml ignore[0]")
    ]

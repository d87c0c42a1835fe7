"""Rules end to end through `konfig check --format json` on small real repositories."""

from __future__ import annotations

import json
from typing import Any

import yaml
from fixtures.rawstacks import (
    app_resources,
    deployment,
    pdb,
    pod_monitor,
    raw_stack,
    resource,
)
from fixtures.repos import KonfigRunner, RepoBuilder

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: {scope}
  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {{type: integer}}
"""


def widget(size: Any, namespace: str | None = "shop-dev") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "knob"}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": meta,
        "spec": {"size": size},
    }


def findings(konfig: KonfigRunner, builder: RepoBuilder, *args: str) -> list[dict[str, Any]]:
    result = konfig("check", "--format", "json", *args, cwd=builder.root)
    assert result.code in (0, 1), result.err
    data: list[dict[str, Any]] = json.loads(result.out)
    assert (result.code == 1) == any(f["severity"] == "error" for f in data)
    return data


def rules(data: list[dict[str, Any]]) -> list[str]:
    return sorted(f["rule"] for f in data)


def test_clean_stack_has_no_findings(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    raw_stack(repo_builder, "shop", "dev", app_resources("web", "shop-dev"))
    assert findings(konfig, repo_builder) == []


def test_custom_kind_is_known_from_a_crd_file_and_validated_against_it(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    raw_stack(repo_builder, "shop", "dev", [*app_resources("web", "shop-dev"), resource(widget(3))])
    assert rules(findings(konfig, repo_builder)) == ["schema/unknown-kind"]
    repo_builder.write("base/crds/widgets.yaml", CRD.format(scope="Namespaced"))
    assert findings(konfig, repo_builder) == []
    # the CRD's schema is enforced
    raw_stack(
        repo_builder, "shop", "dev", [*app_resources("web", "shop-dev"), resource(widget("big"))]
    )
    data = findings(konfig, repo_builder)
    assert rules(data) == ["schema/invalid"]
    assert "spec.size: 'big' is not of type 'integer'" in data[0]["message"]


def test_crd_scope_decides_about_namespaces(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    repo_builder.write("appops/README.md", "# stacks\n")
    repo_builder.write("base/crds/widgets.yaml", CRD.format(scope="Cluster"))
    raw_stack(repo_builder, "shop", "dev", [resource(widget(1))])
    assert rules(findings(konfig, repo_builder)) == ["spec/cluster-scoped-namespace"]
    raw_stack(repo_builder, "shop", "dev", [resource(widget(1, namespace=None))])
    assert findings(konfig, repo_builder) == []


def test_crd_rendered_by_another_stack_counts(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    crd = yaml.safe_load(CRD.format(scope="Namespaced"))
    raw_stack(repo_builder, "platform", "crds", [resource(crd)])
    raw_stack(repo_builder, "shop", "dev", [*app_resources("web", "shop-dev"), resource(widget(2))])
    assert findings(konfig, repo_builder) == []
    # checking the app stack alone: the CRD is known from the platform stack's golden
    assert rules(findings(konfig, repo_builder, "shop/dev")) == ["schema/unknown-kind"]
    assert konfig("test", "--update", "--no-unit", "platform/crds", cwd=repo_builder.root).code == 0
    assert findings(konfig, repo_builder, "shop/dev") == []


def test_policy_disabled_with_a_reason_is_silent(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    prod = [
        *app_resources("web", "shop-prod", replicas=1),
        resource(pod_monitor("web", "shop-prod")),
    ]
    raw_stack(repo_builder, "shop", "prod", [*prod, resource(pdb("web", "shop-prod"))])
    data = findings(konfig, repo_builder)
    assert rules(data) == ["policy/prod-replicas"]
    assert data[0]["file"] == "appops/shop/prod/main.k"
    raw_stack(
        repo_builder,
        "shop",
        "prod",
        [*prod, resource(pdb("web", "shop-prod"))],
        stack_yaml="name: prod\npolicies:\n  disable:\n"
        "    - rule: prod-replicas\n      reason: a singleton by design\n",
    )
    assert findings(konfig, repo_builder) == []


def test_prod_is_the_env_option_before_the_stack_name(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    live = [*app_resources("web", "shop-live"), resource(pod_monitor("web", "shop-live"))]
    raw_stack(repo_builder, "shop", "live", live)
    repo_builder.write(
        "appops/shop/live/ci-test/settings.yaml", "kcl_options:\n  - key: env\n    value: prod\n"
    )
    assert rules(findings(konfig, repo_builder)) == [
        "policy/prod-disruption-budget",
        "policy/prod-replicas",
    ]


def test_schema_reports_every_error_with_its_path(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    bad = deployment("web", "shop-dev")
    bad["spec"]["replicas"] = "two"
    bad["spec"]["template"]["spec"]["containers"][0]["port"] = 80
    ns = resource({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop-dev"}})
    raw_stack(repo_builder, "shop", "dev", [ns, resource(bad, [ns["id"]])])
    messages = sorted(f["message"] for f in findings(konfig, repo_builder))
    assert len(messages) == 2
    assert "spec.replicas: 'two' is not of type 'integer'" in messages[0]
    assert (
        "spec.template.spec.containers[0]: unknown field(s) ('port' was unexpected)"
        in (messages[1])
    )


def test_single_stack_check_ignores_other_projects_layout(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    raw_stack(repo_builder, "shop", "dev", app_resources("web", "shop-dev"))
    repo_builder.write("appops/other/project.yaml", "name: other\nowner: me\n")
    assert rules(findings(konfig, repo_builder)) == ["structure/unknown-key"]
    assert findings(konfig, repo_builder, "shop/dev") == []


def test_policy_disable_can_name_resources(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    ns = "shop-prod"
    spec = [
        *app_resources("leader", ns),
        resource(deployment("follower", ns)),
        resource(pdb("leader", ns)),
        resource(pdb("follower", ns)),
        resource(pod_monitor("leader", ns)),
        resource(pod_monitor("follower", ns)),
    ]
    exempt = (
        "name: prod\npolicies:\n  disable:\n    - rule: prod-replicas\n"
        "      reason: the leader is a single writer\n"
        f"      resources: [apps/v1:Deployment:{ns}:leader]\n"
    )
    raw_stack(repo_builder, "shop", "prod", spec, stack_yaml=exempt)
    data = findings(konfig, repo_builder)
    assert [(f["rule"], f["resource"]) for f in data] == [
        ("policy/prod-replicas", f"apps/v1:Deployment:{ns}:follower")
    ]
    raw_stack(
        repo_builder,
        "shop",
        "prod",
        spec,
        stack_yaml=exempt.replace("[apps/v1", "apps/v1").replace("leader]", "leader"),
    )
    assert "structure/invalid-value" in rules(findings(konfig, repo_builder))


def test_stack_yaml_production_must_be_a_boolean(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    resources = app_resources("web", "shop-dev")
    raw_stack(repo_builder, "shop", "dev", resources, stack_yaml="name: dev\nproduction: true\n")
    assert findings(konfig, repo_builder) == []
    raw_stack(repo_builder, "shop", "dev", resources, stack_yaml="name: dev\nproduction: yes-ish\n")
    (finding,) = findings(konfig, repo_builder)
    assert finding["rule"] == "structure/invalid-value"
    assert finding["message"] == "`production` must be a boolean, not the string 'yes-ish'"
    assert (finding["file"], finding["line"]) == ("appops/shop/dev/stack.yaml", 2)


def test_a_policy_crash_is_reported_on_the_stack_that_causes_it(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    broken = deployment("web", "shop-dev")
    broken["spec"]["template"]["spec"]["containers"] = "not-a-list"
    ns = resource({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop-dev"}})
    raw_stack(repo_builder, "shop", "dev", [ns, resource(broken, [ns["id"]])])
    raw_stack(repo_builder, "shop", "qa", app_resources("web", "shop-qa", image="nginx"))
    data = findings(konfig, repo_builder)
    by_stack = {(f["stack"], f["rule"]) for f in data}
    # the batch failed on dev; qa was still evaluated on its own
    assert ("appops/shop/dev", "policy/error") in by_stack
    assert ("appops/shop/qa", "policy/image-tag") in by_stack
    assert ("appops/shop/qa", "policy/error") not in by_stack

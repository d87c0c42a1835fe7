"""Objects in system namespaces: `konfig check` reports them, and preview and apply
refuse the stack by the same rule (``konfig.check.specrules.system_namespace_findings``),
with the file and line and how to fix it; konfig.yaml ``allowSystemNamespaces`` lifts it
for all three. Against the real control plane."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory as inv
from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"

# line 7: the ConfigMap in kube-system; line 8: the Namespace kube-public itself
MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {{apiVersion = "v1", kind = "ConfigMap", metadata = {{name = "{ns}-own", namespace = "{ns}"}}, data.k = "v"}}
        {{apiVersion = "v1", kind = "ConfigMap", metadata = {{name = "{ns}-sys", namespace = "kube-system"}}, data.k = "v"}}
        {extra}
    ]
}}
"""  # noqa: E501
PUBLIC = '{apiVersion = "v1", kind = "Namespace", metadata.name = "kube-public"}'


def _stack(repo: RepoBuilder, *, extra: str = "") -> tuple[str, str]:
    ns = unique("sysns")
    repo.stack(ns, "dev", main=MAIN.format(ns=ns, extra=extra), stack_yaml=STACK_YAML)
    return ns, f"appops/{ns}/dev/main.k"


def _nothing_written(kube: Kube, ns: str) -> None:
    assert kube.get("v1", "Namespace", ns, None) is None
    assert kube.get("v1", "ConfigMap", f"{ns}-sys", "kube-system") is None
    name = inv.inventory_name(f"appops/{ns}/dev")
    assert kube.get("v1", "ConfigMap", name, "konfig-system") is None
    assert kube.get("coordination.k8s.io/v1", "Lease", name, "konfig-system") is None


def _check(konfig: KonfigRunner, root: Path, ns: str) -> list[dict[str, Any]]:
    res = konfig("check", f"{ns}/dev", "--format", "json", cwd=root)
    assert res.code == 1, res.out + res.err
    found = [f for f in json.loads(res.out) if f["rule"] == "spec/system-namespace"]
    return sorted(found, key=lambda f: f["line"])


def test_preview_shows_the_stack_refused_at_the_file_and_line_exit_1(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    ns, main = _stack(repo_builder)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("preview", f"{ns}/dev", kc, cwd=repo_builder.root)
    assert res.code == 1, res.out + res.err
    assert f"{main}:7: refused (spec/system-namespace, as `konfig check` reports it): " in res.out
    assert f"v1:ConfigMap:kube-system:{ns}-sys is in the system namespace 'kube-system'" in res.out
    assert "allow it in konfig.yaml (`allowSystemNamespaces: [kube-system]`)" in res.out
    assert f"{ns}-own" not in res.out  # no plan of a stack apply refuses
    detailed = konfig("preview", f"{ns}/dev", kc, "--detailed-exitcode", cwd=repo_builder.root)
    assert detailed.code == 1
    as_json = konfig("preview", f"{ns}/dev", kc, "--format", "json", cwd=repo_builder.root)
    assert as_json.code == 1
    stack = json.loads(as_json.out)["stacks"][0]
    assert stack["status"] == "error" and stack["changes"] == []
    assert (stack["error"]["file"], stack["error"]["line"]) == (main, 7)
    # the same rule as `konfig check`, at the same place
    found = _check(konfig, repo_builder.root, ns)
    assert [(f["file"], f["line"]) for f in found] == [(main, 7)]
    assert found[0]["message"] in stack["error"]["message"]


def test_apply_refuses_before_asking_the_cluster_or_writing(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns, main = _stack(repo_builder, extra=PUBLIC)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=repo_builder.root)
    assert res.code == 1, res.out + res.err
    assert f"{main}:7: appops/{ns}/dev: nothing was applied: refused (spec/system-namespace" in (
        res.err
    )
    # every object the rule refuses, each at its line: the cluster-scoped Namespace too
    assert f"\n  {main}:8: v1:Namespace:kube-public is in the system namespace" in res.err
    assert "hint: `konfig check` lists every such object" in res.err
    assert "Traceback" not in res.err
    _nothing_written(kube, ns)
    assert [(f["file"], f["line"]) for f in _check(konfig, repo_builder.root, ns)] == [
        (main, 7),
        (main, 8),
    ]


def test_allow_system_namespaces_lifts_it_for_check_preview_and_apply(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns, _ = _stack(repo_builder)
    konfig_yaml = repo_builder.root / "konfig.yaml"
    konfig_yaml.write_text(
        konfig_yaml.read_text(encoding="utf-8") + "allowSystemNamespaces:\n  - kube-system\n",
        encoding="utf-8",
    )
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("check", f"{ns}/dev", "--format", "json", cwd=repo_builder.root)
    assert "spec/system-namespace" not in res.out
    res = konfig("preview", f"{ns}/dev", kc, "--format", "json", cwd=repo_builder.root)
    assert res.code == 0, res.out + res.err
    actions = {c["id"]: c["action"] for c in json.loads(res.out)["stacks"][0]["changes"]}
    assert actions[f"v1:ConfigMap:kube-system:{ns}-sys"] == "create"
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=repo_builder.root)
    assert res.code == 0, res.out + res.err
    assert kube.get("v1", "ConfigMap", f"{ns}-sys", "kube-system") is not None
    res = konfig("destroy", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=repo_builder.root)
    assert res.code == 0, res.out + res.err
    assert kube.get("v1", "ConfigMap", f"{ns}-sys", "kube-system") is None

"""Monitoring on the real control plane (issue 35): the Prometheus Operator's vendored
CRDs installed, the example stack with monitoring (appops/http-echo/prod) applied with
`konfig apply`, its ServiceMonitor and PrometheusRule stored (validated by the API server
against the CRD schemas), a preview afterwards shows no change, and removing alerts prunes
them: one rule from the PrometheusRule, then the PrometheusRule itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import TEMPLATE_ROOT, KonfigRunner, RepoBuilder
from kubeutil import wait_for

from konfig.engine.kube import Kube, KubeTarget, connect

pytestmark = pytest.mark.cluster

VENDOR = TEMPLATE_ROOT / "base/pkg/k8s/crd/monitoring_coreos_com/vendor"
KINDS = (("ServiceMonitor", "servicemonitors"), ("PodMonitor", "podmonitors"))
KINDS += (("PrometheusRule", "prometheusrules"),)
STACK = "http-echo/prod"
NS = "http-echo-prod"
GROUP = "monitoring.coreos.com/v1"


def install_operator_crds(cluster: Cluster) -> None:
    for _, plural in KINDS:
        path = VENDOR / f"monitoring.coreos.com_{plural}.yaml"
        cluster.kubectl("apply", "--server-side", "-f", str(path))

    def served() -> bool:
        with connect(KubeTarget(str(cluster.kubeconfig), cluster.admin_context)) as fresh:
            return all(fresh.has_kind(GROUP, kind) for kind, _ in KINDS)

    wait_for(served, "the API server to serve the Prometheus Operator's kinds", timeout=60)


def example_repo(repo: RepoBuilder) -> Path:
    """The example project http-echo as it is in the template, in a git repository."""
    src = TEMPLATE_ROOT / "appops/http-echo"
    shutil.copytree(src, repo.root / "appops/http-echo")
    repo.write(".gitignore", "/.cache/\n")
    git_init(repo.root)
    git_commit(repo.root, "the http-echo example")
    return repo.root / "appops" / STACK / "main.k"


def preview_counts(konfig: KonfigRunner, root: Path, cluster: Cluster) -> dict[str, int]:
    res = konfig(
        "--root", str(root), "preview", STACK, "--format", "json",
        "--kubeconfig", str(cluster.kubeconfig),
    )  # fmt: skip
    assert res.code == 0, res.out + res.err
    counts: dict[str, int] = json.loads(res.out)["counts"]
    return counts


def alerts(kube: Kube) -> list[str]:
    rule = kube.get(GROUP, "PrometheusRule", "http-echo", NS)
    assert rule is not None
    return [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]]


def test_example_stack_with_monitoring_applies_previews_clean_and_prunes(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    install_operator_crds(cluster)
    main = example_repo(repo_builder)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"

    res = konfig("apply", STACK, "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    lines = [line.split() for line in res.out.splitlines()]
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert ["created", f"{GROUP}:{kind}:{NS}:http-echo"] in lines, res.out

    monitor = kube.get(GROUP, "ServiceMonitor", "http-echo", NS)
    assert monitor is not None
    assert monitor["spec"]["endpoints"][0]["port"] == "http"
    assert monitor["metadata"]["labels"]["prometheus.konfig.dev/scrape"] == "platform"
    assert alerts(kube) == [
        "HttpEchoHighErrorRate",
        "HttpEchoHighLatency",
        "HttpEchoPodRestarts",
        "HttpEchoReplicasUnavailable",
        "HttpEchoDown",
    ]

    # applied: the preview has nothing to do
    counts = preview_counts(konfig, root, cluster)
    assert counts["unchanged"] > 0
    assert {k: v for k, v in counts.items() if k != "unchanged"} == {
        "create": 0, "update": 0, "replace": 0, "delete": 0, "conflict": 0
    }  # fmt: skip

    # one alert removed: the rule leaves the PrometheusRule
    text = main.read_text(encoding="utf-8")
    written = [line for line in text.splitlines(keepends=True) if "HttpEchoDown" in line]
    assert len(written) == 1
    main.write_text(text.replace(written[0], ""), encoding="utf-8")
    git_commit(root, "drop the HttpEchoDown alert")
    assert preview_counts(konfig, root, cluster)["update"] == 1
    res = konfig("apply", STACK, "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert "HttpEchoDown" not in alerts(kube) and len(alerts(kube)) == 4

    # no alert left: the PrometheusRule is pruned, the ServiceMonitor stays
    text = main.read_text(encoding="utf-8")
    for field in ("errorRate", "latency", "podRestarts", "replicasUnavailable"):
        kept = [line for line in text.splitlines(keepends=True) if f"{field} = " in line]
        assert len(kept) == 1, field
        text = text.replace(kept[0], "")
    main.write_text(text, encoding="utf-8")
    git_commit(root, "no alerts")
    res = konfig("apply", STACK, "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert ["deleted", f"{GROUP}:PrometheusRule:{NS}:http-echo"] in [
        line.split() for line in res.out.splitlines()
    ], res.out
    wait_for(
        lambda: kube.get(GROUP, "PrometheusRule", "http-echo", NS) is None,
        "the PrometheusRule to be gone",
    )
    assert kube.get(GROUP, "ServiceMonitor", "http-echo", NS) is not None
    counts = preview_counts(konfig, root, cluster)
    assert counts["create"] == counts["update"] == counts["delete"] == 0


CRON_STACK = """\
import base.pkg.models.frontend

nightly: frontend.CronJob {
    name = "nightly"
    namespace = "batch-dev"
    image = "busybox:1.36.1"
    schedule = "0 3 * * *"
    suspend = True
    monitoring = {failed = {severity = "critical"}, noRecentSuccess.hours = 26}
}
"""


def test_a_cron_jobs_alerts_are_a_prometheus_rule_the_api_server_stores(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """A CronJob's monitoring renders only a PrometheusRule (no monitor: its pods end
    before a scrape); the API server validates and stores it against the operator's CRD,
    and a preview afterwards is clean."""
    install_operator_crds(cluster)
    repo_builder.stack("batch", "dev", main=CRON_STACK)
    root = repo_builder.root
    git_init(root)
    git_commit(root, "a monitored CronJob")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", "batch/dev", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert ["created", f"{GROUP}:PrometheusRule:batch-dev:nightly"] in [
        line.split() for line in res.out.splitlines()
    ], res.out
    rule = kube.get(GROUP, "PrometheusRule", "nightly", "batch-dev")
    assert rule is not None
    rules = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert sorted(rules) == ["NightlyFailed", "NightlyNoRecentSuccess"]
    assert rules["NightlyNoRecentSuccess"]["expr"].endswith("> 93600")
    assert rule["metadata"]["labels"]["prometheus.konfig.dev/scrape"] == "platform"
    for kind in ("ServiceMonitor", "PodMonitor"):
        assert kube.get(GROUP, kind, "nightly", "batch-dev") is None
    res = konfig("preview", "batch/dev", "--format", "json", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    counts = json.loads(res.out)["counts"]
    assert counts["create"] == counts["update"] == counts["delete"] == 0, counts

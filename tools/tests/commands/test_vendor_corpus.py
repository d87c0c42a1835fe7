"""A real-world corpus: vendors' install manifests (tools/tests/fixtures/vendor/) as
``frontend.Manifests`` stacks, applied, previewed, changed, pruned and destroyed on the
local control plane, with kubectl as the oracle.

- **creates**: kubectl applies the same files first (``kubectl apply --server-side``);
  the objects it made are recorded and deleted, konfig applies the stacks, and the
  objects konfig made must be the same (server-set fields and konfig's ApplySet label
  aside);
- **no diff after apply**: ``konfig preview`` plans nothing and ``kubectl diff
  --server-side`` of the same files shows nothing (the ingress-nginx admission Jobs are
  gone by then: ``ttlSecondsAfterFinished: 0``; konfig knows they ran, kubectl would run
  them again, so the oracle's copy leaves them out);
- **changes**: the stacks change objects in KCL; the objects konfig plans to update are
  the ones ``kubectl diff --server-side`` of the rendered Specs shows, with the same
  fields;
- **prune** and **destroy**: what a stack no longer declares, then every object, is gone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder

from konfig.build.compiler import compile_input, compile_one
from konfig.engine.kube import Kube
from konfig.repo.layout import discover

pytestmark = pytest.mark.cluster

VENDOR = Path(__file__).resolve().parents[1] / "fixtures" / "vendor"
STACK_YAML = """\
name: {name}
kubernetes:
  context: admin
policies:
  disable:
    - rule: resource-limits
      reason: the vendor's manifests set no limits; this stack applies them as shipped
"""

# stack -> (files in apply order, kubectl passes: files whose kinds need the CRDs first)
FILES: dict[str, list[str]] = {
    "metrics-server": ["components.yaml"],
    "ingress-nginx": ["deploy.yaml"],
    "flannel": ["kube-flannel.yml"],
    "prometheus-operator": [
        "monitoring.coreos.com_servicemonitors.yaml",
        "monitoring.coreos.com_podmonitors.yaml",
        "monitoring.coreos.com_probes.yaml",
        "monitoring.coreos.com_prometheusrules.yaml",
        "prometheus-operator-cluster-role.yaml",
        "prometheus-operator-cluster-role-binding.yaml",
        "prometheus-operator-service-account.yaml",
        "prometheus-operator-deployment.yaml",
        "prometheus-operator-service.yaml",
        "prometheus-operator-service-monitor.yaml",
    ],
}

MAIN = """\
import file
import yaml
import base.pkg.models.frontend

_docs = sum([yaml.decode_all(file.read(f)) for f in {files}], [])

extras: frontend.Manifests {{
    manifests = {manifests}
}}
"""

# The change step: every Deployment gets a second replica and a label, in KCL.
CHANGED = (
    '[d | {metadata.labels.team = "platform", spec.replicas = 2} '
    'if d and d.kind == "Deployment" else d for d in _docs]'
)
# The prune step, per stack: objects it stops declaring.
PRUNED = {
    "metrics-server": ("APIService", "v1beta1.metrics.k8s.io"),
    "ingress-nginx": ("IngressClass", "nginx"),
    "flannel": ("ConfigMap", "kube-flannel-cfg"),
    "prometheus-operator": ("ServiceMonitor", "prometheus-operator"),
}

# server-set or konfig's own: not part of what was applied
_NOISE_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
_NOISE_ANNOTATIONS = ("deployment.kubernetes.io/revision",)
_NOISE_LABELS = ("applyset.kubernetes.io/part-of",)


def _docs(stack: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in FILES[stack]:
        text = (VENDOR / stack / name).read_text(encoding="utf-8")
        out.extend(d for d in yaml.safe_load_all(text) if d)
    return out


def _key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])


def _normal(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as the cluster holds it, without what the server or konfig adds."""
    obj = json.loads(json.dumps(obj))
    obj.pop("status", None)
    meta = obj.get("metadata") or {}
    for k in _NOISE_META:
        meta.pop(k, None)
    for field, noise in (("annotations", _NOISE_ANNOTATIONS), ("labels", _NOISE_LABELS)):
        values = meta.get(field) or {}
        for k in noise:
            values.pop(k, None)
        if not values:
            meta.pop(field, None)
    spec = obj.get("spec") or {}
    if obj["kind"] == "Service":  # allocated by the server
        for k in ("clusterIP", "clusterIPs"):
            spec.pop(k, None)
        for port in spec.get("ports") or []:
            port.pop("nodePort", None)
    return obj


def _snapshot(kube: Kube, keys: Iterable[tuple[str, str, str, str]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key in keys:
        api_version, kind, ns, name = key
        obj = kube.get(api_version, kind, name, ns or None)
        out[key] = _normal(obj) if obj is not None else None
    return out


def _gone(kube: Kube, keys: Iterable[tuple[str, str, str, str]], within: float = 60) -> None:
    """Every object of ``keys`` is gone (a namespace may take a moment to finalise)."""
    deadline = time.monotonic() + within
    left = list(keys)
    while left:
        left = [k for k in left if kube.get(k[0], k[1], k[3], k[2] or None) is not None]
        assert not left or time.monotonic() < deadline, f"still there: {left}"
        if left:
            time.sleep(0.5)


def _kubectl_apply(cluster: Cluster, stack: str) -> None:
    """kubectl applies a vendor's files as its README says: CRDs first."""
    crds = [f for f in FILES[stack] if f.startswith("monitoring.coreos.com_")]
    rest = [f for f in FILES[stack] if f not in crds]
    if crds:
        cluster.kubectl("apply", "--server-side", *_f(stack, crds))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *_f(stack, crds))
    cluster.kubectl("apply", "--server-side", *_f(stack, rest))


def _f(stack: str, files: list[str]) -> list[str]:
    return [a for f in files for a in ("-f", str(VENDOR / stack / f))]


def _kubectl_diff(cluster: Cluster, path: Path) -> subprocess.CompletedProcess[str]:
    res = cluster.kubectl(
        "diff", "--server-side", "--force-conflicts", "-f", str(path), check=False
    )
    assert res.returncode in (0, 1), res.stderr  # 1: differences; more: an error
    return res


def _diffed_objects(diff: str) -> set[str]:
    """The objects ``kubectl diff`` shows (its file names: group.version.Kind.ns.name)."""
    return {
        line.split()[-1].rsplit("/", 1)[-1]
        for line in diff.splitlines()
        if line.startswith("diff ")
    }


def _diff_name(key: tuple[str, str, str, str]) -> str:
    api_version, kind, ns, name = key
    group, _, version = api_version.rpartition("/")
    return ".".join([group, version, kind, ns, name]) if group else f"{version}.{kind}.{ns}.{name}"


def _write_repo(repo: RepoBuilder, manifests: dict[str, str]) -> None:
    konfig_yaml = (repo.root / "konfig.yaml").read_text(encoding="utf-8")
    if "allowSystemNamespaces" not in konfig_yaml:
        allowed = "allowSystemNamespaces: [kube-system, default]\n"
        repo.write("konfig.yaml", konfig_yaml + allowed)
    for stack in FILES:
        repo.stack(
            "vendors",
            stack,
            main=MAIN.format(files=json.dumps(FILES[stack]), manifests=manifests[stack]),
            stack_yaml=STACK_YAML.format(name=stack),
        )
        for name in FILES[stack]:
            shutil.copy2(VENDOR / stack / name, repo.root / f"appops/vendors/{stack}/{name}")


def _specs(repo: RepoBuilder) -> dict[str, list[dict[str, Any]]]:
    r = discover(repo.root)
    out: dict[str, list[dict[str, Any]]] = {}
    for stack in FILES:
        result = compile_one(compile_input(r, r.stack(f"vendors/{stack}")))
        assert result.spec is not None, result.error
        out[stack] = [res.attributes for res in result.spec.resources]
    return out


def _changes(konfig: KonfigRunner, kc: str, root: Path) -> dict[str, dict[str, Any]]:
    res = konfig("preview", "--all", "--format", "json", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    return {c["id"]: c for s in json.loads(res.out)["stacks"] for c in s["changes"]}


def test_vendor_manifests_apply_preview_change_prune_destroy(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    kc = f"--kubeconfig={cluster.kubeconfig}"
    root = repo_builder.root
    docs = {stack: _docs(stack) for stack in FILES}
    keys = {stack: [_key(d) for d in docs[stack]] for stack in FILES}
    every = [k for stack in FILES for k in keys[stack]]
    try:
        # 1. the oracle: what kubectl makes of the same files
        for stack in FILES:
            _kubectl_apply(cluster, stack)
        by_kubectl = _snapshot(kube, every)
        missing = [k for k, v in by_kubectl.items() if v is None and k[1] != "Job"]
        assert missing == []  # the Jobs ran and may be gone already (TTL 0)
        # metrics-server first: while its APIService is unavailable (no real server behind
        # it here) the namespace controller cannot finish deleting any namespace
        for stack in FILES:
            cluster.kubectl("delete", "--wait=true", "--ignore-not-found", *_f(stack, FILES[stack]))
        _gone(kube, every)

        # 2. konfig: check, preview, apply; the same objects as kubectl's
        _write_repo(repo_builder, dict.fromkeys(FILES, "_docs"))
        repo_builder.write(".gitignore", "/.cache/\n")
        git_init(root)
        head = git_commit(root, "vendor stacks")
        check = konfig("check", "--all", "--format", "json", cwd=root)
        errors = [f for f in json.loads(check.out) if f["severity"] == "error"]
        assert errors == [], errors
        planned = _changes(konfig, kc, root)
        assert {c["action"] for c in planned.values()} == {"create"}
        assert len(planned) == len(every)
        res = konfig("apply", "--all", "--yes", "--json", kc, cwd=root)
        assert res.code == 0, res.out + res.err
        assert all(s["ok"] for s in json.loads(res.out)["stacks"])
        by_konfig = _snapshot(kube, every)
        jobs = [k for k in every if k[1] == "Job"]
        assert jobs and all(by_konfig[k] is None for k in jobs)  # ran, removed themselves
        for k in every:
            if k not in jobs:
                assert by_konfig[k] == by_kubectl[k], k

        # 3. nothing to do after apply, for konfig and for kubectl
        assert {c["action"] for c in _changes(konfig, kc, root).values()} == {"unchanged"}
        for stack in FILES:
            left = [d for d in docs[stack] if d["kind"] != "Job"]
            path = tmp_path / f"{stack}.yaml"
            path.write_text(yaml.safe_dump_all(left), encoding="utf-8")
            diff = _kubectl_diff(cluster, path)
            assert diff.returncode == 0, diff.stdout

        # 4. a change in KCL: konfig's updates are kubectl's diff
        _write_repo(repo_builder, dict.fromkeys(FILES, CHANGED))
        git_commit(root, "two replicas")
        planned = _changes(konfig, kc, root)
        updates = {i for i, c in planned.items() if c["action"] == "update"}
        creates = {i for i, c in planned.items() if c["action"] == "create"}
        assert creates == set() and updates
        specs = _specs(repo_builder)
        oracle: set[str] = set()
        for stack in FILES:
            path = tmp_path / f"{stack}-changed.yaml"
            left = [d for d in specs[stack] if d["kind"] != "Job"]
            path.write_text(yaml.safe_dump_all(left), encoding="utf-8")
            oracle |= _diffed_objects(_kubectl_diff(cluster, path).stdout)
        by_id = {
            f"{a['apiVersion']}:{a['kind']}:"
            + (f"{a['metadata']['namespace']}:" if a["metadata"].get("namespace") else "")
            + a["metadata"]["name"]: a
            for stack in FILES
            for a in specs[stack]
        }
        assert {_diff_name(_key(by_id[i])) for i in updates} == oracle
        for i in updates:
            fields = {f["path"] for f in planned[i]["fields"]}
            assert fields == {"metadata.labels.team", "spec.replicas"}, (i, fields)
        res = konfig("apply", "--all", "--yes", kc, cwd=root)
        assert res.code == 0, res.out + res.err
        assert {c["action"] for c in _changes(konfig, kc, root).values()} == {"unchanged"}

        # 5. prune: each stack stops declaring one object
        pruned = {
            stack: f"[d for d in {CHANGED} "
            f'if not (d.kind == "{kind}" and d.metadata.name == "{name}")]'
            for stack, (kind, name) in PRUNED.items()
        }
        _write_repo(repo_builder, pruned)
        git_commit(root, "fewer objects")
        planned = _changes(konfig, kc, root)
        deletes = {(c["kind"], c["name"]) for c in planned.values() if c["action"] == "delete"}
        assert deletes == set(PRUNED.values())
        res = konfig("apply", "--all", "--yes", kc, cwd=root)
        assert res.code == 0, res.out + res.err
        _gone(kube, [k for k in every if (k[1], k[3]) in set(PRUNED.values())])

        # 6. destroy: every object is gone, but the Namespaces konfig never deletes
        # (default, kube-*: engine/guards.py protected-namespace)
        stacks = [f"vendors/{stack}" for stack in FILES]
        res = konfig("destroy", *stacks, "--yes", kc, cwd=root)
        assert res.code == 0, res.out + res.err
        assert "kept      v1:Namespace:kube-flannel" in res.out
        kept = {("v1", "Namespace", "", n) for n in ("default", "kube-system", "kube-flannel")}
        _gone(kube, [k for k in every if k not in kept])
        assert head
    finally:
        for stack in FILES:
            cluster.kubectl(
                "delete",
                "--wait=false",
                "--ignore-not-found",
                *_f(stack, FILES[stack]),
                check=False,
            )

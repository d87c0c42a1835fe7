"""``danger/confirm``: konfig.yaml ``dangers`` says which danger classes (and how many
deletes) need a confirmation; preview marks those changes refused and names the
digest, apply refuses the stack until ``--confirm STACK=DIGEST`` names it, and a
confirmation of something else does not count. Against the real control plane."""

from __future__ import annotations

import json
import re

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"

MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {{apiVersion = "v1", kind = "ConfigMap", metadata = {{name = "keep", namespace = "{ns}"}}, data.k = "v"}}
        {extra}
    ]
}}
"""  # noqa: E501
EXTRA = """\
{{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}-old"}}
        {{apiVersion = "v1", kind = "ConfigMap", metadata = {{name = "a", namespace = "{ns}-old"}}, data.k = "v"}}
"""  # noqa: E501


def test_a_cascade_needs_a_confirmation_bound_to_its_digest(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns = unique("dgconf")
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    repo_builder.stack(
        ns, "dev", main=MAIN.format(ns=ns, extra=EXTRA.format(ns=ns)), stack_yaml=STACK_YAML
    )
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    # the policy, then the stack drops its second Namespace (and what is in it)
    (root / "konfig.yaml").write_text(
        (root / "konfig.yaml").read_text(encoding="utf-8")
        + "dangers:\n  confirm: [cascade, data]\n",
        encoding="utf-8",
    )
    repo_builder.stack(ns, "dev", main=MAIN.format(ns=ns, extra=""), stack_yaml=STACK_YAML)

    res = konfig("preview", f"{ns}/dev", kc, "--format", "json", cwd=root)
    stack = json.loads(res.out)["stacks"][0]
    by_id = {c["id"]: c for c in stack["changes"]}
    gone = by_id[f"v1:Namespace:{ns}-old"]
    assert [d["class"] for d in gone["dangers"]] == ["destroy", "cascade"]
    assert gone["dangers"][1]["objects"] == 1  # the ConfigMap a
    match = re.fullmatch(
        rf"danger/confirm: cascade needs a confirmation "
        rf"\(`konfig apply --confirm appops/{ns}/dev=([0-9a-f]{{16}})`\)",
        gone["refused"],
    )
    assert match, gone["refused"]
    digest = match.group(1)
    assert by_id[f"v1:ConfigMap:{ns}-old:a"]["refused"] is None  # a destroy only
    assert stack["dangers"]["cascade"] == 1
    text = konfig("preview", f"{ns}/dev", kc, cwd=root)
    assert "⚠ cascade: Namespace " in text.out
    assert "REFUSED: danger/confirm: cascade needs a confirmation" in text.out

    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 1, res.out + res.err
    assert f"appops/{ns}/dev: nothing was applied: danger/confirm: cascade needs a " in res.err
    assert f"konfig apply --confirm appops/{ns}/dev={digest}" in res.err
    assert kube.get("v1", "Namespace", f"{ns}-old", None) is not None
    # another digest is no confirmation of this
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, "--confirm",
                 f"{ns}/dev={'0' * 16}", cwd=root)  # fmt: skip
    assert res.code == 1 and "danger/confirm" in res.err
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, "--confirm", "nonsense",
                 cwd=root)  # fmt: skip
    assert res.code == 2 and "--confirm 'nonsense' is not STACK=DIGEST" in res.err
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, "--confirm",
                 f"{ns}/dev={digest}", cwd=root)  # fmt: skip
    assert res.code == 0, res.out + res.err
    ns_old = kube.get("v1", "Namespace", f"{ns}-old", None)
    assert ns_old is None or ns_old["metadata"].get("deletionTimestamp")
    res = konfig("destroy", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err


def test_the_count_guard(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns = unique("dgcount")
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    many = "\n        ".join(
        f'{{apiVersion = "v1", kind = "ConfigMap", metadata = {{name = "c{i}", '
        f'namespace = "{ns}"}}, data.k = "v"}}'
        for i in range(4)
    )
    repo_builder.stack(ns, "dev", main=MAIN.format(ns=ns, extra=many), stack_yaml=STACK_YAML)
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    (root / "konfig.yaml").write_text(
        (root / "konfig.yaml").read_text(encoding="utf-8") + "dangers:\n  maxDeletes: 3\n",
        encoding="utf-8",
    )
    repo_builder.stack(ns, "dev", main=MAIN.format(ns=ns, extra=""), stack_yaml=STACK_YAML)
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 1, res.out + res.err
    assert "danger/confirm: deletes 4 objects (more than 3) needs a confirmation" in res.err
    assert kube.get("v1", "ConfigMap", "c0", ns) is not None
    res = konfig("destroy", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err

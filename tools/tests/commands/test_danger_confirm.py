"""``danger/confirm``: konfig.yaml ``dangers`` says which danger classes (and how many
deletes) need a confirmation; preview marks those changes refused and names the
digest, apply refuses the stack until ``--confirm STACK=DIGEST`` names it, and a
confirmation of something else does not count. Against the real control plane."""

from __future__ import annotations

import json
import re
import shutil

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
    # destroy is held to the same policy: it deletes every object of the stack
    res = konfig("destroy", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 1 and "nothing was destroyed: danger/confirm" in res.err, res.err
    digest = re.search(r"--confirm \S+=([0-9a-f]{16})", res.err)
    assert digest, res.err
    res = konfig("destroy", f"{ns}/dev", "--yes", "--allow-dirty", kc, "--confirm",
                 f"{ns}/dev={digest.group(1)}", cwd=root)  # fmt: skip
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
    # destroy is held to the same policy: it deletes every object of the stack
    res = konfig("destroy", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 1 and "nothing was destroyed: danger/confirm" in res.err, res.err
    digest = re.search(r"--confirm \S+=([0-9a-f]{16})", res.err)
    assert digest, res.err
    res = konfig("destroy", f"{ns}/dev", "--yes", "--allow-dirty", kc, "--confirm",
                 f"{ns}/dev={digest.group(1)}", cwd=root)  # fmt: skip
    assert res.code == 0, res.out + res.err


def test_a_deleted_stack_is_not_destroyed_without_the_confirmation_its_preview_names(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns = unique("dgdel")
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    repo_builder.stack(ns, "dev", main=MAIN.format(ns=ns, extra=""), stack_yaml=STACK_YAML)
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    (root / "konfig.yaml").write_text(
        (root / "konfig.yaml").read_text(encoding="utf-8") + "dangers:\n  confirm: [cascade]\n",
        encoding="utf-8",
    )
    shutil.rmtree(root / f"appops/{ns}/dev")  # the pull request deletes the stack
    path = f"appops/{ns}/dev"
    res = konfig("preview", "--deleted", path, "--context", "admin", kc, "--format", "json",
                 cwd=root)  # fmt: skip
    stack = json.loads(res.out)["stacks"][0]
    refused = {c["id"]: c["refused"] for c in stack["changes"]}[f"v1:Namespace:{ns}"]
    digest = re.search(r"--confirm \S+=([0-9a-f]{16})", refused or "")
    assert digest, refused
    res = konfig("destroy", "--deleted", path, "--context", "admin", "--yes", "--allow-dirty",
                 kc, cwd=root)  # fmt: skip
    assert res.code == 1, res.out + res.err
    assert f"{path}: nothing was destroyed: danger/confirm: cascade needs a confirmation" in res.err
    assert f"konfig destroy --confirm {path}={digest.group(1)}" in res.err
    assert kube.get("v1", "Namespace", ns, None) is not None
    res = konfig("destroy", "--deleted", path, "--context", "admin", "--yes", "--allow-dirty",
                 "--confirm", f"{path}={digest.group(1)}", kc, cwd=root)  # fmt: skip
    assert res.code == 0, res.out + res.err
    gone = kube.get("v1", "Namespace", ns, None)
    assert gone is None or gone["metadata"].get("deletionTimestamp")


def test_a_confirmed_cascade_takes_the_objects_of_other_owners_it_counted(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """A deleted stack's Namespace holds an object Konfig does not own: without a
    confirmation the destroy is refused, as before; with the confirmation of the digest
    whose cascade count includes that object, the Namespace goes and the result names
    what went with it. An object added after the preview changes the count, and so the
    digest: the old confirmation no longer holds."""
    ns = unique("dgforeign")
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    repo_builder.stack(ns, "dev", main=MAIN.format(ns=ns, extra=""), stack_yaml=STACK_YAML)
    res = konfig("apply", f"{ns}/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err

    def foreign(name: str) -> None:  # someone else's object, no inventory's label
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}}  # fmt: skip
        kube.apply(cm, dry_run=False, field_manager="ops-team")

    foreign("theirs")
    (root / "konfig.yaml").write_text(
        (root / "konfig.yaml").read_text(encoding="utf-8") + "dangers:\n  confirm: [cascade]\n",
        encoding="utf-8",
    )
    shutil.rmtree(root / f"appops/{ns}/dev")  # the pull request deletes the stack
    path = f"appops/{ns}/dev"
    destroy = ("destroy", "--deleted", path, "--context", "admin", "--yes", "--allow-dirty", kc)

    def previewed() -> tuple[int, str]:
        res = konfig("preview", "--deleted", path, "--context", "admin", kc, "--format",
                     "json", cwd=root)  # fmt: skip
        stack = json.loads(res.out)["stacks"][0]
        gone = {c["id"]: c for c in stack["changes"]}[f"v1:Namespace:{ns}"]
        (cascade,) = [d for d in gone["dangers"] if d["class"] == "cascade"]
        digest = re.search(r"--confirm \S+=([0-9a-f]{16})", gone["refused"] or "")
        assert digest, gone
        return cascade["objects"], digest.group(1)

    count, digest = previewed()
    assert count == 2  # the stack's ConfigMap keep and their ConfigMap theirs
    # without the confirmation: refused before any write, as before
    res = konfig(*destroy, cwd=root)
    assert res.code == 1 and "nothing was destroyed: danger/confirm" in res.err, res.err
    assert kube.get("v1", "ConfigMap", "keep", ns) is not None

    # one more object of theirs after the preview: the count, so the digest, changes
    foreign("late")
    res = konfig(*destroy, "--confirm", f"{path}={digest}", cwd=root)
    assert res.code == 1 and "nothing was destroyed: danger/confirm" in res.err, res.err
    count, late_digest = previewed()
    assert count == 3 and late_digest != digest
    assert kube.get("v1", "Namespace", ns, None) is not None

    # confirmed with the count that includes them: the Namespace goes, with them
    res = konfig(*destroy, "--confirm", f"{path}={late_digest}", "--json", cwd=root)
    assert res.code == 0, res.out + res.err
    (stack,) = json.loads(res.out)["stacks"]
    assert stack["ok"] and stack["inventory"] is None, stack
    message = {o["id"]: o["message"] for o in stack["objects"]}[f"v1:Namespace:{ns}"]
    assert message == (
        f"deleted Namespace {ns} (v1) with the 2 objects of other owners it held (confirmed "
        "cascade): ConfigMap/late, ConfigMap/theirs"
    ), message
    gone = kube.get("v1", "Namespace", ns, None)
    assert gone is None or gone["metadata"].get("deletionTimestamp")

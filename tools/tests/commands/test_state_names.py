"""OpenTofu state names are injective (issue 26, finding 6): ``appops/<p>-a/db`` and
``appops/<p>/a-db`` once shared the state ``tfstate-default-appops-<p>-a-db``, so the
second stack's preview listed the first's database role as its own (a delete). Now each
keeps its own state; a state under its former name moves with the next apply of the
one stack the cluster's inventories show it can be, and the stack whose name that
former name is now is refused until then, saying whose state it is. Against the real
control plane, real OpenTofu and a real PostgreSQL (``hack/tofu up``)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.tofu import PG_ENVIRONMENT, PG_STACK_YAML, Tofu, grant_credentials, server_main

from konfig.engine.kube import Kube
from konfig.tofu.config import STATE_NAMESPACE, Backend
from konfig.tofu.records import legacy_state_suffix, state_suffix
from konfig.tofu.state import decode_state

pytestmark = [pytest.mark.cluster, pytest.mark.tofu]

STACK_YAML = PG_STACK_YAML


def _stack(repo: RepoBuilder, project: str, stack: str, app: str) -> str:
    repo.stack(project, stack, main=server_main(app), stack_yaml=STACK_YAML.format(name=stack))
    return f"appops/{project}/{stack}"


def _role(app: str) -> str:
    return f"cyrilgdn/postgresql:postgresql_role:{app.replace('-', '_')}"


def _changes(out: str) -> dict[str, str]:
    (stack,) = json.loads(out)["stacks"]
    assert stack["status"] == "ok", stack
    return {c["id"]: c["action"] for c in stack["changes"] if c["runtime"] == "Terraform"}


def _state_ids(kube: Kube, suffix: str) -> set[str]:
    secret = kube.get("v1", "Secret", Backend(suffix=suffix).secret_name, STATE_NAMESPACE)
    state = decode_state(secret, where=suffix) or {}
    return {r["name"] for r in state.get("resources") or [] if r.get("type") == "postgresql_role"}


def _pair(repo: RepoBuilder) -> tuple[str, str, str, str]:
    p = "st" + uuid.uuid4().hex[:8]
    a_app, b_app = f"{p}a", f"{p}b"
    a = _stack(repo, f"{p}-a", "db", a_app)  # appops/<p>-a/db
    b = _stack(repo, p, "a-db", b_app)  # appops/<p>/a-db
    assert legacy_state_suffix(a) == legacy_state_suffix(b) == f"appops-{p}-a-db"
    grant_credentials(
        repo.root, [{"stacks": [a, b], "provider": "postgresql", "environment": PG_ENVIRONMENT}]
    )
    return a, b, a_app, b_app


def test_two_stacks_that_shared_a_state_each_keep_their_own(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu_env: Path,
) -> None:
    """Before: B's preview read A's state: A's role was a delete (refused without
    terraform.allowDestroy), and B's apply with allowDestroy would have dropped it."""
    a, b, a_app, b_app = _pair(repo_builder)
    root, kc = repo_builder.root, f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", a, "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err

    res = konfig("preview", b, kc, "--format", "json", cwd=root)
    assert res.code == 0, res.out + res.err
    planned = _changes(res.out)
    assert _role(a_app) not in planned, planned  # nothing of A's
    assert planned[_role(b_app)] == "create"
    res = konfig("apply", b, "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err

    assert state_suffix(a) != state_suffix(b)
    assert _state_ids(kube, state_suffix(a)) == {a_app}
    assert _state_ids(kube, state_suffix(b)) == {b_app}
    for stack, app in ((a, a_app), (b, b_app)):
        res = konfig("preview", stack, kc, "--format", "json", cwd=root)
        assert res.code == 0, res.out + res.err
        changes = _changes(res.out)
        assert _role(app) in changes and set(changes.values()) == {"unchanged"}, changes


def test_a_state_under_its_former_name_moves_with_the_next_apply(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
) -> None:
    a, b, a_app, b_app = _pair(repo_builder)
    root, kc = repo_builder.root, f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", a, "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    # Where konfig kept A's state before names were injective: move it back there
    new, old = Backend(suffix=state_suffix(a)), Backend(suffix=legacy_state_suffix(a))
    secret = kube.get("v1", "Secret", new.secret_name, STATE_NAMESPACE)
    assert secret is not None
    meta = secret["metadata"]
    labels = {**meta.get("labels", {}), "tfstateSecretSuffix": old.suffix}
    kube.apply(
        {"apiVersion": "v1", "kind": "Secret", "type": secret.get("type", "Opaque"),
         "metadata": {"name": old.secret_name, "namespace": STATE_NAMESPACE, "labels": labels,
                      "annotations": meta.get("annotations", {})},
         "data": secret["data"]},
        dry_run=False, field_manager="terraform",
    )  # fmt: skip
    kube.delete("v1", "Secret", new.secret_name, STATE_NAMESPACE, uid=meta["uid"])
    oid = f"SELECT oid FROM pg_roles WHERE rolname = '{a_app}'"
    role_oid = tofu.psql(oid)

    # B's name is that former name now: refused, saying whose state it is
    res = konfig("preview", b, kc, "--format", "json", cwd=root)
    assert res.code == 1, res.out + res.err
    (stack,) = json.loads(res.out)["stacks"]
    error = stack["error"]["message"]
    assert f"{old.secret_name} is the state of {a} under the name konfig gave it before" in error
    assert f"nothing of it was read for {b}" in error
    assert _role(a_app) not in res.out.replace(error, "")
    res = konfig("apply", b, "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 1 and f"is the state of {a}" in res.out + res.err
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{b_app}'") == "0"

    # A's preview reads it where it is: nothing changes
    res = konfig("preview", a, kc, "--format", "json", cwd=root)
    assert res.code == 0, res.out + res.err
    assert set(_changes(res.out).values()) == {"unchanged"}
    assert kube.get("v1", "Secret", new.secret_name, STATE_NAMESPACE) is None  # a read only
    # A's apply moves it: the same role (not re-created), the old name gone
    res = konfig("apply", a, "--yes", "--allow-dirty", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert kube.get("v1", "Secret", old.secret_name, STATE_NAMESPACE) is None
    moved = kube.get("v1", "Secret", new.secret_name, STATE_NAMESPACE)
    assert moved is not None and moved["metadata"]["labels"]["tfstateSecretSuffix"] == new.suffix
    assert moved["metadata"]["annotations"]["konfig.io/stack"] == a  # whose it is, from now on
    assert _state_ids(kube, new.suffix) == {a_app}
    assert tofu.psql(oid) == role_oid

    # B has its name to itself now
    res = konfig("preview", b, kc, "--format", "json", cwd=root)
    assert res.code == 0, res.out + res.err
    assert _changes(res.out)[_role(b_app)] == "create"

"""Whose OpenTofu state a stack reads (:func:`konfig.tofu.records.state_backend`), told
from the state's own record and, for a state from before names were injective, from
the cluster's inventories: never another stack's. The state Secrets are made by hand
here (OpenTofu itself: ``commands/test_state_names.py``); against the real control
plane."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator

import pytest
from fixtures.cluster import Cluster

from konfig.engine import inventory_store
from konfig.engine.kube import Kube, KubeTarget, connect
from konfig.tofu.config import STATE_NAMESPACE, Backend
from konfig.tofu.records import (
    INTENT_PREFIX,
    STACK_ANNOTATION,
    StateNameError,
    legacy_state_suffix,
    state_backend,
    state_suffix,
)

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kube(cluster: Cluster) -> Iterator[Kube]:
    k = connect(KubeTarget(str(cluster.kubeconfig), cluster.admin_context))
    k.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STATE_NAMESPACE}},
            dry_run=False)  # fmt: skip
    yield k
    k.close()


def _state(kube: Kube, suffix: str, *, stack: str | None = None) -> None:
    meta: dict[str, object] = {
        "name": Backend(suffix=suffix).secret_name,
        "namespace": STATE_NAMESPACE,
        "labels": {"tfstate": "true", "tfstateSecretSuffix": suffix},
    }
    if stack:
        meta["annotations"] = {STACK_ANNOTATION: stack}
    data = base64.b64encode(b'{"version": 4, "serial": 3, "lineage": "l"}').decode()
    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": meta,
                "data": {"tfstate": data}}, dry_run=False, field_manager="terraform")  # fmt: skip


def _applied(kube: Kube, path: str) -> None:
    inventory_store.write_inventory(kube, path, [], commit="c", spec_digest="d")


def _pair() -> tuple[str, str]:
    p = "sb" + uuid.uuid4().hex[:8]
    a, b = f"appops/{p}-a/db", f"appops/{p}/a-db"
    assert legacy_state_suffix(a) == legacy_state_suffix(b) == state_suffix(b)
    return a, b


def test_a_former_state_is_read_then_moved_by_the_one_stack_it_can_be(kube: Kube) -> None:
    a, b = _pair()
    old, new = Backend(suffix=legacy_state_suffix(a)), Backend(suffix=state_suffix(a))
    _state(kube, old.suffix)
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": INTENT_PREFIX + old.suffix, "namespace": STATE_NAMESPACE},
                "data": {"creating": '["x"]'}}, dry_run=False)  # fmt: skip
    _applied(kube, a)
    # B (never applied) has that name now: refused, naming A
    with pytest.raises(StateNameError, match=f"is the state of {a} under the name konfig gave"):
        state_backend(kube, b)
    assert state_backend(kube, a) == old  # a read reads it where it is
    assert kube.get("v1", "Secret", new.secret_name, STATE_NAMESPACE) is None
    assert state_backend(kube, a, move=True) == new
    moved = kube.get("v1", "Secret", new.secret_name, STATE_NAMESPACE)
    assert moved is not None and moved["metadata"]["annotations"][STACK_ANNOTATION] == a
    assert moved["metadata"]["labels"]["tfstateSecretSuffix"] == new.suffix
    assert kube.get("v1", "Secret", old.secret_name, STATE_NAMESPACE) is None
    intent = kube.get("v1", "ConfigMap", INTENT_PREFIX + new.suffix, STATE_NAMESPACE)
    assert intent is not None and intent["data"] == {"creating": '["x"]'}
    assert kube.get("v1", "ConfigMap", INTENT_PREFIX + old.suffix, STATE_NAMESPACE) is None
    # now each has its own: B starts empty, A reads its moved state
    assert state_backend(kube, b) == Backend(suffix=state_suffix(b))
    assert state_backend(kube, a) == new


def test_a_former_state_two_applied_stacks_may_own_is_refused_for_both(kube: Kube) -> None:
    a, b = _pair()
    _state(kube, legacy_state_suffix(a))
    _applied(kube, a)
    _applied(kube, b)
    for path in (a, b):
        with pytest.raises(StateNameError, match="konfig cannot tell whose it is") as caught:
            state_backend(kube, path, move=True)
        assert f"tfstate-default-{state_suffix(a)}" in (caught.value.hint or "")
    assert kube.get("v1", "Secret", Backend(suffix=state_suffix(a)).secret_name,
                    STATE_NAMESPACE) is None  # fmt: skip


def test_a_state_that_records_its_stack_is_read_at_once_and_never_by_another(
    kube: Kube,
) -> None:
    a, b = _pair()
    _state(kube, state_suffix(b), stack=b)  # B's own, recorded
    _applied(kube, a)  # A had that name before, but the state says it is B's
    assert state_backend(kube, b) == Backend(suffix=state_suffix(b))
    assert state_backend(kube, a) == Backend(suffix=state_suffix(a))  # not A's
    other = f"appops/{uuid.uuid4().hex[:8]}/dev"
    _state(kube, state_suffix(other), stack=b)  # copied by hand
    with pytest.raises(StateNameError, match=f"records that it is the state of {b}"):
        state_backend(kube, other)


def test_apply_records_whose_a_state_is(kube: Kube) -> None:
    path = f"appops/{uuid.uuid4().hex[:8]}/dev"
    _state(kube, state_suffix(path))  # written by OpenTofu before the record existed
    assert state_backend(kube, path) == Backend(suffix=state_suffix(path))
    secret = kube.get("v1", "Secret", Backend(suffix=state_suffix(path)).secret_name,
                      STATE_NAMESPACE)  # fmt: skip
    assert STACK_ANNOTATION not in (secret or {}).get("metadata", {}).get("annotations", {})
    state_backend(kube, path, move=True)
    secret = kube.get("v1", "Secret", Backend(suffix=state_suffix(path)).secret_name,
                      STATE_NAMESPACE)  # fmt: skip
    assert secret is not None and secret["metadata"]["annotations"][STACK_ANNOTATION] == path
    assert "tfstate" in secret["data"]  # the state itself untouched

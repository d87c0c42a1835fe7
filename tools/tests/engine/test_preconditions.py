"""Server-side apply honours metadata.resourceVersion as a precondition: proven on the
local control plane before the merge-time apply relies on it (issue 27 item 4)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubeutil import configmap, make_stack, namespace, spec_of, unique

from konfig.engine import inventory_store
from konfig.engine.applier import apply_stack
from konfig.engine.kube import Kube, KubeApiError
from konfig.engine.planner import plan_stack
from konfig.engine.stackrun import ApplyOptions

pytestmark = pytest.mark.cluster


def test_server_side_apply_refuses_a_stale_resource_version(kube: Kube) -> None:
    ns = unique("p27rv")
    kube.apply(namespace(ns), dry_run=False)
    first = kube.apply(configmap(ns, k="one"), dry_run=False)
    read = first["metadata"]["resourceVersion"]
    # someone else writes in between
    second = kube.apply(configmap(ns, k="two"), dry_run=False, field_manager="someone")
    assert second["metadata"]["resourceVersion"] != read

    stale = copy.deepcopy(configmap(ns, k="three"))
    stale["metadata"]["resourceVersion"] = read
    with pytest.raises(KubeApiError) as refused:
        kube.apply(stale, dry_run=False, force=True)
    assert refused.value.failure.status == 409
    assert kube.get("v1", "ConfigMap", "cm", ns)["data"] == {"k": "two"}  # type: ignore[index]

    current = copy.deepcopy(stale)
    current["metadata"]["resourceVersion"] = second["metadata"]["resourceVersion"]
    done = kube.apply(current, dry_run=False, force=True)
    assert done["data"] == {"k": "three"}


FAST = ApplyOptions(timeout=30, poll=0.2, backoff=0.05, wait=False, preconditions=True)


def test_apply_with_preconditions_refuses_what_changed_since_the_plan(kube: Kube) -> None:
    """The merge-time apply (options.preconditions): a write between the plan and the apply
    that only the server's bookkeeping shows (another manager's same values) is applied
    over with the version read again; a changed value is refused, not overwritten."""
    ns = unique("p27pc")
    stack = make_stack()
    spec = spec_of(namespace(ns), configmap(ns, k="one"))
    first = apply_stack(kube, plan_stack(kube, stack, spec, None), spec, None, FAST)
    assert first.ok, first.error
    cid = f"v1:ConfigMap:{ns}:cm"

    def planned(data: str) -> tuple[Any, Any]:
        changed = spec_of(namespace(ns), configmap(ns, k=data))
        prior = inventory_store.read_inventory(kube, stack)
        return changed, plan_stack(kube, stack, changed, prior)

    # the same values from another manager: rv moves, nothing that matters does
    changed, plan = planned("two")
    kube.apply(configmap(ns, k="one"), dry_run=False, field_manager="bookkeeper")
    done = apply_stack(kube, plan, changed, inventory_store.read_inventory(kube, stack), FAST)
    assert done.ok, done.error
    assert kube.get("v1", "ConfigMap", "cm", ns)["data"] == {"k": "two"}  # type: ignore[index]

    # a value changed in between: refused, and what the other wrote stays
    changed, plan = planned("three")
    kube.apply(configmap(ns, k="by-hand"), dry_run=False, field_manager="someone")
    refused = apply_stack(kube, plan, changed, inventory_store.read_inventory(kube, stack), FAST)
    assert not refused.ok
    (failed,) = [o for o in refused.objects if o.id == cid]
    assert (
        failed.outcome == "failed"
        and "changed in the cluster since the plan read it" in failed.message
    )
    assert kube.get("v1", "ConfigMap", "cm", ns)["data"] == {"k": "by-hand"}  # type: ignore[index]

"""Server-side apply honours metadata.resourceVersion as a precondition: proven on the
local control plane before the merge-time apply relies on it (issue 27 item 4)."""

from __future__ import annotations

import copy

import pytest
from kubeutil import configmap, namespace, unique

from konfig.engine.kube import Kube, KubeApiError

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

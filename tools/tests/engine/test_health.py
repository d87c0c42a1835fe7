"""kstatus rules on real-shaped objects (as the API server returns them)."""

from __future__ import annotations

import copy
from typing import Any

from konfig.engine.health import status


def deployment(**status_fields: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "web", "generation": 2, "uid": "u"},
        "spec": {"replicas": 2},
        "status": {
            "observedGeneration": 2,
            "replicas": 2,
            "updatedReplicas": 2,
            "readyReplicas": 2,
            "availableReplicas": 2,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        },
    }
    obj["status"].update(status_fields)
    return obj


def test_missing_object() -> None:
    h = status(None)
    assert h.state == "not_found"
    assert not h.done


def test_deployment_available() -> None:
    h = status(deployment())
    assert h.state == "current"
    assert h.done


def test_deployment_rolling_out() -> None:
    h = status(deployment(availableReplicas=1, readyReplicas=1))
    assert h.state == "in_progress"
    assert h.message == "1/2 replicas available"
    assert "Available=True" in h.waiting_for


def test_deployment_updated_replicas_behind() -> None:
    assert status(deployment(updatedReplicas=1)).message == "1/2 replicas updated"


def test_deployment_old_replicas_terminating() -> None:
    assert "pending termination" in status(deployment(replicas=3)).message


def test_deployment_without_available_condition() -> None:
    obj = deployment()
    obj["status"]["conditions"] = [{"type": "Available", "status": "False"}]
    assert status(obj).state == "in_progress"


def test_deployment_progress_deadline_exceeded_fails() -> None:
    obj = deployment(availableReplicas=0)
    obj["status"]["conditions"][1] = {
        "type": "Progressing",
        "status": "False",
        "reason": "ProgressDeadlineExceeded",
        "message": 'ReplicaSet "web-1" has timed out progressing.',
    }
    h = status(obj)
    assert h.state == "failed"
    assert "timed out" in h.message


def test_observed_generation_behind() -> None:
    obj = deployment(observedGeneration=1)
    h = status(obj)
    assert h.state == "in_progress"
    assert "observedGeneration 1 < generation 2" in h.message


def test_terminating_is_in_progress() -> None:
    obj = deployment()
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert status(obj).message == "terminating"


def test_statefulset_revisions() -> None:
    sts: dict[str, Any] = {
        "kind": "StatefulSet",
        "metadata": {"generation": 1},
        "spec": {"replicas": 3},
        "status": {
            "observedGeneration": 1,
            "replicas": 3,
            "readyReplicas": 3,
            "currentReplicas": 3,
            "updatedReplicas": 3,
            "currentRevision": "db-1",
            "updateRevision": "db-1",
        },
    }
    assert status(sts).state == "current"
    rolling = copy.deepcopy(sts)
    rolling["status"]["updateRevision"] = "db-2"
    assert status(rolling).message == "currentRevision != updateRevision"
    notready = copy.deepcopy(sts)
    notready["status"]["readyReplicas"] = 1
    assert status(notready).message == "1/3 replicas ready"


def test_daemonset_counts() -> None:
    ds: dict[str, Any] = {
        "kind": "DaemonSet",
        "metadata": {"generation": 1},
        "status": {
            "observedGeneration": 1,
            "desiredNumberScheduled": 2,
            "currentNumberScheduled": 2,
            "updatedNumberScheduled": 2,
            "numberAvailable": 1,
            "numberReady": 2,
        },
    }
    assert status(ds).message == "1/2 pods available"
    ds["status"]["numberAvailable"] = 2
    assert status(ds).state == "current"
    assert status({"kind": "DaemonSet", "metadata": {}, "status": {}}).state == "in_progress"


def test_a_new_daemonset_waits_for_its_controller() -> None:
    """The create response of a DaemonSet counts 0 desired pods before its controller
    looked at it: that is no reason to call it healthy."""
    created: dict[str, Any] = {
        "kind": "DaemonSet",
        "metadata": {"generation": 1},
        "status": {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        },
    }
    h = status(created)
    assert h.state == "in_progress"
    assert "observe" in h.waiting_for
    observed = copy.deepcopy(created)
    observed["status"]["observedGeneration"] = 1  # a DaemonSet no node wants: 0 of 0
    assert status(observed).state == "current"


def test_job_complete_failed_running() -> None:
    job: dict[str, Any] = {"kind": "Job", "metadata": {}, "status": {"active": 1}}
    h = status(job)
    assert (h.state, h.waiting_for) == ("in_progress", "condition Complete=True")
    job["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    assert status(job).state == "current"
    job["status"]["conditions"] = [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "x"}
    ]
    h = status(job)
    assert h.state == "failed"
    assert "BackoffLimitExceeded" in h.message


def test_pvc_bound() -> None:
    pvc: dict[str, Any] = {
        "kind": "PersistentVolumeClaim",
        "metadata": {},
        "status": {"phase": "Pending"},
    }
    assert status(pvc).waiting_for == "phase Bound"
    pvc["status"]["phase"] = "Bound"
    assert status(pvc).state == "current"


def test_crd_established_and_names_rejected() -> None:
    crd: dict[str, Any] = {
        "kind": "CustomResourceDefinition",
        "metadata": {},
        "status": {"conditions": []},
    }
    assert status(crd).waiting_for == "condition Established=True"
    crd["status"]["conditions"] = [{"type": "Established", "status": "True"}]
    assert status(crd).state == "current"
    crd["status"]["conditions"] = [{"type": "NamesAccepted", "status": "False", "message": "clash"}]
    assert status(crd).state == "failed"


def test_service_load_balancer_waits_for_ingress() -> None:
    svc: dict[str, Any] = {
        "kind": "Service",
        "metadata": {},
        "spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {}},
    }
    assert status(svc).waiting_for == "status.loadBalancer.ingress"
    svc["status"]["loadBalancer"]["ingress"] = [{"ip": "10.0.0.1"}]
    assert status(svc).state == "current"
    assert (
        status({"kind": "Service", "metadata": {}, "spec": {"type": "ClusterIP"}}).state
        == "current"
    )


def test_generic_ready_condition_and_plain_objects() -> None:
    cr: dict[str, Any] = {
        "kind": "Widget",
        "metadata": {},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Reconciling"}]},
    }
    h = status(cr)
    assert (h.state, h.waiting_for) == ("in_progress", "condition Ready=True")
    assert "Reconciling" in h.message
    cr["status"]["conditions"][0]["status"] = "True"
    assert status(cr).state == "current"
    cr["status"]["conditions"] = [{"type": "Stalled", "status": "True", "message": "bad spec"}]
    assert status(cr).state == "failed"
    assert status({"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}}).state == "current"

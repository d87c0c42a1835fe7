"""SIGTERM and SIGINT (what a terminal or a cancelled CI job sends) stop konfig cleanly:
the stack's Lease is released, the inventory records what was applied, compile workers
stop and their temporary files go (issue 19, signals).

konfig runs as its own process (in its own process group) against the real local
control plane; the signal is sent while konfig waits on a LoadBalancer Service, which
never gets an address here, or while a worker compiles a stack that takes long.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.faults import Running, processes_in_group, wait_until_gone
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.kube import Kube
from konfig.engine.lock import LEASE_API_VERSION, LEASE_KIND, StackLock

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"

# level 1: the Namespace; level 2: a ConfigMap and a LoadBalancer Service (never healthy
# here, so the apply waits on it); level 3: a ConfigMap that depends on the Service
LB_MAIN = """\
import base.pkg.models.frontend

first: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {{apiVersion = "v1", kind = "ConfigMap", metadata = {{name = "a", namespace = "{ns}"}}}}
        {{
            apiVersion = "v1"
            kind = "Service"
            metadata = {{name = "edge", namespace = "{ns}"}}
            spec = {{type = "LoadBalancer", selector.app = "edge", ports = [{{port = 80}}]}}
        }}
    ]
}}

after: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "ConfigMap", metadata = {{name = "after", namespace = "{ns}"}}}}
    ]
    dependsOn = ["v1:Service:{ns}:edge"]
}}
"""

# about 20 s of CPU in one KCL run: long enough to be stopped in the middle
SPIN_MAIN = "x = sum([sum([1 for j in range(2000)]) for i in range(2000)])\n"


def _lb_stack(repo_builder: RepoBuilder) -> tuple[str, str]:
    ns = unique("p19sig")
    repo_builder.stack(ns, "dev", main=LB_MAIN.format(ns=ns), stack_yaml=STACK_YAML)
    return ns, f"{ns}/dev"


def _level_2_written(kube: Kube, ns: str) -> bool:
    """The LB stack's level 2 is in the cluster: its apply now waits on the Service's
    health (a stack's lines come as one block at its end when konfig's output is not a
    terminal, so there is no progress line to wait for)."""
    return all(kube.get("v1", k, n, ns) for k, n in (("ConfigMap", "a"), ("Service", "edge")))


def _lease(kube: Kube, address: str) -> dict[str, object] | None:
    name = inv.inventory_name(f"appops/{address}")
    return kube.get(LEASE_API_VERSION, LEASE_KIND, name, inv.NAMESPACE)


@pytest.mark.cluster
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_apply_records_what_was_applied_and_releases_the_lock(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    signum: int,
    code: int,
) -> None:
    ns, address = _lb_stack(repo_builder)
    repo_builder.write(".gitignore", "/.cache/\n")
    git_init(repo_builder.root)
    c1 = git_commit(repo_builder.root, "c1")  # what is applied is a commit
    kc = f"--kubeconfig={cluster.kubeconfig}"
    run = Running(
        repo_builder.root,
        ["apply", address, "--yes", "--timeout", "300", "--commit", c1, kc],
    )
    run.wait_for(lambda: _level_2_written(kube, ns), "the Service and ConfigMap a")
    assert _lease(kube, address) is not None  # held while applying
    group = processes_in_group(run.proc.pid)
    run.proc.send_signal(signum)
    returncode, out, err, seconds = run.finish(30)

    name = signal.Signals(signum).name
    assert returncode == code, out + err
    assert seconds < 15, seconds  # a CI runner sends SIGKILL 10 s after SIGINT
    assert "Traceback" not in out + err
    assert f"konfig: {name} received: stopping the apply" in err
    assert "stopped by a signal with 3 of 4 objects done" in err
    assert f"v1:ConfigMap:{ns}:after: not done: konfig was stopped" in err
    assert f"konfig: stopped by {name}" in err
    assert wait_until_gone(group) == []
    # the Lease is released, the inventory lists what exists, the commit is not recorded
    assert _lease(kube, address) is None
    stored = inventory_store.read_inventory(kube, f"appops/{address}")
    assert stored is not None
    assert stored.ids() == {
        f"v1:Namespace:{ns}",
        f"v1:ConfigMap:{ns}:a",
        f"v1:Service:{ns}:edge",
    }
    assert stored.commit == ""
    assert kube.get("v1", "ConfigMap", "after", ns) is None

    # the next run finishes the job and records the commit
    c2 = git_commit(repo_builder.root, "c2")
    res = konfig("apply", address, "--yes", "--no-wait", kc, "--commit", c2, cwd=repo_builder.root)
    assert res.code == 0, res.out + res.err
    stored = inventory_store.read_inventory(kube, f"appops/{address}")
    assert stored is not None and stored.commit == c2 and len(stored.ids()) == 4
    assert konfig("destroy", address, "--yes", kc, cwd=repo_builder.root).code == 0


@pytest.mark.cluster
def test_sigterm_while_waiting_for_the_lock_writes_nothing_and_leaves_the_holders_lease(
    repo_builder: RepoBuilder, cluster: Cluster, kube: Kube
) -> None:
    ns, address = _lb_stack(repo_builder)
    other = StackLock(kube, f"appops/{address}", identity="another apply")
    other.acquire(10)
    try:
        run = Running(
            repo_builder.root,
            [
                "apply",
                address,
                "--allow-dirty",  # not a git repository
                "--yes",
                "--lock-timeout",
                "300",
                f"--kubeconfig={cluster.kubeconfig}",
            ],
        )
        run.wait_for_line("waiting for the stack's lock, held by 'another apply'")
        run.proc.send_signal(signal.SIGTERM)
        returncode, out, err, seconds = run.finish(30)
        assert returncode == 143, out + err
        assert seconds < 10, seconds
        assert "Traceback" not in out + err
        assert "stopped by a signal while waiting for its lock" in err
        lease = _lease(kube, address)
        assert lease is not None and lease["spec"]["holderIdentity"] == "another apply"  # type: ignore[index]
        assert inventory_store.read_inventory(kube, f"appops/{address}") is None
        assert kube.get("v1", "Namespace", ns, None) is None
    finally:
        other.release()


def _workers_started(tmp: Path) -> bool:
    return any(tmp.glob("konfig-workers-*/worker-*.stderr"))


def test_sigterm_during_compile_stops_the_workers_and_removes_their_files(
    repo_builder: RepoBuilder, tmp_path: Path
) -> None:
    repo_builder.stack("spin", "dev", main=SPIN_MAIN)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    run = Running(
        repo_builder.root, ["compile", "spin/dev", "--no-cache"], env={"TMPDIR": str(tmp)}
    )
    run.wait_for(lambda: _workers_started(tmp), "a compile worker")
    time.sleep(0.5)  # into the KCL run
    workers = [p for p in processes_in_group(run.proc.pid) if p != run.proc.pid]
    assert workers, "no worker process"
    run.proc.send_signal(signal.SIGTERM)
    returncode, out, err, _ = run.finish(20)
    assert returncode == 143, out + err
    assert "error: terminated (SIGTERM)" in err
    assert "Traceback" not in out + err
    assert wait_until_gone(workers, 15) == []
    assert list(tmp.iterdir()) == []  # the workers' folder (stderr files, batches) is gone


def test_compile_workers_die_with_a_parent_killed_by_sigkill(
    repo_builder: RepoBuilder, tmp_path: Path
) -> None:
    """SIGKILL cannot be handled: the kernel stops the workers (no orphan keeps computing)."""
    repo_builder.stack("spin", "dev", main=SPIN_MAIN)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    run = Running(
        repo_builder.root, ["compile", "spin/dev", "--no-cache"], env={"TMPDIR": str(tmp)}
    )
    run.wait_for(lambda: _workers_started(tmp), "a compile worker")
    time.sleep(0.5)  # into the KCL run
    workers = [p for p in processes_in_group(run.proc.pid) if p != run.proc.pid]
    assert workers, "no worker process"
    run.proc.send_signal(signal.SIGKILL)
    run.finish(10)
    assert wait_until_gone(workers, 15) == []


FINALIZER_MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {{
            apiVersion = "v1"
            kind = "ConfigMap"
            metadata = {{name = "held", namespace = "{ns}", finalizers = ["konfig.test/hold"]}}
        }}
    ]
}}
"""


@pytest.mark.cluster
def test_sigterm_during_destroy_keeps_what_survives_in_the_inventory_and_releases_the_lock(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """destroy waits for a ConfigMap held by a finalizer to go; SIGTERM stops it there."""
    ns = unique("p19des")
    repo_builder.stack(ns, "dev", main=FINALIZER_MAIN.format(ns=ns), stack_yaml=STACK_YAML)
    address = f"{ns}/dev"
    kc = f"--kubeconfig={cluster.kubeconfig}"
    assert (
        konfig(
            "apply", address, "--allow-dirty", "--yes", "--no-wait", kc, cwd=repo_builder.root
        ).code
        == 0
    )

    run = Running(
        repo_builder.root, ["destroy", address, "--allow-dirty", "--yes", "--timeout", "300", kc]
    )
    run.wait_for(
        lambda: (
            (kube.get("v1", "ConfigMap", "held", ns) or {})
            .get("metadata", {})
            .get("deletionTimestamp")
            is not None
        ),
        "the ConfigMap to be deleted",
    )
    time.sleep(0.5)  # waiting for it to go
    run.proc.send_signal(signal.SIGTERM)
    returncode, out, err, seconds = run.finish(30)
    assert returncode == 143, out + err
    assert seconds < 15, seconds
    assert "Traceback" not in out + err
    assert "SIGTERM received: stopping the destroy" in err
    assert "stopped by a signal" in err
    assert _lease(kube, address) is None
    stored = inventory_store.read_inventory(kube, f"appops/{address}")
    assert stored is not None  # the survivors stay owned: the next destroy retries them
    assert stored.ids() == {f"v1:Namespace:{ns}", f"v1:ConfigMap:{ns}:held"}

    cluster.kubectl(
        "-n", ns, "patch", "configmap", "held", "--type", "merge",
        "-p", '{"metadata": {"finalizers": null}}',
    )  # fmt: skip
    res = konfig("destroy", address, "--allow-dirty", "--yes", kc, cwd=repo_builder.root)
    assert res.code == 0, res.out + res.err
    assert inventory_store.read_inventory(kube, f"appops/{address}") is None


@pytest.mark.cluster
def test_sigterm_during_an_apply_of_two_stacks_on_threads_stops_both(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """Stacks applied at once run on threads; the handler runs on the main thread."""
    (ns1, address1), (ns2, address2) = _lb_stack(repo_builder), _lb_stack(repo_builder)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    run = Running(
        repo_builder.root,
        ["apply", address1, address2, "--allow-dirty", "--yes", "--timeout", "300", kc],
    )
    run.wait_for(
        lambda: all(_level_2_written(kube, ns) for ns in (ns1, ns2)), "both stacks to wait"
    )
    run.proc.send_signal(signal.SIGTERM)
    returncode, out, err, seconds = run.finish(30)
    assert returncode == 143, out + err
    assert seconds < 15, seconds
    assert "Traceback" not in out + err
    assert "apply failed for 2 of 2 stacks" in err
    for ns, address in ((ns1, address1), (ns2, address2)):
        assert _lease(kube, address) is None
        stored = inventory_store.read_inventory(kube, f"appops/{address}")
        assert stored is not None and stored.commit == ""
        assert f"v1:ConfigMap:{ns}:after" not in stored.ids()
        assert f"v1:Service:{ns}:edge" in stored.ids()
        assert (
            konfig("destroy", address, "--allow-dirty", "--yes", kc, cwd=repo_builder.root).code
            == 0
        )

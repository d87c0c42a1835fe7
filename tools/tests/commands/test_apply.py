"""``konfig apply`` end to end: a real repository, the real control plane, the CLI in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder
from kubeutil import unique

from konfig.build.compiler import compile_input, compile_one
from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.kube import Kube
from konfig.engine.lock import StackLock
from konfig.repo.layout import discover

pytestmark = pytest.mark.cluster

STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"


def make(
    repo: RepoBuilder, project: str, *, image: str = "nginx:1.27.3", ns: str | None = None
) -> str:
    main = SIMPLE_MAIN.format(name=project, namespace=ns or project).replace("nginx:1.27.3", image)
    repo.stack(project, "dev", main=main, stack_yaml=STACK_YAML)
    return f"{project}/dev"


def resource_ids(repo: RepoBuilder, address: str) -> list[str]:
    r = discover(repo.root)
    result = compile_one(compile_input(r, r.stack(address)))
    assert result.spec is not None, result.error
    return [res.id for res in result.spec.resources]


def test_apply_update_and_json(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    project = unique("p7cli")
    address = make(repo_builder, project)
    repo_builder.write(".gitignore", "/.cache/\n")
    git_init(repo_builder.root)
    head = git_commit(repo_builder.root, "a stack")
    ids = resource_ids(repo_builder, address)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", address, "--yes", kc, cwd=repo_builder.root)
    assert res.code == 0, res.err
    assert (
        f"Apply complete: {len(ids)} created, 0 updated, 0 replaced, 0 deleted, 0 unchanged"
        in res.out
    )
    # One complete block per stack on stdout; every object line names its object by id.
    assert "level 1/" in res.out
    lines = [line.split() for line in res.out.splitlines()]
    for rid in ids:
        assert ["created", rid] in lines, res.out
    stored = inventory_store.read_inventory(kube, f"appops/{address}")
    assert stored is not None
    assert stored.ids() == set(ids)
    assert (stored.commit, stored.dirty) == (head, False)
    deploy = kube.get("apps/v1", "Deployment", project, project)
    assert (
        deploy is not None
        and deploy["status"].get("availableReplicas") == deploy["spec"]["replicas"]
    )

    # a second apply changes nothing; --json is machine readable; --commit must be HEAD
    res = konfig("apply", address, "--yes", "--json", kc, "--commit", head, cwd=repo_builder.root)
    assert res.code == 0, res.err
    data = json.loads(res.out)
    assert data["ok"] is True
    (stack,) = data["stacks"]
    assert stack["counts"]["unchanged"] == len(ids)
    assert stack["inventory"]["commit"] == head
    assert stack["inventory"]["applysetId"] == inv.applyset_id(
        inv.inventory_name(f"appops/{address}")
    )
    res = konfig("apply", address, "--yes", kc, "--commit", "HEAD~1", cwd=repo_builder.root)
    assert res.code == 2 and "unknown git revision 'HEAD~1'" in res.err

    # an image change is an update
    make(repo_builder, project, image="nginx:1.27.4")
    git_commit(repo_builder.root, "nginx 1.27.4")
    res = konfig("apply", address, "--yes", kc, cwd=repo_builder.root)
    assert res.code == 0, res.err
    assert "1 updated" in res.out
    deploy = kube.get("apps/v1", "Deployment", project, project)
    assert deploy is not None
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27.4"

    res = konfig("destroy", address, "--yes", kc, cwd=repo_builder.root)
    assert res.code == 0, res.err
    assert inventory_store.read_inventory(kube, f"appops/{address}") is None


def test_refuses_without_tty_unless_yes(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    address = make(repo_builder, unique("p7tty"))
    res = konfig(
        "apply",
        "--allow-dirty",
        address,
        f"--kubeconfig={cluster.kubeconfig}",
        cwd=repo_builder.root,
    )
    assert res.code == 2
    assert "stdin is not a terminal" in res.err and "--yes" in res.err
    assert "to create" in res.out  # the plan was shown
    assert inventory_store.read_inventory(kube, f"appops/{address}") is None


def test_plan_file_must_match(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    project = unique("p7plan")
    address = make(repo_builder, project)
    kc = f"--kubeconfig={cluster.kubeconfig}"
    saved = tmp_path / "preview.json"
    res = konfig(
        "preview", address, kc, "--format", "json", "--out", str(saved), cwd=repo_builder.root
    )
    assert res.code == 0, res.err
    # the configuration changes after the preview: refused, nothing written
    make(repo_builder, project, image="nginx:1.27.4")
    res = konfig(
        "apply", "--allow-dirty", address, "--yes", "--plan", str(saved), kc, cwd=repo_builder.root
    )
    assert res.code == 1
    assert "differs from the previewed one" in res.err
    assert "spec digest" in res.err
    assert inventory_store.read_inventory(kube, f"appops/{address}") is None
    assert kube.get("v1", "Namespace", project, None) is None
    # back to what was previewed: applied
    make(repo_builder, project)
    res = konfig(
        "apply", "--allow-dirty", address, "--yes", "--plan", str(saved), kc, cwd=repo_builder.root
    )
    assert res.code == 0, res.err
    assert "Apply complete" in res.out
    assert konfig("destroy", "--allow-dirty", address, "--yes", kc, cwd=repo_builder.root).code == 0


def test_second_apply_fails_naming_the_holder(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    address = make(repo_builder, unique("p7lock"))
    holder = StackLock(kube, f"appops/{address}", identity="merge run 42")
    holder.acquire(5)
    try:
        res = konfig(
            "apply",
            "--allow-dirty",
            address,
            "--yes",
            "--lock-timeout",
            "1",
            f"--kubeconfig={cluster.kubeconfig}",
            cwd=repo_builder.root,
        )
    finally:
        holder.release()
    assert res.code == 1
    assert "is locked by another apply" in res.err
    assert "'merge run 42'" in res.err
    assert inventory_store.read_inventory(kube, f"appops/{address}") is None


def test_several_stacks_and_shared_objects(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    kc = f"--kubeconfig={cluster.kubeconfig}"
    a, b = make(repo_builder, unique("p7a")), make(repo_builder, unique("p7b"))
    res = konfig("apply", "--allow-dirty", b, a, "--yes", kc, cwd=repo_builder.root)
    assert res.code == 0, res.err
    # one complete block per stack, each starting with its header
    heads = [line for line in res.out.splitlines() if line.startswith("appops/")]
    assert any(h.startswith(f"appops/{a} (context admin): applied in ") for h in heads)
    assert any(h.startswith(f"appops/{b} (context admin): applied in ") for h in heads)
    for address in (a, b):
        stored = inventory_store.read_inventory(kube, f"appops/{address}")
        assert stored is not None and stored.ids() == set(resource_ids(repo_builder, address))
    # two stacks that declare the same object cannot be applied independently
    clash = unique("p7c")
    make(repo_builder, clash, ns=a.split("/")[0])
    repo_builder.write(
        f"appops/{clash}/dev/main.k",
        SIMPLE_MAIN.format(name=a.split("/")[0], namespace=a.split("/")[0]),
    )
    res = konfig("apply", "--allow-dirty", a, f"{clash}/dev", "--yes", kc, cwd=repo_builder.root)
    assert res.code == 2
    assert "stacks share objects" in res.err
    assert inventory_store.read_inventory(kube, f"appops/{clash}/dev") is None
    res = konfig("destroy", "--allow-dirty", a, b, "--yes", kc, cwd=repo_builder.root)
    assert res.code == 0, res.err


SECRET_MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {{
            apiVersion = "v1"
            kind = "Secret"
            metadata = {{name = "creds", namespace = "{ns}"}}
            stringData = {{password = "{value}"}}
        }}
    ]
}}
"""


def test_secret_values_never_printed(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    project = unique("p7sec")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    first, second = "hunter2-" + unique("v"), "correct-horse-" + unique("v")
    repo_builder.stack(
        project, "dev", main=SECRET_MAIN.format(ns=project, value=first), stack_yaml=STACK_YAML
    )
    res = konfig("apply", "--allow-dirty", f"{project}/dev", "--yes", kc, cwd=repo_builder.root)
    assert res.code == 0, res.err
    repo_builder.write(f"appops/{project}/dev/main.k", SECRET_MAIN.format(ns=project, value=second))
    res2 = konfig("apply", "--allow-dirty", f"{project}/dev", "--yes", kc, cwd=repo_builder.root)
    assert res2.code == 0, res2.err
    assert "1 updated" in res2.out
    res3 = konfig(
        "apply", "--allow-dirty", f"{project}/dev", "--yes", "--json", kc, cwd=repo_builder.root
    )
    assert res3.code == 0, res3.err
    for r in (res, res2, res3):
        for value in (first, second):
            assert value not in r.out and value not in r.err
    assert (
        konfig(
            "destroy", "--allow-dirty", f"{project}/dev", "--yes", kc, cwd=repo_builder.root
        ).code
        == 0
    )


LB_MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {{
            apiVersion = "v1"
            kind = "Service"
            metadata = {{name = "edge", namespace = "{ns}"}}
            spec = {{type = "LoadBalancer", selector.app = "edge", ports = [{{port = 80}}]}}
        }}
    ]
}}
"""


def test_two_concurrent_applies_never_interleave(
    repo_builder: RepoBuilder, cluster: Cluster, kube: Kube
) -> None:
    """The second apply waits for the first's lock, says so at once, and writes only
    after the first is done.

    The first holds the lock while it waits for a LoadBalancer Service to get an
    ingress (nothing here gives one), until the test sees the second waiting and sets
    the ingress itself: the first's hold ends on that event, never on a timer that a
    slow start of the second could outlast (with ``--timeout 6`` this failed 3 of 10
    runs at a load of 3-5: the second reached the lock after the first released it).
    """
    import subprocess
    import sys
    import threading
    import time

    project = unique("p7two")
    repo_builder.stack(project, "dev", main=LB_MAIN.format(ns=project), stack_yaml=STACK_YAML)
    konfig_bin = str(Path(sys.executable).parent / "konfig")
    cmd = [
        konfig_bin,
        "apply",
        "--allow-dirty",
        f"{project}/dev",
        "--yes",
        "--timeout",
        "240",
        "--lock-timeout",
        "240",
        f"--kubeconfig={cluster.kubeconfig}",
    ]
    first = subprocess.Popen(
        cmd, cwd=repo_builder.root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    first_lines: list[tuple[float, str]] = []

    def read(proc: subprocess.Popen[str], into: list[tuple[float, str]]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            into.append((time.monotonic(), line))

    readers = [threading.Thread(target=read, args=(first, first_lines))]
    readers[0].start()
    name = inv.inventory_name(f"appops/{project}/dev")
    deadline = time.monotonic() + 120
    while kube.get("coordination.k8s.io/v1", "Lease", name, "konfig-system") is None:
        assert time.monotonic() < deadline, "the first apply never took the lock"
        assert first.poll() is None, "".join(line for _, line in first_lines)
        time.sleep(0.1)
    second = subprocess.Popen(
        cmd, cwd=repo_builder.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[tuple[float, str]] = []
    readers.append(threading.Thread(target=read, args=(second, lines)))
    readers[1].start()
    # the second says that it waits for the lock while the first still holds it
    deadline = time.monotonic() + 180
    while not any("waiting for the stack's lock, held by" in line for _, line in lines):
        assert time.monotonic() < deadline, "the second never said it waits for the lock"
        assert second.poll() is None, "".join(line for _, line in lines)
        assert first.poll() is None, "".join(line for _, line in first_lines)
        time.sleep(0.1)
    assert first.poll() is None, "the first apply ended before the second waited"
    assert second.stdout is not None
    # the Service gets its ingress: the first becomes healthy, records, releases the lock
    cluster.kubectl(
        "-n",
        project,
        "patch",
        "service",
        "edge",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}}',
    )
    first.wait(timeout=120)
    out2 = second.stdout.read()  # one complete block, printed when the stack is done
    second.wait(timeout=120)
    for reader in readers:
        reader.join()
    err1 = "".join(line for _, line in first_lines)
    err2 = "".join(line for _, line in lines)
    assert first.returncode == 0, err1
    assert second.returncode == 0, out2 + err2
    # the second's complete block shows the wait before its first write
    block = out2.splitlines()
    wait_at = next(i for i, line in enumerate(block) if "waiting for the stack's lock" in line)
    first_write = next(i for i, line in enumerate(block) if "inventory konfig." in line)
    assert wait_at < first_write, out2
    res = subprocess.run(
        [
            konfig_bin,
            "destroy",
            "--allow-dirty",
            f"{project}/dev",
            "--yes",
            f"--kubeconfig={cluster.kubeconfig}",
        ],
        cwd=repo_builder.root,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr


CM_MAIN = """\
import base.pkg.models.frontend

extras: frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {{
            apiVersion = "v1"
            kind = "ConfigMap"
            metadata = {{name = "cfg", namespace = "{ns}"}}
            data.k = "v"
        }}
    ]
}}
"""


def test_api_server_stopped_mid_apply_exit_1_then_rerun_converges(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    import threading
    import time

    project = unique("p7down")
    kc = f"--kubeconfig={cluster.kubeconfig}"
    repo_builder.stack(project, "dev", main=LB_MAIN.format(ns=project), stack_yaml=STACK_YAML)
    stopped = threading.Event()

    def stop_when_applied() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if kube.get("v1", "Service", "edge", project) is not None:
                    cluster.stop_apiserver()
                    stopped.set()
                    return
            except Exception:
                pass
            time.sleep(0.1)

    watcher = threading.Thread(target=stop_when_applied)
    watcher.start()
    try:
        res = konfig(
            "apply",
            "--allow-dirty",
            f"{project}/dev",
            "--yes",
            "--timeout",
            "120",
            "--lease-duration",
            "3",
            kc,
            cwd=repo_builder.root,
        )
    finally:
        watcher.join()
        if stopped.is_set():
            cluster.start_apiserver()
    assert stopped.is_set()
    assert res.code == 1
    assert "cannot reach the Kubernetes API server" in res.err
    assert "re-run the apply once the API server is back" in res.err

    # the LoadBalancer leaves the stack; the re-run prunes it (it was recorded before applying)
    repo_builder.write(f"appops/{project}/dev/main.k", CM_MAIN.format(ns=project))
    res = konfig(
        "apply",
        "--allow-dirty",
        f"{project}/dev",
        "--yes",
        "--lock-timeout",
        "60",
        kc,
        cwd=repo_builder.root,
    )
    assert res.code == 0, res.err
    assert "1 created" in res.out and "1 deleted" in res.out
    assert kube.get("v1", "Service", "edge", project) is None
    stored = inventory_store.read_inventory(kube, f"appops/{project}/dev")
    assert stored is not None
    assert stored.ids() == {f"v1:Namespace:{project}", f"v1:ConfigMap:{project}:cfg"}
    assert (
        konfig(
            "destroy", "--allow-dirty", f"{project}/dev", "--yes", kc, cwd=repo_builder.root
        ).code
        == 0
    )

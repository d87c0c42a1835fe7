"""`konfig preview` end to end: real KCL stacks, the real local control plane."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import configmap, namespace, secret, snapshot, unique

from konfig.build.compiler import compile_input, compile_one
from konfig.engine import inventory as inv
from konfig.engine import inventory_store
from konfig.engine.kube import Kube
from konfig.repo.layout import discover

pytestmark = pytest.mark.cluster

RAW_MAIN = """\
import base.pkg.models.frontend
import file
import yaml

extras: frontend.Manifests {
    manifests = yaml.decode_all(file.read("objects.yaml"))
}
"""

SERVER_MAIN = """\
import base.pkg.models.frontend
import file
import yaml

app: frontend.Server {{
    name = "web"
    namespace = "{ns}"
    image = "nginx:1.27.3"
    replicas = 2
    ports = [{{port = 80}}]
    env = {{"MODE" = "demo"}}
}}

extras: frontend.Manifests {{
    manifests = yaml.decode_all(file.read("objects.yaml"))
}}
"""


STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"
# a stack that takes over what exists unmanaged (e.g. made with kubectl by the test)
ADOPTING = STACK_YAML + "apply:\n  adoptUnmanaged: true\n"


def raw_stack(
    builder: RepoBuilder,
    project: str,
    manifests: list[dict[str, Any]],
    *,
    main: str = RAW_MAIN,
    stack_yaml: str = STACK_YAML,
) -> Path:
    path = builder.stack(project, "dev", main=main, stack_yaml=stack_yaml)
    (path / "objects.yaml").write_text(yaml.safe_dump_all(manifests))
    return path


def preview(konfig: KonfigRunner, root: Path, cluster: Cluster, *args: str) -> Any:
    return konfig("--root", str(root), "preview", *args, "--kubeconfig", str(cluster.kubeconfig))


def desired_manifests(root: Path, stack_path: str) -> list[dict[str, Any]]:
    """What konfig apply sends: the compiled manifests with the ApplySet part-of label."""
    repo = discover(root)
    stack = repo.stack(stack_path)
    result = compile_one(compile_input(repo, stack))
    assert result.spec is not None, result.error
    set_id = inv.applyset_id(inv.inventory_name(stack.path))
    labelled = [inv.label_member(r.attributes, set_id) for r in result.spec.resources]
    return sorted(labelled, key=lambda m: m["kind"] != "Namespace")  # Namespaces first


def test_first_preview_creates_everything_and_json_follows_the_contract(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, tmp_path: Path
) -> None:
    ns = unique("p6c")
    project = unique("proj")
    raw_stack(
        repo_builder, project, [namespace(ns), configmap(ns), secret(ns, token="t0k3n-canary")]
    )
    out = tmp_path / "preview.json"
    res = preview(
        konfig, repo_builder.root, cluster, f"{project}/dev", "--format", "json", "--out", str(out)
    )
    assert res.code == 0, res.err
    doc = json.loads(out.read_text())
    assert doc["schemaVersion"] == 1 and doc["kind"] == "KonfigPreview" and doc["hasChanges"]
    assert doc["counts"] == {
        "create": 3, "update": 0, "replace": 0, "delete": 0, "unchanged": 0, "conflict": 0
    }  # fmt: skip
    assert doc["hasConflicts"] is False
    (stack,) = doc["stacks"]
    assert {
        k: stack[k] for k in ("path", "project", "stack", "context", "deleted", "status", "error")
    } == {
        "path": f"appops/{project}/dev",
        "project": project,
        "stack": "dev",
        "context": "admin",
        "deleted": False,
        "status": "ok",
        "error": None,
    }
    assert stack["priorCommit"] is None and len(stack["specDigest"]) == 64
    ids = [c["id"] for c in stack["changes"]]
    assert ids == sorted(ids)
    by_id = {c["id"]: c for c in stack["changes"]}
    assert by_id[f"v1:Namespace:{ns}"]["validated"] is True
    assert by_id[f"v1:ConfigMap:{ns}:cm"]["validated"] is False  # its Namespace comes with the plan
    assert set(by_id[f"v1:Secret:{ns}:creds"]) == {
        "id",
        "apiVersion",
        "kind",
        "namespace",
        "name",
        "action",
        "reason",
        "validated",
        "fields",
        "diff",
        "secrets",
        "runtime",
        "refused",
        "owner",
        "drift",
        "dangers",
        "ignored",
        "rename",
    }
    assert by_id[f"v1:Secret:{ns}:creds"]["runtime"] == "Kubernetes"
    assert by_id[f"v1:Secret:{ns}:creds"]["refused"] is None
    # a Secret with plain-text data (no encrypted file) has no per-key statuses
    assert by_id[f"v1:Secret:{ns}:creds"]["secrets"] == []
    assert by_id[f"v1:Secret:{ns}:creds"]["drift"] is None  # not applied yet: no drift to tell
    assert doc["hasDrift"] is False and stack["drift"] == {"objects": 0, "fields": 0}
    assert "t0k3n-canary" not in out.read_text()

    detailed = preview(konfig, repo_builder.root, cluster, f"{project}/dev", "--detailed-exitcode")
    assert detailed.code == 2, detailed.err
    assert "3 to create" in detailed.out


def test_no_perpetual_diff_after_kubectl_server_side_apply(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns = unique("p6s")
    project = unique("proj")
    raw_stack(
        repo_builder,
        project,
        [configmap(ns), secret(ns, password="pw-canary")],
        main=SERVER_MAIN.format(ns=ns),
    )
    manifests = desired_manifests(repo_builder.root, f"{project}/dev")
    assert {m["kind"] for m in manifests} == {
        "Namespace",
        "Deployment",
        "Service",
        "ConfigMap",
        "Secret",
    }
    cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=konfig",
        "-f",
        "-",
        input=yaml.safe_dump_all(manifests),
    )
    res = preview(
        konfig,
        repo_builder.root,
        cluster,
        f"{project}/dev",
        "--format",
        "json",
        "--detailed-exitcode",
    )
    assert res.code == 0, res.out + res.err
    doc = json.loads(res.out)
    assert doc["hasChanges"] is False
    assert {c["action"] for c in doc["stacks"][0]["changes"]} == {"unchanged"}
    assert doc["counts"]["unchanged"] == 5


def test_removed_object_is_deleted_and_deleted_stack_is_all_deletes(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns = unique("p6d")
    project = unique("proj")
    path = raw_stack(repo_builder, project, [namespace(ns), configmap(ns, "a"), configmap(ns, "b")])
    stack_path = f"appops/{project}/dev"
    applied = [
        kube.apply(m, dry_run=False) for m in desired_manifests(repo_builder.root, stack_path)
    ]
    inventory_store.write_inventory(
        kube,
        stack_path,
        [inv.Member(inv_id(o), o["metadata"]["uid"]) for o in applied],
        commit="abc123",
        spec_digest="digest0",
    )
    # drop ConfigMap b from the stack: it is pruned
    (path / "objects.yaml").write_text(yaml.safe_dump_all([namespace(ns), configmap(ns, "a")]))
    res = preview(konfig, repo_builder.root, cluster, stack_path, "--format", "json")
    assert res.code == 0, res.err
    stack = json.loads(res.out)["stacks"][0]
    assert {c["id"]: c["action"] for c in stack["changes"]} == {
        f"v1:ConfigMap:{ns}:a": "unchanged",
        f"v1:ConfigMap:{ns}:b": "delete",
        f"v1:Namespace:{ns}": "unchanged",
    }
    assert (stack["priorCommit"], stack["priorDigest"]) == ("abc123", "digest0")

    # the whole stack directory goes: every owned object is deleted
    shutil.rmtree(path)
    res = preview(
        konfig, repo_builder.root, cluster, "--deleted", stack_path, "--format", "markdown"
    )
    assert res.code == 0, res.err
    assert (
        "| delete | `v1:ConfigMap:" in res.out
        and f"| `{stack_path}` | deleted | 0 | 0 | 0 | 3 | 0 |" in res.out
    )
    text = preview(
        konfig, repo_builder.root, cluster, "--deleted", stack_path, "--detailed-exitcode"
    )
    assert text.code == 2 and "[stack deleted]" in text.out and "3 to delete" in text.out


def inv_id(obj: dict[str, Any]) -> str:
    from konfig.ids import resource_id

    return resource_id(obj)


def test_deleted_flag_for_an_existing_stack_is_a_usage_error(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    raw_stack(repo_builder, "still", [configmap("x")])
    res = preview(konfig, repo_builder.root, cluster, "--deleted", "appops/still/dev")
    assert res.code == 2 and "still exists" in res.err


def test_canary_secret_appears_in_no_output_format(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, tmp_path: Path
) -> None:
    ns = unique("p6x")
    project = unique("proj")
    old, new = "CANARY-old-3f9a1c", "CANARY-new-77b2e0"
    cluster.kubectl("create", "namespace", ns)
    # client-side apply leaves the old value in the last-applied-configuration annotation
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(secret(ns, password=old)))
    raw_stack(
        repo_builder,
        project,
        [secret(ns, password=new), {**secret(ns, "second"), "data": {"k": b64(new)}}],
        stack_yaml=ADOPTING,
    )
    needles = [old, new, b64(old), b64(new)]
    outputs = []
    for fmt in ("text", "markdown", "json"):
        extra = ["--diff"] if fmt == "text" else []
        res = preview(konfig, repo_builder.root, cluster, f"{project}/dev", "--format", fmt, *extra)
        assert res.code == 0, res.err
        outputs.append(res.out + res.err)
        target = tmp_path / f"out.{fmt}"
        res = preview(
            konfig,
            repo_builder.root,
            cluster,
            f"{project}/dev",
            "--format",
            fmt,
            "--out",
            str(target),
        )
        outputs.append(target.read_text() + res.err)
    for text in outputs:
        for needle in needles:
            assert needle not in text
    doc = json.loads(outputs[4])
    change = {c["id"]: c for c in doc["stacks"][0]["changes"]}[f"v1:Secret:{ns}:creds"]
    # an object the stack does not own yet is shown with its owner only, never its content
    assert change["action"] == "update"
    assert not change.get("fields")
    # once the stack owns it, a changed key is shown masked on both sides
    applied = konfig(
        "--root",
        str(repo_builder.root),
        "apply",
        f"{project}/dev",
        "--allow-dirty",  # not a git repository
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--yes",
    )
    assert applied.code == 0, applied.out + applied.err
    newer = "CANARY-newer-c41d9e"
    raw_stack(
        repo_builder,
        project,
        [secret(ns, password=newer), {**secret(ns, "second"), "data": {"k": b64(new)}}],
        stack_yaml=ADOPTING,
    )
    needles += [newer, b64(newer)]
    outputs = [applied.out + applied.err]
    for fmt in ("text", "markdown", "json"):
        extra = ["--diff"] if fmt == "text" else []
        res = preview(konfig, repo_builder.root, cluster, f"{project}/dev", "--format", fmt, *extra)
        assert res.code == 0, res.err
        outputs.append(res.out + res.err)
    for text in outputs:
        for needle in needles:
            assert needle not in text
    doc = json.loads(outputs[3])
    change = {c["id"]: c for c in doc["stacks"][0]["changes"]}[f"v1:Secret:{ns}:creds"]
    assert change["action"] == "update"
    paths = {f["path"]: (f["before"], f["after"]) for f in change["fields"]}
    assert paths["data.password"] == ("*** (before)", "*** (after)")
    # the old value really is in the live object's last-applied annotation (unchanged by
    # a server-side apply, so not a changed field, but shown in the diff context)
    live = json.loads(cluster.kubectl("get", "secret", "creds", "-n", ns, "-o", "json").stdout)
    assert (
        old in live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    )
    assert 'metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]' not in paths


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_restricted_identity_is_a_clear_error(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    raw_stack(repo_builder, "locked", [configmap("konfig-restricted")])
    res = preview(
        konfig,
        repo_builder.root,
        cluster,
        "locked/dev",
        "--context",
        "restricted",
        "--detailed-exitcode",
    )
    assert res.code == 1
    assert "user 'restricted' of context 'restricted' may not get ConfigMap" in res.out
    assert 'User "konfig-restricted" cannot get resource "configmaps"' in res.out
    assert "hint: grant 'restricted' the RBAC verbs" in res.out


def test_compile_error_is_reported_with_file_and_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    repo_builder.stack("broken", "dev", main="x = 1 +\n")
    res = preview(konfig, repo_builder.root, cluster, "broken/dev", "--format", "json")
    assert res.code == 1
    stack = json.loads(res.out)["stacks"][0]
    assert stack["status"] == "error" and stack["changes"] == []
    assert stack["error"]["file"] == "appops/broken/dev/main.k" and stack["error"]["line"] == 1


def test_preview_never_writes(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    ns = unique("p6w")
    project = unique("proj")
    manifests = [namespace(ns), configmap(ns, "a"), secret(ns, password="x")]
    raw_stack(repo_builder, project, manifests)
    refs = [
        (m["apiVersion"], m["kind"], m["metadata"]["name"], m["metadata"].get("namespace"))
        for m in manifests
    ]
    refs.append(("v1", "ConfigMap", inv.inventory_name(f"appops/{project}/dev"), inv.NAMESPACE))
    before = snapshot(kube, refs)
    assert set(before.values()) == {None}
    assert preview(konfig, repo_builder.root, cluster, f"{project}/dev").code == 0
    assert snapshot(kube, refs) == before


@pytest.mark.slow
def test_unreachable_api_server_is_a_clear_error_exit_1(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster
) -> None:
    raw_stack(repo_builder, "away", [configmap(unique("away"), "cm")])
    server = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    cluster.stop_apiserver()
    try:
        res = preview(konfig, repo_builder.root, cluster, "away/dev", "--detailed-exitcode")
    finally:
        cluster.start_apiserver()
    assert res.code == 1
    assert f"cannot reach the Kubernetes API server at {server}" in res.out
    assert "connection refused" in res.out


def test_changed_from_previews_changed_and_deleted_stacks(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    from fixtures.monorepo import git_commit, git_init

    ns = unique("p6g")
    project = unique("proj")
    kube.apply(namespace(ns), dry_run=False)
    repo_builder.write(".gitignore", "/.cache/\n")
    a = raw_stack(repo_builder, project, [configmap(ns, "a")])
    b_path = f"appops/{project}/b"
    repo_builder.write(f"{b_path}/stack.yaml", "name: b\nkubernetes:\n  context: admin\n")
    repo_builder.write(f"{b_path}/main.k", RAW_MAIN)
    repo_builder.write(f"{b_path}/objects.yaml", yaml.safe_dump(configmap(ns, "b")))
    applied = [kube.apply(m, dry_run=False) for m in desired_manifests(repo_builder.root, b_path)]
    inventory_store.write_inventory(
        kube,
        b_path,
        [inv.Member(inv_id(o), o["metadata"]["uid"]) for o in applied],
        commit="1" * 40,
        spec_digest="x",
    )
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "two stacks")

    unchanged = preview(
        konfig, repo_builder.root, cluster, "--changed-from", "HEAD", "--format", "json"
    )
    assert unchanged.code == 0, unchanged.err
    assert json.loads(unchanged.out)["stacks"] == []

    (a / "objects.yaml").write_text(yaml.safe_dump(configmap(ns, "a", k="v2")))
    shutil.rmtree(repo_builder.root / b_path)
    res = preview(konfig, repo_builder.root, cluster, "--changed-from", "HEAD", "--format", "json")
    assert res.code == 0, res.err
    stacks = {s["path"]: s for s in json.loads(res.out)["stacks"]}
    assert set(stacks) == {f"appops/{project}/dev", b_path}
    assert stacks[f"appops/{project}/dev"]["counts"]["create"] == 1
    assert stacks[b_path]["deleted"] is True
    assert [(c["id"], c["action"]) for c in stacks[b_path]["changes"]] == [
        (f"v1:ConfigMap:{ns}:b", "delete")
    ]
    both = preview(konfig, repo_builder.root, cluster, "--changed-from", "HEAD", "--all")
    assert both.code == 2


def test_a_spec_apply_would_refuse_is_an_error_in_preview_and_apply_writes_nothing(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, kube: Kube
) -> None:
    """A dependsOn naming an object the stack lacks: preview shows the stack as an error
    (never a plan apply would reject) and apply refuses it before any write."""
    ns = unique("p6d")
    project = unique("proj")
    main = RAW_MAIN.replace("\n}\n", f'\n    dependsOn = ["v1:Secret:{ns}:missing"]\n}}\n')
    raw_stack(repo_builder, project, [configmap(ns, "cm")], main=main)
    res = preview(konfig, repo_builder.root, cluster, f"{project}/dev", "--format", "json")
    assert res.code == 1, res.out + res.err
    stack = json.loads(res.out)["stacks"][0]
    assert stack["status"] == "error" and stack["changes"] == []
    assert "cannot be applied" in stack["error"]["message"]
    assert f"v1:Secret:{ns}:missing" in stack["error"]["message"]
    applied = konfig(
        "--root",
        str(repo_builder.root),
        "apply",
        f"{project}/dev",
        "--allow-dirty",  # not a git repository
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--yes",
    )
    assert applied.code == 1, applied.out + applied.err
    assert f"v1:Secret:{ns}:missing" in applied.out + applied.err
    cm = ("v1", "ConfigMap", "cm", ns)
    inventory = ("v1", "ConfigMap", inv.inventory_name(f"appops/{project}/dev"), inv.NAMESPACE)
    assert set(snapshot(kube, [cm, inventory]).values()) == {None}


def test_preview_of_specs_compiled_elsewhere_runs_no_kcl_and_equals_the_compiled_preview(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, tmp_path: Path
) -> None:
    """The privileged half of a pull request's pipeline (docs/security.md) previews the
    Specs the unprivileged half compiled (`konfig compile --out`, an artifact): the same
    preview as compiling, and the stack's KCL is never run (it is broken here after the
    compile, and a KCL that would read the environment is not evaluated)."""
    ns = unique("p6s")
    project = unique("proj")
    path = raw_stack(repo_builder, project, [namespace(ns), configmap(ns)])
    stack = f"appops/{project}/dev"
    specs = tmp_path / "specs"
    compiled = konfig("--root", str(repo_builder.root), "compile", stack, "--out", str(specs))
    assert compiled.code == 0, compiled.err
    direct = preview(konfig, repo_builder.root, cluster, stack, "--format", "json")
    assert direct.code == 0, direct.err
    (path / "main.k").write_text('import file\nx = file.read_env("HOME") + 1\n')
    res = preview(
        konfig, repo_builder.root, cluster, stack, "--format", "json", "--specs", str(specs)
    )
    assert res.code == 0, res.err
    of_specs, compiled_here = json.loads(res.out), json.loads(direct.out)
    # a preview of compiled Specs records what it was computed from (--reuse)
    (keyed,) = of_specs["stacks"]
    assert len(keyed.pop("reuseKey")) == 64 and compiled_here["stacks"][0].pop("reuseKey") is None
    assert of_specs == compiled_here
    # without --specs the broken KCL is compiled and fails: --specs did not compile it
    broken = preview(konfig, repo_builder.root, cluster, stack, "--format", "json")
    assert broken.code == 1 and "compile failed" in broken.out, broken.out

    # A tampered artifact is refused whole, file and line, before any cluster request.
    spec_file = specs / stack / "spec.yaml"
    spec_file.write_text(spec_file.read_text().replace("type: Kubernetes", "type: Shell", 1))
    refused = preview(konfig, repo_builder.root, cluster, stack, "--specs", str(specs))
    assert refused.code == 1, refused.out + refused.err
    assert f"{specs.as_posix()}/{stack}/spec.yaml:" in refused.err, refused.err
    assert "Shell" in refused.err and refused.out == ""

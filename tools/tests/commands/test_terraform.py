"""A stack's database through OpenTofu, end to end: ``konfig preview`` / ``apply`` /
``destroy`` against the real control plane, real OpenTofu with the real PostgreSQL
provider, and a real PostgreSQL (``hack/tofu up``)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.tofu import (
    PG_ENVIRONMENT,
    PG_STACK_YAML,
    TOFU_SCRIPT,
    Tofu,
    grant_credentials,
    server_main,
)
from kubeutil import unique

from konfig.engine.kube import Kube, KubeTarget
from konfig.tofu.config import STATE_NAMESPACE
from konfig.tofu.records import state_suffix
from konfig.tofu.state import decode_state

pytestmark = [pytest.mark.cluster, pytest.mark.tofu]

LOCK_PG_DATABASE = "LOCK TABLE pg_catalog.pg_database IN SHARE ROW EXCLUSIVE MODE;"

DATABASE = '{extensions = ["pgcrypto"]}'

STACK_YAML = PG_STACK_YAML.format(name="dev") + "{extra}"


# konfig.yaml grants these tests' stacks the variables their stack.yaml names
GRANT = {
    "stacks": ["appops/*/dev"],
    "provider": "postgresql",
    "environment": PG_ENVIRONMENT,
}


def _stack(repo: RepoBuilder, name: str, *, database: bool = True, extra: str = "") -> str:
    grant_credentials(repo.root, [GRANT])
    repo.stack(
        name,
        "dev",
        main=server_main(name, DATABASE if database else ""),
        stack_yaml=STACK_YAML.format(extra=extra),
    )
    return f"{name}/dev"


def _by_id(preview_json: str) -> dict[str, dict[str, object]]:
    (stack,) = json.loads(preview_json)["stacks"]
    assert stack["status"] == "ok", stack
    return {str(c["id"]): c for c in stack["changes"]}


def _login(tofu: Tofu, user: str, password: str, db: str) -> str:
    res = subprocess.run(
        ["psql", "-X", "-w", "-At", "-U", user, "-d", db, "-c", "SELECT current_user"],
        env=tofu.env({"PGPASSWORD": password, "PGPASSFILE": "/dev/null"}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_database_preview_apply_drift_and_guarded_removal(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
) -> None:
    name = unique("shopdb")
    db = name.replace("-", "_")
    address = _stack(repo_builder, name)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    role_id = f"cyrilgdn/postgresql:postgresql_role:{db}"
    db_id = f"cyrilgdn/postgresql:postgresql_database:{db}"
    ext_id = f"cyrilgdn/postgresql:postgresql_extension:{db}_pgcrypto"
    secret_id = f"v1:Secret:{name}:{name}-db"
    outputs: list[str] = []

    # 1. The PR preview: the role, database and extension next to the Kubernetes objects.
    res = konfig("preview", address, kc, "--format", "json", cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 0, res.err
    changes = _by_id(res.out)
    assert {role_id, db_id, ext_id, secret_id} <= set(changes), sorted(changes)
    for rid in (role_id, db_id, ext_id):
        assert changes[rid]["action"] == "create" and changes[rid]["runtime"] == "Terraform"
    assert changes[secret_id]["action"] == "create"
    assert changes[f"v1:ConfigMap:{name}:{name}-db"]["action"] == "create"
    assert changes[f"apps/v1:Deployment:{name}:{name}"]["action"] == "create"
    fields = {f["path"]: f["after"] for f in changes[role_id]["fields"]}  # type: ignore[union-attr]
    assert fields["login"] is True and fields["password_wo"] == "(write-only)"
    assert fields["password_wo_version"] == "***"
    text = konfig("preview", address, kc, cwd=root)
    outputs += [text.out, text.err]
    assert f"create  {db_id}" in text.out and f"create  {secret_id}" in text.out
    md = konfig("preview", address, kc, "--format", "markdown", cwd=root)
    outputs += [md.out, md.err]
    assert f"| create | `{role_id}` |" in md.out

    # The PR comment from the saved preview shows them (and the refusal column is empty).
    saved = root.parent / "preview.json"
    res = konfig("preview", address, kc, "--format", "json", "--out", str(saved), cwd=root)
    assert res.code == 0, res.err
    outputs.append(saved.read_text())
    comment = konfig("report", "--preview", str(saved), "--sha", "abc1234", cwd=root)
    outputs += [comment.out, comment.err]
    assert comment.code == 0, comment.err
    assert role_id in comment.out and db_id in comment.out and "REFUSED" not in comment.out

    # 2. Apply what was previewed (--plan, as on merge): OpenTofu first, then the
    # ConfigMap, the Secret and the Deployment that reads them.
    res = konfig(
        "apply", address, "--allow-dirty", "--yes", "--plan", str(saved), "--json", kc, cwd=root
    )
    outputs += [res.out, res.err]
    assert res.code == 0, res.out + res.err
    applied = {o["id"]: o["outcome"] for o in json.loads(res.out)["stacks"][0]["objects"]}
    assert applied[role_id] == applied[db_id] == applied[secret_id] == "created", applied
    assert tofu.psql(f"SELECT rolcanlogin FROM pg_roles WHERE rolname = '{db}'") == "t"
    owner = f"SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '{db}'"
    assert tofu.psql(owner) == db
    assert tofu.psql("SELECT extname FROM pg_extension WHERE extname='pgcrypto'", db) == "pgcrypto"
    config = kube.get("v1", "ConfigMap", f"{name}-db", name)
    assert config is not None
    assert config["data"] == {
        "PGHOST": tofu.pg_host,
        "PGPORT": str(tofu.pg_port),
        "PGDATABASE": db,
        "PGUSER": db,
    }
    secret = kube.get("v1", "Secret", f"{name}-db", name)
    assert secret is not None and set(secret["data"]) == {"PGPASSWORD"}
    password = base64.b64decode(secret["data"]["PGPASSWORD"]).decode()
    assert len(password) == 32
    assert _login(tofu, db, password, db) == db
    deploy = kube.get("apps/v1", "Deployment", name, name)
    assert deploy is not None
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert {"secretRef": {"name": f"{name}-db"}} in container["envFrom"]
    assert {"configMapRef": {"name": f"{name}-db"}} in container["envFrom"]
    # the state lives in the cluster, unlocked after the apply
    suffix = state_suffix(f"appops/{address}")
    state = kube.get("v1", "Secret", f"tfstate-default-{suffix}", STATE_NAMESPACE)
    assert state is not None
    lease = kube.get(
        "coordination.k8s.io/v1", "Lease", f"lock-tfstate-default-{suffix}", STATE_NAMESPACE
    )
    assert lease is None or not (lease.get("spec") or {}).get("holderIdentity")

    # 3. A second preview is clean; a second apply keeps the password.
    res = konfig("preview", address, kc, "--detailed-exitcode", cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 0, res.out + res.err
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 0, res.out + res.err
    again = kube.get("v1", "Secret", f"{name}-db", name)
    assert again is not None and again["data"]["PGPASSWORD"] == secret["data"]["PGPASSWORD"]

    # 4. A role changed by hand shows as drift, and apply puts it back.
    tofu.psql(f'ALTER ROLE "{db}" NOLOGIN')
    res = konfig("preview", address, kc, "--format", "json", "--detailed-exitcode", cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 2, res.err
    drift = _by_id(res.out)[role_id]
    assert drift["action"] == "update"
    assert [(f["path"], f["before"], f["after"]) for f in drift["fields"]] == [  # type: ignore[union-attr]
        ("login", False, True)
    ]
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 0, res.out + res.err
    assert tofu.psql(f"SELECT rolcanlogin FROM pg_roles WHERE rolname = '{db}'") == "t"

    # 5. Removing the database without the stack's opt-in: refused before any change.
    _stack(repo_builder, name, database=False)
    res = konfig("preview", address, kc, cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 0, res.err
    assert f"delete  {db_id}" in res.out and "REFUSED" in res.out
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 1
    assert "terraform.allowDestroy" in res.out + res.err
    assert tofu.psql(f"SELECT count(*) FROM pg_database WHERE datname = '{db}'") == "1"
    assert kube.get("v1", "Secret", f"{name}-db", name) is not None

    # 6. With the opt-in, apply destroys it and prunes the connection Secret.
    _stack(
        repo_builder,
        name,
        database=False,
        extra="  allowDestroy:\n    - cyrilgdn/postgresql:*\n",
    )
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 0, res.out + res.err
    assert tofu.psql(f"SELECT count(*) FROM pg_database WHERE datname = '{db}'") == "0"
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{db}'") == "0"
    assert kube.get("v1", "Secret", f"{name}-db", name) is None
    assert kube.get("v1", "ConfigMap", f"{name}-db", name) is None

    # The password never appeared in any output, nor in any file the runs wrote.
    for text_out in outputs:
        assert password not in text_out
    # PostgreSQL itself never saw it: OpenTofu passed a SCRAM verifier (and its log would
    # quote a failed statement's text)
    status = subprocess.run(
        [str(TOFU_SCRIPT), "status"],
        env={**os.environ, "KONFIG_TOFU_DIR": str(tofu.dir)},
        capture_output=True,
        text=True,
        check=True,
    )
    pg_log = Path(json.loads(status.stdout.strip().splitlines()[-1])["pg_log"])
    assert password not in pg_log.read_text(encoding="utf-8", errors="replace")
    written = [p for p in tofu_env.rglob("*") if p.is_file() and not p.is_symlink()]
    written += [p for p in (root / ".cache").rglob("*") if p.is_file()]
    assert written
    for path in written:
        assert password.encode() not in path.read_bytes(), path


def test_destroy_missing_credentials_and_a_held_state_lock(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = unique("gonedb")
    db = name.replace("-", "_")
    address = _stack(repo_builder, name)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"

    # Credentials come from the apply environment: a missing variable is named.
    with monkeypatch.context() as m:
        m.delenv("T_PGPASSWORD")
        res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 1
    assert "T_PGPASSWORD (provider postgresql, argument password)" in res.err, res.err
    assert "nothing was changed" in res.err
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{db}'") == "0"

    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert tofu.psql(f"SELECT count(*) FROM pg_database WHERE datname = '{db}'") == "1"

    # Another tofu client holds the state's lock: a clear error with how to release it.
    lease_name = f"lock-tfstate-default-{state_suffix('appops/' + address)}"
    lease = kube.get("coordination.k8s.io/v1", "Lease", lease_name, STATE_NAMESPACE)
    assert lease is not None
    held = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease_name,
            "namespace": STATE_NAMESPACE,
            "annotations": {
                "app.terraform.io/lock-info": json.dumps(
                    {"ID": "1234-held", "Operation": "OperationTypeApply", "Who": "other@ci"}
                )
            },
        },
        "spec": {"holderIdentity": "1234-held"},
    }
    kube.apply(held, dry_run=False, field_manager="other-tofu")
    _stack(repo_builder, name, extra="")  # unchanged stack, but OpenTofu must take the lock
    tofu.psql(f'ALTER ROLE "{db}" NOLOGIN')
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 1
    assert "the Terraform state is locked by another tofu client" in res.out + res.err
    assert "force-unlock" in res.out + res.err
    assert tofu.psql(f"SELECT rolcanlogin FROM pg_roles WHERE rolname = '{db}'") == "f"
    kube.apply(
        {**held, "metadata": {"name": lease_name, "namespace": STATE_NAMESPACE}, "spec": {}},
        dry_run=False,
        field_manager="other-tofu",
    )
    released = kube.get("coordination.k8s.io/v1", "Lease", lease_name, STATE_NAMESPACE)
    assert released is not None and not (released.get("spec") or {}).get("holderIdentity")

    # A stack whose directory is gone: its Terraform resources are kept, and said so.
    stack_dir = root / "appops" / name / "dev"
    stack_dir.rename(root / "parked")
    res = konfig("preview", "--deleted", f"appops/{address}", kc, cwd=root)
    (root / "parked").rename(stack_dir)
    assert res.code == 0, res.err
    assert "its Terraform resources are kept" in res.err
    assert f"postgresql_database.{db}" in res.err

    # konfig destroy: the database is kept unless the stack allows destroying it.
    res = konfig("destroy", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 1
    assert "terraform.allowDestroy" in res.out + res.err
    assert tofu.psql(f"SELECT count(*) FROM pg_database WHERE datname = '{db}'") == "1"
    assert kube.get("apps/v1", "Deployment", name, name) is not None

    _stack(repo_builder, name, extra="  allowDestroy: ['cyrilgdn/postgresql:*']\n")
    res = konfig("destroy", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert tofu.psql(f"SELECT count(*) FROM pg_database WHERE datname = '{db}'") == "0"
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{db}'") == "0"
    assert kube.get("apps/v1", "Deployment", name, name) is None
    assert kube.get("v1", "Secret", f"{name}-db", name) is None


def test_kill_9_while_opentofu_applies_then_a_rerun_converges(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    tmp_path: Path,
) -> None:
    name = unique("killdb")
    db = name.replace("-", "_")
    address = _stack(repo_builder, name)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    # Another session creates the same role and does not commit: OpenTofu's CREATE ROLE
    # waits for it, so konfig can be killed while OpenTofu is applying.
    blocker = _Held(tofu, f'CREATE ROLE "{db}";', "CREATE ROLE")
    log = (tmp_path / "apply.log").open("w")
    proc = _apply_in_background(root, address, kc, log, "--lease-duration", "5")
    try:
        blocker.wait_for_opentofu()
        os.killpg(proc.pid, signal.SIGKILL)  # konfig dies; OpenTofu runs in its own session
        proc.wait(30)
    finally:
        blocker.close()
        log.close()
    # OpenTofu was not killed with konfig: it finishes, records the objects in its state
    # and releases its lock; the Kubernetes part never ran.
    suffix = state_suffix(f"appops/{address}")

    def tofu_done() -> bool:
        lease = kube.get(
            "coordination.k8s.io/v1", "Lease", f"lock-tfstate-default-{suffix}", STATE_NAMESPACE
        )
        held = lease is not None and (lease.get("spec") or {}).get("holderIdentity")
        count = tofu.psql(f"SELECT count(*) FROM pg_database WHERE datname = '{db}'")
        return not held and count == "1"

    _until(tofu_done, 120, "OpenTofu to finish the apply konfig started")
    assert kube.get("apps/v1", "Deployment", name, name) is None
    assert kube.get("v1", "Secret", f"{name}-db", name) is None

    # The re-run takes over the stale stack lock and converges; the role gets the
    # password the Secret now holds.
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, "--lock-timeout", "90", cwd=root)
    assert res.code == 0, res.out + res.err
    secret = kube.get("v1", "Secret", f"{name}-db", name)
    assert secret is not None and kube.get("apps/v1", "Deployment", name, name) is not None
    password = base64.b64decode(secret["data"]["PGPASSWORD"]).decode()
    assert _login(tofu, db, password, db) == db
    res = konfig("preview", address, kc, "--detailed-exitcode", cwd=root)
    assert res.code == 0, res.out + res.err


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


class _Held:
    """A psql session whose open transaction makes OpenTofu's ``statement`` (``CREATE
    ROLE``, ``CREATE DATABASE``) wait, until :meth:`release`; made only once psql has
    run ``sql``, so the lock is held before konfig starts."""

    def __init__(self, tofu: Tofu, sql: str, statement: str) -> None:
        self.tofu = tofu
        self.statement = statement
        self.proc = subprocess.Popen(
            ["psql", "-X", "-w", "-q", "-v", "ON_ERROR_STOP=1", "-d", "postgres"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=tofu.env(),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.stdin.write(f"BEGIN; {sql}\n\\echo held\n")
        self.stdin.flush()
        assert self.proc.stdout.readline().strip() == "held", f"psql could not run {sql!r}"
        self.released = False

    def wait_for_opentofu(self) -> None:
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            f"AND query ILIKE '{self.statement}%'"
        )
        _until(lambda: self.tofu.psql(waiting) == "1", 120, f"OpenTofu's {self.statement} to wait")

    def release(self) -> None:
        if not self.released:
            self.stdin.write("ROLLBACK;\n")
            self.stdin.flush()
            self.released = True

    def close(self) -> None:
        self.release()
        self.stdin.close()
        self.proc.wait(30)


def _konfig_bin() -> str:
    return str(Path(sys.executable).parent / "konfig")


def _apply_in_background(
    root: Path, address: str, kc: str, log: IO[str], *extra: str
) -> subprocess.Popen[bytes]:
    """``konfig apply --yes`` as its own process group, its output in ``log``."""
    return subprocess.Popen(
        [_konfig_bin(), "apply", address, "--allow-dirty", "--yes", kc, *extra],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_kill_9_of_opentofu_itself_its_lock_is_named_and_a_rerun_adopts_what_it_created(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    tmp_path: Path,
) -> None:
    name = unique("orphdb")
    db = name.replace("-", "_")
    address = _stack(repo_builder, name)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    # CREATE DATABASE waits for this lock; CREATE ROLE does not: OpenTofu creates the
    # role, then waits to create the database.
    blocker = _Held(tofu, LOCK_PG_DATABASE, "CREATE DATABASE")
    log = (tmp_path / "apply.log").open("w")
    proc = _apply_in_background(root, address, kc, log, "--lease-duration", "5")
    try:
        blocker.wait_for_opentofu()
        # kill -9 of OpenTofu and its provider plugin (their own session), then konfig
        for child in _children(proc.pid):
            os.killpg(child, signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        blocker.close()
        log.close()
    # The role exists and no state records it; the apply had recorded what it was
    # creating, so the next plan can import what exists of it.
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{db}'") == "1"
    intent = kube.get(
        "v1",
        "ConfigMap",
        f"konfig-tofu-intent-{state_suffix('appops/' + address)}",
        STATE_NAMESPACE,
    )
    assert intent is not None and f"postgresql_role:{db}" in intent["data"]["creating"]

    # OpenTofu's lock is left held: the re-run says so, and how to release it.
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, "--lock-timeout", "90", cwd=root)
    assert res.code == 1
    text = res.out + res.err
    assert "the Terraform state is locked by another tofu client" in text, text
    assert "force-unlock" in text and "patch lease" in text
    suffix = state_suffix(f"appops/{address}")
    cluster.kubectl(
        "-n",
        STATE_NAMESPACE,
        "patch",
        "lease",
        f"lock-tfstate-default-{suffix}",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/spec/holderIdentity"}]',
    )
    # Released: the preview shows the role adopted (imported), the re-run converges.
    res = konfig("preview", address, kc, "--format", "json", cwd=root)
    assert res.code == 0, res.err
    adopted = _by_id(res.out)[f"cyrilgdn/postgresql:postgresql_role:{db}"]
    assert adopted["action"] == "update" and "apply adopts it" in str(adopted["reason"])
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    secret = kube.get("v1", "Secret", f"{name}-db", name)
    assert secret is not None
    password = base64.b64decode(secret["data"]["PGPASSWORD"]).decode()
    assert _login(tofu, db, password, db) == db
    res = konfig("preview", address, kc, "--detailed-exitcode", cwd=root)
    assert res.code == 0, res.out + res.err


CREDENTIALS = ("T_PGHOST", "T_PGPASSWORD", "T_PGPORT", "T_PGUSER")


def test_preview_without_credentials_degrades_and_apply_refuses(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = unique("forkdb")
    db = name.replace("-", "_")
    address = _stack(repo_builder, name)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    role_id = f"cyrilgdn/postgresql:postgresql_role:{db}"
    db_id = f"cyrilgdn/postgresql:postgresql_database:{db}"
    ext_id = f"cyrilgdn/postgresql:postgresql_extension:{db}_pgcrypto"
    terraform_ids = [db_id, ext_id, role_id]
    named = "credentials T_PGHOST, T_PGPASSWORD, T_PGPORT, T_PGUSER missing"
    superuser = tofu.superuser_password
    outputs: list[str] = []

    # 1. A PR from a fork: no credentials. The Kubernetes part is previewed, the
    # Terraform resources are listed as not previewed (the variables named), and like
    # Secrets without the decryption key it is neither a change nor an error.
    with monkeypatch.context() as m:
        for var in CREDENTIALS:
            m.delenv(var)
        res = konfig("preview", address, kc, "--format", "json", cwd=root)
        outputs += [res.out, res.err]
        assert res.code == 0, res.err
        (stack,) = json.loads(res.out)["stacks"]
        assert stack["status"] == "ok", stack
        assert [n["id"] for n in stack["notPreviewed"]] == terraform_ids
        assert {n["reason"] for n in stack["notPreviewed"]} == {f"not previewed: {named}"}
        assert {n["runtime"] for n in stack["notPreviewed"]} == {"Terraform"}
        changes = {c["id"]: c for c in stack["changes"]}
        assert not set(terraform_ids) & set(changes)
        assert changes[f"apps/v1:Deployment:{name}:{name}"]["action"] == "create"
        config = changes[f"v1:ConfigMap:{name}:{name}-db"]
        assert config["action"] == "create"
        after = {f["path"]: f["after"] for f in config["fields"]}
        assert after["data.PGHOST"] == "(known after apply)", after
        saved = root.parent / "fork-preview.json"
        saved.write_text(res.out, encoding="utf-8")

        text = konfig("preview", address, kc, "--detailed-exitcode", cwd=root)
        outputs += [text.out, text.err]
        assert text.code == 2, text.err  # the Kubernetes objects are changes
        assert f"? not previewed {role_id}  ({named})" in text.out, text.out
        assert "3 resources not previewed (credentials missing)" in text.out
        md = konfig("preview", address, kc, "--format", "markdown", cwd=root)
        outputs += [md.out, md.err]
        assert f"| not previewed | `{role_id}` | not previewed: {named} |" in md.out
        comment = konfig("report", "--preview", str(saved), "--sha", "abc1234", cwd=root)
        outputs += [comment.out, comment.err]
        assert comment.code == 0, comment.err
        assert "3 resources not previewed" in comment.out, comment.out
        assert f"`{role_id}`: not previewed: {named}" in comment.out
        assert "⚠️ 3 not previewed" in comment.out

        # 2. Apply never degrades: it refuses before any change, naming the variables.
        res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
        outputs += [res.out, res.err]
        assert res.code == 1
        # refused by the command before it connects or locks anything, for every stack
        assert f"not set: appops/{address}: T_PGHOST (provider postgresql, argument host)" in (
            res.err
        ), res.err
        assert "nothing was changed" in res.err
    assert kube.get("apps/v1", "Deployment", name, name) is None
    assert kube.get("v1", "ConfigMap", f"{name}-db", name) is None
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{db}'") == "0"

    # 3. A preview that did not preview everything is not applied as it is.
    res = konfig("apply", address, "--allow-dirty", "--yes", "--plan", str(saved), kc, cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 1
    assert "did not preview 3 resources" in res.out + res.err, res.out + res.err
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{db}'") == "0"

    # 4. Applied (with the credentials), a preview without them is clean: the
    # Kubernetes objects take the values the state records (and the live ones).
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    with monkeypatch.context() as m:
        for var in CREDENTIALS:
            m.delenv(var)
        res = konfig("preview", address, kc, "--format", "json", "--detailed-exitcode", cwd=root)
        outputs += [res.out, res.err]
        assert res.code == 0, res.out + res.err
        (stack,) = json.loads(res.out)["stacks"]
        assert [n["id"] for n in stack["notPreviewed"]] == terraform_ids
        assert {c["action"] for c in stack["changes"]} == {"unchanged"}
    for text_out in outputs:
        assert superuser not in text_out


def test_status_and_drift_cover_terraform_resources(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = unique("statdb")
    db = name.replace("-", "_")
    address = _stack(repo_builder, name)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    role_id = f"cyrilgdn/postgresql:postgresql_role:{db}"
    db_id = f"cyrilgdn/postgresql:postgresql_database:{db}"
    ext_id = f"cyrilgdn/postgresql:postgresql_extension:{db}_pgcrypto"
    superuser = tofu.superuser_password
    outputs: list[str] = []
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err

    def status_json() -> dict[str, object]:
        res = konfig("status", address, kc, "--json", cwd=root)
        outputs.extend([res.out, res.err])
        assert res.code == 0, res.err
        (stack,) = json.loads(res.out)["stacks"]
        return dict(stack)

    def terraform_details(stack: dict[str, object]) -> dict[str, dict[str, object]]:
        details = stack["details"]
        assert isinstance(details, list)
        return {str(d["id"]): d for d in details if d["runtime"] == "Terraform"}

    # 1. status: the Terraform resources next to the Kubernetes objects, in sync.
    stack = status_json()
    found = terraform_details(stack)
    assert set(found) == {role_id, db_id, ext_id}
    for detail in found.values():
        assert detail["health"] == {
            "state": "current",
            "message": "applied (recorded in the Terraform state)",
        }
        assert detail["drift"]["state"] == "in_sync"  # type: ignore[index]
    assert stack["terraform"] == {"mode": "refresh", "resources": 3, "drifted": 0, "unknown": 0}
    assert stack["drift"]["state"] == "none"  # type: ignore[index]
    res = konfig("status", address, kc, cwd=root)
    outputs += [res.out, res.err]
    assert " + 3 Terraform" in res.out, res.out

    # 2. A role changed by hand and an extension dropped: drift (text, JSON, the drift
    # issue's markdown), read while another tofu client holds the state's lock.
    tofu.psql(f'ALTER ROLE "{db}" NOLOGIN')
    tofu.psql("DROP EXTENSION pgcrypto", db)
    lease_name = f"lock-tfstate-default-{state_suffix('appops/' + address)}"
    held = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": lease_name, "namespace": STATE_NAMESPACE},
        "spec": {"holderIdentity": "5678-held"},
    }
    kube.apply(held, dry_run=False, field_manager="other-tofu")
    try:
        res = konfig("drift", address, kc, "--json", "--detailed-exitcode", cwd=root)
        outputs += [res.out, res.err]
        assert res.code == 2, res.out + res.err
        (entry,) = json.loads(res.out)["stacks"]
        objects = {o["id"]: o for o in entry["objects"]}
        assert set(objects) == {role_id, ext_id}, objects
        assert objects[role_id]["runtime"] == "Terraform"
        assert objects[role_id]["state"] == "drifted"
        assert objects[role_id]["fields"] == [
            {"path": "login", "live": False, "removed": False, "planned": True}
        ]
        assert objects[ext_id]["state"] == "deleted"
        md = konfig("drift", address, kc, "--format", "markdown", cwd=root)
        outputs += [md.out, md.err]
        assert f"| `{role_id}` | changed | `login` | `false` | `true` |" in md.out, md.out
        assert f"`{ext_id}`" in md.out
        text = konfig("drift", address, kc, cwd=root)
        outputs += [text.out, text.err]
        assert f"~ {role_id}: 1 field changed outside Konfig" in text.out, text.out
        assert "login: false (live), true (repository)" in text.out
        stack = status_json()
        found = terraform_details(stack)
        assert found[ext_id]["health"]["state"] == "not_found"  # type: ignore[index]
        assert stack["terraform"] == {"mode": "refresh", "resources": 3, "drifted": 2, "unknown": 0}
        assert stack["drift"]["state"] == "drifted"  # type: ignore[index]
        # a working directory of its own, no plan file left behind
        assert list(tofu_env.glob("*.refresh/main.tf.json"))
        assert not list(tofu_env.glob("*.refresh/*.tfplan"))
        # the lock was neither taken nor released by the read-only refresh
        lease = kube.get("coordination.k8s.io/v1", "Lease", lease_name, STATE_NAMESPACE)
        assert lease is not None and lease["spec"]["holderIdentity"] == "5678-held"
    finally:
        kube.apply({**held, "spec": {}}, dry_run=False, field_manager="other-tofu")

    # 3. Without the credentials: not checked, the variables named; never "no drift".
    with monkeypatch.context() as m:
        for var in CREDENTIALS:
            m.delenv(var)
        res = konfig("drift", address, kc, "--json", "--detailed-exitcode", cwd=root)
        outputs += [res.out, res.err]
        assert res.code == 0, res.out + res.err
        text = konfig("drift", address, kc, cwd=root)
        outputs += [text.out, text.err]
        named = "credentials T_PGHOST, T_PGPASSWORD, T_PGPORT, T_PGUSER missing"
        assert f"3 Terraform resources not checked: {named}" in text.out, text.out
        assert "3 Terraform resources not checked (unknown)" in text.out
        stack = status_json()
        assert stack["terraform"] == {"mode": "refresh", "resources": 3, "drifted": 0, "unknown": 3}
        assert {d["drift"]["message"] for d in terraform_details(stack).values()} == {  # type: ignore[index]
            f"not checked: {named}"
        }

    # 4. Apply sets it back; drift is gone.
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    res = konfig("drift", address, kc, "--detailed-exitcode", cwd=root)
    outputs += [res.out, res.err]
    assert res.code == 0, res.out + res.err
    for text_out in outputs:
        assert superuser not in text_out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_first_signal_during_opentofu_apply_is_forwarded_and_tofu_stops_gracefully(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    tmp_path: Path,
    signum: signal.Signals,
) -> None:
    name = unique("sigdb")
    db = name.replace("-", "_")
    address = _stack(repo_builder, name)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    # CREATE DATABASE waits for this lock: OpenTofu has created the role and is creating
    # the database (in flight) when konfig gets the signal; the extension is still to do.
    blocker = _Held(tofu, LOCK_PG_DATABASE, "CREATE DATABASE")
    log_path = tmp_path / "apply.log"
    log = log_path.open("w")
    proc = _apply_in_background(root, address, kc, log)
    try:
        blocker.wait_for_opentofu()
        os.kill(proc.pid, signum)  # konfig only (a CI cancel, a Ctrl-C to konfig's pid)
        _until(
            lambda: "OpenTofu (1 running) was sent SIGINT" in log_path.read_text(),
            60,
            "konfig to forward the signal to OpenTofu",
        )
        assert proc.poll() is None  # konfig waits for OpenTofu to finish what is in flight
        blocker.release()
        code = proc.wait(180)
    finally:
        blocker.close()
        log.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log_path.read_text()
    assert code == (143 if signum == signal.SIGTERM else 130), text
    assert f"konfig: {signum.name} received" in text
    # OpenTofu finished the database in flight, started nothing new (no extension),
    # wrote its state and released its lock; the Kubernetes part never ran.
    assert tofu.psql(f"SELECT count(*) FROM pg_database WHERE datname = '{db}'") == "1"
    assert tofu.psql("SELECT count(*) FROM pg_extension WHERE extname = 'pgcrypto'", db) == "0"
    suffix = state_suffix(f"appops/{address}")
    state = kube.get("v1", "Secret", f"tfstate-default-{suffix}", STATE_NAMESPACE)
    assert state is not None
    lease = kube.get(
        "coordination.k8s.io/v1", "Lease", f"lock-tfstate-default-{suffix}", STATE_NAMESPACE
    )
    assert lease is None or not (lease.get("spec") or {}).get("holderIdentity"), lease
    assert kube.get("apps/v1", "Deployment", name, name) is None
    assert "the Kubernetes objects were not applied" in text, text

    # The state records what was created: the re-run creates the rest and converges.
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert tofu.psql("SELECT count(*) FROM pg_extension WHERE extname = 'pgcrypto'", db) == "1"
    assert kube.get("apps/v1", "Deployment", name, name) is not None
    res = konfig("preview", address, kc, "--detailed-exitcode", cwd=root)
    assert res.code == 0, res.out + res.err


def _limited(repo: RepoBuilder, name: str, limit: int) -> None:
    database = f'{{extensions = ["pgcrypto"], connectionLimit = {limit}}}'
    grant_credentials(repo.root, [GRANT])
    repo.stack(
        name,
        "dev",
        main=server_main(name, database),
        stack_yaml=STACK_YAML.format(extra=""),
    )


def test_apply_runs_each_opentofu_step_once_and_a_stale_shown_plan_is_not_applied(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from konfig.commands._common import tofu_context
    from konfig.engine.inventory_store import read_inventory
    from konfig.pipeline.applying import compile_specs
    from konfig.repo.layout import discover
    from konfig.tofu.hybrid import discard, plan_hybrid, reuse_plan
    from konfig.tofu.plan_apply import tofu_apply

    name = unique("reusedb")
    db = name.replace("-", "_")
    _limited(repo_builder, name, 5)
    address = f"{name}/dev"
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    limit = f"SELECT rolconnlimit FROM pg_roles WHERE rolname = '{db}'"
    assert tofu.psql(limit) == "5"

    # Every tofu run is logged by a wrapper around the real binary.
    runs = tmp_path / "tofu-runs.log"
    wrapper = tmp_path / "tofu"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {runs}\nexec {tofu.tofu} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("KONFIG_TOFU", str(wrapper))

    # apply --plan (as on merge): the plan compared with the saved preview is the one
    # OpenTofu applies: one plan, one show, one apply (the preview's are its own).
    _limited(repo_builder, name, 6)
    saved = tmp_path / "preview.json"
    res = konfig("preview", address, kc, "--format", "json", "--out", str(saved), cwd=root)
    assert res.code == 0, res.err
    runs.unlink()
    res = konfig(
        "apply", address, "--allow-dirty", "--yes", "--plan", str(saved), "--json", kc, cwd=root
    )
    assert res.code == 0, res.out + res.err
    assert runs.read_text().split() == ["plan", "show", "apply"]
    assert tofu.psql(limit) == "6"
    workdir = tofu_env / state_suffix(f"appops/{address}")
    assert not list(workdir.glob("*.tfplan")), "the applied plan file is removed"

    # apply --yes of an update: the plan's messages say what it does (no read-back with
    # show), OpenTofu applies it, each resource is reported; the plan shown names the
    # update; without a Terraform change it only plans.
    _limited(repo_builder, name, 8)
    runs.unlink()
    res = konfig("apply", address, "--allow-dirty", "--yes", "--json", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert runs.read_text().split() == ["plan", "apply"]
    applied = {o["id"]: o["outcome"] for o in json.loads(res.out)["stacks"][0]["objects"]}
    role = f"cyrilgdn/postgresql:postgresql_role:{db}"
    assert applied[role] == "updated", applied
    assert applied[f"cyrilgdn/postgresql:postgresql_database:{db}"] == "unchanged", applied
    assert tofu.psql(limit) == "8"
    _limited(repo_builder, name, 10)
    runs.unlink()
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert runs.read_text().split() == ["plan", "apply"]
    shown = res.out.index(f"~ update  {role}")
    assert shown < res.out.index(f"updated   {role}"), res.out
    assert tofu.psql(limit) == "10"
    runs.unlink()
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert runs.read_text().split() == ["plan"]
    # A preview without a Terraform change (nothing to change, nothing drifted) is not
    # read back either: every resource unchanged, the references resolve to the state's
    # values; the apply of that preview plans once and applies nothing.
    runs.unlink()
    res = konfig("preview", address, kc, "--format", "json", "--out", str(saved), cwd=root)
    assert res.code == 0, res.err
    assert runs.read_text().split() == ["plan"]
    (entry,) = json.loads(saved.read_text())["stacks"]
    actions = {c["id"]: (c["action"], c["reason"]) for c in entry["changes"]}
    assert actions[role] == ("unchanged", "matches the real object"), actions
    assert {a for a, _ in actions.values()} == {"unchanged"}, actions
    runs.unlink()
    res = konfig("apply", address, "--allow-dirty", "--yes", "--plan", str(saved), kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert runs.read_text().split() == ["plan"]
    assert not list(workdir.glob("*.tfplan")) and not list(workdir.glob("*.jsonl"))

    # A plan shown before the state changed is planned again under the lock, and
    # OpenTofu itself refuses to apply it (a stale plan).
    _limited(repo_builder, name, 7)
    repo = discover(root)
    (stack,) = [s for s in repo.stacks if s.path == f"appops/{address}"]
    spec = compile_specs(repo, [stack], jobs=1, state=None)[stack.path]
    target = KubeTarget(str(cluster.kubeconfig), cluster.admin_context)
    tctx = tofu_context(root)
    shown = plan_hybrid(kube, stack, spec, read_inventory(kube, stack), tctx, target, lock=False)
    assert shown.tofu is not None and shown.tofu.plan.has_changes
    assert reuse_plan(kube, stack, spec, read_inventory(kube, stack), shown) is not None
    # (this process's next plan of the stack takes the same file name: keep it aside)
    plan_file = workdir / shown.tofu.plan_file
    aside = tmp_path / "shown.tfplan"
    aside.write_bytes(plan_file.read_bytes())
    _limited(repo_builder, name, 9)
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert tofu.psql(limit) == "9"
    plan_file.write_bytes(aside.read_bytes())
    assert reuse_plan(kube, stack, spec, read_inventory(kube, stack), shown) is None
    outcome = tofu_apply(shown.tofu)
    assert not outcome.ok and "stale" in (outcome.error + outcome.output).lower(), outcome
    assert tofu.psql(limit) == "9"
    discard(shown)
    assert not list(workdir.glob("*.tfplan"))


CANARY_DB = "canary-db-7f3a91c2e4b8d605"
CANARY_DB_ROTATED = "canary-db-rotated-2c8e5a1f9d"


def _forms(value: str) -> list[str]:
    """The value and the base64 spellings a Secret or a log could carry."""
    raw = value.encode()
    out = [value, base64.b64encode(raw).decode()]
    for shift in (1, 2):  # base64 of the value inside a longer text
        out.append(base64.b64encode(b"x" * shift + raw).decode()[4:-4])
    return out


def test_the_role_password_from_the_stacks_encrypted_secrets_never_leaks(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = unique("sopsdb")
    db = name.replace("-", "_")
    root = repo_builder.root
    stack = f"appops/{name}/dev"
    kc = f"--kubeconfig={cluster.kubeconfig}"
    role_id = f"cyrilgdn/postgresql:postgresql_role:{db}"
    secret_id = f"v1:Secret:{name}:{name}-db"
    outputs: list[str] = []

    def run(*args: str, key: bool = True, codes: tuple[int, ...] = (0,)) -> str:
        if key:
            monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key_file))
        else:
            monkeypatch.delenv("SOPS_AGE_KEY_FILE", raising=False)
        res = konfig(*args, cwd=root)
        outputs.extend([res.out, res.err])
        assert res.code in codes, f"konfig {' '.join(args)} -> {res.code}\n{res.out}{res.err}"
        return res.out

    key_file = tmp_path / "age.key"
    recipient = run("secrets", "keygen", "-o", str(key_file), key=False).strip()
    repo_builder.write(".sops.yaml", f"creation_rules:\n  - age: {recipient}\n")
    database = '{extensions = ["pgcrypto"], passwordFromFile = "secrets.enc.yaml"}'
    grant_credentials(repo_builder.root, [GRANT])
    repo_builder.stack(
        name,
        "dev",
        main=server_main(name, database),
        stack_yaml=STACK_YAML.format(extra=""),
    )

    def encrypt(password: str) -> None:
        repo_builder.write(f"{stack}/secrets.enc.yaml", f"{name}-db:\n  PGPASSWORD: {password}\n")
        run("secrets", "encrypt", f"{stack}/secrets.enc.yaml", key=False)

    encrypt(CANARY_DB)

    # Compile needs no key; a preview without it plans the role without its password
    # (write-only: nothing to compare) and says which Secret it could not compare.
    spec_text = run("compile", stack, key=False)
    assert f"{stack}/secrets.enc.yaml" in spec_text and "generated" not in spec_text
    text = run("preview", stack, kc, key=False)
    assert f"could not compare (no decryption key): {secret_id} (PGPASSWORD)" in text, text
    assert f"create  {role_id}" in text
    run("apply", stack, "--allow-dirty", "--yes", kc, key=False, codes=(1,))
    assert "SOPS_AGE_KEY" in outputs[-1] and "nothing was applied" in outputs[-1]
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{db}'") == "0"

    # With the key: previews in every format, apply; the role logs in with the file's
    # password and the Secret holds it.
    preview = json.loads(run("preview", stack, kc, "--format", "json"))
    (entry,) = preview["stacks"]
    changes = {c["id"]: c for c in entry["changes"]}
    assert {k["key"]: k["status"] for k in changes[secret_id]["secrets"]} == {"PGPASSWORD": "new"}
    fields = {f["path"]: f["after"] for f in changes[role_id]["fields"]}
    assert fields["password_wo"] == "(write-only)" and fields["password_wo_version"] == "***"
    run("preview", stack, kc, "--format", "markdown")
    run("preview", stack, kc, "--diff")
    run("apply", stack, "--allow-dirty", "--yes", "--json", kc)
    assert _login(tofu, db, CANARY_DB, db) == db
    secret = kube.get("v1", "Secret", f"{name}-db", name)
    assert secret is not None
    assert base64.b64decode(secret["data"]["PGPASSWORD"]).decode() == CANARY_DB
    run("preview", stack, kc, "--detailed-exitcode")

    # Changed in the file: the next apply sets the role's password (its version changed).
    encrypt(CANARY_DB_ROTATED)
    text = run("preview", stack, kc, codes=(0,))
    assert f"update  {role_id}" in text and "PGPASSWORD changed" in text, text
    run("apply", stack, "--allow-dirty", "--yes", kc)
    assert _login(tofu, db, CANARY_DB_ROTATED, db) == db
    run("status", stack, kc, "--json")
    run("drift", stack, kc)

    # Neither password appears in any output, any file the runs wrote (the compile
    # cache, the OpenTofu working directories and their state), nor PostgreSQL's log.
    written = [p for p in tofu_env.rglob("*") if p.is_file() and not p.is_symlink()]
    written += [p for p in (root / ".cache").rglob("*") if p.is_file()]
    written += [p for p in (root / "appops").rglob("*") if p.is_file()]
    assert any("compile" in str(p) for p in written)
    status = subprocess.run(
        [str(TOFU_SCRIPT), "status"],
        env={**os.environ, "KONFIG_TOFU_DIR": str(tofu.dir)},
        capture_output=True,
        text=True,
        check=True,
    )
    written.append(Path(json.loads(status.stdout.strip().splitlines()[-1])["pg_log"]))
    state_secret = kube.get(
        "v1", "Secret", f"tfstate-default-{state_suffix(stack)}", STATE_NAMESPACE
    )
    state = json.dumps(decode_state(state_secret, where=stack))
    assert f"postgresql_role.{db}" in state
    outputs.append(state)  # OpenTofu's state holds neither (write-only, ephemeral)
    for canary in (CANARY_DB, CANARY_DB_ROTATED):
        for form in _forms(canary):
            for text_out in outputs:
                assert form not in text_out
            for path in written:
                assert form.encode() not in path.read_bytes(), path


def test_an_opentofu_failure_names_the_stack_once(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    tofu_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    address = _stack(repo_builder, unique("gone-tofu"))
    missing = repo_builder.root.parent / "no-such-tofu"
    monkeypatch.setenv("KONFIG_TOFU", str(missing))
    res = konfig(
        "preview", address, f"--kubeconfig={cluster.kubeconfig}", "--format", "json",
        cwd=repo_builder.root,
    )  # fmt: skip
    assert res.code == 1, res.err
    line = next(x for x in res.err.splitlines() if "cannot run OpenTofu" in x)
    assert line.count(f"appops/{address}") == 1, line
    assert str(missing) in line and "not found" in line, line


def test_prune_and_destroy_need_the_credentials_of_what_only_the_state_records(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A database removed from the stack (apply prunes it) and konfig destroy: OpenTofu
    needs the provider of resources only the state records, so the credentials are
    checked for them too, before anything is planned, locked or written."""
    name = unique("credsdb")
    db = name.replace("-", "_")
    address = _stack(repo_builder, name)
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    ids = ", ".join(
        f"cyrilgdn/postgresql:{t}:{n}"
        for t, n in [
            ("postgresql_database", db),
            ("postgresql_extension", f"{db}_pgcrypto"),
            ("postgresql_role", db),
        ]
    )
    allow = "  allowDestroy: ['cyrilgdn/postgresql:*']\n"
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    state_secret = f"tfstate-default-{state_suffix('appops/' + address)}"

    def versions() -> list[object]:
        found = [
            kube.get("apps/v1", "Deployment", name, name),
            kube.get("v1", "Secret", f"{name}-db", name),
            kube.get("v1", "ConfigMap", f"{name}-db", name),
            kube.get("v1", "Secret", state_secret, STATE_NAMESPACE),
        ]
        assert all(found), found
        return [o["metadata"]["resourceVersion"] for o in found if o]

    def databases() -> str:
        return tofu.psql(
            f"SELECT (SELECT count(*) FROM pg_database WHERE datname = '{db}') || '/' || "
            f"(SELECT count(*) FROM pg_roles WHERE rolname = '{db}')"
        )

    before = versions()
    assert databases() == "1/1"

    # 1. The database removed from the stack, with the opt-in: the Spec has no Terraform
    # resource any more, the state's three are pruned with the provider's credentials.
    _stack(repo_builder, name, database=False, extra=allow)
    with monkeypatch.context() as m:
        m.delenv("T_PGHOST")
        m.delenv("T_PGPASSWORD")
        res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 1, res.out + res.err
    assert (
        f"not set: appops/{address}: T_PGHOST (provider postgresql, argument host; to delete "
        f"what only the Terraform state records: {ids}), T_PGPASSWORD (provider postgresql, "
        "argument password; to delete"
    ) in res.err, res.err
    assert "nothing was changed" in res.err
    assert "set them in the apply environment" in res.err
    assert "OpenTofu" not in res.out + res.err  # refused before OpenTofu ran
    assert versions() == before
    assert databases() == "1/1"

    # 2. konfig destroy: every Terraform resource is only in the state.
    _stack(repo_builder, name, extra=allow)
    with monkeypatch.context() as m:
        m.delenv("T_PGPASSWORD")
        res = konfig("destroy", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 1, res.out + res.err
    assert (
        f"not set: appops/{address}: T_PGPASSWORD (provider postgresql, argument password; "
        f"to delete what only the Terraform state records: {ids}); nothing was changed"
    ) in res.err, res.err
    assert "set them in the destroy environment" in res.err
    assert versions() == before
    assert databases() == "1/1"

    # 3. With the credentials, both go through: the prune, then the destroy.
    _stack(repo_builder, name, database=False, extra=allow)
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert databases() == "0/0"
    assert kube.get("v1", "Secret", f"{name}-db", name) is None
    res = konfig("destroy", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    assert kube.get("apps/v1", "Deployment", name, name) is None


def test_status_and_drift_without_the_refresh_read_the_state_or_skip_and_say_so(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    tofu: Tofu,
    tofu_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--terraform state`` lists the Terraform resources from the state without
    OpenTofu or credentials, ``--terraform skip`` does not read them; both say their
    drift was not checked, never "no drift", though a role was changed by hand."""
    name = unique("moddb")
    db = name.replace("-", "_")
    address = _stack(repo_builder, name)
    path = f"appops/{address}"
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    role_id = f"cyrilgdn/postgresql:postgresql_role:{db}"
    res = konfig("apply", address, "--allow-dirty", "--yes", kc, cwd=root)
    assert res.code == 0, res.out + res.err
    tofu.psql(f'ALTER ROLE "{db}" NOLOGIN')
    not_refreshed = (
        "not checked: read from the Terraform state only, not refreshed (--terraform state)"
    )

    with monkeypatch.context() as m:
        for var in CREDENTIALS:
            m.delenv(var)
        m.setenv("KONFIG_TOFU", str(root.parent / "no-such-tofu"))  # any tofu run fails

        # status --terraform state: the state's resources, their drift not checked
        res = konfig("status", address, kc, "--json", "--terraform", "state", cwd=root)
        assert res.code == 0, res.err
        report = json.loads(res.out)
        assert report["terraform"] == {"mode": "state"}
        (stack,) = report["stacks"]
        assert stack["terraform"] == {"mode": "state", "resources": 3, "drifted": 0, "unknown": 3}
        assert stack["drift"]["state"] == "unknown"
        details = [d for d in stack["details"] if d["runtime"] == "Terraform"]
        assert len(details) == 3 and role_id in {d["id"] for d in details}
        assert {d["drift"]["state"] for d in details} == {"unknown"}
        assert {d["drift"]["message"] for d in details} == {not_refreshed}
        text = konfig("status", address, kc, "--terraform", "state", cwd=root)
        assert text.code == 0, text.err
        assert " + 3 Terraform" in text.out, text.out
        assert "drift unknown in 1 stack" in text.out
        assert "read from their state only (--terraform state)" in text.out
        assert "no drift" not in text.out.replace("no drift found", "")
        assert not list(tofu_env.glob("*.refresh"))  # OpenTofu never ran

        # status --terraform skip: not read at all
        res = konfig("status", address, kc, "--json", "--terraform", "skip", cwd=root)
        assert res.code == 0, res.err
        report = json.loads(res.out)
        assert report["terraform"] == {"mode": "skip"}
        (stack,) = report["stacks"]
        assert stack["terraform"] == {"mode": "skip", "resources": 0, "drifted": 0, "unknown": 0}
        assert stack["drift"]["state"] == "unknown"
        assert not [d for d in stack["details"] if d["runtime"] == "Terraform"]
        text = konfig("status", address, kc, "--terraform", "skip", cwd=root)
        assert "+ Terraform (not read)" in text.out, text.out
        assert "Terraform resources not read (--terraform skip)" in text.out

        # drift: exit 0 (nothing found), the stack unknown, the report says why
        for mode, line in [
            ("state", f"{path}: 3 Terraform resources {not_refreshed}"),
            ("skip", f"{path}: Terraform resources not checked: not read (--terraform skip)"),
        ]:
            res = konfig(
                "drift", address, kc, "--json", "--detailed-exitcode", "--terraform", mode,
                cwd=root,
            )  # fmt: skip
            assert res.code == 0, res.out + res.err
            report = json.loads(res.out)
            assert report["terraform"] == {"mode": mode, "notChecked": [path]}
            assert report["hasDrift"] is False
            assert [s["state"] for s in report["stacks"]] == ["unknown"]
            text = konfig("drift", address, kc, "--terraform", mode, cwd=root)
            assert text.code == 0, text.err
            assert line in text.out, text.out
            assert "No drift found in what was checked (1 stack)" in text.out
            assert "No drift in" not in text.out
            md = konfig("drift", address, kc, "--format", "markdown", "--terraform", mode, cwd=root)
            assert "no drift found in what was checked (1 stack)" in md.out, md.out
            assert f"- `{path}`: " in md.out
        assert not list(tofu_env.glob("*.refresh"))

    # With the refresh (the default) and the credentials, the role's drift is found.
    res = konfig("drift", address, kc, "--json", "--detailed-exitcode", cwd=root)
    assert res.code == 2, res.out + res.err
    report = json.loads(res.out)
    assert report["terraform"] == {"mode": "refresh", "notChecked": []}
    (entry,) = report["stacks"]
    assert [o["id"] for o in entry["objects"]] == [role_id]
    res = konfig("status", address, kc, "--json", "--terraform-concurrency", "1", cwd=root)
    (stack,) = json.loads(res.out)["stacks"]
    assert stack["terraform"] == {"mode": "refresh", "resources": 3, "drifted": 1, "unknown": 0}
    for bad in (["--terraform", "later"], ["--terraform-concurrency", "0"]):
        res = konfig("status", address, kc, *bad, cwd=root)
        assert res.code == 2, res.out + res.err
        assert bad[0] in res.err, res.err

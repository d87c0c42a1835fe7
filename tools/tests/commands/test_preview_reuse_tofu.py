"""``konfig preview --specs DIR --reuse PREVIOUS.json`` of a stack with a database
through OpenTofu (real OpenTofu, the real PostgreSQL provider and PostgreSQL, the real
control plane): its result is re-used while nothing its plan reads moved, and planned
again after an apply bumped its state's serial, after its configuration changed, and
after the providers' lock file changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from commands.test_preview import preview
from commands.test_preview_reuse import compiled, stacks_of
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.tofu import PG_ENVIRONMENT, PG_STACK_YAML, Tofu, grant_credentials, server_main
from kubeutil import unique

from konfig.engine.kube import Kube
from konfig.tofu.config import CONFIG_FILE, STATE_NAMESPACE
from konfig.tofu.records import state_suffix
from konfig.tofu.state import decode_state

pytestmark = [pytest.mark.cluster, pytest.mark.tofu]


def _database_stack(repo: RepoBuilder, name: str, extensions: str = '"pgcrypto"') -> str:
    """A stack with a role, a database and its extensions on the local PostgreSQL."""
    grant_credentials(
        repo.root,
        [{"stacks": ["appops/*/dev"], "provider": "postgresql", "environment": PG_ENVIRONMENT}],
    )
    repo.write(".gitignore", "/.cache/\n")
    repo.stack(
        name,
        "dev",
        main=server_main(name, f"{{extensions = [{extensions}]}}"),
        stack_yaml=PG_STACK_YAML.format(name="dev"),
    )
    return f"appops/{name}/dev"


def _previewed(
    konfig: KonfigRunner, root: Path, cluster: Cluster, stack: str, specs: Path, *reuse: Path
) -> tuple[dict[str, Any], str]:
    """The stack's entry of a preview of ``specs`` (re-using ``reuse``), and stderr."""
    args = [a for p in reuse for a in ("--reuse", str(p))]
    res = preview(konfig, root, cluster, stack, "--specs", str(specs), *args, "--format", "json")
    assert res.code == 0, res.out + res.err
    return stacks_of(json.loads(res.out))[stack], res.err


def _saved(konfig: KonfigRunner, root: Path, cluster: Cluster, stack: str, specs: Path) -> Path:
    out = specs.parent / f"{specs.name}-preview.json"
    res = preview(
        konfig, root, cluster, stack, "--specs", str(specs), "--format", "json", "--out", str(out)
    )
    assert res.code == 0, res.out + res.err
    return out


def _logged_tofu(tofu: Tofu, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """konfig runs OpenTofu through a wrapper that logs each run's command: the log."""
    log = tmp_path / "tofu-runs.log"
    log.write_text("")
    wrapper = tmp_path / "bin" / "tofu"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> "{log}"\nexec "{tofu.tofu}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("KONFIG_TOFU", str(wrapper))
    return log


def _terraform(entry: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["action"] for c in entry["changes"] if c.get("runtime") == "Terraform"}


def _assert_reused(entry: dict[str, Any], before: dict[str, Any], head: str, err: str) -> None:
    assert entry["reusedFrom"] == head, err
    assert entry["reuseKey"] == before["reuseKey"]
    assert "1 of 1 stacks re-used from " + head[:12] in err
    # the previous result as it was recorded: its Terraform changes and all
    assert {k: v for k, v in entry.items() if k != "reusedFrom"} == {
        k: v for k, v in before.items() if k != "reusedFrom"
    }


def test_reused_until_an_apply_bumps_the_state_serial(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = repo_builder.root
    runs = _logged_tofu(tofu, tmp_path, monkeypatch)
    name = unique("reudb")
    db = name.replace("-", "_")
    stack = _database_stack(repo_builder, name)
    git_init(root)
    head = git_commit(root, "a stack with a database")
    applied = konfig("apply", stack, "--yes", f"--kubeconfig={cluster.kubeconfig}", cwd=root)
    assert applied.code == 0, applied.out + applied.err
    specs = compiled(konfig, root, tmp_path / "specs", stack)
    secret = f"tfstate-default-{state_suffix(stack)}"

    def serial() -> int:
        state = decode_state(kube.get("v1", "Secret", secret, STATE_NAMESPACE), where=stack)
        assert state is not None
        return int(state["serial"])

    # The previous push's preview: OpenTofu planned, and the key recorded.
    first = _saved(konfig, root, cluster, stack, specs)
    before = stacks_of(json.loads(first.read_text()))[stack]
    assert before["reuseKey"] is not None and len(before["reuseKey"]) == 64
    assert before["review"]["tofuState"]["serial"] == serial()
    role = f"cyrilgdn/postgresql:postgresql_role:{db}"
    assert _terraform(before).get(role, "unchanged") == "unchanged", before["changes"]
    assert "plan" in runs.read_text().split()

    # Nothing moved: re-used, with its Terraform part; OpenTofu not run at all.
    ran = runs.read_text()
    entry, err = _previewed(konfig, root, cluster, stack, specs, first)
    _assert_reused(entry, before, head, err)
    assert runs.read_text() == ran

    # Someone applied: the role was altered by hand and a refresh-only apply recorded it
    # in the state. Nothing of Kubernetes moved, only OpenTofu's serial: planned again,
    # and the plan shows the role's login set back.
    tofu.psql(f'ALTER ROLE "{db}" NOLOGIN')
    was = serial()
    workdir = tofu_env / state_suffix(stack)
    document = json.loads((workdir / CONFIG_FILE).read_text())
    variables = {
        f"TF_VAR_{v}": {"host": tofu.pg_host, "port": str(tofu.pg_port)}.get(
            v.removeprefix("p_postgresql_"),
            tofu.pg_superuser if v.endswith("username") else tofu.superuser_password,
        )
        for v in document.get("variable", {})
    }
    res = tofu.run(
        "apply", "-refresh-only", "-auto-approve", "-input=false", "-no-color",
        cwd=workdir,
        env={**variables, "KUBE_CONFIG_PATHS": str(cluster.kubeconfig), "KUBE_CTX": "admin"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert serial() > was
    entry, err = _previewed(konfig, root, cluster, stack, specs, first)
    assert entry["reusedFrom"] is None and "re-used" not in err
    assert entry["reuseKey"] != before["reuseKey"]
    assert entry["review"]["tofuState"]["serial"] == serial()
    (login,) = [c for c in entry["changes"] if c["id"] == role]
    assert login["action"] == "update"
    assert [(f["path"], f["before"], f["after"]) for f in login["fields"]] == [
        ("login", False, True)
    ]


def test_planned_again_when_its_configuration_or_the_lock_file_changed(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    tofu: Tofu,
    tofu_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = repo_builder.root
    runs = _logged_tofu(tofu, tmp_path, monkeypatch)
    name = unique("reudb")
    db = name.replace("-", "_")
    stack = _database_stack(repo_builder, name)
    git_init(root)
    push1 = git_commit(root, "a stack with a database, not applied yet")
    specs1 = compiled(konfig, root, tmp_path / "specs1", stack)
    first = _saved(konfig, root, cluster, stack, specs1)
    before = stacks_of(json.loads(first.read_text()))[stack]
    assert before["reuseKey"] is not None and before["review"]["tofuState"] is None
    extension = f"cyrilgdn/postgresql:postgresql_extension:{db}_pgcrypto"
    assert _terraform(before)[extension] == "create"

    # A stack never applied (no state yet) is re-used too while nothing moved.
    ran = runs.read_text()
    entry, err = _previewed(konfig, root, cluster, stack, specs1, first)
    _assert_reused(entry, before, push1, err)
    assert runs.read_text() == ran

    # The next push changes the stack's database: planned again, with the new extension.
    (root / stack / "main.k").write_text(server_main(name, '{extensions = ["pgcrypto", "hstore"]}'))
    git_commit(root, "a second extension")
    specs2 = compiled(konfig, root, tmp_path / "specs2", stack)
    entry, err = _previewed(konfig, root, cluster, stack, specs2, first)
    assert entry["reusedFrom"] is None and "re-used" not in err
    assert entry["reuseKey"] != before["reuseKey"]
    assert _terraform(entry)[f"cyrilgdn/postgresql:postgresql_extension:{db}_hstore"] == "create"

    # The same Specs, but the lock file the providers are verified against changed (a
    # reviewed `tofu providers lock`; here a comment in the provider's entry): planned
    # again, never re-used against other provider packages.
    second = _saved(konfig, root, cluster, stack, specs2)
    entry, err = _previewed(konfig, root, cluster, stack, specs2, second)
    assert entry["reusedFrom"] is not None, err
    lock = tmp_path / "changed.terraform.lock.hcl"
    shutil.copy(tofu.lock_file, lock)
    text = lock.read_text(encoding="utf-8")
    assert text.count("{\n") >= 1
    lock.write_text(text.replace("{\n", "{\n  # re-locked\n", 1), encoding="utf-8")
    monkeypatch.setenv("KONFIG_TOFU_LOCK_FILE", str(lock))
    again, err = _previewed(konfig, root, cluster, stack, specs2, second)
    assert again["reusedFrom"] is None and "re-used" not in err
    assert again["reuseKey"] != entry["reuseKey"]
    assert _terraform(again) == _terraform(entry)

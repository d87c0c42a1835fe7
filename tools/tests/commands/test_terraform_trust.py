"""The pull request is the trust boundary, for Terraform (issue 26, findings 2, 3 and 4):
a stack's ``stack.yaml`` and KCL cannot make OpenTofu evaluate an expression, connect
where they choose, read a variable not granted to them, copy a credential into a
Kubernetes object or run a command. End to end against the real control plane, real
OpenTofu with the real PostgreSQL provider and a real PostgreSQL (``hack/tofu up``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.tofu import PG_ENVIRONMENT, Tofu, evil_repo, grant_credentials, server_main
from kubeutil import unique

from konfig.engine.kube import Kube
from konfig.tofu.config import STATE_NAMESPACE

pytestmark = [pytest.mark.cluster, pytest.mark.tofu]

CREDENTIALS = PG_ENVIRONMENT


def _stack_yaml(settings: dict[str, Any], environment: dict[str, str]) -> str:
    return yaml.safe_dump(
        {
            "name": "dev",
            "kubernetes": {"context": "admin"},
            "terraform": {
                "providers": {"postgresql": {"settings": settings, "environment": environment}}
            },
        },
        sort_keys=False,
    )


def _platform(repo: RepoBuilder, grants: list[dict[str, Any]]) -> None:
    grant_credentials(repo.root, grants)


def _nothing_written(kube: Kube, tofu: Tofu, name: str, workroot: Path) -> None:
    db = name.replace("-", "_")
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{db}'") == "0"
    assert kube.get("v1", "Namespace", name, None) is None
    states = kube.list("v1", "Secret", STATE_NAMESPACE)
    assert not [s for s in states if name in s["metadata"]["name"]]
    assert not list(workroot.rglob("main.tf.json")), "no OpenTofu configuration was written"


def test_a_provisioner_is_refused_by_preview_and_apply_and_never_runs(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    tmp_path: Path,
) -> None:
    """Finding 4: check refused a terraform_data resource with a local-exec provisioner,
    preview planned it without a word and apply --yes ran the command."""
    marker = tmp_path / "provisioner-ran"
    _platform(
        repo_builder,
        [{"stacks": ["appops/evil/dev"], "provider": "postgresql", "environment": CREDENTIALS}],
    )
    address = evil_repo(repo_builder, marker, _stack_yaml({}, CREDENTIALS))
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    for args in (
        ("preview", address, kc),
        ("preview", address, kc, "--format", "json"),
        ("apply", address, "--allow-dirty", "--yes", kc),
    ):
        res = konfig(*args, cwd=root)
        assert res.code == 1, (args, res.out, res.err)
        assert "terraform/forbidden" in res.out + res.err, (args, res.out, res.err)
        assert "local-exec" in res.out + res.err
        assert not marker.exists(), f"{args[0]} ran the provisioner"
    assert not list(tofu_env.rglob("main.tf.json")), "no OpenTofu configuration was written"
    states = kube.list("v1", "Secret", STATE_NAMESPACE)
    assert not [s for s in states if "evil" in s["metadata"]["name"]]


def test_a_provider_setting_is_a_literal_and_no_file_reaches_the_preview(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    tmp_path: Path,
) -> None:
    """Finding 2: `connect_timeout: '${tonumber(file(...))}'` was evaluated by OpenTofu
    during the preview (the file's content in the output); now OpenTofu gets the
    literal string and says a number is required."""
    name = unique("litdb")
    canary = tmp_path / "environ"
    canary.write_text("canary-5be1a9-from-a-file")
    _platform(
        repo_builder,
        [{"stacks": [f"appops/{name}/dev"], "provider": "postgresql", "environment": CREDENTIALS}],
    )
    setting = f'${{tonumber(file("{canary}"))}}'
    repo_builder.stack(
        name,
        "dev",
        main=server_main(name),
        stack_yaml=_stack_yaml({"sslmode": "disable", "connect_timeout": setting}, CREDENTIALS),
    )
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("preview", f"{name}/dev", kc, "--format", "json", cwd=root)
    assert "canary-5be1a9" not in res.out + res.err, res.out + res.err
    assert res.code == 1, res.out + res.err
    assert "Incorrect attribute value type" in res.err and "connect_timeout" in res.err, res.err
    assert (
        tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{name.replace('-', '_')}'")
        == "0"
    )


def test_where_opentofu_connects_and_which_variables_a_stack_reads_are_the_platforms(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 2 (a `host` in settings: the preview connected where the stack chose) and
    finding 3 (`environment: {host: OTHER_STACK_PGPASSWORD}` showed another stack's
    password through the ConfigMap's `${konfig:provider/postgresql.host}`): refused with
    the file and line by check, preview and apply, before anything connects."""
    name = unique("polic")
    other_password = "other-stack-pw-0c4d9e"
    monkeypatch.setenv("OTHER_PGPASSWORD", other_password)
    _platform(
        repo_builder,
        [
            {
                "stacks": [f"appops/{name}/dev"],
                "provider": "postgresql",
                "environment": CREDENTIALS,
            },
            {
                "stacks": ["appops/other/dev"],
                "provider": "postgresql",
                "environment": {"password": "OTHER_PGPASSWORD"},
            },
        ],
    )
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    address = f"{name}/dev"
    stack_file = f"appops/{address}/stack.yaml"
    cases = [
        # the connection target in settings (a server the pull request chose)
        (
            {"sslmode": "disable", "host": tofu.pg_host},
            {k: v for k, v in CREDENTIALS.items() if k != "host"},
            "terraform/provider-policy",
            "host",
        ),
        # another stack's password under `host`, which the ConfigMap copies
        (
            {"sslmode": "disable"},
            {**CREDENTIALS, "host": "OTHER_PGPASSWORD"},
            "terraform/credentials",
            "host",
        ),
    ]
    for settings, environment, rule, key in cases:
        text = _stack_yaml(settings, environment)
        repo_builder.stack(name, "dev", main=server_main(name), stack_yaml=text)
        # the one `host:` of the file (in settings, or in environment)
        line = next(
            n for n, row in enumerate(text.splitlines(), 1) if row.strip().startswith(f"{key}:")
        )
        check = konfig("check", address, "--format", "json", cwd=root)
        assert check.code == 1, check.out + check.err
        found = [(f["rule"], f["file"], f["line"]) for f in json.loads(check.out)]
        assert (rule, stack_file, line) in found, (found, rule, line)
        for args in (
            ("preview", address, kc, "--format", "json"),
            ("apply", address, "--allow-dirty", "--yes", kc),
        ):
            res = konfig(*args, cwd=root)
            out = res.out + res.err
            assert other_password not in out, out
            assert res.code == 1, (args, out)
            assert rule in out and f"{stack_file}:{line}" in out, (args, out)
        _nothing_written(kube, tofu, name, tofu_env)


def test_a_credential_never_reaches_a_kubernetes_object_through_a_reference(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    tofu: Tofu,
    tofu_env: Path,
) -> None:
    """A ConfigMap that copies the provider's `username` (a credential the old filter's
    words did not catch): the preview showed CI's database user; now only the
    arguments konfig.yaml lists under `references` (host, port) resolve."""
    name = unique("refdb")
    _platform(
        repo_builder,
        [{"stacks": [f"appops/{name}/dev"], "provider": "postgresql", "environment": CREDENTIALS}],
    )
    leak = f"""
leak: frontend.Manifests {{
    manifests = [{{
        apiVersion = "v1"
        kind = "ConfigMap"
        metadata = {{name = "leak", namespace = "{name}"}}
        data = {{u = "$" + "{{konfig:provider/postgresql.username}}"}}
    }}]
}}
"""
    repo_builder.stack(
        name,
        "dev",
        main=server_main(name, extra=leak),
        stack_yaml=_stack_yaml({"sslmode": "disable"}, CREDENTIALS),
    )
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"
    check = konfig("check", f"{name}/dev", "--format", "json", cwd=root)
    assert check.code == 1
    assert any(
        f["rule"] == "terraform/reference" and "username" in f["message"]
        for f in json.loads(check.out)
    ), check.out
    for args in (
        ("preview", f"{name}/dev", kc, "--format", "json"),
        ("apply", f"{name}/dev", "--allow-dirty", "--yes", kc),
    ):
        res = konfig(*args, cwd=root)
        out = res.out + res.err
        assert res.code == 1, (args, out)
        assert "username" in out and "references" in out, out
        assert "data.u" not in out, out  # no change of the ConfigMap was shown
    assert kube.get("v1", "ConfigMap", "leak", name) is None

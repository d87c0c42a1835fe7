"""Per-environment keys (issue 26, docs/secrets.md): the preview holds the key of the
non-production recipients only, and a production stack's Secrets are then reported
"not compared", never decrypted and never an error; apply needs the production key.

Real files (Konfig's SOPS writer), the real control plane, the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

pytestmark = pytest.mark.cluster

MAIN = """\
import base.pkg.models.frontend

web: frontend.Server {{
    name = "web"
    namespace = "{ns}"
    image = "nginx:1.27.3"
    ports = [{{port = 80}}]
    secrets = [{{name = "api", fromFile = "secrets.enc.yaml", keys = ["token"]}}]
}}
"""
DEV_CANARY = "dev-canary-5c1e2b"
PROD_CANARY = "prod-canary-8d4f7a"


def test_a_non_production_key_previews_dev_and_never_decrypts_prod(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = repo_builder.root
    project = unique("envk")
    keys: dict[str, Path] = {}
    recipients: dict[str, str] = {}
    for env in ("dev", "prod"):
        keys[env] = tmp_path / f"{env}.key"
        res = konfig("secrets", "keygen", "-o", str(keys[env]), cwd=root)
        assert res.code == 0, res.err
        recipients[env] = res.out.strip()
    repo_builder.write(
        ".sops.yaml",
        "creation_rules:\n"
        f"  - path_regex: ^appops/[^/]+/prod/\n    age: {recipients['prod']}\n"
        f"  - path_regex: ^appops/[^/]+/dev/\n    age: {recipients['dev']}\n",
    )
    for env, canary in (("dev", DEV_CANARY), ("prod", PROD_CANARY)):
        ns = f"{project}-{env}"
        repo_builder.stack(
            project,
            env,
            main=MAIN.format(ns=ns),
            stack_yaml=f"name: {env}\nkubernetes:\n  context: admin\n",
        )
        rel = f"appops/{project}/{env}/secrets.enc.yaml"
        repo_builder.write(rel, f"api:\n  token: {canary}\n")
        res = konfig("secrets", "encrypt", rel, cwd=root)
        assert res.code == 0, res.err

    # The preview's key: dev's recipients only (what KONFIG_PREVIEW_SOPS_AGE_KEY holds).
    monkeypatch.delenv("SOPS_AGE_KEY", raising=False)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(keys["dev"]))
    res = konfig(
        "preview",
        f"{project}/dev",
        f"{project}/prod",
        "--format",
        "json",
        "--kubeconfig",
        str(cluster.kubeconfig),
        cwd=root,
    )
    assert res.code == 0, res.out + res.err
    doc = json.loads(res.out)
    by_path = {s["path"]: s for s in doc["stacks"]}
    dev, prod = by_path[f"appops/{project}/dev"], by_path[f"appops/{project}/prod"]
    assert dev["status"] == "ok" and prod["status"] == "ok", (dev["error"], prod["error"])

    def secret_keys(stack: dict[str, object]) -> list[dict[str, str]]:
        changes = stack["changes"]
        assert isinstance(changes, list)
        [secret] = [c for c in changes if c["kind"] == "Secret"]
        return list(secret["secrets"])

    assert [k["status"] for k in secret_keys(dev)] == ["new"]
    assert [k["status"] for k in secret_keys(prod)] == ["not compared"]
    for canary in (DEV_CANARY, PROD_CANARY):
        assert canary not in res.out + res.err
    # (each command takes the key out of the environment before anything compiles)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(keys["dev"]))
    markdown = konfig(
        "preview",
        f"{project}/prod",
        "--format",
        "markdown",
        "--kubeconfig",
        str(cluster.kubeconfig),
        cwd=root,
    )
    assert markdown.code == 0, markdown.err
    assert "Could not compare (no decryption key)" in markdown.out, markdown.out

    # Apply of production needs production's key: refused before any write with dev's.
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(keys["dev"]))
    applied = konfig(
        "apply",
        f"{project}/prod",
        "--allow-dirty",
        "--yes",
        "--kubeconfig",
        str(cluster.kubeconfig),
        cwd=root,
    )
    assert applied.code == 1, applied.out + applied.err
    assert "can decrypt this file" in applied.out + applied.err
    assert PROD_CANARY not in applied.out + applied.err

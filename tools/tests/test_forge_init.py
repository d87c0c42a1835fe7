"""A team's first day on the real forge: ``konfig init`` makes the repository, ``git
push`` puts it on the local Gitea, the first pull request (a first stack, as the README's
tutorial writes it) gets its preview comment, and the merge applies it.

The repository is the one ``konfig init --no-examples`` makes with the team's own age
recipients, nothing copied or patched by the test; the pull-request, apply and drift
workflows, the actions and the tools they install are those it got.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.forge import Forge
from kubeutil import unique
from test_forge_e2e import (
    E2E,
    GIT_ENV,
    RUN_TIMEOUT,
    _logs_for,
    _preview_seen,
    konfig_cli,
)

pytestmark = [pytest.mark.forge, pytest.mark.cluster, pytest.mark.timeout(3600)]


def test_init_push_first_pr_gets_its_comment_and_the_merge_applies(
    forge: Forge, cluster: Cluster, tmp_path: Path
) -> None:
    t_start = time.monotonic()
    work = tmp_path / "team-config"
    keys: dict[str, Path] = {}
    recipients: dict[str, str] = {}
    for env in ("prod", "dev"):
        keys[env] = tmp_path / f"{env}.key"
        made = konfig_cli(
            "secrets", "keygen", "-o", str(keys[env]), cwd=tmp_path, kubeconfig=Path(os.devnull)
        )
        assert made.returncode == 0, made.stderr
        recipients[env] = made.stdout.strip()
    init = konfig_cli(
        "init",
        str(work),
        "--name",
        "team",
        "--no-examples",
        "--age-recipient",
        recipients["prod"],
        "--age-recipient",
        recipients["dev"],
        cwd=tmp_path,
        kubeconfig=Path(os.devnull),
        extra_env={"CI": "1", **GIT_ENV},
    )
    assert init.returncode == 0, init.stderr
    state = E2E(forge, "", work, cluster, cluster, None, "")  # type: ignore[arg-type]
    assert state.git("log", "--format=%s").startswith("team: a new Konfig repository")
    assert state.git("status", "--porcelain") == ""
    # git push to the forge, then the repository settings docs/security.md lists
    repo = state.repo = forge.import_repo(unique("team"), work, state.git)
    forge.request("PUT", f"/repos/{repo}/actions/workflows/drift.yml/disable", expect=(204,))
    kubeconfig = cluster.kubeconfig.read_text(encoding="utf-8")
    for name in ("KONFIG_PREVIEW_KUBECONFIG", "KONFIG_APPLY_KUBECONFIG", "KONFIG_DRIFT_KUBECONFIG"):
        forge.set_secret(repo, name, kubeconfig)
    forge.set_secret(repo, "KONFIG_PREVIEW_SOPS_AGE_KEY", keys["dev"].read_text())
    forge.set_secret(repo, "SOPS_AGE_KEY", keys["dev"].read_text() + keys["prod"].read_text())

    # The first pull request: a first stack, as the README's tutorial writes it.
    project = unique("hello")
    namespace = f"{project}-dev"
    stack = f"appops/{project}/dev"
    main_k = (
        "import base.pkg.models.frontend\n\n"
        "hello: frontend.Server {\n"
        '    name = "hello"\n'
        f'    namespace = "{namespace}"\n'
        '    image = "docker.io/hashicorp/http-echo:1.0.0"\n'
        '    args = ["-listen=:5678", "-text=hello"]\n'
        '    resources = "tiny"\n'
        "    ports = [{port = 80, targetPort = 5678}]\n"
        "}\n"
    )
    files = {
        f"appops/{project}/project.yaml": f"name: {project}\n",
        f"{stack}/stack.yaml": "name: dev\nkubernetes:\n  context: admin\n",
        f"{stack}/ci-test/settings.yaml": "kcl_options:\n  - key: env\n    value: dev\n",
        f"{stack}/main.k": main_k,
    }
    # a new project changes who owns what: CODEOWNERS follow, as `konfig check` asks
    state.git("checkout", "-q", "-b", "hello")
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text, encoding="utf-8")
    owners = konfig_cli("gen", "codeowners", cwd=work, kubeconfig=Path(os.devnull))
    assert owners.returncode == 0, owners.stderr
    for rel in (".github/CODEOWNERS", ".gitea/CODEOWNERS"):
        files[rel] = (work / rel).read_text(encoding="utf-8")
    head = state.change("hello", files, f"{project}: a first stack", goldens=(stack,))
    t0 = time.monotonic()
    pr = state.open_pr("hello", f"{project}: a first stack", head)

    def preview_posted() -> dict[str, Any] | None:
        comments = state.konfig_comments(pr.number)
        assert len(comments) <= 1, f"more than one Konfig comment: {comments}"
        if comments and _preview_seen(comments[0]["body"], head):
            return comments[0]
        return None

    comment = forge.wait(
        "the first pull request's preview comment",
        preview_posted,
        timeout=RUN_TIMEOUT,
        interval=1,
        logs=lambda: _logs_for(state, head),
    )
    commented = time.monotonic() - t0
    body = comment["body"]
    assert stack in body, body
    assert "Deployment" in body and "create" in body.lower(), body
    run = state.wait_run("preview.yml", head, "pull_request")
    assert run["conclusion"] == "success", state.logs(run)
    assert state.kubectl("get", "namespace", namespace, check=False).returncode != 0

    merged = state.merge(pr)
    t1 = time.monotonic()
    applied = state.wait_run("apply.yml", merged, "push")
    assert applied["conclusion"] == "success", state.logs(applied)
    image = state.kubectl(
        "-n",
        namespace,
        "get",
        "deployment",
        "hello",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ).stdout
    assert image == "docker.io/hashicorp/http-echo:1.0.0"
    print(
        f"\nkonfig init -> forge: PR opened -> comment {commented:.0f} s, merge -> applied "
        f"{time.monotonic() - t1:.0f} s, whole test {time.monotonic() - t_start:.0f} s, "
        f"load {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )

"""Promotion order, the audit and an identity per stack through the real apply workflow
(issue 32's acceptance parts the CLI tests prove alone so far), on the local Gitea.

The repository is the one ``konfig init --no-examples`` makes; the test adds three
projects the way a platform team would (konfig.yaml ``identities``, one ServiceAccount
per project made by ``hack/cluster identity``, with RBAC in that project's namespaces
only; the project's owner a forge user):

- ``P`` has ``dev`` and ``prod``; prod says ``promotion: {after: [P/dev], soak: ...}``;
- ``S`` has one production stack (no promotion): its merge's audit names the approver;
- ``Q`` has ``dev``; later its Spec writes into P's namespace.

Then, as a team would:

1. one pull request changes P/dev, P/prod and S/prod; S's owner approves it; it is
   merged. apply.yml's push run applies P/dev and S/prod, and holds P/prod (its log
   says why); S/prod's inventory records the approver, the merged head and the identity;
   ``konfig pending`` says P/prod is held until the soak ends;
2. after the soak a dispatched apply.yml run applies P/prod (a later run, never the
   merge's);
3. a push that makes Q/dev write a ConfigMap into P's namespace fails at the workflow's
   apply: the log names Q's identity and what it may not do, and nothing of Q's change
   is written.

preview.yml and review.yml are disabled in the repository (the pull-request loop is
test_forge_e2e's subject; their runs would only queue before the apply runs), and so
is drift.yml. Timings go to hack/forge.d/README.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.forge import Forge
from fixtures.rawstacks import resource, to_kcl
from kubeutil import unique
from test_forge_e2e import E2E, GIT_ENV, konfig_cli

pytestmark = [pytest.mark.forge, pytest.mark.cluster, pytest.mark.timeout(3600)]

# P/prod's soak: long enough that `konfig pending` right after the merge's run still
# sees it running on a loaded machine, short enough to wait for.
SOAK = 120
TIMINGS: dict[str, float] = {}


def configmap(ns: str, name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {"value": value},
    }


def stack_files(path: str, objects: list[dict[str, Any]], stack_yaml: str) -> dict[str, str | None]:
    """A stack whose Spec is exactly ``objects`` (no model: ``kcl.yaml`` compiles main.k
    alone), applied with the admin context (konfig.yaml `identities` narrows it)."""
    return {
        f"{path}/stack.yaml": stack_yaml,
        f"{path}/kcl.yaml": "kcl_cli_configs:\n  file:\n    - main.k\n",
        f"{path}/main.k": f"resources = {to_kcl([resource(o) for o in objects])}\n",
    }


def value_of(cluster: Cluster, ns: str, name: str) -> str | None:
    got = cluster.kubectl("-n", ns, "get", "configmap", name, "-o", "json", check=False)
    if got.returncode != 0:
        return None
    return str(json.loads(got.stdout)["data"]["value"])


def inventory(cluster: Cluster, stack: str) -> dict[str, str]:
    """The stack's inventory data, as `konfig status --json` reads it."""
    from konfig.engine import inventory as inv

    got = cluster.kubectl(
        "-n", "konfig-system", "get", "configmap", inv.inventory_name(stack), "-o", "json"
    )
    return dict(json.loads(got.stdout)["data"])


def test_prod_waits_for_dev_in_a_later_run_and_an_identity_cannot_write_another_project(
    forge: Forge, cluster: Cluster, tmp_path: Path
) -> None:
    t_start = time.monotonic()
    work = tmp_path / "teams-config"
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
        "init", str(work), "--name", "teams", "--no-examples",
        "--age-recipient", recipients["prod"], "--age-recipient", recipients["dev"],
        cwd=tmp_path, kubeconfig=Path(os.devnull), extra_env={"CI": "1", **GIT_ENV},
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    state = E2E(forge, "", work, cluster, cluster, None, "")  # type: ignore[arg-type]

    # the projects, their owners and identities (the platform team's konfig.yaml)
    p, s, q = unique("promo"), unique("shop"), unique("other")
    ann, sam = unique("ann"), unique("sam")
    tokens = {login: forge.create_user(login) for login in (ann, sam)}
    identities = {
        p: cluster.identity(p, f"{p}-dev", f"{p}-prod"),
        s: cluster.identity(s, f"{s}-prod"),
        q: cluster.identity(q, f"{q}-dev"),
    }
    sa = {
        name: f"system:serviceaccount:{ident.replace('/', ':')}"
        for name, ident in identities.items()
    }
    config = work / "konfig.yaml"
    text = config.read_text(encoding="utf-8")
    text += "\nidentities:\n" + "".join(f"  {k}: {v}\n" for k, v in identities.items())
    config.write_text(text, encoding="utf-8")
    admin_yaml = "kubernetes:\n  context: admin\n"
    files: dict[str, str | None] = {}
    files[f"appops/{p}/project.yaml"] = f"name: {p}\nowners: ['@{ann}']\n"
    files[f"appops/{s}/project.yaml"] = f"name: {s}\nowners: ['@{sam}']\n"
    files[f"appops/{q}/project.yaml"] = f"name: {q}\nowners: ['@{ann}']\n"
    dev, prod = f"appops/{p}/dev", f"appops/{p}/prod"
    shop, other = f"appops/{s}/prod", f"appops/{q}/dev"
    promotion = f"promotion:\n  after: [{dev}]\n  soak: {SOAK}s\n"
    # The prod stacks' changes reach the merge without a preview comment (preview.yml is
    # off here): they apply a change the reviewed record does not hold (docs/review.md),
    # at the merge and in a later run alike
    unreviewed = "apply:\n  onReviewedChanged: apply\n"

    def p_files(version: str, order: str = promotion) -> dict[str, str | None]:
        return {
            **stack_files(dev, [configmap(f"{p}-dev", "app", version)], f"name: dev\n{admin_yaml}"),
            **stack_files(
                prod,
                [configmap(f"{p}-prod", "app", version)],
                f"name: prod\n{admin_yaml}{order}{unreviewed}",
            ),
            **stack_files(
                shop,
                [configmap(f"{s}-prod", "app", version)],
                f"name: prod\n{admin_yaml}{unreviewed}",
            ),
        }

    files.update(p_files("v1", order=""))  # the promotion order comes after a first apply
    files.update(
        stack_files(other, [configmap(f"{q}-dev", "app", "v1")], f"name: dev\n{admin_yaml}")
    )
    for rel, body in files.items():
        assert body is not None
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(body, encoding="utf-8")
    gen = konfig_cli("gen", "codeowners", cwd=work, kubeconfig=Path(os.devnull))
    assert gen.returncode == 0, gen.stderr
    state.git("add", "-A")
    state.git("commit", "-qm", "three projects, their owners and identities")
    main = state.git("rev-parse", "HEAD")
    # The cluster runs what main declares, applied as each project's identity; then P/prod
    # gets its promotion order.
    first = konfig_cli(
        "apply", "--all", "--yes", "--commit", main, cwd=work, kubeconfig=cluster.kubeconfig
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert value_of(cluster, f"{p}-prod", "app") == "v1"
    for rel, body in p_files("v1").items():
        assert body is not None
        (work / rel).write_text(body, encoding="utf-8")
    state.git("commit", "-qam", f"{prod} applies after {dev}")

    repo = state.repo = forge.import_repo(unique("teams"), work, state.git)
    for login in (ann, sam):
        forge.request("PUT", f"/repos/{repo}/collaborators/{login}", {"permission": "write"})
    for workflow in ("drift.yml", "preview.yml", "review.yml"):
        forge.request("PUT", f"/repos/{repo}/actions/workflows/{workflow}/disable", expect=(204,))
    kubeconfig = cluster.kubeconfig.read_text(encoding="utf-8")
    forge.set_secret(repo, "KONFIG_APPLY_KUBECONFIG", kubeconfig)
    forge.set_secret(repo, "SOPS_AGE_KEY", keys["dev"].read_text() + keys["prod"].read_text())

    # 1. one merge changes P/dev, P/prod and S/prod; S's owner approves it
    head = state.change("v2", p_files("v2"), "v2 everywhere")
    pr = state.open_pr("v2", "v2 everywhere", head)
    forge.request(
        "POST",
        f"/repos/{repo}/pulls/{pr.number}/reviews",
        {"event": "APPROVED", "body": "lgtm", "commit_id": head},
        token=tokens[sam],
    )
    merged = state.merge(pr)
    t0, c0 = time.monotonic(), forge.cpu_seconds()
    run = state.wait_run("apply.yml", merged, "push")
    TIMINGS["merge -> apply run done"] = time.monotonic() - t0
    TIMINGS["merge -> apply run done: forge CPU seconds"] = forge.cpu_seconds() - c0
    logs = state.logs(run)
    assert run["conclusion"] == "success", logs
    assert value_of(cluster, f"{p}-dev", "app") == "v2"
    assert value_of(cluster, f"{s}-prod", "app") == "v2"
    assert value_of(cluster, f"{p}-prod", "app") == "v1", "prod applied in dev's run"
    assert f"held: {prod} is held" in logs and dev in logs, logs
    # the audit of the merge: S/prod applied as S's identity, approved by its owner, of
    # the pull request's head
    record = inventory(cluster, shop)
    assert (record["appliedBy"], record["approvedBy"], record["approvedChange"]) == (
        sa[s],
        sam,
        head,
    ), record
    assert f"as {sa[s]}; approved by {sam} of {head[:12]}" in logs, logs
    assert inventory(cluster, dev)["appliedBy"] == sa[p]
    # what `konfig pending` says now: prod waits for dev's soak, until when
    state.git("checkout", "-q", "main")
    state.git("pull", "-q", "--ff-only", "origin", "main")
    pending = konfig_cli("pending", "--json", cwd=work, kubeconfig=cluster.kubeconfig)
    assert pending.returncode == 0, pending.stderr
    held = json.loads(pending.stdout)["held"]
    assert [(h["path"], h["after"]) for h in held] == [(prod, dev)], held
    until = datetime.fromisoformat(str(held[0]["until"]).replace("Z", "+00:00"))
    dev_applied = datetime.fromisoformat(
        inventory(cluster, dev)["appliedAt"].replace("Z", "+00:00")
    )
    assert until == dev_applied + timedelta(seconds=SOAK), (until, dev_applied)
    assert "soak" in held[0]["reason"], held

    # 2. once the soak is over, a later (dispatched) run applies prod
    wait = (until - datetime.now(UTC)).total_seconds()
    if wait > 0:
        time.sleep(wait + 1)
    t1, c1 = time.monotonic(), forge.cpu_seconds()
    later = state.dispatch("apply.yml")
    TIMINGS["dispatch -> apply run done"] = time.monotonic() - t1
    TIMINGS["dispatch -> apply run done: forge CPU seconds"] = forge.cpu_seconds() - c1
    assert later["conclusion"] == "success", state.logs(later)
    assert int(later["id"]) != int(run["id"])
    assert value_of(cluster, f"{p}-prod", "app") == "v2"
    prod_record = inventory(cluster, prod)
    prod_applied = datetime.fromisoformat(prod_record["appliedAt"].replace("Z", "+00:00"))
    assert prod_applied >= dev_applied + timedelta(seconds=SOAK)
    assert prod_record["appliedBy"] == sa[p]

    # 3. Q/dev's Spec writes into P's namespace: refused at the workflow's apply, the
    # identity named, nothing of Q's change written
    intrusion = stack_files(
        other,
        [configmap(f"{q}-dev", "app", "v2"), configmap(f"{p}-dev", "intruder", "x")],
        f"name: dev\n{admin_yaml}",
    )
    pushed = state.change("main", intrusion, f"{q}/dev writes into {p}-dev")  # a push
    t2, c2 = time.monotonic(), forge.cpu_seconds()
    refused = state.wait_run("apply.yml", pushed, "push")
    TIMINGS["push -> refused apply run done"] = time.monotonic() - t2
    TIMINGS["push -> refused apply run done: forge CPU seconds"] = forge.cpu_seconds() - c2
    logs = state.logs(refused)
    assert refused["conclusion"] == "failure", logs
    assert f"user '{sa[q]}' of context 'admin' may not" in logs, logs
    assert f"{p}-dev" in logs
    assert value_of(cluster, f"{p}-dev", "intruder") is None
    assert value_of(cluster, f"{q}-dev", "app") == "v1"
    TIMINGS["whole test"] = time.monotonic() - t_start
    TIMINGS["load average (1 min) at the end"] = os.getloadavg()[0]
    print("\npromotion e2e timings (s):", json.dumps(TIMINGS, indent=1), file=sys.stderr)

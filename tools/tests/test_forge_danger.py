"""Issue 28's acceptance on the real forge: a pull request that deletes a stack holding a
namespace and changes a Deployment's selector.

The repository is the one ``konfig init --no-examples`` makes, with konfig.yaml's
``dangers.confirm: [cascade, data]`` and its owners set to users of the local Gitea,
and two stacks applied to the control plane: ``gone`` (a Namespace with a Deployment
and its Service) and ``web`` (a Deployment, raw). The pull
request deletes ``gone`` and changes ``web``'s selector. Then, with the unmodified
workflows:

- the preview comment's first screen names both dangers (``cascade`` with the live
  count, ``replace``), the pull request carries ``konfig/danger:cascade`` and
  ``konfig/danger:replace`` and the status ``konfig/dangers`` is red, naming the line
  that confirms the cascade with its digest;
- the merge applies ``web`` (its replace needs no confirmation under this policy) but
  refuses to destroy ``gone``: the namespace and what it holds stay (the run fails,
  naming ``danger/confirm`` and the digest);
- the stack's owner writes ``/konfig confirm STACK DIGEST`` on the merged pull request:
  confirm.yml turns ``konfig/dangers`` green, and the next apply.yml run (a dispatch)
  destroys ``gone`` with that confirmation.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fixtures.cluster import Cluster
from fixtures.forge import Forge
from fixtures.rawstacks import deployment, namespace, resource, to_kcl
from kubeutil import unique
from test_forge_e2e import (
    E2E,
    GIT_ENV,
    RUN_TIMEOUT,
    _logs_for,
    _preview_seen,
    _visible,
    konfig_cli,
)

pytestmark = [pytest.mark.forge, pytest.mark.cluster, pytest.mark.timeout(3600)]

STATUS = "konfig/dangers"


def _web(ns: str, *, tier: str | None = None) -> str:
    """web's main.k: its Deployment, the selector with ``tier`` when given."""
    obj = deployment("web", ns)
    if tier is not None:
        obj["spec"]["selector"]["matchLabels"]["tier"] = tier
        obj["spec"]["template"]["metadata"]["labels"]["tier"] = tier
    ns_res = resource(namespace(ns))
    return f"resources = {to_kcl([ns_res, resource(obj, [ns_res['id']])])}\n"


def _gone(ns: str) -> str:
    return (
        "import base.pkg.models.frontend\n\n"
        "gone: frontend.Server {\n"
        '    name = "gone"\n'
        f'    namespace = "{ns}"\n'
        '    image = "docker.io/hashicorp/http-echo:1.0.0"\n'
        '    args = ["-listen=:5678", "-text=gone"]\n'
        '    resources = "tiny"\n'
        "    ports = [{port = 80, targetPort = 5678}]\n"
        "}\n"
    )


def test_a_namespace_deletion_and_a_selector_change_wait_for_a_confirmation_bound_to_the_digest(
    forge: Forge, cluster: Cluster, tmp_path: Path
) -> None:
    t_start = time.monotonic()
    timings: dict[str, float] = {}
    work = tmp_path / "config"
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
        "risky",
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

    # main: the policy, the owners (ann owns the project; the admin opens the pull
    # request), the two stacks, as the cluster runs them
    ann = unique("ann")
    ann_token = forge.create_user(ann)
    project = unique("risky")
    gone, web = f"appops/{project}/gone", f"appops/{project}/web"
    gone_ns, web_ns = f"{project}-gone", f"{project}-web"
    settings = work / "konfig.yaml"
    text = settings.read_text(encoding="utf-8")
    for line, login in (
        ("platform-team: [platform-admin]", forge.admin),
        ("shop-team: [shop-dev]", ann),
    ):
        assert f"    {line}\n" in text, line
        text = text.replace(f"    {line}\n", f"    {line.split(':')[0]}: [{login}]\n")
    settings.write_text(text + "\ndangers:\n  confirm: [cascade, data]\n", encoding="utf-8")
    files = {
        f"appops/{project}/project.yaml": f"name: {project}\nowners: [shop-team]\n",
        f"{gone}/stack.yaml": "name: gone\nkubernetes:\n  context: admin\n",
        f"{gone}/ci-test/settings.yaml": "kcl_options:\n  - key: env\n    value: dev\n",
        f"{gone}/main.k": _gone(gone_ns),
        f"{web}/stack.yaml": (
            "name: web\nkubernetes:\n  context: admin\napply:\n  replaceOnImmutable: true\n"
        ),
        f"{web}/kcl.yaml": "kcl_cli_configs:\n  file:\n    - main.k\n",
        f"{web}/main.k": _web(web_ns),
    }
    for rel, body in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(body, encoding="utf-8")
    for args in (("gen", "codeowners"), ("test", "--update", gone, web), ("check",)):
        res = konfig_cli(*args, cwd=work, kubeconfig=Path(os.devnull))
        assert res.returncode == 0, f"konfig {' '.join(args)}:\n{res.stdout}{res.stderr}"
    state.git("add", "-A")
    state.git("commit", "-qm", f"{project}: two stacks; dangers need a confirmation")
    main = state.git("rev-parse", "HEAD")
    applied = konfig_cli(
        "apply", "--yes", "--commit", main, gone, web, cwd=work, kubeconfig=cluster.kubeconfig
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr

    repo = state.repo = forge.import_repo(unique("risky"), work, state.git)
    forge.request("PUT", f"/repos/{repo}/actions/workflows/drift.yml/disable", expect=(204,))
    forge.request("PUT", f"/repos/{repo}/collaborators/{ann}", {"permission": "write"})
    kubeconfig = cluster.kubeconfig.read_text(encoding="utf-8")
    for name in ("KONFIG_PREVIEW_KUBECONFIG", "KONFIG_APPLY_KUBECONFIG", "KONFIG_DRIFT_KUBECONFIG"):
        forge.set_secret(repo, name, kubeconfig)
    forge.set_secret(repo, "KONFIG_PREVIEW_SOPS_AGE_KEY", keys["dev"].read_text())
    forge.set_secret(repo, "SOPS_AGE_KEY", keys["dev"].read_text() + keys["prod"].read_text())

    # the pull request: gone deleted, web's selector changed
    head = state.change(
        "risky",
        {gone: None, f"{web}/main.k": _web(web_ns, tier="front")},
        f"{project}: drop gone, select web's pods by tier",
        goldens=(web,),
    )
    t0 = time.monotonic()
    pr = state.open_pr("risky", f"{project}: drop gone, web by tier", head)

    def preview_posted() -> dict[str, Any] | None:
        comments = state.konfig_comments(pr.number)
        if comments and _preview_seen(comments[0]["body"], head):
            return comments[0]
        return None

    body = forge.wait(
        "the live preview comment",
        preview_posted,
        timeout=RUN_TIMEOUT,
        interval=2,
        logs=lambda: _logs_for(state, head),
    )["body"]
    timings["PR opened -> preview comment"] = time.monotonic() - t0
    first_screen = "\n".join(_visible(body)[:20])
    if "Dangers" not in first_screen:  # the jobs' logs say why
        print(state.logs(state.cluster_run(head)), file=sys.stderr)
    assert "Dangers" in first_screen, body
    cascade = [line for line in _visible(body)[:20] if line.startswith("| **cascade**")]
    assert cascade and gone in cascade[0] and "objects it holds" in cascade[0], first_screen
    replace = [line for line in _visible(body)[:20] if line.startswith("| **replace**")]
    assert replace and web in replace[0], first_screen

    def latest_status(sha: str) -> dict[str, Any] | None:
        found = [
            s for s in forge.get(f"/repos/{repo}/commits/{sha}/statuses")
            if s.get("context") == STATUS
        ]  # fmt: skip
        return max(found, key=lambda s: int(s["id"])) if found else None

    def status_is(state_name: str) -> dict[str, Any] | None:
        found = latest_status(head)
        return found if found and found["status"] == state_name else None

    red = forge.wait(
        "konfig/dangers red on the head",
        lambda: status_is("failure"),
        timeout=RUN_TIMEOUT,
        interval=2,
        logs=lambda: _logs_for(state, head),
    )
    timings["PR opened -> konfig/dangers"] = time.monotonic() - t0
    m = re.search(rf"/konfig confirm {re.escape(gone)} ([0-9a-f]{{16}})", str(red["description"]))
    assert m and "cascade" in str(red["description"]), red
    digest = m.group(1)
    assert f"{gone}={digest}" in body, body  # the comment names the same digest
    assert web not in str(red["description"])  # a replace needs no confirmation here
    labels = {x["name"] for x in forge.get(f"/repos/{repo}/issues/{pr.number}/labels")}
    assert {"konfig/danger:cascade", "konfig/danger:replace", "konfig/danger:destroy"} <= labels
    assert "konfig/danger:data" not in labels

    # the merge without a confirmation: web is replaced, gone is not destroyed
    merged = state.merge(pr)
    t1 = time.monotonic()
    run = state.wait_run("apply.yml", merged, "push")
    timings["merge -> apply (refused)"] = time.monotonic() - t1
    assert run["conclusion"] == "failure", state.logs(run)
    log = state.logs(run)
    assert "danger/confirm" in log and digest in log, log[-4000:]
    assert state.kubectl("get", "namespace", gone_ns, check=False).returncode == 0
    assert state.kubectl("-n", gone_ns, "get", "deployment", "gone", check=False).returncode == 0
    selector = state.kubectl(
        "-n", web_ns, "get", "deployment", "web", "-o", "jsonpath={.spec.selector.matchLabels}"
    ).stdout
    assert json.loads(selector).get("tier") == "front", selector

    # the owner confirms on the merged pull request: green, and the next run destroys it
    t2 = time.monotonic()
    forge.request(
        "POST",
        f"/repos/{repo}/issues/{pr.number}/comments",
        {"body": f"The namespace goes with all it holds.\n/konfig confirm {gone} {digest}\n"},
        token=ann_token,
    )
    forge.wait(
        "konfig/dangers green after the owner's confirmation",
        lambda: status_is("success"),
        timeout=RUN_TIMEOUT,
        interval=2,
        logs=lambda: "\n".join(
            state.logs(r)
            for r in forge.runs(repo)
            if Path(str(r.get("path", "")).split("@")[0]).name == "confirm.yml"
        ),
    )
    timings["confirmation comment -> konfig/dangers green"] = time.monotonic() - t2
    t3 = time.monotonic()
    again = state.dispatch("apply.yml")
    timings["dispatch -> destroyed"] = time.monotonic() - t3
    assert again["conclusion"] == "success", state.logs(again)
    state.kubectl("wait", "--for=delete", f"namespace/{gone_ns}", "--timeout=120s", check=False)
    left = state.kubectl("get", "namespace", gone_ns, "-o", "jsonpath={.status.phase}", check=False)
    assert left.returncode != 0 or left.stdout == "Terminating", left.stdout
    print(
        "\nforge danger e2e (s): "
        + json.dumps({k: round(v) for k, v in timings.items()})
        + f", whole test {time.monotonic() - t_start:.0f} s, load {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )

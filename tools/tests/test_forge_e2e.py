"""The pull-request loop, end to end, on a real forge: the unmodified workflows on Gitea.

A repository made from this template (its tracked files, without the project's own
CI workflows) is pushed to the local forge (``hack/forge``) with Actions off, then
Actions is switched on and the preview and apply kubeconfigs of a private local
control plane (``hack/cluster``) become repository secrets. A pull request runs in two
halves (docs/security.md): preview.yml (unprivileged, the PR's code) and
preview-cluster.yml (workflow_run, the default branch's, the credentials). Then, as a
user would:

- a PR changing one stack gets exactly one Konfig comment, the placeholder first,
  then the preview (changed field, why the stack is affected, status); a second push
  updates the same comment to the new head;
- merging runs the apply workflow and the cluster holds the new state;
- a PR touching a project base fans out over several shards;
- a PR that does not compile gets the file and line in the comment and fails;
- a stack deleted in a PR is destroyed once merged;
- a PR from a second user's fork gets compile/test/check only: no preview against the
  cluster, its results in the one comment (rendered by the privileged half), and a job
  it adds to its own preview.yml to print every secret gets none;
- a same-repository PR whose KCL, stack.yaml and preview.yml try to read the secrets
  (issue 26) gets none of their values into any log, artifact or the comment, and
  apply.yml dispatched on its branch refuses to run;
- a PR that gives webshop/prod its database (OpenTofu resources of the PostgreSQL
  provider, against a PostgreSQL on loopback from ``hack/tofu``) and changes the stack on
  the second cluster (http-echo/edge, context ``edge``) previews the database, the role
  and the Secret in the one comment, and the merge creates them; the PostgreSQL password
  (the repository secret's) and the role's generated one appear in no job log and no
  comment.

- then someone takes the role's login away by hand (``ALTER ROLE ... NOLOGIN``):
  drift.yml, dispatched on main, opens one issue naming webshop/prod's role and the
  field; with the login given back the next run closes it; no password in any log, the
  issue or its comment.

The repository holds every example stack. drift.yml is disabled in it (its schedule
must not fire during the test) and enabled only for the moment of a dispatch; the
runners get OpenTofu from the tool cache ``hack/forge`` links to this clone's
``.cache/tofu`` (actions/setup, ``tofu: auto``: only the jobs whose stacks include one
with Terraform resources install it).

Every wait is bounded and prints the jobs' logs when it runs out.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fixtures import timeline
from fixtures.cluster import Cluster, _cluster, _run_script, merged_kubeconfig
from fixtures.forge import Forge
from fixtures.tofu import Tofu
from kubeutil import unique

from konfig.pipeline import sharding

# Several workflow runs per test, each bounded by RUN_TIMEOUT (which prints the logs).
pytestmark = [pytest.mark.forge, pytest.mark.cluster, pytest.mark.timeout(4 * 3600)]

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- konfig:preview -->"
DRIFT_MARKER = "<!-- konfig:drift -->"
# The project's own CI (it runs `make test`), not part of what a user's repository runs.
NOT_IN_TEMPLATE = {".github/workflows/tools.yml", ".github/workflows/actions.yml"}
# Bounds for one workflow run on a loaded two-core machine (typical: about a minute).
RUN_TIMEOUT = float(os.environ.get("KONFIG_FORGE_RUN_TIMEOUT", "900"))
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Konfig E2E",
    "GIT_AUTHOR_EMAIL": "e2e@forge.localhost",
    "GIT_COMMITTER_NAME": "Konfig E2E",
    "GIT_COMMITTER_EMAIL": "e2e@forge.localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}
TIMINGS: dict[str, float] = {}
DEV = "appops/guestbook/dev"
SHOP = "appops/webshop/prod"
EDGE = "appops/http-echo/edge"
ECHO_DEV = "appops/http-echo/dev"
# the privileged half's workflows and their jobs that ask the forge which pull request a
# run is for (`konfig pr`)
PRIVILEGED = ("preview-requested.yml", "preview-cluster.yml")
PULL_REQUEST_JOBS = ("preview and report", "pull request and changed stacks")

# konfig.yaml `owners.teams` of the template: team -> its placeholder login
TEAMS = {
    "platform-team": "platform-admin",
    "guestbook-team": "guestbook-dev",
    "shop-team": "shop-dev",
    "data-team": "data-dev",
}
OWNERS_MARKER = "<!-- konfig:owners -->"
# The line that gives webshop/prod its database: main holds the stack without it, the
# database PR adds it back.
DATABASE_LINE = '    database = {name = "storefront", extensions = ["pgcrypto"]}\n'


def konfig_cli(
    *args: str,
    cwd: Path,
    kubeconfig: Path,
    age_key: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECONFIG=str(kubeconfig), NO_COLOR="1")
    env.pop("SOPS_AGE_KEY", None)
    env.pop("SOPS_AGE_KEY_FILE", None)
    if age_key is not None:
        env["SOPS_AGE_KEY_FILE"] = str(age_key)
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "konfig", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@dataclass
class PullRequest:
    number: int
    branch: str
    head: str


@dataclass
class E2E:
    """The repository under test on the forge, its local clone and the cluster."""

    forge: Forge
    repo: str
    work: Path
    cluster: Cluster
    edge: Cluster
    tofu: Tofu
    pg_password: str  # the superuser's: the canary of the database test
    kubectl_env: dict[str, str] = field(default_factory=dict)
    terraform_env: str = ""  # the workflows' provider credentials (one JSON secret each)
    canaries: dict[str, list[str]] = field(default_factory=dict)  # every secret's values
    owners: dict[str, tuple[str, str]] = field(default_factory=dict)  # team -> login, token

    def git(self, *args: str, cwd: Path | None = None) -> str:
        res = subprocess.run(
            ["git", *args],
            cwd=cwd or self.work,
            env=dict(os.environ, **GIT_ENV),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, f"git {' '.join(args)}:\n{res.stdout}{res.stderr}"
        return res.stdout.strip()

    def change(
        self,
        branch: str,
        edits: dict[str, str | None],
        message: str,
        *,
        goldens: tuple[str, ...] = (),
    ) -> str:
        """Commit ``edits`` (path -> new text, None deletes a file or folder) on ``branch``
        (created from main when new), after `konfig test --update` of the ``goldens``
        stacks as their author would, and push it; returns the new head."""
        branches = self.git("branch", "--list", branch)
        if branches:
            self.git("checkout", "-q", branch)
        else:
            self.git("fetch", "-q", "origin", "main")
            self.git("checkout", "-q", "-B", branch, "origin/main")
        for rel, text in edits.items():
            path = self.work / rel
            if text is None:
                self.git("rm", "-rq", rel)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                self.git("add", rel)
        for stack in goldens:
            res = konfig_cli("test", "--update", stack, cwd=self.work, kubeconfig=Path(os.devnull))
            assert res.returncode == 0, res.stdout + res.stderr
            self.git("add", f"{stack}/ci-test")
        self.git("commit", "-qm", message)
        self.git("push", "-q", "origin", f"{branch}:{branch}")
        return self.git("rev-parse", "HEAD")

    def open_pr(self, branch: str, title: str, head: str) -> PullRequest:
        data = self.forge.request(
            "POST", f"/repos/{self.repo}/pulls", {"head": branch, "base": "main", "title": title}
        )
        return PullRequest(int(data["number"]), branch, head)

    def konfig_comments(self, number: int) -> list[dict[str, Any]]:
        comments = self.forge.paged(f"/repos/{self.repo}/issues/{number}/comments")
        return [c for c in comments if MARKER in (c.get("body") or "")]

    def wait_run(self, workflow: str, head: str, event: str) -> dict[str, Any]:
        return self.forge.wait_run(
            self.repo, workflow=workflow, head_sha=head, event=event, timeout=RUN_TIMEOUT
        )

    def cluster_runs(self, head: str) -> list[dict[str, Any]]:
        """Both finished runs of the privileged half (workflow_run) for the pull request
        at ``head``: preview-requested.yml's, started when the unprivileged run was
        requested (`preview and report`: the first comment, a one-shard live preview),
        and preview-cluster.yml's, started when it completed (`pull request and changed
        stacks`, the fan-out). Gitea records such a run at the default branch's commit; its first
        job names the head it found (`konfig pr`)."""
        seen: dict[int, bool] = {}

        def find() -> list[dict[str, Any]] | None:
            runs = [
                run
                for run in self.forge.runs(self.repo, event="workflow_run")
                if Path(str(run.get("path", "")).split("@")[0]).name in PRIVILEGED
            ]
            # Gitea sends a failed run's workflow_run twice: wait for every privileged
            # run to end, so the comment read next is the last one written.
            if any(run.get("status") != "completed" for run in runs):
                return None
            found = []
            for run in runs:
                jobs = self.forge.jobs(self.repo, int(run["id"]))
                if not all(j.get("status") == "completed" for j in jobs):
                    continue
                rid = int(run["id"])
                if rid not in seen:
                    first = [j for j in jobs if j["name"] in PULL_REQUEST_JOBS]
                    seen[rid] = any(
                        f" at {head} " in self.forge.job_log(self.repo, int(j["id"]))
                        for j in first
                        if j.get("conclusion") != "skipped"
                    )
                if seen[rid]:
                    found.append(run)
            # both runs: the completed one comes once the unprivileged run ended
            return found if len(found) >= 2 else None

        return self.forge.wait(
            f"the privileged runs for {head}",
            find,
            timeout=RUN_TIMEOUT,
            interval=2,
            logs=lambda: _logs_for(self, head),
        )

    def cluster_run(self, head: str) -> dict[str, Any]:
        """The privileged run that previewed ``head`` against the clusters (its
        konfig-preview-* artifacts: the requested run's `preview and report` for one
        shard of work, the completed run's shards for more), or without a live preview
        (a fork's pull request) the completed run, which wrote the final comment."""
        runs = self.cluster_runs(head)
        previewed = [
            r for r in runs if any(a.startswith("konfig-preview-") for a in self.artifacts(r))
        ]
        if previewed:
            return previewed[0]
        [completed] = [r for r in runs if "pull request and changed stacks" in self.ran(r)]
        return completed

    def ran(self, run: dict[str, Any]) -> set[str]:
        """The names of ``run``'s jobs that were not skipped."""
        return {
            j["name"]
            for j in self.forge.jobs(self.repo, int(run["id"]))
            if j.get("conclusion") != "skipped"
        }

    def artifact_texts(self, run: dict[str, Any]) -> dict[str, str]:
        """Every file of every artifact of ``run``, by ``artifact/path``, as text."""
        data = self.forge.get(f"/repos/{self.repo}/actions/runs/{run['id']}/artifacts")
        found: dict[str, str] = {}
        for artifact in data.get("artifacts") or []:
            blob = _artifact_zip(self.forge, self.repo, int(artifact["id"]))
            with zipfile.ZipFile(io.BytesIO(blob)) as archive:
                for member in archive.namelist():
                    found[f"{artifact['name']}/{member}"] = archive.read(member).decode(
                        errors="replace"
                    )
        return found

    def jobs(self, run: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {j["name"]: j for j in self.forge.jobs(self.repo, int(run["id"]))}

    def artifacts(self, run: dict[str, Any]) -> set[str]:
        data = self.forge.get(f"/repos/{self.repo}/actions/runs/{run['id']}/artifacts")
        return {a["name"] for a in data.get("artifacts") or []}

    def logs(self, run: dict[str, Any]) -> str:
        return self.forge.run_logs(self.repo, int(run["id"]))

    def merge(self, pr: PullRequest) -> str:
        self.forge.request("POST", f"/repos/{self.repo}/pulls/{pr.number}/merge", {"Do": "merge"})
        branch = self.forge.get(f"/repos/{self.repo}/branches/main")
        return str(branch["commit"]["id"])

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl(*args, check=check)

    def dispatch(self, workflow: str, ref: str = "main") -> dict[str, Any]:
        """Run ``workflow`` on main as a user does from the Actions page
        (``workflow_dispatch``) and wait for the run to finish.

        The workflow is disabled in this repository (its schedule must not fire
        mid-test) and Gitea dispatches no disabled workflow: it is enabled for the
        dispatch only. The run is made by the dispatch request itself, so it runs
        once the workflow is disabled again; its schedule never does.
        """
        path = f"/repos/{self.repo}/actions/workflows/{workflow}"
        disabled = self.forge.get(path)["state"] != "active"
        if disabled:
            self.forge.request("PUT", f"{path}/enable", expect=(204,))
        try:
            details = self.forge.request(
                "POST", f"{path}/dispatches?return_run_details=true", {"ref": ref}
            )
        finally:
            if disabled:
                self.forge.request("PUT", f"{path}/disable", expect=(204,))
        run_id = int(details["workflow_run_id"])

        def done() -> dict[str, Any] | None:
            run: dict[str, Any] = self.forge.get(f"/repos/{self.repo}/actions/runs/{run_id}")
            if run.get("status") != "completed":
                return None
            jobs = self.forge.jobs(self.repo, run_id)
            return run if all(j.get("status") == "completed" for j in jobs) else None

        return self.forge.wait(
            f"the dispatched {workflow} run {run_id} to complete",
            done,
            timeout=RUN_TIMEOUT,
            interval=1,
            logs=lambda: self.forge.run_logs(self.repo, run_id),
        )

    def drift_issues(self, state: str = "open") -> list[dict[str, Any]]:
        """The issues carrying the drift marker (pull requests left out)."""
        issues = self.forge.paged(f"/repos/{self.repo}/issues?state={state}&type=issues")
        return [i for i in issues if DRIFT_MARKER in (i.get("body") or "").splitlines()]

    def role_password(self) -> str:
        """The database role's password, kept only in the Secret the Deployment reads."""
        encoded = self.kubectl(
            "-n",
            "webshop-prod",
            "get",
            "secret",
            "storefront-db",
            "-o",
            "jsonpath={.data.PGPASSWORD}",
        ).stdout
        return base64.b64decode(encoded).decode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _artifact_zip(forge: Forge, repo: str, artifact_id: int) -> bytes:
    """An artifact's zip: the API answers 302 to a signed URL on the forge's public
    name (forge.localhost, which only the runners resolve): fetched on loopback."""
    req = urllib.request.Request(
        f"{forge.api_url}/repos/{repo}/actions/artifacts/{artifact_id}/zip"
    )
    req.add_header("Authorization", f"token {forge.token}")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(req, timeout=60)
        raise AssertionError("the artifact download did not redirect")
    except urllib.error.HTTPError as e:
        assert e.code == 302, e.code
        location = e.headers["Location"]
    parts = urllib.parse.urlsplit(location)
    api = urllib.parse.urlsplit(forge.api_url)
    direct = urllib.parse.urlunsplit((api.scheme, api.netloc, parts.path, parts.query, ""))
    with urllib.request.urlopen(direct, timeout=60) as resp:
        return bytes(resp.read())


def _forms(value: str) -> list[str]:
    """A secret and the base64 spellings a log, a Spec or a Secret could carry."""
    raw = value.encode()
    out = [value, base64.b64encode(raw).decode()]
    for shift in (1, 2):  # base64 of the value inside a longer text
        out.append(base64.b64encode(b"x" * shift + raw).decode()[4:-4])
    return [o for o in out if len(o) >= 8]


def _leaks(canaries: dict[str, list[str]], texts: dict[str, str]) -> list[str]:
    found = []
    for what, values in canaries.items():
        for value in values:
            for form in _forms(value):
                found += [f"{what} in {where}" for where, text in texts.items() if form in text]
    return sorted(set(found))


def template_files() -> list[str]:
    """The template's tracked files (their working-tree content), as a user copies them."""
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [f for f in out.split("\0") if f and f not in NOT_IN_TEMPLATE and (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def e2e_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane of this module's own: the example stacks' namespaces and
    inventories must not meet other tests' objects."""
    cluster_dir = tmp_path_factory.mktemp("e2e-cluster")
    try:
        out = _run_script("up", cluster_dir, 3600)
        yield Cluster(
            kubeconfig=Path(out.strip().splitlines()[-1]),
            admin_context="admin",
            restricted_context="restricted",
            dir=cluster_dir,
        )
    finally:
        subprocess.run(
            [str(ROOT / "hack" / "cluster"), "down"],
            env=dict(os.environ, KONFIG_CLUSTER_DIR=str(cluster_dir)),
            capture_output=True,
            timeout=120,
        )


@pytest.fixture(scope="module")
def e2e_edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The second cluster (context ``edge``) of http-echo/edge, this module's own."""
    yield from _cluster(tmp_path_factory, "edge")


@pytest.fixture(scope="module")
def e2e(
    forge: Forge,
    e2e_cluster: Cluster,
    e2e_edge: Cluster,
    tofu: Tofu,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[E2E]:
    scratch = tmp_path_factory.mktemp("e2e")
    work = scratch / "config"
    work.mkdir()
    for rel in template_files():
        dest = work / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes((ROOT / rel).read_bytes())
        dest.chmod((ROOT / rel).stat().st_mode)
    # webshop/prod without its database on main: the database PR adds it, as an app
    # developer would.
    shop_main = work / SHOP / "main.k"
    assert DATABASE_LINE in shop_main.read_text(encoding="utf-8")
    shop_main.write_text(shop_main.read_text(encoding="utf-8").replace(DATABASE_LINE, ""))
    # One stack a shard (the default is ten), so that a PR of a few stacks fans out
    # (test_shared_base_change_fans_out_over_shards); a one-stack PR runs in one.
    settings = work / "konfig.yaml"
    settings.write_text(
        settings.read_text(encoding="utf-8") + "\nsharding:\n  stacksPerShard: 1\n",
        encoding="utf-8",
    )
    # Each team of konfig.yaml `owners` is one user of the forge (the template names
    # placeholder logins), and CODEOWNERS follows, as a team adopting the template does.
    owners: dict[str, tuple[str, str]] = {}
    text = settings.read_text(encoding="utf-8")
    for team, placeholder in TEAMS.items():
        login = unique(team.split("-")[0])
        owners[team] = (login, forge.create_user(login))
        line = f"    {team}: [{placeholder}]\n"
        assert line in text, f"konfig.yaml has no {line!r}"
        text = text.replace(line, f"    {team}: [{login}]\n")
    settings.write_text(text, encoding="utf-8")
    gen = konfig_cli("gen", "codeowners", cwd=work, kubeconfig=Path(os.devnull))
    assert gen.returncode == 0, gen.stderr
    # The example secrets are encrypted for keys nobody holds: two test keys of our own
    # (outside the repository), one for production's recipients and one for the others
    # (docs/secrets.md), the example files re-created for them, their goldens brought up
    # to date, as a user adopting the template would. Never printed: the preview gets
    # the dev key (KONFIG_PREVIEW_SOPS_AGE_KEY), apply both (SOPS_AGE_KEY).
    dev_key, prod_key = scratch / "dev-age.key", scratch / "prod-age.key"
    recipients = []
    for key in (dev_key, prod_key):
        keygen = konfig_cli(
            "secrets", "keygen", "-o", str(key), cwd=work, kubeconfig=Path(os.devnull)
        )
        assert keygen.returncode == 0, keygen.stderr
        recipients.append(keygen.stdout.strip())
    age_key = scratch / "age.key"
    age_key.write_text(dev_key.read_text() + prod_key.read_text(), encoding="utf-8")
    age_key.chmod(0o600)
    rekey = subprocess.run(
        [
            sys.executable,
            str(ROOT / "hack" / "demo-secrets"),
            recipients[0],
            str(work),
            "--prod",
            recipients[1],
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rekey.returncode == 0, rekey.stderr
    rekeyed = rekey.stdout.split()
    assert rekeyed, "hack/demo-secrets re-keyed no stack"
    goldens = sorted({*rekeyed, SHOP})
    updated = konfig_cli("test", "--update", "--", *goldens, cwd=work, kubeconfig=Path(os.devnull))
    assert updated.returncode == 0, updated.stdout + updated.stderr
    pg_password = tofu.superuser_password
    state = E2E(forge, "", work, e2e_cluster, e2e_edge, tofu, pg_password, owners=owners)
    state.git("init", "-q", "-b", "main")
    state.git("add", "-A")
    state.git("commit", "-qm", "Konfig template")
    main = state.git("rev-parse", "HEAD")
    # Actions off while importing, or every workflow on `push` would run on the import.
    repo = state.repo = forge.import_repo(unique("config"), work, state.git)
    for login, _ in owners.values():
        forge.request("PUT", f"/repos/{repo}/collaborators/{login}", {"permission": "write"})
    # The drift schedule (every six hours) must not fire in this repository mid-test:
    # Gitea skips the schedules of a disabled workflow (services/actions/schedule_tasks.go).
    forge.request("PUT", f"/repos/{repo}/actions/workflows/drift.yml/disable", expect=(204,))
    drift = forge.get(f"/repos/{repo}/actions/workflows/drift.yml")
    assert drift["state"] == "disabled_manually", drift
    # Both clusters' contexts (admin, restricted; edge, edge-restricted) in one file.
    kubeconfig = merged_kubeconfig(e2e_cluster, e2e_edge)
    kubeconfig_file = scratch / "kubeconfig"
    kubeconfig_file.write_text(kubeconfig, encoding="utf-8")
    kubeconfig_file.chmod(0o600)
    forge.set_secret(repo, "KONFIG_PREVIEW_KUBECONFIG", kubeconfig)
    forge.set_secret(repo, "KONFIG_APPLY_KUBECONFIG", kubeconfig)
    forge.set_secret(repo, "KONFIG_DRIFT_KUBECONFIG", kubeconfig)
    forge.set_secret(repo, "SOPS_AGE_KEY", age_key.read_text(encoding="utf-8"))
    forge.set_secret(repo, "KONFIG_PREVIEW_SOPS_AGE_KEY", dev_key.read_text(encoding="utf-8"))
    # webshop/prod's stack.yaml names the variables; one secret per workflow holds them.
    terraform_env = json.dumps(
        {
            "WEBSHOP_PROD_PGHOST": tofu.pg_host,
            "WEBSHOP_PROD_PGPORT": tofu.pg_port,
            "WEBSHOP_PROD_PGUSER": tofu.pg_superuser,
            "WEBSHOP_PROD_PGPASSWORD": pg_password,
        },
        indent=1,
    )
    forge.set_secret(repo, "KONFIG_PREVIEW_TERRAFORM_ENV", terraform_env)
    forge.set_secret(repo, "KONFIG_APPLY_TERRAFORM_ENV", terraform_env)
    forge.set_secret(repo, "KONFIG_DRIFT_TERRAFORM_ENV", terraform_env)
    state.terraform_env = terraform_env
    # The forge's runners reach no registry: OpenTofu and the provider are the ones
    # hack/tofu built (actions/setup `tofu-install: build`, the air-gapped path).
    forge.set_variable(repo, "KONFIG_TOFU_INSTALL", "build")
    # Every secret value the workflows hold: none may appear in any log, artifact,
    # comment or summary (test_a_hostile_pull_request_reaches_no_secret).
    state.canaries = {
        "age keys": [
            line.strip()
            for line in age_key.read_text(encoding="utf-8").splitlines()
            if line.startswith("AGE-SECRET-KEY-")
        ],
        "kubeconfig credentials": [
            line.split(":", 1)[1].strip()
            for line in kubeconfig.splitlines()
            if line.strip().startswith(("token:", "client-key-data:"))
        ],
        "PostgreSQL password": [pg_password],
    }
    assert all(state.canaries.values()), state.canaries

    # The example stacks' ServiceMonitors need the Prometheus Operator's CRDs, as a cluster
    # that runs them has: the vendored ones konfig.yaml generates the schemas from.
    crds = sorted((ROOT / "base/pkg/k8s/crd/monitoring_coreos_com/vendor").glob("*.yaml"))
    assert crds
    for cluster in (e2e_cluster, e2e_edge):
        for crd in crds:
            cluster.kubectl("apply", "--server-side", "-f", str(crd))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    # The cluster runs what main declares (as in a repository adopting Konfig), so a PR's
    # preview shows updates of live objects, and the first merge applies only its change.
    t0 = time.monotonic()
    res = konfig_cli(
        "apply",
        "--all",
        "--yes",
        "--commit",
        main,
        cwd=work,
        kubeconfig=kubeconfig_file,
        age_key=age_key,
        extra_env={
            "KONFIG_TOFU": str(tofu.tofu),
            "TF_CLI_CONFIG_FILE": str(tofu.cli_config),
            "KONFIG_TOFU_LOCK_FILE": str(tofu.lock_file),
            "KONFIG_TOFU_WORKDIR": str(scratch / "tofu-work"),
            "KONFIG_TERRAFORM_ENV": terraform_env,
        },
    )
    assert res.returncode == 0, res.stdout + res.stderr
    TIMINGS["pre-apply of every example stack"] = time.monotonic() - t0
    assert forge.runs(repo) == [], "a workflow ran on the import, with Actions off"
    yield state
    print("\nforge e2e timings (s):", json.dumps(TIMINGS, indent=1), file=sys.stderr)


def _record_breakdown(
    e2e: E2E, what: str, runs: list[dict[str, Any]], t0: float, end: float
) -> None:
    """Where the round's time went (fixtures/timeline.py), into TIMINGS and stderr."""
    jobs = []
    for run in runs:
        name = Path(str(run.get("path", "")).split("@")[0]).name
        for job in e2e.forge.jobs(e2e.repo, int(run["id"])):
            jobs.append(timeline.job_of(name, job, e2e.forge.job_log(e2e.repo, int(job["id"]))))
    for kind, seconds in timeline.breakdown(jobs, t0, end).items():
        TIMINGS[f"{what} -> preview comment, critical path: {kind}"] = round(seconds, 1)
    print(f"\n{what}: the round's jobs\n{timeline.table(jobs, t0)}", file=sys.stderr)


def _preview_seen(body: str, head: str) -> bool:
    """The final comment for ``head``: not the placeholder, and not the offline preview
    a live one replaces (a fork's offline preview is final)."""
    lines = _visible(body)
    return (
        f"for `{head[:12]}`" in body
        and not any("running" in line for line in lines[:1])
        and not (lines and lines[0].endswith("replaces this)"))
    )


def _offline_first(body: str, head: str) -> bool:
    """A trusted pull request's first comment: the offline preview the live one replaces."""
    lines = _visible(body)
    return (
        f"for `{head[:12]}`" in body
        and bool(lines)
        and lines[0].startswith("offline: render diff of base")
        and lines[0].endswith("the live preview against the clusters replaces this)")
    )


def _visible(body: str) -> list[str]:
    """The comment's lines without the hidden marker."""
    return [line for line in body.splitlines() if not line.startswith("<!--")]


def test_one_stack_pr_gets_one_comment_placeholder_first_then_updated(e2e: E2E) -> None:
    main_k = e2e.work / "appops/guestbook/dev/main.k"
    text = main_k.read_text().replace(
        'frontend_app: frontend.Server {\n    namespace = "guestbook-dev"\n',
        'frontend_app: frontend.Server {\n    namespace = "guestbook-dev"\n    replicas = 2\n',
    )
    assert "replicas = 2" in text
    head = e2e.change(
        "one-stack", {"appops/guestbook/dev/main.k": text}, "guestbook dev: 2", goldens=(DEV,)
    )
    t0, cpu0, wall0 = time.monotonic(), e2e.forge.cpu_seconds(), time.time()
    pr = e2e.open_pr("one-stack", "guestbook dev: two frontends", head)

    # Watch the comments as the run goes: never more than one, placeholder first.
    seen: list[tuple[float, int, str]] = []

    def preview_posted() -> dict[str, Any] | None:
        comments = e2e.konfig_comments(pr.number)
        assert len(comments) <= 1, f"more than one Konfig comment: {comments}"
        if comments:
            c = comments[0]
            if not seen or seen[-1][2] != c["body"]:
                seen.append((time.monotonic() - t0, int(c["id"]), c["body"]))
            if _preview_seen(c["body"], head):
                return c
        return None

    comment = e2e.forge.wait(
        "the preview comment",
        preview_posted,
        timeout=RUN_TIMEOUT,
        interval=0.3,
        logs=lambda: _logs_for(e2e, head),
    )
    TIMINGS["PR opened -> placeholder comment"] = seen[0][0]
    TIMINGS["PR opened -> preview comment"] = time.monotonic() - t0
    TIMINGS["PR opened -> preview comment: forge CPU seconds"] = e2e.forge.cpu_seconds() - cpu0
    TIMINGS["load average (1 min) at the preview comment"] = os.getloadavg()[0]
    seen_at = time.time()
    first_body = seen[0][2]
    # the first comment is the offline preview (issue 29), then the live one replaces it
    assert _offline_first(first_body, head), first_body
    assert _visible(body := comment["body"])[0] == "live preview against the clusters", body
    assert {cid for _, cid, _ in seen} == {int(comment["id"])}
    assert "appops/guestbook/dev" in body
    assert "appops/guestbook/dev/main.k" in body  # why the stack is affected
    assert "replicas" in body and "changes" in body, body
    assert "appops/guestbook/prod" not in body
    run = e2e.wait_run("preview.yml", head, "pull_request")
    TIMINGS["PR opened -> run completed"] = time.monotonic() - t0
    assert run["conclusion"] == "success", e2e.logs(run)
    assert len(e2e.konfig_comments(pr.number)) == 1
    _record_breakdown(e2e, "PR opened", [run, *e2e.cluster_runs(head)], wall0, seen_at)

    # A second push: the same comment now reports the new head.
    text2 = text.replace("replicas = 2", "replicas = 3")
    head2 = e2e.change(
        "one-stack", {"appops/guestbook/dev/main.k": text2}, "guestbook dev: 3", goldens=(DEV,)
    )
    t1, cpu1, wall1 = time.monotonic(), e2e.forge.cpu_seconds(), time.time()
    offline2: list[float] = []

    def second_posted() -> dict[str, Any] | None:
        for c in e2e.konfig_comments(pr.number):
            if not offline2 and _offline_first(c["body"], head2):
                offline2.append(time.monotonic() - t1)
            if _preview_seen(c["body"], head2):
                return c
        return None

    updated = e2e.forge.wait(
        "the comment to report the second push",
        second_posted,
        timeout=RUN_TIMEOUT,
        interval=0.3,
        logs=lambda: _logs_for(e2e, head2),
    )
    TIMINGS["second push -> preview comment"] = time.monotonic() - t1
    TIMINGS["second push -> preview comment: forge CPU seconds"] = e2e.forge.cpu_seconds() - cpu1
    # the offline comment comes first (seen by the 0.3 s poll; absent: replaced before)
    TIMINGS["second push -> first (offline) comment"] = offline2[0] if offline2 else -1.0
    seen2_at = time.time()
    TIMINGS["load average (1 min) at the second comment"] = os.getloadavg()[0]
    assert int(updated["id"]) == int(comment["id"])
    assert len(e2e.konfig_comments(pr.number)) == 1
    run2 = e2e.wait_run("preview.yml", head2, "pull_request")
    assert run2["conclusion"] == "success", e2e.logs(run2)
    _record_breakdown(e2e, "second push", [run2, *e2e.cluster_runs(head2)], wall1, seen2_at)

    # Merge: the apply workflow brings the cluster to the new state.
    merged = e2e.merge(pr)
    t2 = time.monotonic()
    applied = e2e.wait_run("apply.yml", merged, "push")
    TIMINGS["merge -> apply run completed"] = time.monotonic() - t2
    assert applied["conclusion"] == "success", e2e.logs(applied)
    replicas = e2e.kubectl(
        "-n", "guestbook-dev", "get", "deployment", "guestbook", "-o", "jsonpath={.spec.replicas}"
    ).stdout
    assert replicas == "3"


def test_database_pr_previews_then_creates_it_and_no_password_is_shown(e2e: E2E) -> None:
    """webshop/prod gets its database (Terraform resources) and http-echo/edge (the second
    cluster) a second replica in one PR: one comment shows both, the merge applies both."""
    shop_main = e2e.work / SHOP / "main.k"
    shop = (ROOT / SHOP / "main.k").read_text(encoding="utf-8")
    assert DATABASE_LINE in shop
    edge_main = e2e.work / EDGE / "main.k"
    edge = edge_main.read_text(encoding="utf-8").replace(
        'namespace = "http-echo-edge"\n', 'namespace = "http-echo-edge"\n    replicas = 2\n'
    )
    assert "replicas = 2" in edge
    head = e2e.change(
        "database",
        {f"{SHOP}/main.k": shop, f"{EDGE}/main.k": edge},
        "webshop prod: a database; http-echo edge: 2",
        goldens=(SHOP, EDGE),
    )
    assert shop_main.read_text(encoding="utf-8") == shop
    t0 = time.monotonic()
    pr = e2e.open_pr("database", "webshop prod: a PostgreSQL database", head)
    comment = e2e.forge.wait(
        "the database PR's preview comment",
        lambda: next(
            (c for c in e2e.konfig_comments(pr.number) if _preview_seen(c["body"], head)), None
        ),
        timeout=RUN_TIMEOUT,
        logs=lambda: _logs_for(e2e, head),
    )
    TIMINGS["database PR opened -> preview comment"] = time.monotonic() - t0
    run = e2e.wait_run("preview.yml", head, "pull_request")
    logs = e2e.logs(run)
    assert run["conclusion"] == "success", logs
    [comment] = e2e.konfig_comments(pr.number)
    body = comment["body"]
    for expected in (
        # both stacks, each on its own cluster
        f"| `{SHOP}` |",
        f"| `{EDGE}` |",
        "| update | `Deployment http-echo-edge/http-echo` |",
        "+  replicas: 2",
        # the database, its owner role and the connection Secret, created
        "| create | `postgresql_database storefront` | not in the Terraform state |",
        "| create | `postgresql_role storefront` | not in the Terraform state |",
        "| create | `Secret webshop-prod/storefront-db` | not in the cluster |",
        "+name: storefront\n+owner: storefront",
        # the role's password: write-only in the plan, masked in the Secret
        "+password_wo: (write-only)",
        "+  PGPASSWORD: '***'",
        # the Deployment reads it
        "+            - secretRef:\n+                name: storefront-db",
    ):
        assert expected in body, f"{expected!r} not in the comment:\n{body}"
    assert e2e.pg_password not in body and e2e.pg_password not in logs
    # The preview job asked konfig whether OpenTofu takes part for its own stacks
    # (actions/setup, `tofu: auto`): the job with webshop/prod installed it from the
    # runners' tool cache (built nothing). Both stacks hash to one shard of the two
    # (konfig.pipeline.sharding), so one job previews both.
    cluster = e2e.cluster_run(head)
    logs += e2e.logs(cluster)
    assert e2e.pg_password not in logs
    assert sharding.shard_of(SHOP, 2) == sharding.shard_of(EDGE, 2)
    shard_logs = {
        name: e2e.forge.job_log(e2e.repo, int(job["id"]))
        for name, job in e2e.jobs(cluster).items()
        if name.startswith("preview ") and job["conclusion"] == "success"
    }
    [shop_log] = [t for t in shard_logs.values() if SHOP in t and "OpenTofu takes part" in t]
    assert f'"{EDGE}"' in shop_log, shop_log
    assert f"tofu: auto: OpenTofu takes part for {SHOP}" in shop_log, shop_log
    assert "OpenTofu 1.12.6" in shop_log and "building OpenTofu" not in shop_log, shop_log

    merged = e2e.merge(pr)
    t1 = time.monotonic()
    applied = e2e.wait_run("apply.yml", merged, "push")
    TIMINGS["database merge -> apply run completed"] = time.monotonic() - t1
    apply_logs = e2e.logs(applied)
    assert applied["conclusion"] == "success", apply_logs
    # The database, its owner role and the extension exist; the role logs in with the
    # password kept only in the Secret the Deployment reads.
    tofu = e2e.tofu
    assert tofu.psql("SELECT rolname FROM pg_roles WHERE rolname = 'storefront'") == "storefront"
    assert (
        tofu.psql("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'storefront'")
        == "storefront"
    )
    assert tofu.psql("SELECT extname FROM pg_extension", dbname="storefront").count("pgcrypto")
    role_password = e2e.role_password()
    assert len(role_password) >= 16
    login = subprocess.run(
        ["psql", "-X", "-w", "-At", "-U", "storefront", "-d", "storefront", "-c", "SELECT 1"],
        env=tofu.env({"PGPASSWORD": role_password, "PGPASSFILE": os.devnull}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (login.returncode, login.stdout.strip()) == (0, "1"), login.stderr
    env_from = e2e.kubectl(
        "-n",
        "webshop-prod",
        "get",
        "deployment",
        "storefront",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].envFrom[*].secretRef.name}",
    ).stdout
    assert "storefront-db" in env_from.split(), env_from
    # The second cluster follows too.
    replicas = e2e.edge.kubectl(
        "-n", "http-echo-edge", "get", "deployments", "-o", "jsonpath={.items[*].spec.replicas}"
    ).stdout
    assert replicas.split() == ["2"], replicas
    # Neither password in any log of either run, nor in the comment.
    every_log = logs + apply_logs + "".join(e2e.logs(r) for r in e2e.forge.runs(e2e.repo))
    for secret in (e2e.pg_password, role_password):
        assert secret not in every_log
        assert all(secret not in (c.get("body") or "") for c in e2e.konfig_comments(pr.number))


def test_drift_workflow_opens_an_issue_for_a_role_changed_by_hand_then_closes_it(
    e2e: E2E,
) -> None:
    """After the database PR's merge someone takes the role's login away by hand
    (psql: ``ALTER ROLE ... NOLOGIN``). drift.yml, dispatched on main as a user would,
    opens one issue naming webshop/prod's Terraform role and the field; once the login
    is given back, a run without the provider credentials leaves the issue open (the
    role was not checked) and the next run with them closes that same issue. Neither password (the
    superuser's, in the drift workflow's secret; the role's, in the cluster) appears in
    the job logs, the issue or its comment."""
    tofu = e2e.tofu
    role = "cyrilgdn/postgresql:postgresql_role:storefront"
    login = "SELECT rolcanlogin FROM pg_roles WHERE rolname = 'storefront'"
    assert tofu.psql(login) == "t", "the database PR's merge creates the role"
    role_password = e2e.role_password()
    assert e2e.drift_issues("all") == []
    tofu.psql('ALTER ROLE "storefront" NOLOGIN')

    t0 = time.monotonic()
    run = e2e.dispatch("drift.yml")
    TIMINGS["drift dispatched (a role changed by hand) -> run completed"] = time.monotonic() - t0
    logs = e2e.logs(run)
    assert run["conclusion"] == "success", logs
    [issue] = e2e.drift_issues()
    body = issue["body"]
    for expected in (
        "## Konfig: drift in 1 stack",
        f"| `{SHOP.removeprefix('appops/')}` |",
        # the Terraform resource, the field, the live value
        f"| `{role}` | changed | `login` | `false` |",
    ):
        assert expected in body, f"{expected!r} not in the drift issue:\n{body}\n{logs}"
    # OpenTofu read the role (drift.yml: `tofu: auto` over every stack), read-only.
    assert f"tofu: auto: OpenTofu takes part for {SHOP}" in logs, logs
    assert tofu.psql(login) == "f"
    # The issue is the job token's (gitea-actions): the next run must find it.
    assert issue["user"]["login"] == "gitea-actions", issue["user"]

    tofu.psql('ALTER ROLE "storefront" LOGIN')
    # Without the provider credentials the role is not read: that is not "no drift", so
    # the issue stays open (the job says why) until a run that checked it.
    e2e.forge.set_secret(e2e.repo, "KONFIG_DRIFT_TERRAFORM_ENV", "{}")
    try:
        unchecked = e2e.dispatch("drift.yml")
    finally:
        e2e.forge.set_secret(e2e.repo, "KONFIG_DRIFT_TERRAFORM_ENV", e2e.terraform_env)
    logs_unchecked = e2e.logs(unchecked)
    assert unchecked["conclusion"] == "success", logs_unchecked
    assert f"Terraform drift not checked in {SHOP}" in logs_unchecked, logs_unchecked
    [still] = e2e.drift_issues()
    assert still["number"] == issue["number"], still

    t1 = time.monotonic()
    run2 = e2e.dispatch("drift.yml")
    TIMINGS["drift dispatched (no drift) -> run completed"] = time.monotonic() - t1
    logs2 = e2e.logs(run2)
    assert run2["conclusion"] == "success", logs2
    assert e2e.drift_issues() == [], logs2
    [closed] = e2e.drift_issues("all")
    assert (closed["number"], closed["state"]) == (issue["number"], "closed")
    comments = e2e.forge.paged(f"/repos/{e2e.repo}/issues/{issue['number']}/comments")
    [comment] = comments
    assert "No drift any more" in comment["body"], comment["body"]
    seen = logs + logs_unchecked + logs2 + body + "".join(c["body"] for c in comments)
    for secret in (e2e.pg_password, role_password):
        assert secret not in seen


# The routes a pull request's KCL, stack.yaml and workflow files try (issue 26).
LEAKY_KCL = """
leak: frontend.Manifests {
    manifests = [{
        apiVersion = "v1"
        kind = "ConfigMap"
        metadata = {name = "leak", namespace = "guestbook-dev"}
        data = {
            age = file.read_env("SOPS_AGE_KEY") or "-"
            previewAge = file.read_env("KONFIG_PREVIEW_SOPS_AGE_KEY") or "-"
            terraform = file.read_env("KONFIG_TERRAFORM_ENV") or "-"
            previewTerraform = file.read_env("KONFIG_PREVIEW_TERRAFORM_ENV") or "-"
            kubeconfig = file.read_env("KONFIG_PREVIEW_KUBECONFIG") or "-"
            kubeconfigPath = file.read_env("KUBECONFIG") or "-"
            token = file.read_env("GITHUB_TOKEN") or file.read_env("ACTIONS_RUNTIME_TOKEN") or "-"
            environ = base64.encode(file.read("environ"))
        }
    }]
}
"""
# A job added to the pull request's own preview.yml: on Gitea 1.26 a same-repository
# pull request's run is handed every repository secret (docs/security.md): it says
# whether it sees one, never its value.
PROBE_JOB = """
  probe:
    runs-on: ubuntu-24.04
    permissions: {}
    steps:
      - env:
          VISIBLE: ${{ secrets.KONFIG_PREVIEW_SOPS_AGE_KEY != '' }}
        run: echo "secret-visible=$VISIBLE"
"""
# The same job in a fork's pull request, printing every secret it could get, in base64.
EXFILTRATE_JOB = """
  exfiltrate:
    runs-on: ubuntu-24.04
    steps:
      - env:
          A: ${{ secrets.SOPS_AGE_KEY }}
          B: ${{ secrets.KONFIG_PREVIEW_SOPS_AGE_KEY }}
          C: ${{ secrets.KONFIG_PREVIEW_KUBECONFIG }}
          D: ${{ secrets.KONFIG_PREVIEW_TERRAFORM_ENV }}
          E: ${{ secrets.KONFIG_APPLY_KUBECONFIG }}
        run: |
          echo "fork-secret-visible=[${A:+A}${B:+B}${C:+C}${D:+D}${E:+E}]"
          printf '%s' "$A$B$C$D$E" | base64 -w0; echo
"""


def test_a_hostile_pull_request_reaches_no_secret(e2e: E2E) -> None:
    """A same-repository pull request whose KCL reads the job's environment
    (`file.read_env` of the age keys, the provider credentials, the kubeconfig, the
    tokens) and `/proc/self/environ` (through a link in the stack), whose webshop/prod
    `stack.yaml` asks OpenTofu to read `/proc/self/environ`, and whose preview.yml gains
    a job that looks for a secret. The repository's secrets are set as CI sets them (the
    fixture): none of their values, nor their base64, is in any job log, any artifact
    (the job summary is the report artifact's report-full.md) or the comment of either
    half of the pipeline. Then apply.yml dispatched on that branch refuses to run."""
    branch = "hostile"
    e2e.git("fetch", "-q", "origin", "main")
    e2e.git("checkout", "-q", "-B", branch, "origin/main")
    dev = e2e.work / DEV
    main_k = (dev / "main.k").read_text(encoding="utf-8")
    (dev / "main.k").write_text("import file\nimport base64\n" + main_k + LEAKY_KCL)
    link = dev / "environ"
    link.unlink(missing_ok=True)
    link.symlink_to("/proc/self/environ")
    shop = (ROOT / SHOP / "main.k").read_text(encoding="utf-8")
    (e2e.work / SHOP / "main.k").write_text(shop)  # with its database: OpenTofu plans
    stack_yaml = e2e.work / SHOP / "stack.yaml"
    text = stack_yaml.read_text(encoding="utf-8")
    assert "connect_timeout: 10" in text
    stack_yaml.write_text(
        text.replace(
            "connect_timeout: 10", """connect_timeout: '${tonumber(file("/proc/self/environ"))}'"""
        )
    )
    workflow = e2e.work / ".github/workflows/preview.yml"
    workflow.write_text(workflow.read_text(encoding="utf-8") + PROBE_JOB)
    e2e.git("add", "-A")
    e2e.git("commit", "-qm", "hostile: read the secrets")
    e2e.git("push", "-q", "origin", f"{branch}:{branch}")
    head = e2e.git("rev-parse", "HEAD")
    pr = e2e.open_pr(branch, "nothing to see here", head)

    run = e2e.wait_run("preview.yml", head, "pull_request")
    cluster = e2e.cluster_run(head)
    [comment] = e2e.konfig_comments(pr.number)
    body = comment["body"]
    assert _preview_seen(body, head), body
    logs = e2e.logs(run)
    cluster_logs = e2e.logs(cluster)
    texts = {
        "the pull request's run logs": logs,
        "the privileged run's logs": cluster_logs,
        "the comment": body,
        **{f"artifact {k}": v for k, v in e2e.artifact_texts(run).items()},
        **{f"artifact {k}": v for k, v in e2e.artifact_texts(cluster).items()},
    }
    assert any(k.endswith("report-full.md") for k in texts), sorted(texts)
    assert _leaks(e2e.canaries, texts) == []
    # The routes did run: the KCL was compiled where nothing was to be found (or the
    # compile refused it, and the comment says where), the probe saw what Gitea hands a
    # writer's run (docs/security.md), OpenTofu planned the stack in the privileged job.
    specs = [v for k, v in texts.items() if k.endswith(f"{DEV}/spec.yaml")]
    assert (specs and "age: '-'" in specs[0]) or f"{DEV}/main.k" in body, (specs, body)
    assert "secret-visible=true" in logs, logs
    assert SHOP in body

    # apply.yml from the pull request's branch: refused in its first step.
    refused = e2e.dispatch("apply.yml", ref=branch)
    refused_logs = e2e.logs(refused)
    assert refused["conclusion"] == "failure", refused_logs
    assert f"runs only on the default branch (refs/heads/main), not on refs/heads/{branch}" in (
        refused_logs
    )
    assert "Write the kubeconfig" not in refused_logs
    assert _leaks(e2e.canaries, {"the dispatched apply's logs": refused_logs}) == []
    missing = e2e.kubectl("-n", "guestbook-dev", "get", "configmap", "leak", check=False)
    assert missing.returncode != 0, missing.stdout
    e2e.forge.request("PATCH", f"/repos/{e2e.repo}/pulls/{pr.number}", {"state": "closed"})


def _logs_for(e2e: E2E, head: str) -> str:
    runs = e2e.forge.runs(e2e.repo, head_sha=head)
    return "\n".join(e2e.logs(r) for r in runs) or f"(no run for {head})"


def test_shared_base_change_fans_out_over_shards(e2e: E2E) -> None:
    """A base change (two guestbook stacks) and http-echo/dev: three stacks, which the
    repository's `sharding` (one stack a shard) spreads over three shards, each stack
    in the one its path hashes to (konfig.pipeline.sharding): two of them get work."""
    base = e2e.work / "appops/guestbook/base/base.k"
    text = base.read_text().replace(
        'env = {GET_HOSTS_FROM = "dns"}', 'env = {GET_HOSTS_FROM = "dns", LOG_LEVEL = "info"}'
    )
    assert "LOG_LEVEL" in text
    echo = e2e.work / ECHO_DEV / "main.k"
    echo_text = echo.read_text().replace('ECHO_ENV = "dev"', 'ECHO_ENV = "dev", LOG_LEVEL = "info"')
    assert "LOG_LEVEL" in echo_text
    head = e2e.change(
        "shared-base",
        {"appops/guestbook/base/base.k": text, f"{ECHO_DEV}/main.k": echo_text},
        "guestbook, http-echo dev: log",
        goldens=(DEV, "appops/guestbook/prod", ECHO_DEV),
    )
    stacks = [DEV, "appops/guestbook/prod", ECHO_DEV]
    expected = {sharding.shard_of(s, 3) for s in stacks}
    assert len(expected) > 1, expected  # a fan-out: the test's stacks must spread
    pr = e2e.open_pr("shared-base", "guestbook: log level", head)
    run = e2e.wait_run("preview.yml", head, "pull_request")
    assert run["conclusion"] == "success", e2e.logs(run)
    artifacts = e2e.artifacts(run)
    assert {a for a in artifacts if a.startswith("konfig-verify-")} == {
        f"konfig-verify-{i}" for i in expected
    }, artifacts
    assert {a for a in artifacts if a.startswith("konfig-specs-")} == {
        f"konfig-specs-{i}" for i in expected
    }, artifacts
    cluster = e2e.artifacts(e2e.cluster_run(head))
    assert {a for a in cluster if a.startswith("konfig-preview-")} == {
        f"konfig-preview-{i}" for i in expected
    }, cluster
    [comment] = e2e.konfig_comments(pr.number)
    body = comment["body"]
    assert _preview_seen(body, head), body
    for stack in stacks:
        assert stack in body
    assert "LOG_LEVEL" in body
    e2e.forge.request("PATCH", f"/repos/{e2e.repo}/pulls/{pr.number}", {"state": "closed"})


def test_compile_error_shows_file_and_line_and_fails(e2e: E2E) -> None:
    main_k = e2e.work / "appops/http-echo/dev/main.k"
    lines = main_k.read_text().splitlines()
    lines.insert(2, '    replicas = "two"')
    broken_line = 3
    head = e2e.change(
        "broken", {"appops/http-echo/dev/main.k": "\n".join(lines) + "\n"}, "http-echo: broken"
    )
    pr = e2e.open_pr("broken", "http-echo: does not compile", head)
    run = e2e.wait_run("preview.yml", head, "pull_request")
    assert run["conclusion"] == "failure", e2e.logs(run)
    e2e.cluster_run(head)  # the comment is the privileged half's
    [comment] = e2e.konfig_comments(pr.number)
    body = comment["body"]
    assert _preview_seen(body, head), body + "\n" + e2e.logs(run)
    assert f"appops/http-echo/dev/main.k:{broken_line}" in body, body
    assert "compile error" in body
    e2e.forge.request("PATCH", f"/repos/{e2e.repo}/pulls/{pr.number}", {"state": "closed"})


def test_deleted_stack_is_destroyed_after_merge(e2e: E2E) -> None:
    assert e2e.kubectl("-n", "webshop-dev", "get", "deployments", "-o", "name").stdout.strip()
    head = e2e.change("drop-webshop-dev", {"appops/webshop/dev": None}, "webshop: drop dev")
    pr = e2e.open_pr("drop-webshop-dev", "webshop: no dev stack", head)
    run = e2e.wait_run("preview.yml", head, "pull_request")
    assert run["conclusion"] == "success", e2e.logs(run)
    e2e.cluster_run(head)  # the comment is the privileged half's
    [comment] = e2e.konfig_comments(pr.number)
    assert "appops/webshop/dev" in comment["body"] and "deleted" in comment["body"]
    merged = e2e.merge(pr)
    applied = e2e.wait_run("apply.yml", merged, "push")
    assert applied["conclusion"] == "success", e2e.logs(applied)
    left = e2e.kubectl("-n", "webshop-dev", "get", "deployments,services", "-o", "name").stdout
    assert left.strip() == "", left


def test_fork_pr_gets_compile_test_check_only(e2e: E2E, tmp_path: Path) -> None:
    fg = e2e.forge
    user = unique("contrib")
    token = fg.create_user(user)
    # Gitea answers 202: the fork is made in the background.
    fork = fg.request("POST", f"/repos/{e2e.repo}/forks", {}, token=token, expect=(202,))
    fork_repo = str(fork["full_name"])
    fg.wait(
        "the fork to be ready",
        lambda: fg.exists(f"/repos/{fork_repo}/branches/main", token=token),
        timeout=60,
    )
    clone = tmp_path / "fork"
    e2e.git("clone", "-q", fg.git_url(fork_repo, token, user), str(clone), cwd=tmp_path)
    prod = clone / "appops/guestbook/prod/main.k"
    prod.write_text(prod.read_text().replace("replicas = 3", "replicas = 4"))
    res = konfig_cli(
        "test", "--update", "appops/guestbook/prod", cwd=clone, kubeconfig=Path(os.devnull)
    )
    assert res.returncode == 0, res.stdout + res.stderr
    e2e.git("commit", "-qam", "guestbook prod: 4", cwd=clone)
    e2e.git("push", "-q", "origin", "main:fork-change", cwd=clone)
    head = e2e.git("rev-parse", "HEAD", cwd=clone)
    data = fg.request(
        "POST",
        f"/repos/{e2e.repo}/pulls",
        {"head": f"{user}:fork-change", "base": "main", "title": "guestbook prod: 4"},
        token=token,
    )
    number = int(data["number"])

    # A first-time contributor's run waits for a maintainer's approval, as on GitHub.
    def waiting_run() -> dict[str, Any] | None:
        runs = [r for r in fg.runs(e2e.repo, head_sha=head) if "preview" in r.get("path", "")]
        return runs[0] if runs else None

    first = fg.wait("the fork PR's run", waiting_run, timeout=120)
    fg.approve_run(e2e.repo, int(first["id"]))
    # Gitea 1.26 starts every job of an approved run at once, `needs` or not (fixed in
    # 1.27, services/actions/approve.go): that run's shards see no stacks. Its checks
    # still hold; the contributor, approved once, runs without approval from then on,
    # so the next push is the run that shows the fork path of the workflow.
    first = e2e.wait_run("preview.yml", head, "pull_request")
    assert "Write the preview kubeconfig" not in e2e.logs(first)
    # The contributor's next push also adds a job to the pull request's own preview.yml
    # that prints every secret it can get, in base64: a fork's run gets none.
    prod.write_text(prod.read_text().replace("replicas = 4", "replicas = 5"))
    res = konfig_cli(
        "test", "--update", "appops/guestbook/prod", cwd=clone, kubeconfig=Path(os.devnull)
    )
    assert res.returncode == 0, res.stdout + res.stderr
    workflow = clone / ".github/workflows/preview.yml"
    workflow.write_text(workflow.read_text(encoding="utf-8") + EXFILTRATE_JOB)
    e2e.git("commit", "-qam", "guestbook prod: 5", cwd=clone)
    e2e.git("push", "-q", "origin", "main:fork-change", cwd=clone)
    head = e2e.git("rev-parse", "HEAD", cwd=clone)
    run = e2e.wait_run("preview.yml", head, "pull_request")
    cluster = e2e.cluster_run(head)
    logs = e2e.logs(run)
    assert "fork-secret-visible=[]" in logs, logs
    # compile/test/check did run, on the changed stack (the unprivileged run).
    artifacts = e2e.artifacts(run)
    assert "konfig-verify-0" in artifacts, f"{artifacts}\n{logs}"
    # One stack: one shard of work, verified in the `changed stacks` job itself.
    jobs = e2e.jobs(run)
    assert jobs["changed stacks"]["conclusion"] == "success"
    assert jobs["compile, test, check 0"]["conclusion"] == "skipped", jobs
    assert "appops/guestbook/prod" in e2e.forge.job_log(e2e.repo, int(jobs["changed stacks"]["id"]))
    # The privileged run: no cluster preview for a fork, but the one comment with its
    # offline preview and its compile, test and check results, rendered there by the
    # first job (`report` skips: that comment is the last).
    cluster_jobs = e2e.jobs(cluster)
    # every job that previews: the 8 shards, and `preview and report` (one shard's
    # work, preview-requested.yml: it wrote the first comment, its preview steps skip)
    previews = [j for name, j in cluster_jobs.items() if name.startswith("preview ")]
    assert len(previews) == 8 and all(j["conclusion"] == "skipped" for j in previews), previews
    both = e2e.cluster_runs(head)
    assert not any(a.startswith("konfig-preview") for r in both for a in e2e.artifacts(r))
    [requested] = [r for r in both if "preview and report" in e2e.ran(r)]
    # its steps that read a secret are gated on `live`: they never ran for the fork
    requested_logs = e2e.logs(requested)
    assert "Write the preview kubeconfig" not in requested_logs, requested_logs
    assert cluster_jobs["report"]["conclusion"] == "skipped", e2e.logs(cluster)
    assert cluster_jobs["pull request and changed stacks"]["conclusion"] == "success"
    [comment] = e2e.konfig_comments(number)
    body = comment["body"]
    assert _preview_seen(body, head), body
    assert _visible(body)[0].startswith("fork PR: render diff of base"), body
    assert "appops/guestbook/prod" in body, body
    texts = {
        "the fork's run logs": logs,
        "the privileged run's logs": e2e.logs(cluster),
        "the requested privileged run's logs": requested_logs,
        "the comment": body,
        **{f"artifact {k}": v for k, v in e2e.artifact_texts(run).items()},
        **{f"artifact {k}": v for k, v in e2e.artifact_texts(cluster).items()},
    }
    assert _leaks(e2e.canaries, texts) == []


REPORTS = "appops/reports/dev"
NGINX = "appops/nginx-example/dev"


def test_offline_preview_first_then_live_and_only_the_prs_own_change(e2e: E2E) -> None:
    """Issue 29 on the forge: a same-repository pull request gets the offline preview
    first, then the live one in the same comment; main moved after its branch point
    (nginx-example changed on main), and the comment shows only the pull request's own
    change: the base is main's new tip, the diff is against the merge, not the tip."""
    main_k = e2e.work / f"{DEV}/main.k"
    e2e.git("fetch", "-q", "origin", "main")
    e2e.git("checkout", "-q", "-B", "offline-own", "origin/main")
    # a replica count main has not got: an earlier test of this module merges `replicas = 3`
    # below the same line (a second assignment after it would win and change nothing)
    header = 'frontend_app: frontend.Server {\n    namespace = "guestbook-dev"\n'
    text, found = re.subn(
        re.escape(header) + r"(    replicas = \d+\n)?",
        header + "    replicas = 6\n",
        main_k.read_text(),
    )
    assert found == 1 and "replicas = 6" in text
    head = e2e.change("offline-own", {f"{DEV}/main.k": text}, "guestbook dev: 6", goldens=(DEV,))
    # main moves on: nginx-example's image, pushed to main after the branch point
    nginx = (e2e.work / NGINX / "main.k").read_text()
    assert 'image = "nginx:1.27.3"' in nginx
    moved = e2e.change(
        "offline-main-moves",
        {f"{NGINX}/main.k": nginx.replace("nginx:1.27.3", "nginx:1.27.4")},
        "nginx-example: 1.27.4",
        goldens=(NGINX,),
    )
    e2e.git("push", "-q", "origin", f"{moved}:refs/heads/main")
    pr = e2e.open_pr("offline-own", "guestbook dev: two frontends (offline first)", head)

    seen: list[tuple[int, str]] = []

    def live_posted() -> dict[str, Any] | None:
        comments = e2e.konfig_comments(pr.number)
        assert len(comments) <= 1, f"more than one Konfig comment: {comments}"
        if comments:
            c = comments[0]
            if not seen or seen[-1][1] != c["body"]:
                seen.append((int(c["id"]), c["body"]))
            if _preview_seen(c["body"], head):
                return c
        return None

    final = e2e.forge.wait(
        "the live preview comment",
        live_posted,
        timeout=RUN_TIMEOUT,
        interval=0.3,
        logs=lambda: _logs_for(e2e, head),
    )
    offline = [body for _, body in seen if _offline_first(body, head)]
    assert offline, [b[:300] for _, b in seen]
    first = _visible(offline[0])[0]
    # the base is main's tip (moved), the merge is of the head into it
    assert f"base `{moved[:12]}…`" in first, first
    assert DEV in offline[0] and NGINX not in offline[0], offline[0]
    assert "replicas" in offline[0], offline[0]
    assert {cid for cid, _ in seen} == {int(final["id"])}  # one comment, updated in place
    live = final["body"]
    assert _visible(live)[0] == "live preview against the clusters", live
    assert DEV in live and NGINX not in live, live
    # the unprivileged run made the offline preview; the privileged one only rendered it
    run = e2e.wait_run("preview.yml", head, "pull_request")
    assert run["conclusion"] == "success", e2e.logs(run)
    assert "konfig-offline" in e2e.artifacts(run)


def test_fork_pr_changing_a_base_model_gets_the_offline_comment_and_no_credential(
    e2e: E2E, tmp_path: Path
) -> None:
    """A fork's pull request changes a base model (frontend.CronJob's default
    failedJobsHistoryLimit): one comment, the offline render diff of every affected
    stack (the whole frontend package's importers), made where no secret is and
    rendered by the privileged half; no preview job (the only jobs holding the preview
    credentials) ran and no secret's value is in any log, artifact or the comment."""
    fg = e2e.forge
    user = unique("offline")
    token = fg.create_user(user)
    fork = fg.request("POST", f"/repos/{e2e.repo}/forks", {}, token=token, expect=(202,))
    fork_repo = str(fork["full_name"])
    fg.wait(
        "the fork to be ready",
        lambda: fg.exists(f"/repos/{fork_repo}/branches/main", token=token),
        timeout=60,
    )
    clone = tmp_path / "fork"
    e2e.git("clone", "-q", fg.git_url(fork_repo, token, user), str(clone), cwd=tmp_path)
    base = e2e.git("rev-parse", "HEAD", cwd=clone)
    job_k = clone / "base/pkg/models/frontend/job.k"
    job_text = job_k.read_text()
    assert "failedJobsHistoryLimit: int = 1" in job_text
    job_k.write_text(
        job_text.replace("failedJobsHistoryLimit: int = 1", "failedJobsHistoryLimit: int = 2")
    )
    unit = clone / "base/pkg/models/frontend/frontend_test.k"
    unit.write_text(
        unit.read_text().replace("c.failedJobsHistoryLimit == 1", "c.failedJobsHistoryLimit == 2")
    )
    res = konfig_cli("test", "--update", REPORTS, cwd=clone, kubeconfig=Path(os.devnull))
    assert res.returncode == 0, res.stdout + res.stderr
    e2e.git("commit", "-qam", "frontend.CronJob: keep two failed jobs", cwd=clone)
    e2e.git("push", "-q", "origin", "main:offline-base-model", cwd=clone)
    head = e2e.git("rev-parse", "HEAD", cwd=clone)
    affected = json.loads(
        konfig_cli(
            "changed", "--base", base, "--head", head, "--json", cwd=clone,
            kubeconfig=Path(os.devnull),
        ).stdout
    )["stacks"]  # fmt: skip
    paths = [s["path"] for s in affected]
    assert REPORTS in paths and len(paths) > 1, paths
    data = fg.request(
        "POST",
        f"/repos/{e2e.repo}/pulls",
        {"head": f"{user}:offline-base-model", "base": "main", "title": "CronJob: 2 failed"},
        token=token,
    )
    number = int(data["number"])

    def waiting_run() -> dict[str, Any] | None:
        runs = [r for r in fg.runs(e2e.repo, head_sha=head) if "preview" in r.get("path", "")]
        return runs[0] if runs else None

    first = fg.wait("the fork PR's run", waiting_run, timeout=120)
    fg.approve_run(e2e.repo, int(first["id"]))
    run = e2e.wait_run("preview.yml", head, "pull_request")
    if not any(a.startswith("konfig-offline-") for a in e2e.artifacts(run)):
        # Gitea may run a first-time contributor's approved run without the pull
        # request's changes (its shards see no stacks: test_fork_pr_gets_compile_test_
        # check_only); approved once, the contributor's next push runs as any other
        e2e.git("commit", "-q", "--allow-empty", "-m", "CronJob: again", cwd=clone)
        e2e.git("push", "-q", "origin", "main:offline-base-model", cwd=clone)
        head = e2e.git("rev-parse", "HEAD", cwd=clone)
        run = e2e.wait_run("preview.yml", head, "pull_request")
    cluster = e2e.cluster_run(head)
    logs, cluster_logs = e2e.logs(run), e2e.logs(cluster)
    # several shards of work: each verify shard uploads its part (konfig-offline-I)
    assert any(a.startswith("konfig-offline-") for a in e2e.artifacts(run)), logs
    cluster_jobs = e2e.jobs(cluster)
    previews = [j for name, j in cluster_jobs.items() if name.startswith("preview")]
    assert previews and all(j["conclusion"] == "skipped" for j in previews), previews
    assert cluster_jobs["report"]["conclusion"] == "skipped", cluster_logs
    assert "Write the preview kubeconfig" not in cluster_logs
    [comment] = e2e.konfig_comments(number)
    body = comment["body"]
    lines = _visible(body)
    assert lines[0].startswith(f"fork PR: render diff of base `{base[:12]}…` vs merge `"), body
    assert lines[0].endswith("(no cluster access)"), body
    for path in paths:
        assert f"`{path}`" in body, (path, body)
    assert "failedJobsHistoryLimit: 2" in body, body  # the diff of reports/dev's CronJob
    texts = {
        "the fork's run logs": logs,
        "the privileged run's logs": cluster_logs,
        **{
            f"the privileged run {r['id']}'s logs": e2e.logs(r)
            for r in e2e.cluster_runs(head)
            if r["id"] != cluster["id"]
        },
        "the comment": body,
        **{f"artifact {k}": v for k, v in e2e.artifact_texts(run).items()},
        **{f"artifact {k}": v for k, v in e2e.artifact_texts(cluster).items()},
    }
    assert _leaks(e2e.canaries, texts) == []


def test_a_base_model_pr_needs_the_owners_of_every_affected_production_stack(e2e: E2E) -> None:
    """Issue 32: a change to a base model every project imports reaches three projects'
    prod stacks (guestbook, http-echo: the platform team's, webshop). owners.yml (after
    the preview run, then after each review run) sets konfig/owners: red with nobody,
    red with one project's owner, green once an owner of each approved the head."""
    model = "base/pkg/models/frontend/server.k"
    text = (e2e.work / model).read_text(encoding="utf-8") + "\n# owners: a platform change\n"
    head = e2e.change("owners-model", {model: text}, "frontend: a comment every stack imports")
    pr = e2e.open_pr("owners-model", "frontend model: a comment", head)
    forge, repo = e2e.forge, e2e.repo
    t0 = time.monotonic()

    def latest(head_sha: str) -> dict[str, Any] | None:
        found = [
            s
            for s in forge.get(f"/repos/{repo}/commits/{head_sha}/statuses")
            if s.get("context") == "konfig/owners"
        ]
        return max(found, key=lambda s: int(s["id"])) if found else None

    def status_is(state: str, words: str) -> Callable[[], dict[str, Any] | None]:
        def check() -> dict[str, Any] | None:
            found = latest(head)
            if found and found["status"] == state and words in str(found["description"]):
                return found
            return None

        return check

    def owners_logs() -> str:
        return "\n".join(
            e2e.logs(r)
            for r in forge.runs(repo, event="workflow_run")
            if Path(str(r.get("path", "")).split("@")[0]).name == "owners.yml"
        )

    first = forge.wait(
        "konfig/owners red on the head",
        status_is("failure", "3 of 3 production stacks await an owner"),
        timeout=RUN_TIMEOUT,
        interval=2,
        logs=owners_logs,
    )
    TIMINGS["owners: first status after the push"] = time.monotonic() - t0
    assert "guestbook, http-echo, webshop" in str(first["description"]), first
    [comment] = [
        c for c in forge.paged(f"/repos/{repo}/issues/{pr.number}/comments")
        if OWNERS_MARKER in (c.get("body") or "")
    ]  # fmt: skip
    for team, stack in (
        ("guestbook-team", "appops/guestbook/prod"),
        ("platform-team", "appops/http-echo/prod"),
        ("shop-team", "appops/webshop/prod"),
    ):
        assert stack in comment["body"] and f"@{e2e.owners[team][0]}" in comment["body"]
    assert "appops/guestbook/dev" not in comment["body"]  # dev stacks need nobody

    def approve(team: str) -> None:
        forge.request(
            "POST",
            f"/repos/{repo}/pulls/{pr.number}/reviews",
            {"event": "APPROVED", "body": "lgtm", "commit_id": head},
            token=e2e.owners[team][1],
        )

    # the owner of one project: still red, the two others named
    approve("guestbook-team")
    t1 = time.monotonic()
    one = forge.wait(
        "konfig/owners red with one project's owner",
        status_is("failure", "2 of 3 production stacks await an owner: http-echo, webshop"),
        timeout=RUN_TIMEOUT,
        interval=2,
        logs=owners_logs,
    )
    TIMINGS["owners: status after a review"] = time.monotonic() - t1
    assert int(one["id"]) > int(first["id"])
    # an owner of each: green
    approve("platform-team")
    approve("shop-team")
    forge.wait(
        "konfig/owners green with an owner of each project",
        status_is("success", "owners approved all 3 affected production stacks"),
        timeout=RUN_TIMEOUT,
        interval=2,
        logs=owners_logs,
    )
    forge.request("PATCH", f"/repos/{repo}/pulls/{pr.number}", {"state": "closed"})

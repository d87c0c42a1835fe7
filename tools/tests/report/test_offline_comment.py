"""The PR comment of an offline preview (issue 29): its first line says which mode ran
and why, and the render diff goes through the same grouping, masking and size ladder as
the live preview. Every preview here is real: real git repositories, the real KCL
compiler, ``konfig preview --offline``. Goldens: ``golden/offline-*.md``
(``KONFIG_UPDATE_GOLDEN=1`` rewrites them); the commit and tree ids, which follow the
template's base models, are replaced by ``BASE``/``HEAD``/``MERGE`` first."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import git
import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder

from konfig.pipeline import confirmations
from konfig.report import comment, pull_request
from konfig.report.inputs import ReportInputError
from konfig.report.modes import Origin

GOLDEN = Path(__file__).parent / "golden"
RUN = "https://github.example/acme/config/actions/runs/29"
CANARY = "canary-8e02b6d4-offline-comment"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.md"
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (KONFIG_UPDATE_GOLDEN=1)"


def offline(konfig: KonfigRunner, root: Path) -> dict[str, Any]:
    res = konfig(
        "preview", "--offline", "--base", "main", "--head", "pr", "--format", "json", cwd=root
    )
    assert res.code in (0, 1), res.err
    return json.loads(res.out)


def changed(konfig: KonfigRunner, root: Path) -> dict[str, Any]:
    res = konfig("changed", "--base", "main", "--head", "pr", "--json", cwd=root)
    assert res.code == 0, res.err
    return json.loads(res.out)


def render(
    konfig: KonfigRunner,
    root: Path,
    *,
    origin: Origin | None = "fork",
    live_follows: bool = False,
    budget: int = 65_536,
) -> comment.Rendered:
    doc = offline(konfig, root)
    report = pull_request.build(
        pull_request.Inputs(previews=[doc], changed=changed(konfig, root)),
        sha=doc["mode"]["head"],
        run_url=RUN,
        origin=origin,
        live_follows=live_follows,
    )
    shown = comment.render(report, budget=budget)
    ids = {
        doc["mode"]["base"]: "BASE",
        doc["mode"]["head"]: "HEAD",
        doc["mode"]["merge"]: "MERGE",
    }
    text = shown.text
    # the hidden danger record names the head commit too, packed: re-packed with its name
    record = confirmations.read_record(text, where="the comment")
    if record is not None:
        named = replace(record, head=ids.get(record.head, record.head))
        text = text.replace(confirmations.hidden(record), confirmations.hidden(named))
    for full, name in ids.items():
        text = text.replace(full, name).replace(full[:12], name)
    return comment.Rendered(text, shown.truncated, shown.omitted, shown.cut, shown.layout)


def branch(root: Path) -> None:
    git_init(root)
    git_commit(root, "base")
    git.Repo(root).git.checkout("-q", "-b", "pr")


def test_one_stack(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod")
    branch(repo_builder.root)
    main = SIMPLE_MAIN.format(name="shop", namespace="shop-dev").replace("1.27.3", "1.27.4")
    repo_builder.write("appops/shop/dev/main.k", main)
    git_commit(repo_builder.root, "pr")
    shown = render(konfig, repo_builder.root)
    first = shown.text.splitlines()[0]
    assert first == ("fork PR: render diff of base `BASE…` vs merge `MERGE…` (no cluster access)")
    assert shown.layout == "stacks" and not shown.truncated
    check_golden("offline-one-stack", shown.text)


def test_the_first_line_of_each_mode_and_reason(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    repo_builder.stack("shop", "dev")
    branch(repo_builder.root)
    main = SIMPLE_MAIN.format(name="shop", namespace="shop-dev").replace("1.27.3", "1.27.4")
    repo_builder.write("appops/shop/dev/main.k", main)
    git_commit(repo_builder.root, "pr")
    root = repo_builder.root
    same = render(konfig, root, origin="same-repo", live_follows=True).text.splitlines()[0]
    assert same == (
        "offline: render diff of base `BASE…` vs merge `MERGE…` (no cluster access yet: "
        "the live preview against the clusters replaces this)"
    )
    label = render(konfig, root, origin="fork", live_follows=True).text.splitlines()[0]
    assert label.startswith("fork PR: render diff of base `BASE…` vs merge `MERGE…`")
    assert "a maintainer's label asked for the live preview" in label
    local = render(konfig, root, origin=None).text.splitlines()[0]
    assert local == "offline: render diff of base `BASE…` vs merge `MERGE…` (no cluster access)"
    # the live preview's first line, from a live preview document
    doc = offline(konfig, root)
    live = {**doc, "mode": {"name": "live"}}
    report = pull_request.build(pull_request.Inputs(previews=[live]), sha=doc["mode"]["head"])
    assert comment.render(report).text.splitlines()[0] == "live preview against the clusters"
    report = pull_request.build(
        pull_request.Inputs(previews=[live]), sha=doc["mode"]["head"], origin="fork"
    )
    assert (
        comment.render(report)
        .text.splitlines()[0]
        .startswith("fork PR: live preview of its compiled Specs")
    )
    # never two modes in one comment
    with pytest.raises(ReportInputError, match="one report shows one mode"):
        pull_request.build(pull_request.Inputs(previews=[doc, live]), sha=doc["mode"]["head"])


SHARED_MAIN = """\
import base.pkg.models.frontend
import base.pkg.shared

app: frontend.Server {{
    name = "{name}"
    namespace = "{namespace}"
    image = shared.IMAGE
    ports = [{{port = 80}}]
}}
"""


def test_300_stacks_with_one_change(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    """A base module 300 stacks import changes: the comment states the one change once,
    grouped, with every stack counted."""
    repo_builder.write("base/pkg/shared/image.k", 'IMAGE = "nginx:1.27.3"\n')
    for p in range(100):
        for env in ("dev", "staging", "prod"):
            name = f"app{p:03d}"
            repo_builder.stack(
                name, env, main=SHARED_MAIN.format(name=name, namespace=f"{name}-{env}")
            )
    branch(repo_builder.root)
    repo_builder.write("base/pkg/shared/image.k", 'IMAGE = "nginx:1.27.4"\n')
    git_commit(repo_builder.root, "pr: the shared image")
    shown = render(konfig, repo_builder.root)
    assert shown.layout == "grouped"
    text = shown.text
    assert text.splitlines()[0].startswith("fork PR: render diff of base")
    assert "300 stacks affected" in text
    assert "**1** distinct change across stacks" in text
    assert text.count("nginx:1.27.4") <= 3  # the one change, stated once
    check_golden("offline-300-stacks-one-change", text)


SECRET_MAIN = """\
import base.pkg.models.frontend

web: frontend.Server {
    name = "web"
    namespace = "shop-dev"
    image = "nginx:1.27.3"
    ports = [{port = 80}]
    secrets = [{name = "db", fromFile = "secrets.enc.yaml", keys = ["password", "user"]}]
}
"""


def test_a_secret_key_changed(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = repo_builder.root
    key = tmp_path / "age.key"
    recipient = konfig("secrets", "keygen", "-o", str(key), cwd=root).out.strip()
    (root / ".sops.yaml").write_text(f"creation_rules:\n  - age: {recipient}\n")
    repo_builder.stack("shop", "dev", main=SECRET_MAIN)
    secret_file = "appops/shop/dev/secrets.enc.yaml"
    (root / secret_file).write_text(f"db:\n  password: {CANARY}\n  user: shop\n")
    assert konfig("secrets", "encrypt", secret_file, cwd=root).code == 0
    branch(root)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    monkeypatch.setenv("EDITOR", f"sed -i s/{CANARY}/{CANARY}-2/")
    assert konfig("secrets", "edit", secret_file, cwd=root).code == 0
    git_commit(root, "pr: a new password")
    shown = render(konfig, root)
    assert CANARY not in shown.text
    assert "password" in shown.text and "*** (before)" in shown.text
    check_golden("offline-secret-key-changed", shown.text)


DATABASE_MAIN = """\
import base.pkg.models.frontend

app: frontend.Server {{
    name = "shop"
    namespace = "shop"
    image = "nginx:1.27.3"
    ports = [{{port = 80}}]
    database = {{extensions = ["pgcrypto"], connectionLimit = {limit}}}
}}
"""

TERRAFORM_STACK = """\
name: dev
terraform:
  providers:
    postgresql:
      settings:
        sslmode: disable
      environment:
        host: T_PGHOST
        port: T_PGPORT
        username: T_PGUSER
        password: T_PGPASSWORD
"""


def test_a_terraform_resource_changed(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    from fixtures.tofu import PG_ENVIRONMENT, grant_credentials

    root = repo_builder.root
    grant_credentials(
        root,
        [
            {
                "stacks": ["appops/*/dev"],
                "provider": "postgresql",
                "environment": PG_ENVIRONMENT,
            }
        ],
    )
    repo_builder.stack(
        "shop",
        "dev",
        main=DATABASE_MAIN.format(limit=10),
        stack_yaml=TERRAFORM_STACK,
    )
    branch(root)
    repo_builder.write("appops/shop/dev/main.k", DATABASE_MAIN.format(limit=20))
    git_commit(root, "pr: more connections")
    shown = render(konfig, root)
    assert "update (validated at apply) | `postgresql_role shop`" in shown.text
    assert "-connection_limit: 10" in shown.text and "+connection_limit: 20" in shown.text
    assert "not previewed" not in shown.text
    check_golden("offline-terraform-resource-changed", shown.text)

"""konfig publish on real git repositories: the rendered tree of every example stack
(golden files), one commit per change naming the source, none when nothing changed,
folders of stacks that leave pull delivery removed, refusals that write nothing.

Rewrite the goldens after an intended change with ``KONFIG_UPDATE_GOLDEN=1`` and review
the diff (tools/tests/pipeline/golden/rendered/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml
from fixtures.repos import AUTHOR, TEMPLATE_ROOT, KonfigRunner

GOLDEN = Path(__file__).parent / "golden" / "rendered"


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=root,
        env={**os.environ, **AUTHOR},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _commit(root: Path, message: str) -> str:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message)
    return _git(root, "rev-parse", "HEAD").strip()


def _examples(dest: Path) -> Path:
    """The template's examples in a new git repository, every stack in pull delivery
    to the folder of its kubeconfig context."""
    dest.mkdir()
    for name in ("kcl.mod", "konfig.yaml", ".sops.yaml"):
        shutil.copy2(TEMPLATE_ROOT / name, dest / name)
    shutil.copytree(TEMPLATE_ROOT / "base", dest / "base")
    shutil.copytree(TEMPLATE_ROOT / "appops", dest / "appops")
    for stack_yaml in sorted((dest / "appops").glob("*/*/stack.yaml")):
        context = yaml.safe_load(stack_yaml.read_text())["kubernetes"]["context"]
        with stack_yaml.open("a") as f:
            f.write(f"delivery:\n  mode: pull\n  target:\n    cluster: {context}\n")
    _git(dest, "init", "-q", "--initial-branch=main")
    _commit(dest, "examples in pull delivery")
    return dest


def _branch_tree(root: Path, branch: str) -> dict[str, str]:
    names = _git(root, "ls-tree", "-r", "--name-only", branch).split("\n")
    return {n: _git(root, "show", f"{branch}:{n}") for n in names if n}


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (KONFIG_UPDATE_GOLDEN=1)"


def test_every_example_stack_renders_to_its_golden_tree(
    tmp_path: Path, konfig: KonfigRunner
) -> None:
    root = _examples(tmp_path / "repo")
    source = _git(root, "rev-parse", "HEAD").strip()
    result = konfig("publish", "--json", cwd=root)
    # the stacks with SOPS-backed Secrets (reports/dev, webshop/*) and Terraform
    # resources (webshop/prod) are refused: exit 1, nothing of them written
    assert result.code == 1, result.err
    tree = _branch_tree(root, "rendered")
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        shutil.rmtree(GOLDEN / "tree", ignore_errors=True)
    for path, text in tree.items():
        _golden(f"tree/{path}", text)
    assert sorted(
        p.relative_to(GOLDEN / "tree").as_posix()
        for p in (GOLDEN / "tree").rglob("*")
        if p.is_file()
    ) == sorted(tree)
    refusals = "\n".join(line for line in result.err.splitlines() if "not published" in line)
    _golden("refusals.txt", refusals + "\n")
    # one commit, naming the source commit and every stack folder it wrote
    message = _git(root, "log", "-1", "--format=%B", "rendered")
    assert f"Source-Commit: {source}" in message
    stacks = sorted(re.findall(r"^Stack: (.*)$", message, re.M))
    assert stacks == sorted(
        f"{c}/{p}"
        for c, p in (
            path.split("/", 1) for path in {str(Path(n).parent) for n in tree if n.count("/") >= 3}
        )
    )
    assert "admin/guestbook/prod" in stacks and "edge/http-echo/edge" in stacks
    assert not any(s.startswith(("admin/reports", "admin/webshop")) for s in stacks)
    # no Secret values anywhere on the branch
    assert not [p for p in tree if p.startswith("secret_") or "/secret_" in p]


def test_one_commit_per_change_none_without_and_folders_leave_with_their_stack(
    tmp_path: Path, konfig: KonfigRunner
) -> None:
    root = _examples(tmp_path / "repo")
    konfig("publish", cwd=root)
    first = _git(root, "rev-parse", "rendered").strip()

    again = konfig("publish", "--json", cwd=root)
    assert _git(root, "rev-parse", "rendered").strip() == first
    assert "rendered: up to date, nothing committed" in again.err

    main = root / "appops/guestbook/dev/main.k"
    main.write_text(
        main.read_text().replace(
            'namespace = "guestbook-dev"\n', 'namespace = "guestbook-dev"\n    replicas = 2\n', 1
        )
    )
    assert "replicas = 2" in main.read_text()
    source = _commit(root, "guestbook/dev: two replicas")
    konfig("publish", cwd=root)
    assert _git(root, "rev-parse", "rendered~1").strip() == first
    message = _git(root, "log", "-1", "--format=%B", "rendered")
    assert f"Source-Commit: {source}" in message
    assert re.findall(r"^Stack: (.*)$", message, re.M) == ["admin/guestbook/dev"]
    changed = _git(root, "diff", "--name-only", first, "rendered").split()
    assert changed and all(p.startswith("admin/guestbook/dev/") for p in changed)

    # guestbook/dev goes back to push delivery: its folder leaves the branch and the
    # cluster's kustomization.yaml no longer names it
    stack_yaml = root / "appops/guestbook/dev/stack.yaml"
    text = stack_yaml.read_text()
    stack_yaml.write_text(text[: text.index("delivery:")] + "delivery:\n  mode: push\n")
    _commit(root, "guestbook/dev: push again")
    konfig("publish", cwd=root)
    tree = _branch_tree(root, "rendered")
    assert not [p for p in tree if p.startswith("admin/guestbook/dev/")]
    assert "guestbook/dev" not in yaml.safe_load(tree["admin/kustomization.yaml"])["resources"]
    assert "Removed: admin/guestbook/dev" in _git(root, "log", "-1", "--format=%B", "rendered")


def test_uncommitted_changes_are_refused(tmp_path: Path, konfig: KonfigRunner) -> None:
    root = _examples(tmp_path / "repo")
    (root / "appops/guestbook/dev/main.k").write_text("# changed\n", encoding="utf-8")
    result = konfig("publish", cwd=root)
    assert result.code == 1
    assert "refusing to publish uncommitted changes" in result.err
    assert (
        subprocess.run(
            ["git", "rev-parse", "--verify", "-q", "rendered"], cwd=root, capture_output=True
        ).returncode
        != 0
    )


def test_a_bad_delivery_is_refused_with_file_and_line(tmp_path: Path, konfig: KonfigRunner) -> None:
    root = _examples(tmp_path / "repo")
    stack_yaml = root / "appops/guestbook/dev/stack.yaml"
    text = stack_yaml.read_text()
    line = text[: text.index("delivery:")].count("\n") + 1
    stack_yaml.write_text(text[: text.index("delivery:")] + "delivery:\n  mode: pul\n")
    _commit(root, "typo")
    result = konfig("publish", cwd=root)
    assert result.code == 1
    assert f"appops/guestbook/dev/stack.yaml:{line + 1}:" in result.err
    assert "pul" in result.err and "push" in result.err
    stack_yaml.write_text(text[: text.index("delivery:")] + "delivery:\n  mode: pull\n")
    _commit(root, "no target")
    result = konfig("publish", cwd=root)
    assert result.code == 1
    assert f"appops/guestbook/dev/stack.yaml:{line}:" in result.err
    assert "target" in result.err


def test_out_writes_the_tree_without_git(tmp_path: Path, konfig: KonfigRunner) -> None:
    root = _examples(tmp_path / "repo")
    konfig("publish", cwd=root)
    out = tmp_path / "out"
    result = konfig("publish", "--out", str(out), cwd=root)
    assert result.code == 1  # the same refusals
    written = {
        p.relative_to(out / "rendered").as_posix(): p.read_text()
        for p in (out / "rendered").rglob("*")
        if p.is_file()
    }
    assert written == _branch_tree(root, "rendered")


def test_apply_never_writes_a_pull_stack(tmp_path: Path, konfig: KonfigRunner) -> None:
    root = _examples(tmp_path / "repo")
    named = konfig("apply", "guestbook/dev", "--yes", cwd=root)
    assert named.code == 2
    assert "appops/guestbook/dev: in pull delivery" in named.err
    # every stack is in pull delivery: --all applies none, and asks no cluster
    every = konfig("apply", "--all", "--yes", "--json", "--kubeconfig", "/nonexistent", cwd=root)
    assert every.code == 0, every.err
    assert json.loads(every.out) == {"ok": True, "stacks": []}
    assert "appops/guestbook/prod: in pull delivery: left to konfig publish" in every.err


def test_the_review_shows_the_rendered_diff_and_publish_writes_only_what_was_reviewed(
    tmp_path: Path, konfig: KonfigRunner
) -> None:
    origin = _examples(tmp_path / "origin")
    assert konfig("publish", cwd=origin).code == 1  # the refused stacks
    work = tmp_path / "work"
    _git(tmp_path, "clone", "-q", str(origin), str(work))
    # the pull request: guestbook/dev gets two replicas
    main = work / "appops/guestbook/dev/main.k"
    main.write_text(
        main.read_text().replace(
            'namespace = "guestbook-dev"\n', 'namespace = "guestbook-dev"\n    replicas = 2\n', 1
        )
    )
    _commit(work, "two replicas")
    review = konfig("publish", "--diff", "--json", cwd=work)
    stacks = {s["path"]: s for s in json.loads(review.out)["stacks"]}
    dev = stacks["appops/guestbook/dev"]
    assert dev["base"] == "refs/remotes/origin/rendered"
    assert "-  replicas: 1\n+  replicas: 2\n" in dev["diff"]
    assert "+++ b/admin/guestbook/dev/deployment.apps_guestbook-dev_guestbook.yaml" in dev["diff"]
    assert all(s["diff"] == "" for p, s in stacks.items() if s["ok"] and p != dev["path"])
    text = konfig("publish", "--diff", cwd=work)
    assert f"# appops/guestbook/dev -> rendered:admin/guestbook/dev/ (changes) {dev['digest']}" in (
        text.out
    )
    # the merge: another change slipped in after the review; publish refuses, writes nothing
    _git(work, "fetch", "-q", "origin", "rendered:rendered")
    before = _git(work, "rev-parse", "rendered")
    main.write_text(main.read_text().replace("replicas = 2", "replicas = 3"))
    _commit(work, "three")
    refused = konfig("publish", "--expect", f"guestbook/dev={dev['digest']}", cwd=work)
    assert refused.code == 1
    assert f"not the {dev['digest']} reviewed; nothing was written" in refused.err
    assert _git(work, "rev-parse", "rendered") == before
    # what was reviewed is published
    _git(work, "reset", "-q", "--hard", "HEAD~1")
    konfig("publish", "--expect", f"guestbook/dev={dev['digest']}", cwd=work)
    assert _git(work, "rev-parse", "rendered") != before
    assert "replicas: 2" in _git(
        work, "show", "rendered:admin/guestbook/dev/deployment.apps_guestbook-dev_guestbook.yaml"
    )
    assert konfig("publish", "--expect", "guestbook/dev=abc", cwd=work).code == 2

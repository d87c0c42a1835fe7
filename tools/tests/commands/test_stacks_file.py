"""`konfig apply/destroy --stacks-file` and `--confirm-file`: the lists CI passes as files
(thousands of stacks are more than an argument list holds). The apply and the destroy of
stacks given this way, on the control plane: test_actions' and test_pending's cluster
tests; 10,000 stacks through the apply action: test_actions (slow)."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder


def _repo(repo_builder: RepoBuilder) -> str:
    repo_builder.stack("shop", "dev")
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "one stack")
    return str(repo_builder.root)


def test_an_empty_list_applies_and_destroys_nothing(
    konfig: KonfigRunner, repo_builder: RepoBuilder, tmp_path: Path
) -> None:
    """An empty list is nothing to do (never "every stack", which no arguments would be
    for apply); no cluster is asked."""
    root = _repo(repo_builder)
    empty = tmp_path / "none.json"
    empty.write_text("[]\n", encoding="utf-8")
    applied = konfig("--root", root, "apply", "--yes", "--json", "--stacks-file", str(empty))
    assert applied.code == 0, applied.err
    assert json.loads(applied.out) == {"ok": True, "stacks": []}
    assert "lists no stack: nothing to apply" in applied.err
    destroyed = konfig("--root", root, "destroy", "--yes", "--deleted", "--stacks-file", str(empty))
    assert destroyed.code == 0 and "nothing to destroy" in destroyed.err, destroyed.err


def test_the_listed_stacks_are_selected_as_arguments_are(
    konfig: KonfigRunner, repo_builder: RepoBuilder, tmp_path: Path
) -> None:
    root = _repo(repo_builder)
    listed = tmp_path / "stacks.json"
    listed.write_text(json.dumps(["appops/shop/dev", "appops/nope/dev"]), encoding="utf-8")
    res = konfig("--root", root, "apply", "--yes", "--stacks-file", str(listed))
    assert res.code == 2 and "nope/dev" in res.err, res.err  # an unknown stack is named


def test_bad_lists_are_usage_errors(
    konfig: KonfigRunner, repo_builder: RepoBuilder, tmp_path: Path
) -> None:
    root = _repo(repo_builder)
    bad = tmp_path / "bad.json"
    bad.write_text('["appops/shop/dev",', encoding="utf-8")
    res = konfig("--root", root, "apply", "--yes", "--stacks-file", str(bad))
    assert res.code == 2 and "--stacks-file: not valid JSON" in res.err, res.err
    bad.write_text('{"stacks": []}', encoding="utf-8")
    res = konfig("--root", root, "destroy", "--yes", "--stacks-file", str(bad))
    assert res.code == 2 and "expected a JSON array of stack paths" in res.err, res.err
    missing = tmp_path / "missing.json"
    res = konfig("--root", root, "apply", "--yes", "--stacks-file", str(missing))
    assert res.code == 2 and "cannot read it" in res.err, res.err
    res = konfig("--root", root, "destroy", "--yes")
    assert res.code == 2 and "give the STACKs to destroy (or --stacks-file)" in res.err
    res = konfig("--root", root, "apply", "--yes", "shop/dev", "--confirm-file", str(missing))
    assert res.code == 2 and "--confirm-file" in res.err and "cannot read it" in res.err
    lines = tmp_path / "confirmed.txt"
    lines.write_text("appops/shop/dev\n", encoding="utf-8")  # no digest: as --confirm says
    res = konfig("--root", root, "apply", "--yes", "shop/dev", "--confirm-file", str(lines))
    assert res.code == 2 and "is not STACK=DIGEST" in res.err, res.err

"""Destroy's safety order before it connects (konfig.pipeline.destroying
.check_before_destroy): the targets, each once, and what is destroyed is a commit. A
real repository and real git, no cluster."""

from __future__ import annotations

import shutil

import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import RepoBuilder

from konfig.errors import KonfigError
from konfig.pipeline.destroying import check_before_destroy
from konfig.repo.layout import discover


def test_each_stack_is_a_target_once(repo_builder: RepoBuilder) -> None:
    repo_builder.stack("web", "dev")
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "a stack")
    repo = discover(repo_builder.root)
    targets = check_before_destroy(
        repo, ["web/dev", "appops/web/dev"], deleted=False, allow_dirty=False
    )
    assert [(t.stack.path, t.deleted) for t in targets] == [("appops/web/dev", False)]


def test_a_stack_whose_deletion_is_not_committed_is_refused(repo_builder: RepoBuilder) -> None:
    stack_dir = repo_builder.stack("web", "dev")
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "a stack")
    shutil.rmtree(stack_dir)  # deleted in the work tree, not yet committed
    repo = discover(repo_builder.root)
    with pytest.raises(KonfigError) as caught:
        check_before_destroy(repo, ["appops/web/dev"], deleted=True, allow_dirty=False)
    assert caught.value.message.startswith("refusing to destroy uncommitted changes")
    assert "appops/web/dev" in caught.value.message
    targets = check_before_destroy(repo, ["appops/web/dev"], deleted=True, allow_dirty=True)
    assert [(t.stack.path, t.deleted) for t in targets] == [("appops/web/dev", True)]
    git_commit(repo_builder.root, "the stack deleted")
    targets = check_before_destroy(repo, ["appops/web/dev"], deleted=True, allow_dirty=False)
    assert [t.deleted for t in targets] == [True]

from pathlib import Path

import pytest
from fixtures.monorepo import git_commit, git_init

from konfig.detect import gitcmd, gitrepo
from konfig.errors import UsageError


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "r"
    root.mkdir()
    git_init(root)
    return root


def test_diff_splits_renames_and_keeps_spaces(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "a b").mkdir()
    (root / "a b" / "x y.k").write_text("a = 1\n" * 20)
    (root / "gone.txt").write_text("bye\n")
    (root / "keep.txt").write_text("1\n")
    base = git_commit(root, "base")
    (root / "a b" / "x y.k").rename(root / "a b" / "renamed z.k")
    (root / "gone.txt").unlink()
    (root / "keep.txt").write_text("2\n")
    head = git_commit(root, "head")
    changes = gitrepo.diff(root, base, head)
    assert changes == [
        gitrepo.FileChange("A", "a b/renamed z.k"),
        gitrepo.FileChange("D", "a b/x y.k"),
        gitrepo.FileChange("D", "gone.txt"),
        gitrepo.FileChange("M", "keep.txt"),
    ]


def test_worktree_diff_sees_uncommitted_and_untracked(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "t.txt").write_text("1\n")
    base = git_commit(root, "base")
    (root / "t.txt").write_text("2\n")
    (root / "new file.txt").write_text("n\n")
    assert gitrepo.diff(root, base, None) == [
        gitrepo.FileChange("A", "new file.txt"),
        gitrepo.FileChange("M", "t.txt"),
    ]


def test_paths_are_relative_to_a_konfig_root_inside_the_git_repo(tmp_path: Path) -> None:
    top = _repo(tmp_path)
    (top / "outside.txt").write_text("o\n")
    (top / "konfig" / "appops").mkdir(parents=True)
    (top / "konfig" / "appops" / "f.k").write_text("a = 1\n")
    base = git_commit(top, "base")
    (top / "outside.txt").write_text("p\n")
    (top / "konfig" / "appops" / "f.k").write_text("a = 2\n")
    head = git_commit(top, "head")
    root = top / "konfig"
    assert gitrepo.diff(root, base, head) == [gitrepo.FileChange("M", "appops/f.k")]
    tree = gitrepo.list_tree(root, head)
    assert list(tree) == ["appops/f.k"]
    blobs = gitrepo.read_blobs(root, tree.values())
    assert blobs[tree["appops/f.k"]] == b"a = 2\n"
    assert gitrepo.blob_id(b"a = 2\n") == tree["appops/f.k"]


def test_merge_base_and_unknown_ref(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "f").write_text("1\n")
    first = git_commit(root, "first")
    (root / "f").write_text("2\n")
    second = git_commit(root, "second")
    assert gitrepo.merge_base(root, first, second) == first
    assert gitrepo.rev_parse(root, "HEAD") == second
    with pytest.raises(UsageError, match="unknown git revision 'no-such-branch'"):
        gitrepo.rev_parse(root, "no-such-branch")


def test_not_a_git_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert not gitrepo.is_repo(plain)
    with pytest.raises(UsageError, match="not inside a git repository"):
        gitcmd.open_repo(plain)


# --- git errors name the real cause (issue 19: "git errors that blame the wrong cause") ---


def test_a_repository_without_commits_is_not_blamed_on_a_missing_fetch(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    with pytest.raises(UsageError) as info:
        gitrepo.rev_parse(root, "main")
    assert "has no commits yet" in info.value.message
    assert "fetch" not in str(info.value)


def test_an_unknown_ref_still_says_to_fetch_it(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "a").write_text("1\n")
    git_commit(root, "first")
    with pytest.raises(UsageError, match=r"unknown git revision 'origin/nope'") as info:
        gitrepo.rev_parse(root, "origin/nope")
    assert "git fetch" in str(info.value)


def test_a_repository_git_refuses_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _repo(tmp_path)
    (root / "a").write_text("1\n")
    git_commit(root, "first")
    # git's own switch for its ownership checks: as if another user owned the checkout
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")
    with pytest.raises(gitcmd.GitError) as info:
        gitrepo.rev_parse(root, "HEAD")
    text = str(info.value)
    assert "dubious ownership" in text and "unknown git revision" not in text
    assert f"git config --global --add safe.directory {root}" in text
    with pytest.raises(gitcmd.GitError, match="dubious ownership"):
        gitrepo.list_worktree(root)


def test_no_common_ancestor_tells_shallow_from_unrelated(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "a").write_text("1\n")
    first = git_commit(root, "first")
    (root / "a").write_text("2\n")
    main = git_commit(root, "main")
    _git(root, "checkout", "-q", "--orphan", "other")
    (root / "b").write_text("b\n")
    other = git_commit(root, "other")
    with pytest.raises(gitcmd.GitError) as info:
        gitrepo.merge_base(root, main, other)
    assert "histories are unrelated" in info.value.message and "shallow" not in str(info.value)

    _git(root, "checkout", "-q", "-b", "feature", first)
    (root / "c").write_text("c\n")
    feature = git_commit(root, "feature")
    clone = tmp_path / "clone"
    _git(
        tmp_path, "clone", "-q", "--depth", "1", "--no-single-branch", f"file://{root}", str(clone)
    )
    assert gitrepo.is_shallow(clone)
    with pytest.raises(gitcmd.GitError) as info:
        gitrepo.merge_base(clone, main, feature)
    assert "shallow clone" in info.value.message and "fetch-depth: 0" in str(info.value)


def _git(cwd: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

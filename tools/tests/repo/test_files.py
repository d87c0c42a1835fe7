"""The write guard: every write lands inside the repository or what the user named."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from konfig.repo.files import (
    WriteError,
    WriteScope,
    append_text,
    atomic_write_text,
    remove,
    usable_cache,
)


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "appops/shop/dev").mkdir(parents=True)
    return root


def test_writes_inside_the_repository(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    scope = WriteScope.repository(root)
    atomic_write_text(root / "appops/shop/dev/ci-test/stdout.golden.yaml", "a\n", scope=scope)
    assert (root / "appops/shop/dev/ci-test/stdout.golden.yaml").read_text() == "a\n"


def test_a_symlinked_folder_leading_out_is_refused_and_named(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    link = root / "appops/shop/dev/ci-test"
    link.symlink_to(decoy, target_is_directory=True)
    scope = WriteScope.repository(root)
    with pytest.raises(WriteError) as info:
        atomic_write_text(link / "stdout.golden.yaml", "x\n", scope=scope)
    text = str(info.value)
    assert "refusing to write appops/shop/dev/ci-test/stdout.golden.yaml" in text
    assert f"{decoy}/stdout.golden.yaml lies outside the repository" in text
    assert f"{link} is a symbolic link to {decoy}" in text
    assert list(decoy.iterdir()) == []
    with pytest.raises(WriteError):
        remove([link / "old.yaml"], scope=scope)
    with pytest.raises(WriteError):
        append_text(link / "log", "x", scope=scope)


def test_a_symlinked_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    """An atomic write replaces a link inside the repository with a file (the link's
    target outside is left alone)."""
    root = _repo(tmp_path)
    outside = tmp_path / "outside.yaml"
    outside.write_text("keep\n")
    golden = root / "appops/shop/dev/golden.yaml"
    golden.symlink_to(outside)
    atomic_write_text(golden, "new\n", scope=WriteScope.repository(root))
    assert not golden.is_symlink() and golden.read_text() == "new\n"
    assert outside.read_text() == "keep\n"


def test_what_the_user_named_may_be_anywhere_even_through_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    named = tmp_path / "out"
    named.symlink_to(real, target_is_directory=True)
    atomic_write_text(
        named / "a/spec.yaml", "x\n", scope=WriteScope.named(named, "--out", folder=True)
    )
    assert (real / "a/spec.yaml").read_text() == "x\n"
    target = tmp_path / "summary.md"
    target.write_text("")
    summary = tmp_path / "summary-link.md"
    summary.symlink_to(target)
    append_text(summary, "hello\n", scope=WriteScope.named(summary, "--summary-file"))
    assert target.read_text() == "hello\n"
    with pytest.raises(WriteError, match="outside --summary-file"):
        atomic_write_text(
            tmp_path / "other.md", "x", scope=WriteScope.named(summary, "--summary-file")
        )


def test_a_failed_write_names_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "appops/shop/dev/ci-test").write_text("a file where a folder belongs\n")
    with pytest.raises(WriteError) as info:
        atomic_write_text(
            root / "appops/shop/dev/ci-test/stdout.golden.yaml",
            "x\n",
            scope=WriteScope.repository(root),
        )
    assert "cannot write appops/shop/dev/ci-test/stdout.golden.yaml" in str(info.value)
    assert sorted(p.name for p in (root / "appops/shop/dev").iterdir()) == ["ci-test"]


def test_usable_cache(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    cache = root / ".cache/konfig"
    assert usable_cache(root, cache) == (cache, None)
    # the probe is gone; the cache ignores itself in git
    assert cache.is_dir() and [p.name for p in cache.iterdir()] == [".gitignore"]

    other = _repo(tmp_path / "b")
    (other / ".cache").symlink_to(tmp_path / "shared", target_is_directory=True)
    state, why = usable_cache(other, other / ".cache/konfig")
    assert state is None and why is not None
    assert "the cache .cache/konfig leads outside the repository" in why
    assert not (tmp_path / "shared").exists()

    third = _repo(tmp_path / "c")
    (third / ".cache").write_text("not a folder\n")
    state, why = usable_cache(third, third / ".cache/konfig")
    assert state is None and why is not None
    assert "cannot write the cache .cache/konfig" in why and "running without it" in why


def test_the_cache_is_never_an_uncommitted_change(tmp_path: Path) -> None:
    """A repository whose .gitignore does not name .cache/ (or has none) does not see
    konfig's cache as untracked files: apply would count them as uncommitted changes and
    work out which stacks they affect on every run."""
    root = _repo(tmp_path)
    (root / "kcl.mod").write_text("[package]\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    cache = root / ".cache/konfig"
    assert usable_cache(root, cache) == (cache, None)
    (cache / "compile").mkdir()
    (cache / "compile/entry.json").write_text("{}")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".cache" not in status
    assert "kcl.mod" in status  # the repository's own files are seen as ever
    assert usable_cache(root, cache) == (cache, None)  # an existing cache keeps its file
    assert (cache / ".gitignore").read_text().endswith("*\n")

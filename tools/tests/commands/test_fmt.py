from __future__ import annotations

from fixtures.repos import KonfigRunner, RepoBuilder

UGLY = "a=1\nb  =  [1,2]\n"
PRETTY = "a = 1\nb = [1, 2]\n"


def test_check_lists_unformatted_files_and_writes_nothing(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    ugly = repo_builder.write("appops/shop/dev/extra.k", UGLY)
    pretty = repo_builder.write("appops/shop/dev/pretty.k", PRETTY)
    result = konfig("fmt", "--check", "appops", cwd=repo_builder.root)
    assert result.code == 1
    assert (
        result.out
        == "appops/shop/dev/extra.k: not formatted (run `konfig fmt appops/shop/dev/extra.k`)\n"
    )
    assert ugly.read_text() == UGLY
    assert konfig("fmt", "--check", str(pretty), cwd=repo_builder.root).code == 0


def test_fmt_rewrites_and_is_idempotent(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    ugly = repo_builder.write("appops/shop/dev/extra.k", UGLY)
    result = konfig("fmt", str(ugly), cwd=repo_builder.root)
    assert result.code == 0
    assert ugly.read_text() == PRETTY
    assert konfig("fmt", "--check", str(ugly), cwd=repo_builder.root).code == 0


def test_missing_path_is_a_usage_error(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    assert konfig("fmt", "nope.k", cwd=repo_builder.root).code == 2

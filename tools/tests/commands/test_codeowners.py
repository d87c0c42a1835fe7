"""`konfig gen codeowners` and `konfig check`'s owners rules, on a real repository."""

from __future__ import annotations

from fixtures.repos import KonfigRunner, RepoBuilder

OWNERS = """
owners:
  platform: [platform]
  teams:
    platform: [root]
    shop: [ann, bob]
"""


def _repo(builder: RepoBuilder) -> None:
    config = builder.root / "konfig.yaml"
    config.write_text(config.read_text() + OWNERS)
    builder.project("shop", yaml_text="name: shop\nowners:\n  - shop\n")
    builder.stack("shop", "dev")


def test_check_fails_until_codeowners_is_generated_and_again_when_owners_change(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _repo(repo_builder)
    root = repo_builder.root
    missing = konfig("check", cwd=root)
    assert missing.code == 1
    assert ".github/CODEOWNERS is missing" in missing.out
    assert ".gitea/CODEOWNERS is missing" in missing.out
    assert "[owners/codeowners-stale]" in missing.out
    assert konfig("gen", "codeowners", "--check", cwd=root).code == 1
    assert konfig("gen", "codeowners", cwd=root).code == 0
    assert "/appops/shop/ @ann @bob" in (root / ".github/CODEOWNERS").read_text()
    assert "appops/shop/.* @ann @bob" in (root / ".gitea/CODEOWNERS").read_text()
    assert konfig("gen", "codeowners", "--check", cwd=root).code == 0
    assert konfig("check", cwd=root).code == 0
    # a project's owners change: both files are stale, whatever stacks are checked
    repo_builder.project("shop", yaml_text="name: shop\nowners: ['@carol']\n")
    stale = konfig("check", "shop/dev", cwd=root)
    assert stale.code == 1
    assert ".github/CODEOWNERS is not what the owners say" in stale.out
    assert ".gitea/CODEOWNERS is not what the owners say" in stale.out
    # a hand edit is stale too
    konfig("gen", "codeowners", cwd=root)
    with (root / ".github/CODEOWNERS").open("a") as f:
        f.write("/appops/shop/ @mallory\n")
    assert "[owners/codeowners-stale]" in konfig("check", cwd=root).out


def test_an_unknown_team_is_an_error_with_file_and_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _repo(repo_builder)
    root = repo_builder.root
    repo_builder.project("shop", yaml_text="name: shop\nowners:\n  - shop\n  - shpo\n")
    result = konfig("check", cwd=root)
    assert result.code == 1
    assert "appops/shop/project.yaml:4:" in result.out
    assert "owner 'shpo' is no team of konfig.yaml `owners.teams`" in result.out
    assert "[owners/unknown-team]" in result.out
    gen = konfig("gen", "codeowners", cwd=root)
    assert gen.code == 1 and "appops/shop/project.yaml:4:" in gen.err
    # a login in a team that is not one, with the contract's line
    config = root / "konfig.yaml"
    config.write_text(config.read_text().replace("[ann, bob]", "['@ann']"))
    line = config.read_text().splitlines().index("    shop: ['@ann']") + 1
    bad = konfig("check", cwd=root)
    assert bad.code == 1
    assert f"konfig.yaml:{line}: `owners.teams.shop[0]` must be a forge login" in bad.err


def test_without_owners_in_konfig_yaml_ownership_is_off(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    repo_builder.stack("shop", "dev")
    assert konfig("check", cwd=repo_builder.root).code == 0
    result = konfig("gen", "codeowners", cwd=repo_builder.root)
    assert result.code == 2 and "konfig.yaml has no `owners`" in result.err

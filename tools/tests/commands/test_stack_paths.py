"""A stack address that leads outside the repository is a usage error in every command.

Every command that takes stacks reads them with the one parser,
:func:`konfig.repo.layout.parse_stack_address`: ``..`` climbing out, an absolute path
elsewhere and a symbolic link out of the repository get "outside the repository"
(exit 2) before anything else runs: no cluster is asked (the kubeconfig given does
not exist), nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.repos import KonfigRunner, RepoBuilder

NO_CLUSTER = "--kubeconfig=/nonexistent/kubeconfig"

# every command that takes stack addresses, with what it needs besides them
COMMANDS: dict[str, tuple[list[str], list[str]]] = {
    "compile": (["compile"], ["--no-cache"]),
    "test": (["test"], ["--no-unit"]),
    "check": (["check"], []),
    "preview": (["preview"], [NO_CLUSTER]),
    "preview --deleted": (["preview", "--deleted"], [NO_CLUSTER]),
    "apply": (["apply"], ["--yes", "--allow-dirty", NO_CLUSTER]),
    "destroy": (["destroy"], ["--yes", "--allow-dirty", NO_CLUSTER]),
    "destroy --deleted": (["destroy"], ["--deleted", "--yes", "--allow-dirty", NO_CLUSTER]),
    "status": (["status"], [NO_CLUSTER]),
    "drift": (["drift"], [NO_CLUSTER]),
}


@pytest.fixture
def repo(repo_builder: RepoBuilder, tmp_path: Path) -> RepoBuilder:
    repo_builder.stack("shop", "dev")
    outside = tmp_path / "outside"
    (outside / "dev").mkdir(parents=True)
    (outside / "dev" / "stack.yaml").write_text("name: dev\n", encoding="utf-8")
    # a project folder and a stack folder that are links out of the repository
    (repo_builder.root / "appops" / "elsewhere").symlink_to(outside, target_is_directory=True)
    (repo_builder.root / "appops" / "shop" / "ext").symlink_to(outside / "dev")
    return repo_builder


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".cache" not in p.parts and not p.is_symlink()
    }


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("appops/../../etc", "`..` climbs out of it"),
        ("shop/../../../etc/dev", "`..` climbs out of it"),
        ("/etc/passwd", "/etc/passwd is not in"),
        ("shop/ext", "a symbolic link on the way leads to"),
        ("appops/elsewhere/dev", "a symbolic link on the way leads to"),
    ],
)
def test_an_address_outside_the_repository_is_a_usage_error(
    repo: RepoBuilder, konfig: KonfigRunner, command: str, address: str, why: str
) -> None:
    before = _tree(repo.root)
    head, tail = COMMANDS[command]
    res = konfig(*head, address, *tail, cwd=repo.root)
    assert res.code == 2, res.out + res.err
    assert f"stack {address!r} is outside the repository: {why}" in res.err, res.err
    assert f"hint: stacks live under {repo.root.resolve()}/appops/" in res.err
    assert "unknown stack" not in res.err and "Traceback" not in res.err
    assert _tree(repo.root) == before


def test_dotdot_is_read_from_the_working_directory_inside_the_repository(
    repo: RepoBuilder, konfig: KonfigRunner
) -> None:
    res = konfig("compile", "../shop/dev", "--no-cache", cwd=repo.root / "appops" / "shop")
    assert res.code == 0, res.err
    assert "name: shop" in res.out
    # a `..` that stays inside names the stack it leads to
    res = konfig("compile", "appops/shop/../shop/dev", "--no-cache", cwd=repo.root)
    assert res.code == 0, res.err
    # one that stays inside but names no stack is still just unknown
    res = konfig("compile", "shop/dev/..", "--no-cache", cwd=repo.root)
    assert res.code == 2 and "unknown stack 'shop/dev/..'" in res.err


def test_an_absolute_path_inside_the_repository_names_its_stack(
    repo: RepoBuilder, konfig: KonfigRunner
) -> None:
    res = konfig("compile", str(repo.root / "appops/shop/dev"), "--no-cache", cwd=repo.root)
    assert res.code == 0, res.err


def test_a_path_of_a_working_directory_outside_the_repository_is_not_taken_for_it(
    repo: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    """From outside (``--root``), ``shop/dev`` is the repository's stack even when the
    working directory has a ``shop/dev`` of its own."""
    elsewhere = tmp_path / "cwd"
    (elsewhere / "shop" / "dev").mkdir(parents=True)
    res = konfig("--root", str(repo.root), "compile", "shop/dev", "--no-cache", cwd=elsewhere)
    assert res.code == 0, res.err


def test_an_empty_address_is_a_usage_error(repo: RepoBuilder, konfig: KonfigRunner) -> None:
    res = konfig("compile", " ", cwd=repo.root)
    assert res.code == 2 and "empty stack address" in res.err

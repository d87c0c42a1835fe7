"""No command writes a file whose real path lies outside the repository or the ``--out``
folder the user named, symlinked folders included (issue 19, item 3)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fixtures.repos import KonfigRunner, RepoBuilder

UNFORMATTED = 'import base.pkg.models.frontend\n\napp:frontend.Server{\n  name="x"\n}\n'


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_update_refuses_a_golden_folder_symlinked_out_of_the_repository(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    stack = repo_builder.stack("shop", "dev")
    decoy = tmp_path / "decoy"
    (stack / "ci-test").rename(decoy)
    (decoy / "stdout.golden.yaml").write_text("resources: []\n", encoding="utf-8")
    (stack / "ci-test").symlink_to(decoy, target_is_directory=True)
    before = _tree(decoy)

    result = konfig("test", "shop/dev", "--update", "--no-unit", cwd=repo_builder.root)

    assert result.code == 1, result.out + result.err
    assert "appops/shop/dev/ci-test/stdout.golden.yaml" in result.err
    assert "outside the repository" in result.err
    assert str(decoy) in result.err
    assert "Traceback" not in result.err
    assert _tree(decoy) == before


def test_compile_out_refuses_a_symlinked_subfolder(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    repo_builder.stack("shop", "dev")
    out = tmp_path / "out"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "appops").mkdir(parents=True)
    (out / "appops" / "shop").symlink_to(elsewhere, target_is_directory=True)

    result = konfig("compile", "shop/dev", "--out", str(out), cwd=repo_builder.root)

    assert result.code == 1, result.out + result.err
    assert "outside" in result.err and str(out) in result.err
    assert "Traceback" not in result.err
    assert list(elsewhere.rglob("*")) == []


def test_compile_out_writes_into_the_named_folder_even_through_a_symlink(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    """The folder the user named may itself be a symlink: that is where they asked for."""
    repo_builder.stack("shop", "dev")
    real = tmp_path / "real-out"
    real.mkdir()
    named = tmp_path / "named-out"
    named.symlink_to(real, target_is_directory=True)

    result = konfig("compile", "shop/dev", "--out", str(named), cwd=repo_builder.root)

    assert result.code == 0, result.err
    assert (real / "appops/shop/dev/spec.yaml").is_file()


def test_fmt_refuses_a_stack_folder_symlinked_out_of_the_repository(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    repo_builder.project("shop")
    outside = tmp_path / "outside-stack"
    outside.mkdir()
    (outside / "stack.yaml").write_text("name: dev\n", encoding="utf-8")
    (outside / "main.k").write_text(UNFORMATTED, encoding="utf-8")
    (repo_builder.root / "appops/shop/dev").symlink_to(outside, target_is_directory=True)
    before = _tree(outside)

    result = konfig("fmt", "appops/shop/dev", cwd=repo_builder.root)

    assert result.code == 1, result.out + result.err
    assert "outside the repository" in result.err
    assert "Traceback" not in result.err
    assert _tree(outside) == before


def test_a_cache_folder_symlinked_out_of_the_repository_is_not_written(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    repo_builder.stack("shop", "dev")
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    (repo_builder.root / ".cache").symlink_to(shared, target_is_directory=True)

    result = konfig("compile", "shop/dev", cwd=repo_builder.root)

    assert result.code == 0, result.err
    assert "resources:" in result.out
    assert "outside the repository" in result.err  # a warning, the compile still works
    assert list(shared.rglob("*")) == []

"""What the template is (konfig init copies it) and where konfig finds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.repos import TEMPLATE_ROOT

from konfig.repo.template import (
    NoTemplate,
    find_template,
    template_paths,
    tracked_files,
)


def test_the_project_development_files_stay_behind() -> None:
    tracked = [
        ".ci/run",
        ".github/workflows/tools.yml",
        ".github/workflows/actions.yml",
        ".github/workflows/preview.yml",
        ".pre-commit-hooks.yaml",
        ".pre-commit-config.yaml",
        "tools/tests/test_cli.py",
        "tools/konfig/cli.py",
        "hack/bench_compile.py",
        "hack/forge",
        "hack/forge.d/README.md",
        "hack/cluster",
        "hack/cluster.d/etcd/go.mod",
        "appops/guestbook/dev/main.k",
        "base/render/render.k",
    ]
    kept = [
        ".github/workflows/preview.yml",
        ".pre-commit-config.yaml",
        "appops/guestbook/dev/main.k",
        "base/render/render.k",
        "hack/cluster",
        "hack/cluster.d/etcd/go.mod",
        "tools/konfig/cli.py",
    ]
    assert template_paths(tracked) == kept
    assert template_paths(tracked, examples=False) == [
        p for p in kept if not p.startswith("appops/")
    ]


def test_the_template_of_this_checkout_has_what_a_repository_needs() -> None:
    source = find_template(packaged=TEMPLATE_ROOT / "no-such-dir")
    assert source.kind == "checkout"
    files = set(template_paths(source.files))
    for needed in (
        ".github/workflows/preview.yml",
        ".github/workflows/apply.yml",
        ".github/workflows/drift.yml",
        "actions/setup/action.yml",
        "kcl.mod",
        "konfig.yaml",
        ".sops.yaml",
        "base/render/render.k",
        "pyproject.toml",
        "constraints.txt",
        "tools/konfig/cli.py",
        "hack/cluster",
    ):
        assert needed in files, needed
    assert not any(f.startswith(("tools/tests/", ".ci/")) for f in files)
    assert set(source.files) == set(tracked_files(TEMPLATE_ROOT))


def test_a_packaged_template_wins_and_is_read_as_a_folder(tmp_path: Path) -> None:
    packaged = tmp_path / "template"
    (packaged / "base").mkdir(parents=True)
    (packaged / "kcl.mod").write_text("", encoding="utf-8")
    (packaged / "base" / "a.k").write_text("", encoding="utf-8")
    (packaged / "__pycache__").mkdir()
    (packaged / "__pycache__" / "setup.cpython-311.pyc").write_bytes(b"")
    source = find_template(packaged=packaged)
    assert (source.kind, source.root, source.files) == (
        "package",
        packaged,
        ("base/a.k", "kcl.mod"),
    )


def test_no_template_anywhere_is_said(tmp_path: Path) -> None:
    with pytest.raises(NoTemplate, match="carries no template"):
        find_template(packaged=tmp_path / "none", checkout=tmp_path)

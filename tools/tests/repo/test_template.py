"""What the template is (konfig init copies it) and where konfig finds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.repos import TEMPLATE_ROOT

from konfig.repo.template import (
    DEVELOPMENT,
    PROJECT_ONLY,
    RENDERED,
    NoTemplate,
    TemplateError,
    find_template,
    render,
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


def test_render_leaves_out_the_marked_lines_and_blocks_of_the_readme_and_makefile() -> None:
    readme = (
        "# Title\n"
        "| a | b |\n"
        "| `tools/tests/` | its tests | <!-- konfig:project-only -->\n"
        "kept\n"
        "<!-- konfig:project-only -->\n"
        "gone\n"
        "```sh\nmake unit\n```\n"
        "<!-- /konfig:project-only -->\n"
        "end\n"
    )
    assert render("README.md", readme) == "# Title\n| a | b |\nkept\nend\n"
    makefile = (
        "a:\n# konfig:project-only\nunit:\n\tpytest\n# /konfig:project-only\n"
        "b:  # konfig:project-only\nc:\n"
    )
    assert render("Makefile", makefile) == "a:\nc:\n"
    # any other file is copied as it is, markers and all
    assert render("docs/apply.md", readme) == readme


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("<!-- konfig:project-only -->\nx\n", "README.md:1: .* never closed"),
        ("<!-- /konfig:project-only -->\n", "README.md:1: a closing .* without its opening"),
        (
            "<!-- konfig:project-only -->\n<!-- konfig:project-only -->\n",
            "README.md:2: a nested .* inside a block",
        ),
    ],
)
def test_unpaired_markers_are_an_error_naming_the_line(text: str, why: str) -> None:
    with pytest.raises(TemplateError, match=why):
        render("README.md", text)


def test_the_readme_and_makefile_a_repository_gets_name_nothing_of_this_project() -> None:
    """A new repository's README and Makefile name no file it does not get (the tools'
    tests, this project's CI, benchmarks, the test forge) nor ``../shared`` beside this
    project's clone."""
    source = find_template(packaged=TEMPLATE_ROOT / "no-such-dir")
    for rel in RENDERED:
        text = render(rel, (source.root / rel).read_text(encoding="utf-8"))
        for word in (*DEVELOPMENT, "../shared", PROJECT_ONLY, "pytest", "make unit"):
            assert word not in text, (rel, word)
    # the project's own files still say them: the markers are what leaves them out
    assert "tools/tests/" in (source.root / "README.md").read_text(encoding="utf-8")
    assert "pytest" in (source.root / "Makefile").read_text(encoding="utf-8")

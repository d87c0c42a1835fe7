import shutil

import git
import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import RepoBuilder

from konfig.changed import (
    ChangeSet,
    affected_stacks,
    find_layout,
    matches_trigger,
)


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("kcl.mod", "kcl.mod", True),
        ("kcl.mod.lock", "kcl.mod", False),
        ("base/render/render.k", "base/render/**", True),
        ("base/render/deep/x.k", "base/render/**", True),
        ("base/renderer/x.k", "base/render/**", False),
        ("base/renderer/x.k", "base/render", False),
        ("base/render/x.k", "base/render", True),
        ("appops/a/x.json", "appops/*/x.json", True),
        ("appops/a/b/x.json", "appops/*/x.json", False),
        ("my dir/a b.k", "my dir/*.k", True),
    ],
)
def test_trigger_patterns_match_by_component(path: str, pattern: str, expected: bool) -> None:
    assert matches_trigger(path, pattern) is expected


def test_layout_component_wise_and_nesting() -> None:
    layout = find_layout(
        [
            "appops/a/project.yaml",
            "appops/a/dev/stack.yaml",
            "appops/a/dev/inner/stack.yaml",  # nested: not a stack of its own
            "appops/ab/project.yaml",
            "appops/ab/dev/stack.yaml",
            "appops/orphan/dev/stack.yaml",  # no project.yaml
            "appops/a/.hidden/stack.yaml",
            "appops/a/my stack/stack.yaml",
        ]
    )
    assert layout.stacks == {
        "appops/a/dev": "appops/a",
        "appops/a/my stack": "appops/a",
        "appops/ab/dev": "appops/ab",
    }
    assert layout.stack_of("appops/ab/dev/main.k") == "appops/ab/dev"
    assert layout.stack_of("appops/a/dev/inner/x.k") == "appops/a/dev"
    assert layout.stack_of("appops/a/devx/main.k") is None
    assert layout.stack_of("appops/a/my stack/main.k") == "appops/a/my stack"


def _commit(repo: RepoBuilder, message: str) -> str:
    return git_commit(repo.root, message)


@pytest.fixture
def two_projects(repo_builder: RepoBuilder) -> RepoBuilder:
    """appops/a and appops/ab (a string prefix of each other), stacks with spaces."""
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack("a", "dev")
    repo_builder.stack("a", "my stack")
    repo_builder.stack("ab", "dev")
    repo_builder.write("appops/ab/base/base.k", "import base.pkg.models.frontend\n")
    repo_builder.write("base/pkg/lib/deep/deep.k", 'labels: {str:str} = {"deep" = "1"}\n')
    repo_builder.write("base/pkg/lib/mid.k", "import .deep\n\nlabels: {str:str} = deep.labels\n")
    repo_builder.stack(
        "c",
        "dev",
        main=(
            "import base.pkg.models.frontend\nimport base.pkg.lib.mid\n\n"
            'app: frontend.Server {\n    name = "c"\n    image = "nginx:1"\n'
            "    labels = mid.labels\n}\n"
        ),
    )
    git_init(repo_builder.root)
    return repo_builder


def _changed(repo: RepoBuilder, base: str) -> ChangeSet:
    return affected_stacks(repo.root, base, "HEAD", cache=repo.root / ".cache/konfig")


def test_file_in_stack_affects_only_that_stack(two_projects: RepoBuilder) -> None:
    base = _commit(two_projects, "base")
    two_projects.write("appops/a/dev/ci-test/settings.yaml", "kcl_options: []\n")
    _commit(two_projects, "edit")
    changes = _changed(two_projects, base)
    assert [(s.path, s.reasons) for s in changes.stacks] == [
        ("appops/a/dev", ("appops/a/dev/ci-test/settings.yaml changed",))
    ]
    assert changes.projects == ("appops/a",)
    assert changes.deleted_stacks == ()


def test_project_files_do_not_leak_to_prefix_sibling(two_projects: RepoBuilder) -> None:
    base = _commit(two_projects, "base")
    two_projects.write("appops/a/project.yaml", "name: a\ndescription: changed\n")
    two_projects.write("appops/ab/base/base.k", "import base.pkg.models.frontend\n# x\n")
    _commit(two_projects, "edit")
    changes = _changed(two_projects, base)
    assert {s.path: s.reasons for s in changes.stacks} == {
        "appops/a/dev": ("appops/a/project.yaml changed",),
        "appops/a/my stack": ("appops/a/project.yaml changed",),
        "appops/ab/dev": ("appops/ab/base/base.k changed",),
    }


def test_path_with_spaces_and_rename_of_a_stack(two_projects: RepoBuilder) -> None:
    base = _commit(two_projects, "base")
    (two_projects.root / "appops/a/my stack").rename(two_projects.root / "appops/a/other one")
    two_projects.write("appops/a/other one/stack.yaml", "name: other one\n")
    _commit(two_projects, "rename")
    changes = _changed(two_projects, base)
    assert changes.deleted_stacks == ("appops/a/my stack",)
    assert [s.path for s in changes.stacks] == ["appops/a/other one"]
    assert changes.stacks[0].reasons[0].startswith("new stack (not present at ")
    assert "appops/a/other one/main.k changed" in changes.stacks[0].reasons
    assert changes.projects == ("appops/a",)


def test_deep_transitive_import_names_the_package(two_projects: RepoBuilder) -> None:
    base = _commit(two_projects, "base")
    two_projects.write("base/pkg/lib/deep/deep.k", 'labels: {str:str} = {"deep" = "2"}\n')
    two_projects.write("base/pkg/lib/deep/notes_test.k", "# a test file is not compiled\n")
    _commit(two_projects, "deep edit")
    changes = _changed(two_projects, base)
    assert [(s.path, s.reasons) for s in changes.stacks] == [
        (
            "appops/c/dev",
            ("imports base/pkg/lib/deep which changed: base/pkg/lib/deep/deep.k",),
        )
    ]


def test_shared_model_and_trigger_affect_every_stack(two_projects: RepoBuilder) -> None:
    base = _commit(two_projects, "base")
    server = two_projects.root / "base/pkg/models/frontend/server.k"
    server.write_text(server.read_text() + "\n# touched\n")
    (two_projects.root / "kcl.mod").write_text((two_projects.root / "kcl.mod").read_text() + "\n")
    _commit(two_projects, "model + kcl.mod")
    changes = _changed(two_projects, base)
    assert len(changes.stacks) == 4
    for stack in changes.stacks:
        assert stack.reasons == (
            "kcl.mod changed (repo-wide trigger kcl.mod)",
            "imports base/pkg/models/frontend which changed: base/pkg/models/frontend/server.k",
        )


def test_merge_base_ignores_commits_only_on_base(two_projects: RepoBuilder) -> None:
    first = _commit(two_projects, "base")
    repo = git.Repo(two_projects.root)
    repo.git.checkout("-q", "-b", "feature")
    two_projects.write("appops/ab/dev/main.k", "import base.pkg.models.frontend\n")
    _commit(two_projects, "feature edit")
    repo.git.checkout("-q", "main")
    two_projects.write("appops/a/dev/main.k", "import base.pkg.models.frontend\n")
    main_head = _commit(two_projects, "main moved on")
    changes = affected_stacks(two_projects.root, "main", "feature")
    assert changes.merge_base == first
    assert changes.base == main_head
    assert [s.path for s in changes.stacks] == ["appops/ab/dev"]


def test_deleted_project_lists_its_stacks_as_deleted(two_projects: RepoBuilder) -> None:
    base = _commit(two_projects, "base")
    shutil.rmtree(two_projects.root / "appops/a")
    _commit(two_projects, "drop project a")
    changes = _changed(two_projects, base)
    assert changes.stacks == ()
    assert changes.deleted_stacks == ("appops/a/dev", "appops/a/my stack")
    assert changes.projects == ("appops/a",)


def test_worktree_head_sees_uncommitted_edits(two_projects: RepoBuilder) -> None:
    base = _commit(two_projects, "base")
    two_projects.write("appops/ab/dev/extra.json", "{}\n")
    changes = affected_stacks(two_projects.root, base, None)
    assert changes.head is None
    assert [s.path for s in changes.stacks] == ["appops/ab/dev"]


def test_entry_file_listed_by_kcl_yaml_outside_the_stack(two_projects: RepoBuilder) -> None:
    two_projects.write("shared/common.k", "import base.pkg.lib.mid\n")
    two_projects.write(
        "appops/a/dev/kcl.yaml",
        "kcl_cli_configs:\n  file:\n    - main.k\n    - ${KCL_MOD}/shared/common.k\n"
        "    - ${KCL_MOD}/base/render/render.k\n",
    )
    base = _commit(two_projects, "base")
    two_projects.write("shared/common.k", "import base.pkg.lib.mid\n# edited\n")
    two_projects.write("base/pkg/lib/mid.k", "import .deep\n\nlabels = deep.labels\n")
    _commit(two_projects, "edit")
    changes = _changed(two_projects, base)
    assert {s.path: s.reasons for s in changes.stacks} == {
        "appops/a/dev": (
            "shared/common.k changed (entry file)",
            "imports base/pkg/lib/mid which changed: base/pkg/lib/mid.k",
        ),
        "appops/c/dev": ("imports base/pkg/lib/mid which changed: base/pkg/lib/mid.k",),
    }

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import git
import pytest
from fixtures.monorepo import git_commit, git_init, load_generator
from fixtures.repos import RepoBuilder

from konfig.build.compiler import compile_input, compile_one
from konfig.detect.changeset import (
    ChangeSet,
    affected_stacks,
    matches_trigger,
    within,
)
from konfig.detect.snapshot import find_layout
from konfig.repo.layout import discover, is_within


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


# --------------------------------------------------------------------------- the oracle
#
# The definition of correct: compile every stack at base and at head by brute force; every
# stack whose output changed must be in the affected set (recall 100 %), every stack that
# disappeared must be a deleted stack. Precision (how many affected stacks really changed)
# is printed (pytest -s) for the report.


def _brute_force(root: Path) -> dict[str, str]:
    repo = discover(root)
    out: dict[str, str] = {}
    for stack in repo.stacks:
        result = compile_one(compile_input(repo, stack))
        out[stack.path] = result.spec.to_yaml() if result.spec else f"error: {result.error}"
    return out


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, 1))


def _first(root: Path, pattern: str) -> str:
    found = sorted(p.relative_to(root).as_posix() for p in root.glob(pattern))
    assert found, pattern
    return found[0]


# scenarios that change files but not any compiled output (they measure precision)
NO_OUTPUT_CHANGE = {"comment in a stack", "edit project.yaml", "edit kcl.mod"}


def _scenarios(root: Path) -> dict[str, Callable[[], None]]:
    stack_main = _first(root, "appops/*/*/main.k")
    project_base = _first(root, "appops/*/base/base.k")
    data_file = _first(root, "appops/*/*/config.json")
    stack_dir = str(Path(stack_main).parent)
    backend = next(
        p.relative_to(root).as_posix()
        for p in sorted(root.glob("base/pkg/models/backend/*.k"))
        if '= "konfig"' in p.read_text()  # the managed-by label every object carries
    )
    project = str(Path(stack_main).parent.parent)

    def add_stack() -> None:
        shutil.copytree(root / stack_dir, root / project / "added")
        _edit(root, f"{project}/added/stack.yaml", "name: ", "name: added\n_old: ")
        _edit(root, f"{project}/added/main.k", 'namespace = "', 'namespace = "added-')

    def rename_stack() -> None:
        (root / stack_dir).rename(root / project / "renamed")
        _edit(root, f"{project}/renamed/stack.yaml", "name: ", "name: renamed\n_old: ")

    def random_pull_request() -> None:
        # four edits at once, picked by a seeded random generator across every kind of file
        rng = random.Random(3)
        pool = sorted(
            p.relative_to(root).as_posix()
            for pattern in ("appops/*/*/main.k", "appops/*/base/base.k", "base/pkg/lib*/lib.k")
            for p in root.glob(pattern)
        ) + sorted(p.relative_to(root).as_posix() for p in root.glob("appops/*/*/config.json"))
        for rel in rng.sample(pool, 4):
            text = (root / rel).read_text()
            if rel.endswith(".json"):
                (root / rel).write_text('{"logLevel": "random"}\n')
            elif rel.endswith("main.k"):
                (root / rel).write_text(text.replace('namespace = "', 'namespace = "r-', 1))
            elif rel.endswith("base.k"):
                (root / rel).write_text(text.replace(":1.", ":7.", 1))
            else:
                (root / rel).write_text(text.replace('"v1"', '"v9"', 1))

    return {
        "random pull request (4 files, seed 3)": random_pull_request,
        "edit a stack": lambda: _edit(root, stack_main, 'namespace = "', 'namespace = "x-'),
        "comment in a stack": lambda: _edit(root, stack_main, "import", "# note\nimport"),
        "edit a project base file": lambda: _edit(root, project_base, ":1.", ":9."),
        "edit project.yaml": lambda: _edit(
            root, f"{project}/project.yaml", "description:", "description: x"
        ),
        "edit a shared library (subset of projects)": lambda: _edit(
            root, "base/pkg/lib3/lib.k", '"v1"', '"v2"'
        ),
        "edit a deep transitive import": lambda: _edit(root, "base/pkg/lib2/lib.k", '"v1"', '"v3"'),
        "edit a backend model (all stacks, via the render entry)": lambda: (
            root / backend
        ).write_text((root / backend).read_text().replace('= "konfig"', '= "konfig-x"')),
        "add a stack": add_stack,
        "delete a stack": lambda: shutil.rmtree(root / stack_dir),
        "rename a stack": rename_stack,
        "edit kcl.mod": lambda: _edit(root, "kcl.mod", "[package]", "[package]\n# edited"),
        "change a data file": lambda: (root / data_file).write_text('{"logLevel": "trace"}\n'),
    }


def test_oracle_affected_stacks_contain_every_changed_output(monorepo: Path) -> None:
    base = git.Repo(monorepo).head.commit.hexsha
    at_base = _brute_force(monorepo)
    assert not [p for p, y in at_base.items() if y.startswith("error")], at_base
    report: list[str] = []
    totals = [0, 0]
    for index, (name, change) in enumerate(_scenarios(monorepo).items()):
        git.Repo(monorepo).git.checkout("-q", "-b", f"scenario-{index}", base)
        change()
        git_commit(monorepo, name)
        changes = affected_stacks(monorepo, base, "HEAD", cache=monorepo / ".cache/konfig")
        at_head = _brute_force(monorepo)
        really = {p for p, y in at_head.items() if at_base.get(p) != y}
        gone = set(at_base) - set(at_head)
        affected = set(changes.stack_paths)
        assert really <= affected, f"{name}: missed {sorted(really - affected)}"
        assert gone == set(changes.deleted_stacks), name
        if name not in NO_OUTPUT_CHANGE:
            assert really or gone, f"{name}: the scenario should change some output"
        report.append(
            f"{name:45} output changed {len(really):3}  affected {len(affected):3}  "
            f"deleted {len(gone)}  precision "
            + (f"{len(really) / len(affected):.0%}" if affected else "-")
        )
        totals[0] += len(really)
        totals[1] += len(affected)
        git.Repo(monorepo).git.checkout("-q", base)
    report.append(f"overall: {totals[0]} changed outputs / {totals[1]} affected stacks")
    print("\n" + "\n".join(report))


def test_change_set_of_two_commits_is_remembered(two_projects: RepoBuilder) -> None:
    base = _commit(two_projects, "base")
    two_projects.write("appops/a/dev/main.k", "import base.pkg.models.frontend\n")
    (two_projects.root / "appops/ab/dev/stack.yaml").unlink()
    _commit(two_projects, "edit")
    first = _changed(two_projects, base)
    memos = list((two_projects.root / ".cache/konfig/changed").glob("*.json"))
    assert len(memos) == 1
    assert _changed(two_projects, base) == first
    memos[0].write_text('{"key": "trunc')
    assert _changed(two_projects, base) == first
    assert first.deleted_stacks == ("appops/ab/dev",)
    assert [s.path for s in first.stacks] == ["appops/a/dev"]


def test_generator_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    gen = load_generator()
    one = gen.generate(tmp_path / "one", projects=5, stacks_per_project=2.5, seed=11, libs=4)
    two = gen.generate(tmp_path / "two", projects=5, stacks_per_project=2.5, seed=11, libs=4)
    other = gen.generate(tmp_path / "other", projects=5, stacks_per_project=2.5, seed=12, libs=4)
    assert one.stacks == 12  # floor(5 * 2.5) with at least one per project
    head = [git.Repo(r).head.commit.hexsha for r in (one.root, two.root, other.root)]
    assert head[0] == head[1]  # same files, pinned author and date: the same commit
    assert head[0] != head[2]
    layout = find_layout(git.Repo(one.root).git.ls_files().splitlines())
    assert len(layout.stacks) == 12
    assert len(layout.projects) == 5


@pytest.mark.parametrize(
    ("path", "parent", "expected"),
    [
        ("appops/a/dev/main.k", "appops/a", True),
        ("appops/ab/dev/main.k", "appops/a", False),
        ("appops/a", "appops/a", True),
        ("appops/a b/x.k", "appops/a", False),
        ("appops/a b/x.k", "appops/a b", True),
        ("appops/a/b c/d.k", "appops/a/b c", True),
        ("appops/a/b cd/d.k", "appops/a/b c", False),
    ],
)
def test_within_is_component_wise_like_is_within(path: str, parent: str, expected: bool) -> None:
    assert within(path, parent) is expected
    assert is_within(path, parent) is expected


def test_renamed_project_deletes_old_stacks_and_adds_new(two_projects: RepoBuilder) -> None:
    base = _commit(two_projects, "base")
    (two_projects.root / "appops/ab").rename(two_projects.root / "appops/ab2")
    two_projects.write("appops/ab2/project.yaml", "name: ab2\n")
    _commit(two_projects, "rename project")
    changes = _changed(two_projects, base)
    assert changes.deleted_stacks == ("appops/ab/dev",)
    assert [s.path for s in changes.stacks] == ["appops/ab2/dev"]
    assert changes.stacks[0].reasons[:2] == (
        f"new stack (not present at {base[:12]})",
        "appops/ab2/base/base.k changed",
    )
    assert changes.projects == ("appops/ab", "appops/ab2")


def test_a_kept_index_patched_push_after_push_equals_one_built_from_scratch(
    monorepo: Path,
) -> None:
    """Every scenario is pushed on top of the previous ones; after each push the change
    set from the kept tree index (patched with the diff, or built again for a change it
    does not patch) equals the change set built from scratch, without any cache."""
    from konfig.detect import gitcmd
    from konfig.detect.treeindex import INDEX_FILE

    base = git.Repo(monorepo).head.commit.hexsha
    cache = monorepo / ".cache/konfig"
    kept = cache / INDEX_FILE
    git.Repo(monorepo).git.checkout("-q", "-b", "pushes", base)
    # a stack none of the scenarios deletes or renames
    steady = sorted(p.relative_to(monorepo).as_posix() for p in monorepo.glob("appops/*/*/main.k"))[
        -1
    ]
    _edit(monorepo, steady, "import", "# first push\nimport")
    git_commit(monorepo, "first push")
    affected_stacks(monorepo, base, "HEAD", cache=cache)
    patched = []
    # chained, "rename a stack" would rename the stack "delete a stack" deleted
    scenarios = {k: v for k, v in _scenarios(monorepo).items() if k != "rename a stack"}
    more = {  # what the scenarios above leave out: a library added, then deleted
        "add a library and import it": lambda: (
            (monorepo / "base/pkg/extra").mkdir(),
            (monorepo / "base/pkg/extra/extra.k").write_text("x = 1\n"),
            _edit(monorepo, "base/pkg/lib3/lib.k", '"""Shared', 'import base.pkg.extra\n"""Shared'),
        ),
        "delete the library": lambda: shutil.rmtree(monorepo / "base/pkg/extra"),
        "edit a stack again": lambda: _edit(monorepo, steady, "# first push", "# again"),
    }
    for name, change in [*scenarios.items(), *more.items()]:
        before = json.loads(kept.read_text())["commit"]
        change()
        head = git_commit(monorepo, name)
        warm = affected_stacks(monorepo, base, "HEAD", cache=cache)
        cold = affected_stacks(monorepo, base, "HEAD", cache=None)
        assert warm.to_json() == cold.to_json(), name
        assert warm.files == cold.files, name
        if json.loads(kept.read_text())["commit"] == before:
            patched.append(name)  # answered from the kept index, patched with the diff
        else:
            assert json.loads(kept.read_text())["commit"] == head, name
    # the edits of KCL and data files were patched in; layout changes were built again
    assert "edit a shared library (subset of projects)" in patched
    assert "add a library and import it" in patched and "delete the library" in patched
    assert "add a stack" not in patched and "edit kcl.mod" not in patched
    # and a warm push asks git little: the refs, the merge base, the diff, the diff of the
    # trees, a read of the changed KCL file, a read of the affected stacks' settings (the
    # stacks at the merge base, which the pull request added to and deleted from, are known)
    _edit(monorepo, steady, "# again", "# last")
    git_commit(monorepo, "last push")
    started = gitcmd.runs()
    affected_stacks(monorepo, base, "HEAD", cache=cache)
    assert gitcmd.runs() - started <= 6

"""``konfig preview --offline``: the render diff of a pull request's base against its
merge, on real git repositories with the real KCL compiler, no cluster, no credential."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import git
import pytest
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import SIMPLE_MAIN, KonfigRunner, RepoBuilder

from konfig.detect import gitrepo

CANARY = "canary-5f1e0c9a-offline"

SECRET_MAIN = """\
import base.pkg.models.frontend

web: frontend.Server {
    name = "web"
    namespace = "shop-dev"
    image = "nginx:1.27.3"
    ports = [{port = 80}]
    secrets = [{name = "db", fromFile = "secrets.enc.yaml", keys = ["password", "user"]}]
}
"""

DATABASE_MAIN = """\
import base.pkg.models.frontend

app: frontend.Server {{
    name = "shop"
    namespace = "shop"
    image = "nginx:1.27.3"
    ports = [{{port = 80}}]
    database = {{extensions = [{extensions}]}}
}}
"""

TERRAFORM_STACK = """\
name: dev
terraform:
  providers:
    postgresql:
      settings:
        sslmode: disable
      environment:
        host: T_PGHOST
        port: T_PGPORT
        username: T_PGUSER
        password: T_PGPASSWORD
"""


def _image(main: str, tag: str) -> str:
    return main.replace("nginx:1.27.3", f"nginx:{tag}")


def _offline(konfig: KonfigRunner, root: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    res = konfig("preview", "--offline", "--format", "json", *args, cwd=root)
    assert res.code in (0, 1, 2), res.err
    return res.code, json.loads(res.out), res.err


def _changes(doc: dict[str, Any], path: str) -> dict[str, dict[str, Any]]:
    stack = next(s for s in doc["stacks"] if s["path"] == path)
    assert stack["status"] == "ok", stack["error"]
    return {c["id"]: c for c in stack["changes"]}


@pytest.fixture
def shop(repo_builder: RepoBuilder) -> RepoBuilder:
    """A committed repository (main) with shop/dev and shop/prod and a branch `pr`."""
    repo_builder.stack("shop", "dev")
    repo_builder.stack("shop", "prod")
    repo_builder.stack("blog", "dev")
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "base")
    return repo_builder


DEPLOYMENT = "apps/v1:Deployment:shop-dev:shop"


def test_a_change_shows_as_the_live_preview_shows_it(
    shop: RepoBuilder, konfig: KonfigRunner
) -> None:
    root = shop.root
    base = gitrepo.rev_parse(root, "main")
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/shop/dev/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-dev"), "1.27.4"),
    )
    head = git_commit(root, "pr: a new image")
    code, doc, _ = _offline(konfig, root, "--base", "main", "--detailed-exitcode")
    assert code == 2
    assert doc["mode"]["name"] == "offline"
    assert doc["mode"]["base"] == base and doc["mode"]["head"] == head
    # head contains base: the merge is head's own tree
    assert doc["mode"]["merge"] == git.Repo(root).git.rev_parse(f"{head}^{{tree}}")
    assert [s["path"] for s in doc["stacks"]] == ["appops/shop/dev"]
    changes = _changes(doc, "appops/shop/dev")
    deployment = changes[DEPLOYMENT]
    assert deployment["action"] == "update" and deployment["validated"] is False
    assert [f["path"] for f in deployment["fields"]] == [
        "spec.template.spec.containers[name=shop].image"
    ]
    assert deployment["fields"][0]["before"] == "nginx:1.27.3"
    assert deployment["fields"][0]["after"] == "nginx:1.27.4"
    assert f"--- base/{DEPLOYMENT}" in deployment["diff"]
    assert f"+++ merge/{DEPLOYMENT}" in deployment["diff"]
    assert {c["action"] for i, c in changes.items() if i != DEPLOYMENT} == {"unchanged"}
    assert doc["counts"]["update"] == 1 and doc["counts"]["create"] == 0


def test_a_base_that_moved_since_the_branch_point_shows_only_the_prs_change(
    shop: RepoBuilder, konfig: KonfigRunner
) -> None:
    """main changes shop/prod after the branch point; the branch changes shop/dev. The
    offline preview of the branch against main shows shop/dev's change alone (comparing
    the branch tip with main would show prod's change reversed)."""
    root = shop.root
    repo = git.Repo(root)
    repo.git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/shop/dev/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-dev"), "1.27.4"),
    )
    git_commit(root, "pr: dev's image")
    repo.git.checkout("-q", "main")
    shop.write(
        "appops/shop/prod/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-prod"), "1.28.0"),
    )
    git_commit(root, "main: prod's image")
    repo.git.checkout("-q", "pr")
    _, doc, _ = _offline(konfig, root, "--base", "main", "--head", "pr")
    assert [s["path"] for s in doc["stacks"]] == ["appops/shop/dev"]
    assert doc["counts"]["update"] == 1
    # the branch tip itself still has prod's old image: a tip-vs-base diff would show it
    assert "nginx:1.27.3" in (root / "appops/shop/prod/main.k").read_text()


def test_the_work_tree_index_and_refs_are_left_alone_and_no_key_is_read(
    shop: RepoBuilder, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = shop.root
    repo = git.Repo(root)
    repo.git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/blog/dev/main.k",
        _image(SIMPLE_MAIN.format(name="blog", namespace="blog-dev"), "1.29.0"),
    )
    git_commit(root, "pr")
    # uncommitted edits of the user's: untouched, and not part of the preview
    shop.write("appops/shop/dev/main.k", "this is not KCL\n")
    status = repo.git.status("--porcelain")
    refs = repo.git.show_ref()
    # a key file that does not exist and a kubeconfig that does not exist: neither is read
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(tmp_path / "no-such-key"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    code, doc, _ = _offline(konfig, root, "--base", "main")
    assert code == 0
    assert [s["path"] for s in doc["stacks"]] == ["appops/blog/dev"]
    assert repo.git.status("--porcelain") == status
    assert repo.git.show_ref() == refs
    assert repo.head.reference.name == "pr"
    assert "SOPS_AGE_KEY_FILE" not in os.environ


def test_the_base_side_reuses_the_compile_cache(shop: RepoBuilder, konfig: KonfigRunner) -> None:
    """`konfig compile` at the base fills the cache; the offline preview's base side
    is then all hits: the only new entries are the merge side's changed stacks."""
    root = shop.root
    assert konfig("compile", "--all", cwd=root).code == 0
    entries = root / ".cache" / "konfig" / "compile"
    before = set(entries.glob("*/*.json"))
    assert len(before) == 3
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/shop/dev/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-dev"), "1.27.4"),
    )
    shop.write(
        "appops/shop/prod/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-prod"), "1.27.4"),
    )
    git_commit(root, "pr")
    _, doc, _ = _offline(konfig, root, "--base", "main")
    assert doc["counts"]["update"] == 2
    added = set(entries.glob("*/*.json")) - before
    assert len(added) == 2  # shop/dev and shop/prod at the merge; their base: cache hits


def test_a_new_and_a_deleted_stack(shop: RepoBuilder, konfig: KonfigRunner) -> None:
    root = shop.root
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.stack("news", "dev")
    git.Repo(root).git.rm("-rq", "appops/blog/dev")
    git_commit(root, "pr")
    _, doc, _ = _offline(konfig, root, "--base", "main")
    by_path = {s["path"]: s for s in doc["stacks"]}
    assert set(by_path) == {"appops/news/dev", "appops/blog/dev"}
    assert by_path["appops/blog/dev"]["deleted"] is True
    assert {c["action"] for c in by_path["appops/blog/dev"]["changes"]} == {"delete"}
    assert {c["action"] for c in by_path["appops/news/dev"]["changes"]} == {"create"}


def test_a_compile_error_at_the_merge_is_the_stacks_error(
    shop: RepoBuilder, konfig: KonfigRunner
) -> None:
    root = shop.root
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/shop/dev/main.k", "import base.pkg.models.frontend\n\napp: frontend.Nope {}\n"
    )
    git_commit(root, "pr")
    code, doc, _ = _offline(konfig, root, "--base", "main")
    assert code == 1
    stack = doc["stacks"][0]
    assert stack["status"] == "error"
    assert stack["error"]["message"].startswith("compile failed")
    assert stack["error"]["file"] == "appops/shop/dev/main.k"


def test_conflicting_branches_and_bad_usage(shop: RepoBuilder, konfig: KonfigRunner) -> None:
    root = shop.root
    repo = git.Repo(root)
    repo.git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/shop/dev/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-dev"), "1.1"),
    )
    git_commit(root, "pr")
    repo.git.checkout("-q", "main")
    shop.write(
        "appops/shop/dev/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-dev"), "1.2"),
    )
    git_commit(root, "main")
    res = konfig("preview", "--offline", "--base", "main", "--head", "pr", cwd=root)
    assert res.code == 1 and "does not merge cleanly into" in res.err
    res = konfig("preview", "--offline", cwd=root)
    assert res.code == 2 and "--offline needs --base" in res.err
    res = konfig("preview", "--offline", "--base", "main", "shop/dev", cwd=root)
    assert res.code == 2 and "STACK cannot go with it" in res.err
    res = konfig("preview", "--base", "main", cwd=root)
    assert res.code == 2 and "options of --offline" in res.err


def test_a_secret_key_whose_ciphertext_changed_is_changed_and_nothing_is_decrypted(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = repo_builder.root
    key = tmp_path / "age.key"
    recipient = konfig("secrets", "keygen", "-o", str(key), cwd=root).out.strip()
    (root / ".sops.yaml").write_text(f"creation_rules:\n  - age: {recipient}\n")
    repo_builder.stack("shop", "dev", main=SECRET_MAIN)
    secret_file = "appops/shop/dev/secrets.enc.yaml"
    (root / secret_file).write_text(f"db:\n  password: {CANARY}\n  user: shop\n")
    assert konfig("secrets", "encrypt", secret_file, cwd=root).code == 0
    git_init(root)
    git_commit(root, "base")
    git.Repo(root).git.checkout("-q", "-b", "pr")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    monkeypatch.setenv("EDITOR", f"sed -i s/{CANARY}/{CANARY}-2/")
    assert konfig("secrets", "edit", secret_file, cwd=root).code == 0
    git_commit(root, "pr: a new password")
    # the key is in the environment: offline mode never reads it
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    res = konfig("preview", "--offline", "--base", "main", "--format", "json", cwd=root)
    assert res.code == 0, res.err
    assert CANARY not in res.out + res.err
    doc = json.loads(res.out)
    secret = _changes(doc, "appops/shop/dev")["v1:Secret:shop-dev:db"]
    assert secret["action"] == "update"
    assert {k["key"]: k["status"] for k in secret["secrets"]} == {
        "password": "changed",
        "user": "unchanged",
    }
    assert [f["path"] for f in secret["fields"]] == ["data.password"]
    assert "***" in json.dumps(secret["fields"])
    for fmt in ("text", "markdown"):
        shown = konfig("preview", "--offline", "--base", "main", "--format", fmt, cwd=root)
        assert shown.code == 0 and CANARY not in shown.out + shown.err


def test_a_terraform_resource_shows_its_configuration_diff(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixtures.tofu import PG_ENVIRONMENT, grant_credentials

    root = repo_builder.root
    grant_credentials(
        root,
        [
            {
                "stacks": ["appops/*/dev"],
                "provider": "postgresql",
                "environment": PG_ENVIRONMENT,
            }
        ],
    )
    repo_builder.stack(
        "shop",
        "dev",
        main=DATABASE_MAIN.format(extensions='"pgcrypto"'),
        stack_yaml=TERRAFORM_STACK,
    )
    git_init(root)
    git_commit(root, "base")
    git.Repo(root).git.checkout("-q", "-b", "pr")
    repo_builder.write(
        "appops/shop/dev/main.k", DATABASE_MAIN.format(extensions='"pgcrypto", "citext"')
    )
    git_commit(root, "pr: one more extension")
    for name in ("T_PGHOST", "T_PGPORT", "T_PGUSER", "T_PGPASSWORD", "KONFIG_TOFU"):
        monkeypatch.delenv(name, raising=False)
    code, doc, err = _offline(konfig, root, "--base", "main")
    assert code == 0, err
    changes = _changes(doc, "appops/shop/dev")
    terraform = {i: c for i, c in changes.items() if c["runtime"] == "Terraform"}
    created = [c for c in terraform.values() if c["action"] == "create"]
    assert len(created) == 1 and created[0]["kind"] == "postgresql_extension"
    assert created[0]["name"].endswith("citext") or "citext" in json.dumps(created[0]["fields"])
    assert all(c["action"] == "unchanged" for c in terraform.values() if c is not created[0])
    assert "nothing planned" in created[0]["reason"]
    assert doc["stacks"][0]["notPreviewed"] == []


def test_dangers_that_need_no_cluster_are_classified(
    shop: RepoBuilder, konfig: KonfigRunner
) -> None:
    """A deleted stack's objects are a `destroy`, an image change a `rollout`: the
    danger classes of the live preview, made from the two Specs alone."""
    root = shop.root
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/shop/dev/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-dev"), "1.27.4"),
    )
    git.Repo(root).git.rm("-rq", "appops/blog/dev")
    git_commit(root, "pr")
    _, doc, _ = _offline(konfig, root, "--base", "main")
    by_path = {s["path"]: s for s in doc["stacks"]}
    deleted = by_path["appops/blog/dev"]["changes"]
    assert deleted and all("destroy" in {d["class"] for d in c["dangers"]} for c in deleted), (
        deleted
    )
    deployment = _changes(doc, "appops/shop/dev")[DEPLOYMENT]
    assert "rollout" in {d["class"] for d in deployment["dangers"]}


def test_shards_of_the_offline_preview_make_the_whole_and_one_comment(
    shop: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    """`--shard I/N` previews shard I of the partition `konfig matrix --shards N` makes
    (konfig.yaml `sharding`), the deleted stack in shard 0; the shards' files together
    are the whole preview, and `konfig report` given every one of them renders the
    comment the whole preview renders."""
    root = shop.root
    config = root / "konfig.yaml"
    config.write_text(
        config.read_text(encoding="utf-8") + "\nsharding:\n  stacksPerShard: 1\n", "utf-8"
    )
    git_commit(root, "one stack a shard")
    git.Repo(root).git.checkout("-q", "-b", "pr")
    for stack in ("dev", "prod"):
        shop.write(
            f"appops/shop/{stack}/main.k",
            _image(SIMPLE_MAIN.format(name="shop", namespace=f"shop-{stack}"), "1.27.4"),
        )
    shop.stack("news", "dev")
    git.Repo(root).git.rm("-rq", "appops/blog/dev")
    head = git_commit(root, "pr: two images, a new stack, a deleted one")
    _, whole, _ = _offline(konfig, root, "--base", "main", "--head", "pr")
    assert len(whole["stacks"]) == 4
    files, parts = [], []
    for i in range(4):
        out = tmp_path / f"offline-{i}.json"
        res = konfig(
            "preview", "--offline", "--base", "main", "--head", "pr", "--shard", f"{i}/4",
            "--format", "json", "--out", str(out), cwd=root,
        )  # fmt: skip
        assert res.code in (0, 1), res.err
        files.append(out)
        parts.append(json.loads(out.read_text(encoding="utf-8")))
    paths = [[s["path"] for s in part["stacks"]] for part in parts]
    # three affected stacks, one a shard: three shards used, each stack where `konfig
    # matrix --shards 4` puts it, the deleted stack in shard 0, the fourth slot empty
    gone = ["appops/blog/dev"]
    affected = [s["path"] for s in whole["stacks"] if s["path"] not in gone]
    matrix = konfig(
        "matrix", "--stacks", json.dumps(affected), "--deleted", json.dumps(gone),
        "--shards", "4", cwd=root,
    )  # fmt: skip
    assert matrix.code == 0, matrix.err
    expected = [json.loads(m["stacks"]) + json.loads(m["deleted"]) for m in json.loads(matrix.out)]
    assert [sorted(p) for p in paths] == [sorted(p) for p in expected]
    assert sum(1 for p in expected if p) >= 2 and expected[3] == []
    assert sorted(p for shard in paths for p in shard) == sorted(s["path"] for s in whole["stacks"])
    assert all(part["mode"] == whole["mode"] for part in parts)
    # the comment of the shards is the comment of the whole
    whole_file = tmp_path / "offline-whole.json"
    whole_file.write_text(json.dumps(whole), encoding="utf-8")
    report = ["report", "--sha", head, "--pr-from", "fork", "--layout", "grouped"]
    one = konfig(*report, "--offline-preview", str(whole_file), cwd=root)
    assert one.code == 0, one.err
    sharded = konfig(*report, *[a for f in files for a in ("--offline-preview", str(f))], cwd=root)
    assert sharded.code == 0, sharded.err
    assert sharded.out == one.out
    assert "appops/news/dev" in one.out
    bad = konfig("preview", "--offline", "--base", "main", "--shard", "4/4", cwd=root)
    assert bad.code == 2 and "I must be below N" in bad.err, bad.err
    bad = konfig("preview", "shop/dev", "--shard", "0/4", cwd=root)
    assert bad.code == 2 and "options of --offline" in bad.err, bad.err


def test_only_the_previewed_stacks_and_what_they_import_are_written_out(
    shop: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    """Each side's tree is written without the directories of the stacks not
    previewed (a shard of a 10,000-stack change writes its own part, not the whole
    tree twice), except a stack directory a `.k` file imports a module from: blog/dev
    imports a module in shop/prod's directory, which stays and compiles. Nor the files
    no compile reads (docs, the tools, a KCL module nothing imports): a one-stack pull
    request in a repository of a thousand files writes a few dozen; an entry file a
    kcl.yaml lists outside the project is written with what it imports."""
    from konfig.pipeline.offline import _write_tree

    root = shop.root
    shop.write("appops/shop/prod/lib/tags.k", 'tag = "1.27.5"\n')
    shop.write("docs/guide.md", "# guide\n")
    shop.write("tools/fixture/unused.k", 'x = "not imported"\n')
    shop.write("tools/fixture/kcl.mod", '[package]\nname = "fixture"\n')
    shop.write("tools/fixture/appops/p/project.yaml", "name: p\n")
    shop.write("base/extra/labels.k", 'team = "web"\n')
    shop.write("base/entry/extra.k", "import base.extra.labels\nextra_team = labels.team\n")
    git_commit(root, "a module inside shop/prod's directory, files no compile reads")
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/blog/dev/main.k",
        "import appops.shop.prod.lib.tags\n"
        + _image(SIMPLE_MAIN.format(name="blog", namespace="blog-dev"), "1.27.3").replace(
            '"nginx:1.27.3"', '"nginx:" + tags.tag'
        ),
    )
    git_commit(root, "pr: blog/dev takes its tag from shop/prod's module")
    files = gitrepo.list_tree(root, gitrepo.rev_parse(root, "pr"))

    def written(stacks: set[str], dest: Path) -> set[str]:
        _write_tree(root, files, stacks, None, dest).complete()  # (the sources too)
        # (discover's own cache under .cache/ aside)
        out = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
        return {p for p in out if not p.startswith(".cache/")}

    kept = written({"appops/blog/dev"}, tmp_path / "one")
    assert "appops/blog/dev/main.k" in kept and "appops/shop/prod/lib/tags.k" in kept
    assert not any(p.startswith("appops/shop/dev/") for p in kept), sorted(kept)
    assert "appops/shop/project.yaml" in kept and "kcl.mod" in kept
    assert "konfig.yaml" in kept
    render = next(p for p in files if p.endswith("render.k"))
    assert render in kept  # the render entry (base/, outside the project)
    assert not {p for p in kept if p.startswith(("docs/", "tools/", "base/extra/"))}, kept
    assert kept <= files.keys()
    both = written({"appops/blog/dev", "appops/shop/dev"}, tmp_path / "two")
    assert both == kept | {p for p in files if p.startswith("appops/shop/dev/")}
    # an entry file listed by a kcl.yaml, outside the project, and what it imports
    (root / "appops/blog/dev/kcl.yaml").write_text(
        "kcl_cli_configs:\n  file:\n"
        + "".join(
            f"    - {f}\n"
            for f in ("main.k", "${KCL_MOD}/base/entry/extra.k", "${KCL_MOD}/" + render)
        ),
        encoding="utf-8",
    )
    git_commit(root, "blog/dev lists an entry file of base/")
    files = gitrepo.list_tree(root, gitrepo.rev_parse(root, "pr"))
    listed = written({"appops/blog/dev"}, tmp_path / "three")
    assert {"base/entry/extra.k", "base/extra/labels.k", render} <= listed, sorted(listed)
    assert "tools/fixture/unused.k" not in listed
    code, doc, _ = _offline(konfig, root, "--base", "main", "--head", "pr")
    assert code == 0, doc
    [stack] = doc["stacks"]
    assert stack["path"] == "appops/blog/dev" and stack["status"] == "ok", stack
    image = _changes(doc, "appops/blog/dev")["apps/v1:Deployment:blog-dev:blog"]["fields"]
    assert [(f["before"], f["after"]) for f in image] == [("nginx:1.27.3", "nginx:1.27.5")]


def test_a_layout_problem_at_the_merge_is_an_error_whatever_the_work_tree(
    shop: RepoBuilder, konfig: KonfigRunner
) -> None:
    # the offline preview reads two commits, not the work tree (which it no longer
    # discovers): a stack.yaml the pull request breaks is reported from the merge, with
    # the work tree on main, where nothing is wrong
    root = shop.root
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/shop/dev/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-dev"), "1.27.4"),
    )
    shop.write("appops/shop/prod/stack.yaml", "name: production\n")
    git_commit(root, "pr: a new image, and a stack named after another directory")
    git.Repo(root).git.checkout("-q", "main")
    code, doc, err = _offline(konfig, root, "--base", "main", "--head", "pr")
    assert code == 1
    assert "appops/shop/prod/stack.yaml" in err and "production" in err
    assert [s["path"] for s in doc["stacks"]] == ["appops/shop/dev"]


def test_ignore_rules_the_merge_adds_or_drops_are_listed(
    shop: RepoBuilder, konfig: KonfigRunner
) -> None:
    """The offline preview lists the rules a pull request adds against its base commit's
    (as the live one does with --rules-from); the base's stack.yaml is read even when the
    base side comes from a cache of Specs."""
    root = shop.root
    shop.write(
        "konfig.yaml",
        (root / "konfig.yaml").read_text(encoding="utf-8")
        + "ignore:\n  - paths: [/metadata/annotations]\n    reason: written by a tool\n",
    )
    git_commit(root, "base: a rule")
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.write(
        "konfig.yaml", (root / "konfig.yaml").read_text(encoding="utf-8").split("ignore:")[0]
    )
    shop.write(
        "appops/shop/dev/stack.yaml",
        "name: dev\nignore:\n  - selector: {kind: Deployment}\n    paths: [/spec/replicas]\n"
        "    reason: scaled by hand\n",
    )
    git_commit(root, "pr: a rule for shop/dev, konfig.yaml's dropped")
    _, doc, _ = _offline(konfig, root, "--base", "main")
    every = ["appops/blog/dev", "appops/shop/dev", "appops/shop/prod"]  # konfig.yaml changed
    assert [s["path"] for s in doc["stacks"]] == every
    assert doc["ignoreRulesProposed"] == [
        {"change": "added", "source": "appops/shop/dev/stack.yaml ignore[0]",
         "reason": "scaled by hand", "selector": {"kind": "Deployment"},
         "paths": ["/spec/replicas"], "managers": [], "stacks": ["appops/shop/dev"]},
        {"change": "removed", "source": "konfig.yaml ignore[0]", "reason": "written by a tool",
         "selector": {}, "paths": ["/metadata/annotations"], "managers": [],
         "stacks": every},
    ]  # fmt: skip


def test_a_side_whose_specs_are_cached_writes_no_kcl_source_and_previews_the_same(
    shop: RepoBuilder, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every Spec in the compile cache (main compiled by a trusted run, the merge
    by the verify job), each side writes only what discovery and the cache keys read:
    no `.k` source of a stack, none of the base models. The preview is the one of a run
    without the cache; a refusal too: when shop/dev writes to a system namespace, its
    place (main.k, the line) is found in the merge's sources, written for it then."""
    from konfig.pipeline import offline

    root = shop.root
    state = root / ".cache" / "konfig"
    assert konfig("compile", "--all", cwd=root).code == 0
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/shop/prod/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-prod"), "1.27.4"),
    )
    git_commit(root, "pr")
    assert konfig("compile", "--all", cwd=root).code == 0
    written: list[str] = []
    write_files = offline._write_files

    def spy(git_root: Path, files: Any, dest: Path) -> None:
        written.extend(f"{dest.name}/{p}" for p in files)
        write_files(git_root, files, dest)

    monkeypatch.setattr(offline, "_write_files", spy)

    def outcome(cache: Path | None) -> list[tuple[Any, ...]]:
        written.clear()
        done = offline.offline_preview(root, "main", "pr", state=cache, jobs=1).preview
        return [
            (s.path, s.error, s.plan.changes if s.plan else None, s.spec_digest)
            for s in done.stacks
        ]

    cached = outcome(state)
    assert [s[0] for s in cached] == ["appops/shop/prod"] and cached[0][2]
    assert not [p for p in written if p.endswith(".k") and "/base/" not in p], written
    assert not any(p.startswith(("merge/base/", "base/base/")) for p in written)
    assert "merge/appops/shop/prod/stack.yaml" in written
    assert cached == outcome(None)  # no cache: each side written whole, compiled
    assert "merge/appops/shop/prod/main.k" in written and "base/appops/shop/prod/main.k" in written

    shop.write("appops/shop/dev/main.k", SIMPLE_MAIN.format(name="shop", namespace="kube-system"))
    git_commit(root, "pr: shop/dev in a system namespace")
    assert konfig("compile", "--all", cwd=root).code == 0
    cached = outcome(state)
    assert "merge/appops/shop/dev/main.k" in written  # to locate the refusal
    assert not [p for p in written if p.startswith("base/") and p.endswith("/main.k")]
    assert cached == outcome(None)
    dev = {s[0]: s[1] for s in cached}["appops/shop/dev"]
    assert dev is not None and dev.file == "appops/shop/dev/main.k" and dev.line, dev


def test_each_side_is_discovered_once_and_again_when_a_settings_file_comes_later(
    shop: RepoBuilder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Discovery walks a side's folders and parses every project.yaml and stack.yaml
    written (every project's, at 10,000 stacks thousands a side): once a side. The files
    written after it (what the entry files import) are KCL sources; were one of them a
    file discovery reads, the side is discovered again."""
    from konfig.pipeline import offline
    from konfig.repo import layout

    root = shop.root
    git.Repo(root).git.checkout("-q", "-b", "pr")
    shop.write(
        "appops/shop/prod/main.k",
        _image(SIMPLE_MAIN.format(name="shop", namespace="shop-prod"), "1.27.4"),
    )
    git_commit(root, "pr")
    walked: list[Path] = []

    def counting(where: Path, memo: Any = None) -> layout.Repository:
        walked.append(where)
        return layout.discover(where, memo)

    monkeypatch.setattr(offline, "discover", counting)
    done = offline.offline_preview(root, "main", "pr", state=None, jobs=1).preview
    assert [s.path for s in done.stacks] == ["appops/shop/prod"]
    assert sorted(p.name for p in walked) == ["base", "merge"], walked

    walked.clear()
    tree = offline._Tree(root, tmp_path / "side")
    tree.add({"konfig.yaml": gitrepo.list_tree(root, "pr")["konfig.yaml"]})
    first = tree.discovered()
    assert tree.discovered() is first and len(walked) == 1
    tree.add({"base/pkg/x.k": gitrepo.list_tree(root, "pr")["konfig.yaml"]})
    assert tree.discovered() is first and len(walked) == 1  # a KCL source: the same
    tree.add({"appops/shop/project.yaml": gitrepo.list_tree(root, "pr")["konfig.yaml"]})
    assert tree.discovered() is not first and len(walked) == 2

"""`konfig pending` (and `konfig matrix`) through the CLI; pending on the real control plane."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.monorepo import git_commit, git_init
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique


def test_matrix_github_output(
    konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    stacks = json.dumps([f"appops/p/s {i}" for i in range(5)])
    result = konfig("matrix", "--stacks", stacks, "--max-jobs", "2", "--github-output")
    assert result.code == 0, result.err
    matrix = json.loads(result.out)
    assert [json.loads(c["stacks"]) for c in matrix] == [
        ["appops/p/s 0", "appops/p/s 1", "appops/p/s 2"],
        ["appops/p/s 3", "appops/p/s 4"],
    ]
    text = out.read_text(encoding="utf-8")
    assert text.startswith("matrix<<KONFIG_EOF_") and json.dumps(matrix) in text
    bad = konfig("matrix", "--stacks", "appops/p/s")
    assert bad.code == 2 and "not valid JSON" in bad.err


def test_matrix_fixed_shards_for_a_static_matrix(
    konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    stacks = json.dumps([f"appops/p/s {i}" for i in range(5)])
    deleted = json.dumps(["appops/gone/dev"])
    args = ("matrix", "--stacks", stacks, "--deleted", deleted)
    # Outside a repository: the default sharding, 10 stacks a shard: 5 stacks in one.
    result = konfig(*args, "--shards", "4", "--github-output", cwd=tmp_path)
    assert result.code == 0, result.err
    shards = json.loads(result.out)
    assert [s["index"] for s in shards] == [0, 1, 2, 3]
    assert [json.loads(s["stacks"]) for s in shards] == [
        [f"appops/p/s {i}" for i in range(5)],
        [],
        [],
        [],
    ]
    assert [json.loads(s["deleted"]) for s in shards] == [["appops/gone/dev"], [], [], []]
    # the output: each shard's counts, never its stacks (issue 33 item 3)
    text = out.read_text(encoding="utf-8")
    counts = [{"index": 0, "stacks": 5, "deleted": 1}] + [
        {"index": i, "stacks": 0, "deleted": 0} for i in (1, 2, 3)
    ]
    assert text.startswith("shards<<KONFIG_EOF_") and json.dumps(counts) in text
    assert "appops/p/s 0" not in text
    assert "count<<" in text and "used<<KONFIG_EOF_" in text

    # 2,000 stacks over 8 shards: all 8 used, each stack where its hash puts it, and
    # the same answer for one shard alone.
    many = [f"appops/p{i:04d}/dev" for i in range(2000)]
    spread = json.loads(konfig("matrix", "--stacks", json.dumps(many), "--shards", "8").out)
    sizes = [len(json.loads(s["stacks"])) for s in spread]
    assert sum(sizes) == 2000 and min(sizes) > 180, sizes
    assert {x for s in spread for x in json.loads(s["stacks"])} == set(many)
    one = json.loads(konfig("matrix", "--stacks", json.dumps(many), "--shard", "7/8").out)
    assert one == spread[7]
    # 10,000 stacks are more than one argument holds (128 KiB): read from a file
    listed = tmp_path / "stacks.json"
    huge = [f"appops/p{i:05d}/dev" for i in range(10_000)]
    listed.write_text(json.dumps(huge), encoding="utf-8")
    assert len(json.dumps(huge)) > 128 * 1024
    from_file = konfig("matrix", "--stacks", f"@{listed}", "--shards", "8")
    assert from_file.code == 0, from_file.err
    assert sum(len(json.loads(s["stacks"])) for s in json.loads(from_file.out)) == 10_000
    missing = konfig("matrix", "--stacks", f"@{tmp_path / 'nope.json'}", "--shards", "8")
    assert missing.code == 2 and "cannot read it" in missing.err, missing.err

    for bad_args, message in [
        (("--shard", "8/8"), "I must be below N"),
        (("--shard", "x"), "expected I/N"),
        (("--shards", "2", "--max-jobs", "2"), "one of --shards"),
    ]:
        bad = konfig("matrix", "--stacks", stacks, *bad_args)
        assert bad.code == 2 and message in bad.err, bad.err


def test_matrix_follows_konfig_yaml_sharding(
    konfig: KonfigRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """konfig.yaml's `sharding` sets how many shards the stacks use; a wrong value is
    an error naming the key."""
    (tmp_path / "kcl.mod").write_text('[package]\nname = "x"\n', encoding="utf-8")
    conf = tmp_path / "konfig.yaml"
    conf.write_text("sharding:\n  stacksPerShard: 2\n  maxShards: 3\n", encoding="utf-8")
    out = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))

    def used(count: int, slots: int = 8) -> int:
        stacks = json.dumps([f"appops/p/s{i}" for i in range(count)])
        res = konfig("matrix", "--stacks", stacks, "--shards", str(slots), cwd=tmp_path)
        assert res.code == 0, res.err
        shards = json.loads(res.out)
        assert len(shards) == slots
        return sum(1 for s in shards if json.loads(s["stacks"]))

    assert used(1) == 1
    assert used(40) == 3  # maxShards
    assert used(40, slots=2) == 2  # the matrix's length
    # ... which bounds konfig.yaml's maxShards: said, with what to change
    capped = konfig("matrix", "--stacks", json.dumps([f"a/b/s{i}" for i in range(40)]),
                    "--shards", "2", cwd=tmp_path)  # fmt: skip
    assert capped.code == 0, capped.err
    assert "maxShards is 3" in capped.err and "2 jobs" in capped.err, capped.err
    assert "docs/forges.md" in capped.err
    quiet = konfig("matrix", "--stacks", '["a/b/c"]', "--shards", "2", cwd=tmp_path)
    assert "maxShards" not in quiet.err  # one shard of work: nothing held back
    res = konfig("matrix", "--stacks", '["a/b/c"]', "--shards", "8", "--github-output")
    assert res.code == 0 and "used<<" in out.read_text(encoding="utf-8")
    conf.write_text("sharding:\n  stacksPerShard: 0\n", encoding="utf-8")
    bad = konfig("matrix", "--stacks", '["appops/a/b"]', "--shards", "8", cwd=tmp_path)
    assert bad.code == 1, (bad.code, bad.err)  # a configuration error, as in every command
    assert "stacksPerShard" in bad.err and "konfig.yaml" in bad.err, bad.err


@pytest.mark.cluster
def test_pending_follows_the_inventories(
    konfig: KonfigRunner,
    repo_builder: RepoBuilder,
    cluster: Cluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = unique("p8a"), unique("p8b")
    stack_yaml = "name: dev\nkubernetes:\n  context: admin\n"
    repo_builder.write(".gitignore", "/.cache/\n")
    repo_builder.stack(a, "dev", stack_yaml=stack_yaml)
    repo_builder.stack(b, "dev", stack_yaml=stack_yaml)
    git_init(repo_builder.root)
    git_commit(repo_builder.root, "two stacks")
    root = str(repo_builder.root)
    kube = ("--kubeconfig", str(cluster.kubeconfig))
    mine = {f"appops/{a}/dev", f"appops/{b}/dev"}

    def pending() -> dict[str, object]:
        result = konfig("--root", root, "pending", "--json", *kube)
        assert result.code == 0, result.err
        data: dict[str, object] = json.loads(result.out)
        return data

    first = pending()
    assert {s["path"] for s in first["stacks"]} == mine  # type: ignore[attr-defined]
    applied = konfig("--root", root, "apply", "--yes", "--no-wait", f"{a}/dev", f"{b}/dev", *kube)
    assert applied.code == 0, applied.err
    assert pending()["stacks"] == []

    # A change to b only; then a is removed from the repository.
    repo_builder.write(f"appops/{b}/dev/notes.yaml", "x: 1\n")
    git_commit(repo_builder.root, "touch b")
    after = pending()
    assert [s["path"] for s in after["stacks"]] == [f"appops/{b}/dev"]  # type: ignore[attr-defined]
    shutil.rmtree(repo_builder.root / "appops" / a)
    git_commit(repo_builder.root, "remove a")
    out = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    result = konfig("--root", root, "pending", "--github-output", *kube)
    assert result.code == 0, result.err
    text = out.read_text(encoding="utf-8")
    assert re.search(r"^deleted-count<<(\S+)\n1\n\1$", text, re.M), text  # counts, no lists
    assert re.search(r"^stack-count<<(\S+)\n1\n\1$", text, re.M), text  # b, touched
    assert f"appops/{a}/dev (deleted)" in result.out
    # the deleted stacks as a file, as the apply action passes them (never as arguments)
    gone = tmp_path / "deleted.json"
    gone.write_text(json.dumps([f"appops/{a}/dev"]), encoding="utf-8")
    destroyed = konfig(
        "--root", root, "destroy", "--yes", "--deleted", "--no-wait", "--stacks-file", str(gone),
        *kube,
    )  # fmt: skip
    assert destroyed.code == 0, destroyed.err
    assert f"appops/{a}/dev" not in pending()["deleted_stacks"]  # type: ignore[operator]

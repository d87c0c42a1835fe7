import hashlib
import json
import os
import time
from pathlib import Path

import pytest
from fixtures.repos import KonfigRunner, RepoBuilder

from konfig.build import cache as cache_module
from konfig.build import kcl
from konfig.build.cache import CompileCache, DependencyIndex
from konfig.build.compiler import compile_cached, compile_input
from konfig.fingerprint import files_digest, package_digest
from konfig.repo import statmemo
from konfig.repo.layout import discover
from konfig.spec import load_spec

LIB_MAIN = (
    "import base.pkg.models.frontend\nimport base.pkg.lib.mid\nimport file\n\n"
    'app: frontend.Server {\n    name = "shop"\n    image = "nginx:1"\n'
    '    labels = mid.labels | {"data" = file.read("data.txt").strip()}\n}\n'
)


def _repo(repo_builder: RepoBuilder) -> RepoBuilder:
    repo_builder.write("base/pkg/lib/deep/deep.k", 'labels: {str:str} = {"deep" = "1"}\n')
    repo_builder.write("base/pkg/lib/mid.k", "import .deep\n\nlabels: {str:str} = deep.labels\n")
    repo_builder.stack("shop", "dev", main=LIB_MAIN)
    repo_builder.write("appops/shop/dev/data.txt", "one\n")
    repo_builder.stack("other", "dev")
    return repo_builder


def _compile(root: Path) -> dict[str, tuple[bool, str]]:
    repo = discover(root)
    inputs = [compile_input(repo, s) for s in repo.stacks]
    results = compile_cached(repo, inputs, state=root / ".cache/konfig")
    out: dict[str, tuple[bool, str]] = {}
    for r in results:
        assert r.spec is not None, str(r.error)
        out[r.stack_path] = (r.cached, r.spec.to_yaml())
    return out


def test_warm_run_reuses_and_every_dependency_invalidates(repo_builder: RepoBuilder) -> None:
    root = _repo(repo_builder).root
    cold = _compile(root)
    assert {p: c for p, (c, _) in cold.items()} == {
        "appops/other/dev": False,
        "appops/shop/dev": False,
    }
    warm = _compile(root)
    assert {p: c for p, (c, _) in warm.items()} == {
        "appops/other/dev": True,
        "appops/shop/dev": True,
    }
    assert {p: y for p, (_, y) in warm.items()} == {p: y for p, (_, y) in cold.items()}

    # a deep transitive import, a data file, the options: each recompiles only shop/dev
    edits = [
        ("base/pkg/lib/deep/deep.k", 'labels: {str:str} = {"deep" = "2"}\n', "deep: '2'"),
        ("appops/shop/dev/data.txt", "two\n", "data: two"),
        (
            "appops/shop/dev/ci-test/settings.yaml",
            "kcl_options:\n  - key: env\n    value: qa\n",
            None,
        ),
    ]
    for rel, text, expect in edits:
        repo_builder.write(rel, text)
        after = _compile(root)
        assert after["appops/other/dev"][0] is True, rel
        assert after["appops/shop/dev"][0] is False, rel
        if expect:
            assert expect in after["appops/shop/dev"][1]
    # a shared model every stack imports (through the render entry): everything recompiles
    server = root / "base/pkg/models/frontend/server.k"
    server.write_text(server.read_text() + "\n# touched\n")
    assert {c for c, _ in _compile(root).values()} == {False}


def test_corrupt_entry_is_ignored_and_rewritten(repo_builder: RepoBuilder) -> None:
    root = _repo(repo_builder).root
    _compile(root)
    entries = sorted((root / ".cache/konfig/compile").rglob("*.json"))
    assert len(entries) == 2
    for entry in entries:
        entry.write_text('{"key": "truncated')
    again = _compile(root)
    assert {c for c, _ in again.values()} == {False}
    for entry in entries:
        assert json.loads(entry.read_text())["key"] == entry.stem
    assert {c for c, _ in _compile(root).values()} == {True}


def test_key_covers_stack_files_and_imported_modules(repo_builder: RepoBuilder) -> None:
    root = _repo(repo_builder).root
    repo = discover(root)
    index = DependencyIndex.build(root, None)
    stack = repo.stack("shop/dev")
    inputs = compile_input(repo, stack)
    deps = index.deps(stack.path, stack.project_path, inputs.files, inputs.options, "0.0")
    for expected in ("appops/shop/dev/data.txt", "base/render/render.k", "kcl.mod"):
        assert expected in deps.files
    for module in ("base/pkg/lib/deep", "base/pkg/lib/mid", "base/pkg/models/frontend"):
        assert module in deps.modules
    assert not any(f.startswith("appops/other/") for f in deps.files)
    assert not any(m.startswith("appops/other") for m in deps.modules)
    other = index.deps(stack.path, stack.project_path, inputs.files, inputs.options, "0.1")
    assert other.key != deps.key  # the KCL version is part of the key


def test_cache_miss_on_unknown_key(tmp_path: Path) -> None:
    assert CompileCache(tmp_path).get("0" * 64) is None


def test_cli_no_cache_flag_and_cached_json(repo_builder: RepoBuilder, konfig: KonfigRunner) -> None:
    root = _repo(repo_builder).root
    first = konfig("compile", "--all", "--json", "-j", "1", cwd=root)
    assert first.code == 0, first.err
    assert [r["cached"] for r in json.loads(first.out)] == [False, False]
    second = konfig("compile", "--all", "--json", cwd=root)
    assert [r["cached"] for r in json.loads(second.out)] == [True, True]
    third = konfig("compile", "--all", "--json", "--no-cache", cwd=root)
    assert [r["cached"] for r in json.loads(third.out)] == [False, False]
    text = konfig("compile", "--all", "--out", str(root / "out"), cwd=root)
    assert "compiled 2/2 stacks (2 from cache)" in text.err


def test_prune_keeps_current_entries_and_drops_the_oldest(tmp_path: Path) -> None:
    store = CompileCache(tmp_path)
    spec = load_spec({"resources": []})
    keys = [f"{i:02d}" + "0" * 62 for i in range(6)]
    for age, key in enumerate(keys):
        store.put(key, f"appops/p/s{age}", spec, "resources: []\n")
        path = tmp_path / "compile" / key[:2] / f"{key}.json"
        os.utime(path, (1000 + age, 1000 + age))
    assert store.prune(keep=[keys[0]], limit=3) == 3
    left = sorted(p.stem for p in (tmp_path / "compile").glob("*/*.json"))
    assert left == [keys[0], keys[4], keys[5]]
    assert store.get(keys[0]) is not None
    assert store.prune(keep=[], limit=3) == 0


def test_changing_any_file_of_the_package_changes_the_fingerprint(tmp_path: Path) -> None:
    import shutil

    import konfig

    package = tmp_path / "konfig"
    shutil.copytree(
        Path(konfig.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    before = files_digest(package)
    files = sorted(p for p in package.rglob("*") if p.is_file())
    assert any(p.name == "yamlio.py" for p in files)  # the module the old list left out
    seen = {before}
    for path in files:
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        seen.add(files_digest(package))
        path.write_bytes(original)
    assert len(seen) == len(files) + 1  # every edit gave a digest of its own
    assert files_digest(package) == before
    (package / "new_module.py").write_text("x = 1\n", encoding="utf-8")
    assert files_digest(package) != before
    # and the compile cache keys on exactly that digest of the installed package
    installed = files_digest(Path(konfig.__file__).parent)
    assert cache_module.tool_fingerprint() == package_digest(konfig.__version__)
    assert (
        package_digest(konfig.__version__)
        == hashlib.sha256(f"{konfig.__version__}\0{installed}".encode()).hexdigest()
    )
    assert package_digest("another version") != package_digest(konfig.__version__)


def test_key_changes_with_the_tool_and_kcl_lib(
    repo_builder: RepoBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo(repo_builder).root
    assert not any(c for c, _ in _compile(root).values())
    assert all(c for c, _ in _compile(root).values())
    monkeypatch.setattr(cache_module, "tool_fingerprint", lambda state=None: "another konfig")
    assert not any(c for c, _ in _compile(root).values())
    monkeypatch.setattr(kcl, "library_version", lambda: "9.9.9")
    assert not any(c for c, _ in _compile(root).values())


# --- shortcuts of a warm run: files remembered by their stat must never serve stale data ---


def _later(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the run came seconds later: files written by the test count as settled, so
    their stat is remembered (outside the racy window that protects fresh files)."""
    later = time.time_ns() + 10 * 10**9
    monkeypatch.setattr(statmemo, "settled_before", lambda: later)


def _rewrite_keeping_size_and_mtime(path: Path, text: str) -> None:
    """Edit ``path`` so that its size and modification time stay what they were."""
    before = path.stat()
    assert len(text.encode()) == before.st_size and path.read_text() != text
    time.sleep(0.02)  # a later clock tick than the first write
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _cached(konfig: KonfigRunner, root: Path) -> dict[str, bool]:
    result = konfig("compile", "--all", "--json", "-j", "1", cwd=root)
    assert result.code == 0, result.err
    return {r["path"]: r["cached"] for r in json.loads(result.out)}


@pytest.mark.parametrize("settled", [False, True], ids=["within-the-second", "seconds-later"])
def test_an_edit_keeping_size_and_mtime_is_seen(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    monkeypatch: pytest.MonkeyPatch,
    settled: bool,
) -> None:
    root = _repo(repo_builder).root
    if settled:
        _later(monkeypatch)
    assert _cached(konfig, root) == {"appops/other/dev": False, "appops/shop/dev": False}
    assert _cached(konfig, root) == {"appops/other/dev": True, "appops/shop/dev": True}
    if settled:  # the stat of every file was remembered
        assert (
            "appops/shop/dev/ci-test/settings.yaml"
            in json.loads((root / ".cache/konfig/settings.json").read_text())["files"]
        )

    # a stack's options (ci-test/settings.yaml, read through the settings memo)
    settings = root / "appops/shop/dev/ci-test/settings.yaml"
    _rewrite_keeping_size_and_mtime(settings, settings.read_text().replace("dev", "qa!"))
    assert _cached(konfig, root) == {"appops/other/dev": True, "appops/shop/dev": False}
    # a data file the stack reads (its blob id, remembered by stat in worktree.json)
    _rewrite_keeping_size_and_mtime(root / "appops/shop/dev/data.txt", "two\n")
    result = konfig("compile", "shop/dev", cwd=root)
    assert result.code == 0, result.err
    assert "data: two" in result.out
    # a stack.yaml (read through the settings memo by discovery): its new name is wrong
    stack_yaml = root / "appops/other/dev/stack.yaml"
    _rewrite_keeping_size_and_mtime(stack_yaml, "name: xyz\n")
    result = konfig("compile", "--all", cwd=root)
    assert result.code == 1
    assert "appops/other/dev/stack.yaml" in result.err and "'xyz'" in result.err


def test_a_touched_file_with_the_same_content_still_hits(
    repo_builder: RepoBuilder, konfig: KonfigRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo(repo_builder).root
    _later(monkeypatch)
    cold = konfig("compile", "shop/dev", cwd=root)
    assert cold.code == 0, cold.err
    for rel in ("appops/shop/dev/data.txt", "appops/shop/dev/ci-test/settings.yaml"):
        path = root / rel
        path.write_text(path.read_text())  # new times, same bytes
        os.utime(path, ns=(time.time_ns(), time.time_ns() + 5 * 10**9))
    assert _cached(konfig, root)["appops/shop/dev"] is True
    warm = konfig("compile", "shop/dev", cwd=root)
    assert warm.out == cold.out


def test_the_package_digest_sees_an_edit_keeping_size_and_mtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import konfig

    package = tmp_path / "konfig"
    shutil.copytree(
        Path(konfig.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    _later(monkeypatch)
    memo_file = tmp_path / "package.json"
    plain = files_digest(package)
    memo = statmemo.StatMemo(memo_file, "seed")
    assert files_digest(package, memo) == plain
    memo.save()
    assert memo_file.is_file()
    module = package / "repo" / "yamlio.py"
    text = module.read_text()
    _rewrite_keeping_size_and_mtime(module, text.replace("import", "imp0rt", 1))
    assert files_digest(package, statmemo.StatMemo(memo_file, "seed")) != plain
    # a touched module with the same content: the same digest, read again
    module.write_text(text)
    assert files_digest(package, statmemo.StatMemo(memo_file, "seed")) == plain

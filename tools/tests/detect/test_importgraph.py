import shutil
from pathlib import Path

import pytest
from fixtures.repos import TEMPLATE_ROOT

from konfig.build import kcl
from konfig.detect.importgraph import ImportCache, ImportGraph, resolve, scan_files, scan_imports
from konfig.detect.snapshot import worktree_snapshot

IGNORE = shutil.ignore_patterns("_kcl_test_*", "__pycache__")


def test_scanner_reads_import_forms_and_skips_strings_and_comments() -> None:
    text = (
        '"""Docs.\n\nimport not.an.import\n"""\n'
        "import base.pkg.models.frontend\n"
        "import base.pkg.lib0 as lib\n"
        "  import .sibling\n"
        "import ..up.one as u\n"
        "# import commented.out\n"
        's = "import in.a.string"\n'
        "x = 1  # import trailing.comment\n"
        "import regex\n"
    )
    assert scan_imports(text) == [
        ("base.pkg.models.frontend", 5),
        ("base.pkg.lib0", 6),
        (".sibling", 7),
        ("..up.one", 8),
        ("regex", 12),
    ]


@pytest.mark.parametrize(
    ("name", "file", "root", "expected"),
    [
        ("base.pkg.lib0", "appops/p/dev/main.k", "", "base/pkg/lib0"),
        (".er", "a/deep/m.k", "", "a/deep/er"),
        ("..x.y", "a/deep/m.k", "", "a/x/y"),
        ("...both", "a/deep/m.k", "", "both"),
        ("....above", "a/deep/m.k", "", None),
        ("regex", "a/m.k", "", None),
        ("lib.x", "sub/mod/a/m.k", "sub/mod", "sub/mod/lib/x"),
    ],
)
def test_resolve(name: str, file: str, root: str, expected: str | None) -> None:
    assert resolve(name, file, root) == expected


def _assert_equal_to_kcl(root: Path) -> int:
    snapshot = worktree_snapshot(root)
    imports = scan_files(snapshot.files, snapshot.read, ImportCache(None))
    graph = ImportGraph.build(snapshot.files, imports)
    checked = 0
    for path in sorted(imports):
        deps, _errors = kcl.import_deps(root / path)
        kcl_view = {Path(d).resolve().relative_to(root.resolve()).as_posix() for d in deps}
        assert graph.resolved_files(path, snapshot.files) == kcl_view, path
        checked += 1
    return checked


def test_scanner_equals_kcl_parser_on_the_template_repository(tmp_path: Path) -> None:
    # a copy: other tools (kcl's test runner) drop temporary files into the live tree
    copy = tmp_path / "template"
    for name in ("kcl.mod", "konfig.yaml"):
        copy.mkdir(exist_ok=True)
        shutil.copy2(TEMPLATE_ROOT / name, copy / name)
    for name in ("base", "appops"):
        shutil.copytree(TEMPLATE_ROOT / name, copy / name, ignore=IGNORE)
    assert _assert_equal_to_kcl(copy) >= 5


def test_scanner_equals_kcl_parser_on_a_generated_monorepo(monorepo: Path) -> None:
    assert _assert_equal_to_kcl(monorepo) >= 20


def test_scanner_equals_kcl_parser_on_tricky_layouts(tmp_path: Path) -> None:
    root = tmp_path / "r"
    files = {
        "kcl.mod": '[package]\nname = "x"\n',
        "a/b/one.k": "v = 1\n",
        "a/b/two.k": "v2 = 1\n",
        "a/b/one_test.k": "t = 1\n",
        "a/b/inner/i.k": "i = 1\n",
        "a/b/data.json": "{}\n",
        "both.k": "w = 1\n",
        "both/in.k": "w = 2\n",
        "x/y/z.k": "z = 1\n",
        "a/deep/er/e.k": "e = 1\n",
        "m1.k": "import a.b\nimport both\nimport math\nimport missing.pkg\n",
        "a/deep/m2.k": "import .er\nimport ...both as bb\nimport ...x.y\n",
        "a/m3.k": 'import .b.inner\nimport .b\n"""\nimport x.y\n"""\n',
        "m4.k": "import a.b.one\n",
        # a nested KCL module resolves from its own kcl.mod
        "nested/kcl.mod": '[package]\nname = "nested"\n',
        "nested/x/y.k": "n = 1\n",
        "nested/m5.k": "import x\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert _assert_equal_to_kcl(root) == 14


def test_cache_reads_only_changed_blobs(tmp_path: Path) -> None:
    files = {"a.k": "blob-a", "b.k": "blob-b", "c.txt": "blob-c"}
    contents = {"a.k": b"import x.y\n", "b.k": b"import .z\n"}
    reads: list[list[str]] = []

    def read(paths: list[str]) -> dict[str, bytes]:
        reads.append(sorted(paths))
        return {p: contents[p] for p in paths}

    cache_file = tmp_path / "imports.json"
    cache = ImportCache.load(cache_file)
    assert scan_files(files, read, cache) == {"a.k": [("x.y", 1)], "b.k": [(".z", 1)]}
    cache.save()
    contents["b.k"] = b"import q\n"
    warm = ImportCache.load(cache_file)
    assert scan_files({**files, "b.k": "blob-b2"}, read, warm) == {
        "a.k": [("x.y", 1)],
        "b.k": [("q", 1)],
    }
    assert reads == [["a.k", "b.k"], ["b.k"]]
    cache_file.write_text("{not json")
    assert ImportCache.load(cache_file).entries == {}

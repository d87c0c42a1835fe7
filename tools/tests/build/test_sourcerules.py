"""The rules on a pull request's KCL source, on plain text and on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from konfig.build.sourcerules import SourceRules, source_findings


def _found(text: str, **kwargs: object) -> list[tuple[str, int]]:
    return [(f.rule, f.line) for f in source_findings(text, "x.k", **kwargs)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('import file\n\nx = file.write("a", "b")\n', [("kcl/side-effect", 3)]),
        ('import file as f\n\nx = [f.mkdir][0]("d")\n', [("kcl/side-effect", 3)]),
        ('import file as f\nimport file\n\nx = f.append("a", "b")\n', [("kcl/side-effect", 4)]),
        ('import json\n\nx = json.dump_to_file({}, "/etc/x")\n', [("kcl/side-effect", 3)]),
        ('import yaml as y\n\nx = y.dump_all_to_file([], "x")\n', [("kcl/side-effect", 3)]),
        ('import crypto\n\nx = crypto.filesha512("/etc/x")\n', [("kcl/file-hash", 3)]),
        ('import kcl_plugin.hello\n\nx = hello.say("a")\n', [("kcl/plugin", 1)]),
        ('import file\n\nx = file.read("a.txt")\ny = file.read_env("HOME")\n', []),
        ("import crypto\nimport json\n\nx = crypto.sha256(json.encode({}))\n", []),
        # a name that is not an import of a watched module
        ("schema file:\n    write: int\n\nx = file {write = 1}\n", []),
    ],
)
def test_each_refused_function_and_import(text: str, expected: list[tuple[str, int]]) -> None:
    assert _found(text) == expected


def test_a_file_at_the_root_may_use_no_function_of_file() -> None:
    text = 'import file\n\nx = file.read(".git/config")\n'
    assert _found(text, at_root=True) == [("kcl/root-read", 3)]
    assert _found(text) == []


def test_the_files_of_a_main_package_share_their_imports(tmp_path: Path) -> None:
    (tmp_path / "kcl.mod").write_text('[package]\nname = "x"\n')
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "a.k").write_text("import file as f\n\nx = 1\n")
    (tmp_path / "s" / "b.k").write_text('y = f.delete("stack.yaml")\n')
    found = SourceRules(tmp_path).findings([tmp_path / "s" / "a.k", tmp_path / "s" / "b.k"])
    assert [(f.rule, f.file, f.line) for f in found] == [("kcl/side-effect", "s/b.k", 1)]


def test_modules_imported_from_the_repository_are_checked_transitively(tmp_path: Path) -> None:
    (tmp_path / "kcl.mod").write_text('[package]\nname = "x"\n')
    (tmp_path / "lib" / "deep").mkdir(parents=True)
    (tmp_path / "lib" / "a.k").write_text("import lib.deep\n\nx = deep.y\n")
    (tmp_path / "lib" / "deep" / "d.k").write_text('import file\n\ny = file.mv("a", "b")\n')
    (tmp_path / "lib" / "deep" / "d_test.k").write_text("import kcl_plugin.x\n")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "main.k").write_text("import lib\n\nz = lib.x\n")
    rules = SourceRules(tmp_path)
    found = rules.findings([tmp_path / "s" / "main.k"])
    # the package's tests are not part of the program
    assert [(f.rule, f.file, f.line) for f in found] == [("kcl/side-effect", "lib/deep/d.k", 3)]
    (tmp_path / "lib" / "deep" / "d.k").write_text("y = 1\n")
    assert rules.findings([tmp_path / "s" / "main.k"]) == []


def test_programs_checked_together_get_what_each_gets_alone(tmp_path: Path) -> None:
    """``findings_of`` walks the modules several programs share once: each program still
    gets the findings of exactly what it imports, through a cycle of imports too."""
    (tmp_path / "kcl.mod").write_text('[package]\nname = "x"\n')
    (tmp_path / "lib" / "deep").mkdir(parents=True)
    (tmp_path / "lib" / "a.k").write_text("import lib.deep\n\nx = deep.y\n")
    (tmp_path / "lib" / "deep" / "d.k").write_text(
        'import file\nimport lib\n\ny = file.mv("a", "b")\n'
    )
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "o.k").write_text('import crypto\n\nh = crypto.filesha256("/x")\n')
    programs = {
        "s1": "import lib\n\nz = lib.x\n",
        "s2": "import lib.deep\nimport other\n\nz = 1\n",
        "s3": "z = 1\n",
        "s4": 'import file as f\n\nz = f.write("a", "b")\n',
    }
    for name, text in programs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "main.k").write_text(text)
    entries = [[tmp_path / name / "main.k"] for name in programs]

    def shown(found: list[object]) -> list[tuple[str, str, int]]:
        return [(f.rule, f.file, f.line) for f in found]  # type: ignore[attr-defined]

    together = SourceRules(tmp_path).findings_of(entries)
    alone = [SourceRules(tmp_path).findings(e) for e in entries]
    assert together == alone
    mv = ("kcl/side-effect", "lib/deep/d.k", 4)
    assert [shown(f) for f in together] == [
        [mv],
        [mv, ("kcl/file-hash", "other/o.k", 3)],
        [],
        [("kcl/side-effect", "s4/main.k", 3)],
    ]
    # the same rules, later: a changed module is read again
    rules = SourceRules(tmp_path)
    rules.findings_of(entries)
    (tmp_path / "lib" / "deep" / "d.k").write_text("import lib\n\ny = 1\n")
    assert [shown(f) for f in rules.findings_of(entries)] == [
        [],
        [("kcl/file-hash", "other/o.k", 3)],
        [],
        [("kcl/side-effect", "s4/main.k", 3)],
    ]

"""Every link in the repository's documents resolves, as GitHub renders them.

- Markdown: every tracked ``*.md`` (the README, ``docs/``, ``tools/konfig/README.md``,
  ``actions/*/README.md``, ``hack/*.d/README.md``, ...; not the golden reports under
  ``tools/tests/``, which are command output): each relative link or image names a file
  or directory of the repository, and its ``#anchor`` is a heading of the target
  (GitHub's anchors, see :func:`mdparse.anchors`) or, in another kind of file, a line
  (``#L12``, ``#L12-L20``) it has. Links with a scheme (``https:``, ``mailto:``) are not
  fetched.
- Workflow and action YAML (``.github/**/*.yml``, ``actions/*/action.yml``): each
  ``*.md`` path a comment names exists (from the repository root, or from the file's
  folder when it starts with ``./`` or ``../``), with its ``#anchor``, and a section
  named after it in quotes (``docs/operate.md, "Credentials in the workflows"``) is a
  heading of that file.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import mdparse
import pytest

ROOT = Path(__file__).resolve().parents[2]
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")
_LINE_ANCHOR = re.compile(r"^L(\d+)(?:-L(\d+))?$")
# A comment: "#" at the start of a line or after whitespace, to the end of the line.
_COMMENT = re.compile(r"(?:^|\s)#(.*)$")
# A markdown path in a comment, its optional #anchor, and an optional quoted section
# right after it: docs/operate.md, "Credentials in the workflows"
_MD_REF = re.compile(
    r"(?<![\w/.@-])((?:\.\.?/)*[\w.-]+(?:/[\w.-]+)*\.md)(?:#([\w-]+))?(?:,\s*\"([^\"]+)\")?"
)


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z", "--", *patterns],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted(f for f in out.split("\0") if f and (ROOT / f).is_file())


def documents() -> list[str]:
    return [f for f in _tracked("*.md") if "/golden/" not in f]


def yaml_with_comments() -> list[str]:
    return _tracked(".github/*.yml", ".github/*.yaml", "actions/*.yml", "actions/*.yaml")


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _anchor_problem(target: Path, anchor: str, root: Path) -> str | None:
    rel = target.relative_to(root)
    if target.is_file() and target.suffix == ".md":
        if anchor in mdparse.anchors(target.read_text(encoding="utf-8")):
            return None
        return f"{rel} has no heading with the anchor #{anchor}"
    lines = _LINE_ANCHOR.match(anchor)
    if target.is_file() and lines:
        count = len(target.read_text(encoding="utf-8").splitlines())
        last = int(lines.group(2) or lines.group(1))
        if last <= count:
            return None
        return f"{rel} has {count} lines, #{anchor} points past them"
    return f"#{anchor}: {rel} is not a markdown file (anchors there are #L<line>)"


def link_problems(doc: Path, root: Path) -> list[str]:
    """What is wrong with the links of one markdown document: 'file:line: why'."""
    text = doc.read_text(encoding="utf-8")
    problems: list[str] = []
    rel_doc = doc.relative_to(root)
    for link in mdparse.links(text):
        target = link.target
        if not target or _SCHEME.match(target):
            continue
        where = f"{rel_doc}:{link.line}: ({target})"
        if target.startswith("/"):
            problems.append(f"{where} is absolute: GitHub resolves it against the site")
            continue
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / unquote(path)).resolve() if path else doc.resolve()
        if not _inside(resolved, root.resolve()):
            problems.append(f"{where} points outside the repository")
            continue
        if not resolved.exists():
            problems.append(f"{where}: {resolved.relative_to(root.resolve())} does not exist")
            continue
        if anchor:
            why = _anchor_problem(resolved, unquote(anchor), root.resolve())
            if why:
                problems.append(f"{where}: {why}")
    return problems


def comment_problems(file: Path, root: Path) -> list[str]:
    """What is wrong with the markdown references in a YAML file's comments."""
    problems: list[str] = []
    rel_file = file.relative_to(root)
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        comment = _COMMENT.search(line)
        if not comment:
            continue
        for ref in _MD_REF.finditer(comment.group(1)):
            path, anchor, section = ref.group(1), ref.group(2), ref.group(3)
            base = file.parent if path.startswith(("./", "../")) else root
            resolved = (base / path).resolve()
            where = f"{rel_file}:{number}: {path}"
            if not _inside(resolved, root.resolve()) or not resolved.is_file():
                problems.append(f"{where} does not exist")
                continue
            if anchor:
                why = _anchor_problem(resolved, anchor, root.resolve())
                if why:
                    problems.append(f"{where}: {why}")
            if section:
                titles = {h.text for h in mdparse.headings(resolved.read_text(encoding="utf-8"))}
                if section not in titles:
                    problems.append(f'{where}: no heading "{section}" there')
    return problems


@pytest.mark.parametrize("doc", documents())
def test_markdown_links_resolve(doc: str) -> None:
    assert link_problems(ROOT / doc, ROOT) == []


@pytest.mark.parametrize("file", yaml_with_comments())
def test_workflow_and_action_comments_name_files_that_exist(file: str) -> None:
    found = {re.sub(r":\d+: ", ": ", p, count=1) for p in comment_problems(ROOT / file, ROOT)}
    assert found == set()


def test_the_documents_checked_include_every_readme_and_docs() -> None:
    docs = set(documents())
    assert {"README.md", "tools/konfig/README.md"} <= docs
    assert {f for f in docs if f.startswith("docs/")}, "no docs/ file checked"
    for folder in [*ROOT.glob("actions/*/"), *ROOT.glob("hack/*.d/")]:
        if (folder / "README.md").is_file():
            assert f"{folder.relative_to(ROOT)}/README.md" in docs
    assert ".github/workflows/preview.yml" in yaml_with_comments()
    assert "actions/setup/action.yml" in yaml_with_comments()


# -- the checker itself, on documents made for it ---------------------------------------


def test_github_anchors_of_headings() -> None:
    text = (
        "# Konfig\n## `konfig status`\n### Terraform resources (a stack's database)\n"
        "## In CI (GitHub and Gitea)\n## Drift\n## Drift\n## Python ≥ 3.11, make_it\n"
    )
    assert mdparse.anchors(text) == {
        "konfig",
        "konfig-status",
        "terraform-resources-a-stacks-database",
        "in-ci-github-and-gitea",
        "drift",
        "drift-1",
        "python--311-make_it",
    }


def test_broken_links_anchors_and_absolute_paths_are_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n## The part\n", encoding="utf-8")
    (tmp_path / "tool.py").write_text("x = 1\ny = 2\n", encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "# Top\n\n"
        "[ok](docs/a.md#the-part) [dir](docs/) [self](#top) [web](https://example.com/x)\n"
        "[line](tool.py#L2) [ref][r]\n\n"
        "[gone](docs/b.md) [anchor](docs/a.md#nope) [self-anchor](#nope)\n\n"
        "[abs](/docs/a.md) [out](../elsewhere.md) [past](tool.py#L3) ![img](docs/x.png)\n\n"
        "[r]: docs/a.md#a\n",
        encoding="utf-8",
    )
    problems = link_problems(tmp_path / "README.md", tmp_path)
    assert problems == [
        "README.md:6: (docs/b.md): docs/b.md does not exist",
        "README.md:6: (docs/a.md#nope): docs/a.md has no heading with the anchor #nope",
        "README.md:6: (#nope): README.md has no heading with the anchor #nope",
        "README.md:8: (/docs/a.md) is absolute: GitHub resolves it against the site",
        "README.md:8: (../elsewhere.md) points outside the repository",
        "README.md:8: (tool.py#L3): tool.py has 2 lines, #L3 points past them",
        "README.md:8: (docs/x.png): docs/x.png does not exist",
    ]


def test_comment_references_are_checked(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "operate.md").write_text(
        "# Operate\n### Credentials in the workflows\n", encoding="utf-8"
    )
    workflow = tmp_path / ".github" / "workflows" / "x.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(
        "# Security (docs: GITHUB.md): never pull_request_target.\n"
        '# read-only (docs/operate.md, "Credentials in the workflows").\n'
        '# (docs/operate.md, "Credentials") and docs/operate.md#operate\n'
        "on: push  # see ../../docs/operate.md#nope\n"
        "run: echo ${#list[@]} docs/not-a-comment.md\n",
        encoding="utf-8",
    )
    assert comment_problems(workflow, tmp_path) == [
        ".github/workflows/x.yml:1: GITHUB.md does not exist",
        '.github/workflows/x.yml:3: docs/operate.md: no heading "Credentials" there',
        ".github/workflows/x.yml:4: ../../docs/operate.md: docs/operate.md has no heading "
        "with the anchor #nope",
    ]

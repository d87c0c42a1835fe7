"""Stack addresses are literal paths, and names that are not safe are `check` findings.

A stack directory may be called ``st*r?``: compile, test and apply must use that
stack and no other, even when a sibling (``stArX``) matches it as a glob pattern.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import yaml
from fixtures.repos import KonfigRunner, RepoBuilder

MAIN = """\
import base.pkg.models.frontend

{var} = frontend.Manifests {{
    manifests = [{{
        apiVersion = "v1"
        kind = "ConfigMap"
        metadata = {{name = "{name}", namespace = "weird"}}
        data = {{who = "{name}"}}
    }}]
}}
"""


def _glob_twins(repo: RepoBuilder) -> None:
    repo.stack(
        "weird", "st*r?", main=MAIN.format(var="glob", name="star"), stack_yaml='name: "st*r?"\n'
    )
    repo.stack("weird", "stArX", main=MAIN.format(var="plain", name="starx"))


def _names(spec_text: str) -> list[str]:
    spec = yaml.safe_load(spec_text)
    return sorted(r["attributes"]["metadata"]["name"] for r in spec["resources"])


def test_compile_takes_a_glob_like_stack_name_literally(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _glob_twins(repo_builder)
    result = konfig("compile", "weird/st*r?", "--no-cache", cwd=repo_builder.root)
    assert result.code == 0, result.err
    assert _names(result.out) == ["star"]
    other = konfig("compile", "weird/stArX", "--no-cache", cwd=repo_builder.root)
    assert other.code == 0, other.err
    assert _names(other.out) == ["starx"]


def test_test_update_writes_the_literal_stacks_golden(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _glob_twins(repo_builder)
    result = konfig("test", "weird/st*r?", "--update", "--no-unit", cwd=repo_builder.root)
    assert result.code == 0, result.out + result.err
    golden = repo_builder.root / "appops/weird/st*r?/ci-test/stdout.golden.yaml"
    assert _names(golden.read_text(encoding="utf-8")) == ["star"]
    assert not (repo_builder.root / "appops/weird/stArX/ci-test/stdout.golden.yaml").exists()


def _findings(out: str) -> list[tuple[str, str | None]]:
    return [(f["rule"], f["file"]) for f in json.loads(out)]


def test_check_reports_unsafe_stack_and_project_names(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    _glob_twins(repo_builder)
    for name in (
        "dev\u202eved",  # a right-to-left override: displays as "devdev"
        "a\x1bb",  # an ESC, as in ANSI colour codes
        "x$(id)",  # shell substitution
    ):
        repo_builder.stack("weird", name, stack_yaml=f"name: {json.dumps(name)}\n")
    repo_builder.stack("safe", "dev")
    result = konfig("check", "--format", "json", cwd=repo_builder.root)
    assert result.code == 1, result.out + result.err
    found = _findings(result.out)
    for name in ("st*r?", "dev\u202eved", "a\x1bb", "x$(id)"):
        assert ("structure/unsafe-name", f"appops/weird/{name}/stack.yaml") in found, found
    assert not any(f[1] and f[1].startswith("appops/safe/") for f in found), found
    assert not any(
        rule == "structure/unsafe-name" and file == "appops/weird/stArX/stack.yaml"
        for rule, file in found
    )
    text = konfig("check", cwd=repo_builder.root)
    # the terminal never gets the raw control or override characters
    assert "\x1b" not in text.out + text.err and "\u202e" not in text.out + text.err
    assert "\\u202e" in text.out + text.err


def test_check_reports_names_equal_after_unicode_normalisation(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    composed = unicodedata.normalize("NFC", "caf\u00e9")
    decomposed = unicodedata.normalize("NFD", "caf\u00e9")
    assert composed != decomposed
    repo_builder.stack("shop", composed, stack_yaml=f"name: {json.dumps(composed)}\n")
    repo_builder.stack("shop", decomposed, stack_yaml=f"name: {json.dumps(decomposed)}\n")
    result = konfig("check", "--format", "json", cwd=repo_builder.root)
    assert result.code == 1, result.out + result.err
    found = _findings(result.out)
    for name in (composed, decomposed):
        assert ("structure/unsafe-name", f"appops/shop/{name}/stack.yaml") in found, found
    messages = [
        f["message"] for f in json.loads(result.out) if f["rule"] == "structure/unsafe-name"
    ]
    assert any("Unicode normalisation" in m for m in messages), messages


def test_a_stack_is_never_selected_through_a_pattern(
    repo_builder: RepoBuilder, konfig: KonfigRunner, tmp_path: Path
) -> None:
    repo_builder.stack("weird", "stArX", main=MAIN.format(var="plain", name="starx"))
    result = konfig("compile", "weird/st*r?", "--no-cache", cwd=repo_builder.root)
    assert result.code == 2
    assert "unknown stack 'weird/st*r?'" in result.err

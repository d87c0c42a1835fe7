"""Ignore rules as declared: a bad rule is an error at its file and line (stack.yaml,
project.yaml, konfig.yaml), for every command that reads the repository."""

from __future__ import annotations

from fixtures.repos import KonfigRunner, RepoBuilder

STACK = """\
name: dev
ignore:
  - selector: {kind: Deployment}
    paths: [/spec/replicas]
    reason: scaled by hand
  - paths: [spec/replicas]
    reason: no leading slash
"""


def test_a_bad_pointer_is_an_error_at_its_line(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    repo_builder.stack("shop", "dev", stack_yaml=STACK)
    res = konfig("check", "shop/dev", cwd=repo_builder.root)
    assert res.code != 0
    out = res.out + res.err
    assert "appops/shop/dev/stack.yaml:6" in out, out
    assert "'spec/replicas' is not a JSON Pointer such as /spec/replicas" in out, out
    assert "stack.yaml:4" not in out  # the good rule


def test_a_rule_without_a_reason_is_an_error(
    repo_builder: RepoBuilder, konfig: KonfigRunner
) -> None:
    konfig_yaml = repo_builder.root / "konfig.yaml"
    text = konfig_yaml.read_text(encoding="utf-8")
    rule_line = text.count("\n") + 2  # the rule's line, below `ignore:` at the end
    konfig_yaml.write_text(text + "ignore:\n  - paths: [/spec/replicas]\n", encoding="utf-8")
    repo_builder.stack("shop", "dev")
    res = konfig("list", cwd=repo_builder.root)
    assert res.code == 1, res.out + res.err
    assert f"konfig.yaml:{rule_line}: `ignore[0].reason` is required" in res.err, res.err
    assert "is not a JSON Pointer" not in res.err

"""PromQL rule: every expression of a PrometheusRule parses (``promql/parse``).

The expressions of a Prometheus Operator ``PrometheusRule`` (its alerting and recording
rules) are parsed offline by ``promql-parser`` (Prometheus' grammar, no server asked). An
expression that does not parse would be refused by the operator's admission webhook, or
worse, loaded by no Prometheus: the finding points at the line of ``main.k`` (or the
project's ``base/*.k``) that holds the expression, else at the resource.

The expression is stack input (hostile): it is only parsed, never evaluated, and one
longer than :data:`MAX_EXPRESSION` characters is refused unparsed (the parser recurses on
nesting, and an unbounded input could exhaust its stack).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import promql_parser

from konfig.check.findings import Finding
from konfig.check.locate import locate
from konfig.repo.layout import MAIN, Stack
from konfig.spec import Resource, Spec

RULE = "promql/parse"
GROUP = "monitoring.coreos.com"
KIND = "PrometheusRule"
MAX_EXPRESSION = 4096  # characters; the parser was tried at this size with nested input


def parse_error(expr: str) -> str | None:
    """Why ``expr`` is not PromQL, or None when it parses."""
    if len(expr) > MAX_EXPRESSION:
        return f"it is {len(expr)} characters long, more than the {MAX_EXPRESSION} konfig parses"
    try:
        promql_parser.parse(expr)
    except ValueError as exc:
        return str(exc) or "it does not parse"
    return None


def rule_expressions(resource: Resource) -> Iterator[tuple[str, str]]:
    """``(rule name, expression)`` of each rule of a PrometheusRule; nothing for other kinds."""
    attrs = resource.attributes
    if resource.is_terraform or attrs.get("kind") != KIND:
        return
    if str(attrs.get("apiVersion", "")).split("/")[0] != GROUP:
        return
    spec = attrs.get("spec")
    groups = spec.get("groups") if isinstance(spec, dict) else None
    for group in groups if isinstance(groups, list) else []:
        rules = group.get("rules") if isinstance(group, dict) else None
        for index, rule in enumerate(rules if isinstance(rules, list) else []):
            if not isinstance(rule, dict) or not isinstance(rule.get("expr"), str):
                continue
            name = rule.get("alert") or rule.get("record") or f"rule {index + 1}"
            yield str(name), rule["expr"]


def check_promql(root: Path, stack: Stack, spec: Spec) -> list[Finding]:
    findings = []
    for resource in spec.resources:
        for name, expr in rule_expressions(resource):
            reason = parse_error(expr)
            if reason is None:
                continue
            file, line = _locate_expression(root, stack, resource, expr)
            shown = expr if len(expr) <= 200 else expr[:200] + "…"
            findings.append(
                Finding(
                    RULE,
                    f"{resource.id}: the expression of {name!r} is not PromQL: {reason}: {shown!r}",
                    file,
                    line,
                    stack=stack.path,
                    resource=resource.id,
                )
            )
    return findings


def _locate_expression(
    root: Path, stack: Stack, resource: Resource, expr: str
) -> tuple[str, int | None]:
    """The first line of main.k (then the project's base/*.k) holding the expression as
    written in KCL (its quotes escaped or not), else where the resource is."""
    needles = {expr, expr.replace("\\", "\\\\").replace('"', '\\"')}
    needles = {n.strip().splitlines()[0] for n in needles if n.strip()}
    candidates = [root / stack.path / MAIN]
    base = root / stack.project_path / "base"
    if base.is_dir():
        candidates.extend(sorted(p for p in base.glob("*.k") if not p.name.endswith("_test.k")))
    for path in candidates:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for number, line in enumerate(lines, 1):
            if any(n in line for n in needles):
                return path.relative_to(root).as_posix(), number
    return locate(root, stack, resource)

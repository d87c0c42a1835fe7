"""``promotion/unknown-stack``: a stack's ``promotion.after`` names a stack the
repository does not have (a typo would otherwise hold the stack forever), or the stack
itself, or closes a cycle (every stack of it would wait for the others forever)."""

from __future__ import annotations

from konfig.check.findings import Finding
from konfig.contracts.yamlpos import key_lines
from konfig.repo.layout import STACK_FILE, Repository

UNKNOWN_RULE = "promotion/unknown-stack"


def check_promotion(repo: Repository) -> list[Finding]:
    known = {s.path for s in repo.stacks}
    edges: dict[str, list[str]] = {}
    findings: list[Finding] = []
    for stack in repo.stacks:
        data = stack.raw.get("promotion")
        if not isinstance(data, dict) or not isinstance(data.get("after"), list):
            continue
        rel = f"{stack.path}/{STACK_FILE}"
        path = repo.root / rel
        lines = key_lines(path.read_text(encoding="utf-8")) if path.is_file() else {}
        for i, first in enumerate(data["after"]):
            first = str(first).strip("/")
            line = lines.get(("promotion", "after", i)) or lines.get(("promotion", "after"))
            if first == stack.path or first not in known:
                what = "itself" if first == stack.path else f"{first!r}, which is no stack"
                findings.append(
                    Finding(
                        UNKNOWN_RULE,
                        f"promotion.after names {what}: the stack would be held forever; "
                        "name stacks as appops/<project>/<stack> (`konfig list`)",
                        rel,
                        line,
                        stack=stack.path,
                    )
                )
            else:
                edges.setdefault(stack.path, []).append(first)
    for cycle in _cycles(edges):
        findings.append(
            Finding(
                UNKNOWN_RULE,
                "promotion.after makes a cycle: " + " -> ".join(cycle) + ": each stack "
                "would wait for the others forever",
                f"{cycle[0]}/{STACK_FILE}",
                stack=cycle[0],
            )
        )
    return findings


def _cycles(edges: dict[str, list[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycle = [*path[path.index(node) :], node]
            if not any(set(cycle) == set(c) for c in found):
                found.append(cycle)
            return
        if node in done:
            return
        for nxt in edges.get(node, ()):
            visit(nxt, [*path, node])
        done.add(node)

    for start in sorted(edges):
        visit(start, [])
    return found

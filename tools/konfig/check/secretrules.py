"""Rules ``secrets/*``: encrypted files and plain-text Secret data.

- ``secrets/plaintext-secret`` — a compiled v1 Secret carries ``data`` or
  ``stringData`` in plain text: put the values in an encrypted file beside the stack
  and reference them (``fromFile``/``keys``, docs/secrets.md);
- ``secrets/not-encrypted``, ``secrets/malformed``, ``secrets/plaintext-value``,
  ``secrets/recipients``, ``secrets/decrypt`` — every ``*.enc.yaml`` in the checked
  scope, see :mod:`konfig.secrets.audit` (``decrypt`` only with a key of one of the
  file's recipients, passed in by the CLI).

The messages name the file, the key and the resource, never a value.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from konfig.check.findings import Finding
from konfig.check.locate import locate
from konfig.repo.layout import Stack
from konfig.secrets.audit import Problem, audit_files, audit_specs, encrypted_files
from konfig.secrets.errors import SecretsError
from konfig.secrets.keys import Keyring
from konfig.secrets.rules import RULES_FILE, load_rules
from konfig.spec import Spec


def check_secret_specs(root: Path, stack: Stack, spec: Spec) -> list[Finding]:
    findings = []
    by_id = spec.by_id()
    for problem in audit_specs({stack.path: spec}):
        resource = by_id.get(problem.resource or "")
        file, line = locate(root, stack, resource)
        findings.append(
            Finding(
                problem.rule,
                problem.message,
                file,
                line,
                stack=stack.path,
                resource=problem.resource,
            )
        )
    return findings


def check_secret_files(
    root: Path, scope: Sequence[str] | None, keyring: Keyring | None
) -> list[Finding]:
    """The encrypted files under ``scope`` (directories; None: the whole repository)."""
    files = [
        f
        for f in encrypted_files(root)
        if scope is None or any(f == d or f.startswith(d.rstrip("/") + "/") for d in scope)
    ]
    if not files:
        return []
    try:
        rules = load_rules(root)
    except SecretsError as exc:
        return [Finding("secrets/rules", exc.message, RULES_FILE, exc.line)]
    report = audit_files(root, files, rules=rules, keyring=keyring)
    return [_finding(p) for p in report.problems]


def _finding(problem: Problem) -> Finding:
    return Finding(problem.rule, problem.message, problem.file, problem.line, stack=problem.stack)

"""Policy rules: the KCL policies under ``base/pkg/policies/`` evaluated against Specs.

The policy entry (``base/pkg/policies/evaluate/main.k``) is compiled with stacks and
their resources passed in as the ``konfig_policy_inputs`` option (a list: one KCL run
evaluates a batch of stacks); it returns the rule ids it knows and the violations per
stack. Each violation becomes a finding ``policy/<rule id>``, unless the stack's
stack.yaml switches the rule off with a reason (``policies: {disable: [{rule, reason,
resources?}]}``). Switching off a rule that does not exist is ``policy/unknown-rule``;
a policy that fails to evaluate is ``policy/error``.

The policies are KCL from the repository, so from the pull request: they run in a
worker process (:mod:`konfig.build.workers`: an empty environment, limits), with the
entry's own directory as KCL's work directory (the only one kcl-lib lets ``file``
functions reach) and after the source rules (:mod:`konfig.build.sourcerules`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from konfig.build import kcl
from konfig.build.limits import Limits
from konfig.check.findings import Finding
from konfig.check.locate import locate
from konfig.check.privilege import SWITCHABLE  # konfig's own rules a stack may switch off
from konfig.check.structure import Exemption, disabled_rules
from konfig.contracts.yamlpos import key_lines
from konfig.repo.layout import STACK_FILE, Stack
from konfig.spec import Spec

POLICY_ENTRY = "base/pkg/policies/evaluate/main.k"
OPTION = "konfig_policy_inputs"
BATCH = 50  # stacks per KCL run: one run per stack costs about 3x as much


@dataclass(frozen=True)
class PolicyOutcome:
    rules: tuple[str, ...]
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class PolicyJob:
    """One stack to evaluate: its compiled Spec and compile options (for ``env``)."""

    stack: Stack
    spec: Spec
    options: Mapping[str, Any]


def policy_input(stack: Stack, spec: Spec, options: Mapping[str, Any]) -> dict[str, Any]:
    env = options.get("env")
    return {
        "stack": {
            "project": stack.project,
            "name": stack.name,
            "path": stack.path,
            "env": str(env) if env else stack.name,
        },
        "resources": spec.to_dict()["resources"],
    }


def check_policies(
    root: Path, stack: Stack, spec: Spec, options: Mapping[str, Any]
) -> PolicyOutcome:
    return check_policies_many(root, [PolicyJob(stack, spec, options)])[stack.path]


def check_policies_many(
    root: Path, jobs: Sequence[PolicyJob], *, batch: int = BATCH, limits: Limits | None = None
) -> dict[str, PolicyOutcome]:
    """Evaluate the policies for many stacks, ``batch`` stacks per KCL run, in a worker
    process under ``limits``.

    When a batch fails (a policy that crashes on some input), its stacks are evaluated
    one by one so the error is reported on the stack that causes it.
    """
    entry = root / POLICY_ENTRY
    if not jobs or not entry.is_file():
        return {j.stack.path: PolicyOutcome((), ()) for j in jobs}
    from konfig.build import workers

    task = (root, tuple(jobs), batch)
    pool = workers.Pool[tuple[Path, tuple[PolicyJob, ...], int]](1, limits or Limits(), root=root)
    with pool:
        pool.submit(_evaluate_all, task)
        for _, outcome in pool.outcomes():
            if isinstance(outcome, workers.Done):
                return dict(outcome.value)
            reason = outcome.reason if isinstance(outcome, workers.Died) else outcome.message
            failed = Finding("policy/error", f"the policies stopped: KCL {reason}", POLICY_ENTRY)
            return {j.stack.path: PolicyOutcome((), (failed,)) for j in jobs}
    raise AssertionError("the policy worker gave no outcome")


def _evaluate_all(
    task: tuple[Path, tuple[PolicyJob, ...], int],
) -> dict[str, PolicyOutcome]:
    """In a worker: the source rules over the policies, then the policies."""
    from konfig.build.compiler import rules_for

    root, jobs, batch = task
    refused = rules_for(root).findings([root / POLICY_ENTRY])
    if refused:
        found = tuple(
            Finding(f.rule, f"the policies cannot run: {f.message}", f.file, f.line)
            for f in refused
        )
        return {j.stack.path: PolicyOutcome((), found) for j in jobs}
    return _evaluate_here(root, jobs, batch=batch)


def _evaluate_here(
    root: Path, jobs: Sequence[PolicyJob], *, batch: int
) -> dict[str, PolicyOutcome]:
    entry = root / POLICY_ENTRY
    outcomes: dict[str, PolicyOutcome] = {}
    for start in range(0, len(jobs), batch):
        chunk = jobs[start : start + batch]
        try:
            rules, results = _evaluate(root, entry, chunk)
        except kcl.KclError as exc:
            if len(chunk) > 1:
                outcomes |= _evaluate_here(root, chunk, batch=1)
                continue
            outcomes[chunk[0].stack.path] = _failed(chunk[0].stack, exc)
            continue
        for job in chunk:
            outcomes[job.stack.path] = _outcome(root, job, rules, results.get(job.stack.path, []))
    return outcomes


def _evaluate(
    root: Path, entry: Path, jobs: Sequence[PolicyJob]
) -> tuple[tuple[str, ...], dict[str, list[Any]]]:
    output = kcl.run(
        [str(entry)],
        work_dir=entry.parent,
        options=[(OPTION, [policy_input(j.stack, j.spec, j.options) for j in jobs])],
        root=root,
    )
    output = output or {}
    rules = tuple(str(r) for r in output.get("rules") or [])
    results = {
        str(item.get("path")): list(item.get("violations") or [])
        for item in output.get("results") or []
        if isinstance(item, dict)
    }
    return rules, results


def _failed(stack: Stack, exc: kcl.KclError) -> PolicyOutcome:
    first = exc.diagnostics[0] if exc.diagnostics else None
    return PolicyOutcome(
        (),
        (
            Finding(
                "policy/error",
                f"the policies failed to evaluate for this stack: {exc.summary()}",
                first.file if first and first.file else POLICY_ENTRY,
                first.line if first else None,
                stack=stack.path,
            ),
        ),
    )


def _outcome(
    root: Path, job: PolicyJob, rules: tuple[str, ...], violations: list[Any]
) -> PolicyOutcome:
    stack, spec = job.stack, job.spec
    disabled = disabled_rules(stack)
    by_id = spec.by_id()
    findings: list[Finding] = []
    for violation in violations:
        rule = str(violation.get("rule", "unknown"))
        rid = str(violation.get("id") or "") or None
        if any(e.covers(rid) for e in disabled.get(rule, ())):
            continue
        file, line = locate(root, stack, by_id.get(rid) if rid else None)
        message = str(violation.get("message", ""))
        findings.append(
            Finding(
                f"policy/{rule}",
                f"{rid}: {message}" if rid else message,
                file,
                line,
                stack=stack.path,
                resource=rid,
            )
        )
    findings.extend(_unknown_disables(root, stack, disabled, rules))
    return PolicyOutcome(rules, tuple(findings))


def _unknown_disables(
    root: Path, stack: Stack, disabled: Mapping[str, list[Exemption]], rules: tuple[str, ...]
) -> list[Finding]:
    unknown = [r for r in disabled if r not in rules and r not in SWITCHABLE]
    if not unknown:
        return []
    rel = f"{stack.path}/{STACK_FILE}"
    try:
        lines = key_lines((root / rel).read_text(encoding="utf-8"))
    except OSError:
        lines = {}
    entries = (stack.raw.get("policies") or {}).get("disable") or []
    findings = []
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("rule") in unknown:
            findings.append(
                Finding(
                    "policy/unknown-rule",
                    f"stack.yaml disables policy {entry['rule']!r}, which does not exist "
                    f"(policies: {', '.join((*rules, *SWITCHABLE))})",
                    rel,
                    lines.get(("policies", "disable", index, "rule")),
                    stack=stack.path,
                )
            )
    return findings

"""`konfig check`: every rule over the selected stacks (:func:`check`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from konfig.build.compiler import CompileError, CompileResult
from konfig.check.findings import Finding, sorted_findings
from konfig.check.kinds import scan_repository
from konfig.check.locate import clear_cache
from konfig.check.owners import check_owners
from konfig.check.ownership import Declared, check_ownership
from konfig.check.policy import PolicyJob, check_policies_many
from konfig.check.promotion import check_promotion
from konfig.check.promql import check_promql
from konfig.check.schema import check_schema
from konfig.check.secretrules import check_secret_files, check_secret_specs
from konfig.check.specrules import check_spec
from konfig.check.stackcache import StackFindings
from konfig.check.structure import check_structure, layout_findings, within_selection
from konfig.check.terraform import check_terraform
from konfig.repo.kclmod import KCL_MOD_RULE
from konfig.repo.layout import STACK_FILE, Repository
from konfig.secrets.keys import Keyring
from konfig.tofu.policy import policy_from_data


def check(
    repo: Repository,
    compiled: Sequence[CompileResult],
    *,
    scope: Sequence[str] | None = None,
    policies: bool = True,
    keyring: Keyring | None = None,
    declared: Sequence[Declared] = (),
    state: Path | None = None,
) -> list[Finding]:
    """Every finding for the compiled stacks; structure and encrypted-file findings
    limited to ``scope`` (directories; None: the whole repository). With a ``keyring``,
    encrypted files it can open are decrypted and their MAC checked (in memory).
    ``declared``: what every stack declares, for the ownership rule (objects the
    compiled stacks share with any stack). ``state``: konfig's cache folder, where each
    compiled stack's own findings are kept and found again (:mod:`konfig.check.stackcache`;
    None: no cache)."""
    clear_cache()
    layout = set(layout_findings(repo))
    findings = [
        f
        for f in check_structure(repo)
        # a bad kcl.mod stops every stack from compiling: reported whatever the scope
        if scope is None or f in layout or f.rule == KCL_MOD_RULE or within_selection(f, scope)
    ]
    findings.extend(check_secret_files(repo.root, scope, keyring))
    findings.extend(check_owners(repo))  # repository-wide, whatever the scope
    findings.extend(f for f in check_promotion(repo) if scope is None or within_selection(f, scope))
    by_path = {s.path: s for s in repo.stacks}
    kinds = scan_repository(repo.root)
    for result in compiled:
        if result.spec is not None:
            kinds.add_resources(result.spec.resources, result.stack_path)
    jobs: list[PolicyJob] = []
    terraform_policy = policy_from_data(repo.config.terraform)
    cache = StackFindings(repo, state, kinds, policies=policies) if state is not None else None
    worked: dict[str, tuple[str | None, list[Finding]]] = {}  # not from the cache
    for result in compiled:
        stack = by_path[result.stack_path]
        if result.spec is None:
            error = result.error
            findings.append(
                Finding(
                    error.rule if error and error.rule else "compile/error",
                    _compile_message(stack.path, error),
                    (error.file if error and error.file else f"{stack.path}/{STACK_FILE}"),
                    error.line if error else None,
                    stack=stack.path,
                    resource=error.resource if error else None,
                )
            )
            continue
        spec = result.spec
        key = cache.key(stack, result) if cache is not None else None
        stored = cache.get(key, stack.path) if cache is not None and key is not None else None
        if stored is not None:
            findings.extend(stored)
            continue
        own = check_spec(
            repo.root,
            stack,
            spec,
            kinds,
            allowed_system_namespaces=repo.config.allow_system_namespaces,
        )
        own.extend(check_secret_specs(repo.root, stack, spec))
        own.extend(check_schema(repo.root, stack, spec, kinds, repo.config.kubernetes_version))
        own.extend(check_terraform(repo.root, stack, spec, terraform_policy))
        own.extend(check_promql(repo.root, stack, spec))
        worked[stack.path] = (key, own)
        if policies:
            options = dict(result.inputs.options) if result.inputs else {}
            jobs.append(PolicyJob(stack, spec, options))
    for path, outcome in check_policies_many(repo.root, jobs).items():
        worked[path][1].extend(outcome.findings)
    for path, (key, own) in worked.items():
        findings.extend(own)
        if cache is not None and key is not None:
            cache.put(key, path, own)
    findings.extend(check_ownership(declared, [r.stack_path for r in compiled]))
    return sorted_findings(findings)


def _compile_message(stack_path: str, error: CompileError | None) -> str:
    if error is None:
        return f"{stack_path} does not compile"
    lines = [f"{stack_path} does not compile: {error.message}", *error.details]
    return "\n  ".join(lines)

"""Terraform rules: a stack's ``type: Terraform`` resources, without OpenTofu.

- ``terraform/invalid-resource``: a resource Konfig cannot use as written (its
  ``extensions.provider``, ``writeOnly``, ...) or a stack.yaml ``terraform`` section that
  is not valid, or a provider configuration stack.yaml does not define;
- ``terraform/unknown-provider``: a provider version Konfig has no schema of (it is not
  built into the mirror: docs/terraform.md, "Adding another provider");
- ``terraform/schema``: the resource against the provider's schema (the bundled output of
  ``tofu providers schema -json``, :mod:`konfig.tofu.schema`): an unknown resource type or
  argument, a required argument missing, a read-only or write-only one set, a wrong type;
- ``terraform/reference``: a ``${konfig:...}`` reference that does not parse, names no
  Terraform resource of the stack or provider configuration, or an attribute its schema
  does not have, or a provider argument konfig.yaml does not let references copy;
- ``terraform/provider-policy`` and ``terraform/credentials``: stack.yaml's provider
  configurations held to the platform's policy in konfig.yaml (:mod:`konfig.tofu.policy`:
  a configuration it does not offer, a setting it does not allow, a variable it does not
  grant the stack), with the line; preview, apply and the rest refuse the stack alike;
- ``terraform/forbidden`` (:mod:`konfig.tofu.guards`: a provisioner, a resource type of
  another provider, a meta-argument) fails the stack's compile, and check reports it.
"""

from __future__ import annotations

from pathlib import Path

from konfig import outputs
from konfig.check.findings import Finding
from konfig.check.locate import locate
from konfig.errors import ConfigError, KonfigError
from konfig.repo.layout import STACK_FILE, Stack
from konfig.spec import Resource, Spec
from konfig.tofu import schema
from konfig.tofu.model import StackTerraform, stack_terraform, terraform_resource
from konfig.tofu.policy import (
    TerraformPolicy,
    Violation,
    checked_against_policy,
    policy_violations,
)


def check_terraform(
    root: Path, stack: Stack, spec: Spec, policy: TerraformPolicy | None = None
) -> list[Finding]:
    """The Terraform findings of one compiled stack; ``policy``: konfig.yaml's (None:
    an empty one, which offers no provider configuration)."""
    findings: list[Finding] = []
    policy = policy or TerraformPolicy()

    def add(rule: str, message: str, resource: Resource | None) -> None:
        file, line = locate(root, stack, resource)
        rid = resource.id if resource is not None else None
        findings.append(Finding(rule, message, file, line, stack=stack.path, resource=rid))

    terraform: StackTerraform | None
    try:
        terraform = stack_terraform(stack.raw, stack.path)
    except ConfigError as exc:
        terraform = None
        findings.append(
            Finding("terraform/invalid-resource", exc.message, exc.file, stack=stack.path)
        )
    if terraform is not None:
        refused = policy_violations(stack.raw, stack.path, policy)
        if refused:
            findings.extend(_policy_findings(root, stack, refused))
            terraform = None  # its references are not checked against a refused section
        else:
            terraform = checked_against_policy(terraform, stack.raw, stack.path, policy)
    by_id = {r.id: r for r in spec.terraform()}
    types: dict[str, dict[str, object] | None] = {}
    for res in spec.terraform():
        try:
            item = terraform_resource(res)
        except KonfigError as exc:
            add("terraform/invalid-resource", exc.message, res)
            continue
        p = item.provider
        if terraform is not None and p.config not in terraform.providers:
            add(
                "terraform/invalid-resource",
                f"{res.id} uses provider configuration {p.config!r}, which stack.yaml does "
                f"not define: add `terraform.providers.{p.config}` (settings, and the "
                "environment variables of its credentials)",
                res,
            )
        bundled = schema.bundled(p.source, p.version)
        if bundled is None:
            add(
                "terraform/unknown-provider",
                f"{res.id}: Konfig has no schema of provider {p.source} {p.version}: build it "
                "into the mirror and bundle its schema (docs/terraform.md, 'Adding another "
                "provider')",
                res,
            )
            types[res.id] = None
            continue
        block = (bundled.get("resources") or {}).get(item.address.type)
        if block is None:
            known = ", ".join(sorted(bundled.get("resources") or {}))
            add(
                "terraform/schema",
                f"{res.id}: provider {p.source} {p.version} has no resource type "
                f"{item.address.type!r} (it has: {known})",
                res,
            )
            types[res.id] = None
            continue
        types[res.id] = block
        for problem in schema.problems(block, res.attributes):
            add("terraform/schema", f"{res.id}: {problem}", res)
    for res in spec.resources:
        for found in outputs.find(res.attributes):
            ref = found.reference
            if ref is None:
                add("terraform/reference", f"{res.id}: {found.field}: {found.problem}", res)
                continue
            if ref.is_provider:
                config = terraform.providers.get(ref.config) if terraform else None
                if terraform is not None and config is None:
                    add(
                        "terraform/reference",
                        f"{res.id}: {found.field} refers to provider configuration "
                        f"{ref.config!r}, which stack.yaml does not define",
                        res,
                    )
                elif config is not None and ref.attribute not in config.references:
                    add(
                        "terraform/reference",
                        f"{res.id}: {found.field} refers to {ref}: konfig.yaml does not let "
                        f"a reference copy argument {ref.attribute!r} of provider "
                        f"{ref.config} (it may: {', '.join(config.references) or 'none'}); "
                        "a credential is never copied into a Kubernetes object",
                        res,
                    )
                continue
            if ref.target not in by_id:
                add(
                    "terraform/reference",
                    f"{res.id}: {found.field} refers to {ref.target}, which is not a "
                    "Terraform resource of this stack",
                    res,
                )
                continue
            block = types.get(ref.target)
            attrs = (block or {}).get("attributes") or {}
            if block is not None and isinstance(attrs, dict) and ref.path[0] not in attrs:
                add(
                    "terraform/reference",
                    f"{res.id}: {found.field} refers to {ref}: {ref.target} has no attribute "
                    f"{ref.path[0]!r}",
                    res,
                )
    return findings


def _policy_findings(root: Path, stack: Stack, found: list[Violation]) -> list[Finding]:
    from konfig.contracts.yamlpos import key_lines, line_of
    from konfig.repo.yamlio import read_text

    file = f"{stack.path}/{STACK_FILE}"
    try:
        lines = key_lines(read_text(root / file, root=root))
    except (OSError, KonfigError):
        lines = {}
    return [
        Finding(v.rule, v.message, file, line_of(lines, v.path), stack=stack.path) for v in found
    ]

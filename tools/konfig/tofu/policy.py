"""The platform's Terraform policy: what a stack may say about its provider configurations.

Where OpenTofu connects (a host, a port, an endpoint) and with which credentials is the
platform team's to decide, not a pull request's. ``konfig.yaml`` (owned by the platform
team: protect it with CODEOWNERS) declares it::

    terraform:
      providers:
        postgresql:                        # a provider configuration stacks may use
          settings: [sslmode, superuser, connect_timeout]   # what a stack may set itself
          references: [host, port]         # what a Kubernetes object may copy
                                           # (${konfig:provider/postgresql.host})
      credentials:                         # which variables a stack may map, and to what
        - stacks: [appops/webshop/prod]    # stack paths or patterns (as productionStacks)
          provider: postgresql
          environment:
            host: WEBSHOP_PROD_PGHOST
            port: WEBSHOP_PROD_PGPORT
            username: WEBSHOP_PROD_PGUSER
            password: WEBSHOP_PROD_PGPASSWORD

A stack's ``stack.yaml`` ``terraform.providers.<config>`` is then held to it
(:func:`policy_violations`, :func:`checked_against_policy`):

- ``terraform/provider-policy``: a configuration konfig.yaml does not declare, or a
  ``settings`` argument it does not list (a ``host`` or ``port`` written into settings
  would make OpenTofu connect where the pull request chooses, with the job's
  credentials);
- ``terraform/credentials``: an ``environment`` entry that konfig.yaml does not grant
  to this stack for this argument (``host: OTHER_STACK_PGPASSWORD`` would read another
  stack's password, and through ``${konfig:provider/<config>.host}`` show it).

A reference to a provider argument resolves only for the arguments konfig.yaml lists
under ``references`` (:attr:`~konfig.tofu.model.ProviderConfig.references`), never for
one that looks like a credential. Pure functions on plain data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from konfig.errors import ConfigError, KonfigError
from konfig.tofu.installation import Installation, installation_from_data
from konfig.tofu.model import STACK_FILE, STACK_KEY, StackTerraform, stack_terraform

if TYPE_CHECKING:
    from konfig.repo.layout import Stack

POLICY_RULE = "terraform/provider-policy"
CREDENTIALS_RULE = "terraform/credentials"
CONFIG_FILE = "konfig.yaml"

# Arguments a reference may never copy into a Kubernetes object, whatever konfig.yaml says.
SECRET_ARGUMENT = re.compile(r"pass|secret|token|key|cert|credential|auth", re.IGNORECASE)


@dataclass(frozen=True)
class ProviderPolicy:
    """A provider configuration the platform offers: what a stack may set in
    ``settings`` and which arguments a Kubernetes object may copy."""

    name: str
    settings: tuple[str, ...] = ()
    references: tuple[str, ...] = ()


@dataclass(frozen=True)
class Grant:
    """Variables stacks matching ``stacks`` may map, each to one argument of ``provider``."""

    stacks: tuple[str, ...]
    provider: str
    environment: Mapping[str, str] = field(default_factory=dict)  # argument -> variable


@dataclass(frozen=True)
class TerraformPolicy:
    providers: Mapping[str, ProviderPolicy] = field(default_factory=dict)
    grants: tuple[Grant, ...] = ()
    # where OpenTofu gets its providers (konfig.tofu.installation): the registry unless
    # konfig.yaml names a mirror
    installation: Installation = field(default_factory=Installation)

    def granted(self, stack_path: str, provider: str) -> dict[str, set[str]]:
        """argument -> the variables konfig.yaml grants ``stack_path`` for it."""
        from konfig.repo.settings import path_matches

        out: dict[str, set[str]] = {}
        for grant in self.grants:
            if grant.provider == provider and any(
                path_matches(stack_path, p) for p in grant.stacks
            ):
                for argument, variable in grant.environment.items():
                    out.setdefault(argument, set()).add(variable)
        return out


def policy_from_data(data: Mapping[str, Any] | None) -> TerraformPolicy:
    """konfig.yaml's ``terraform`` section (already valid against its contract)."""
    data = data or {}
    providers = {
        str(name): ProviderPolicy(
            str(name),
            tuple(str(s) for s in (body or {}).get("settings") or ()),
            tuple(str(r) for r in (body or {}).get("references") or ()),
        )
        for name, body in (data.get("providers") or {}).items()
    }
    grants = tuple(
        Grant(
            tuple(str(s) for s in g.get("stacks") or ()),
            str(g.get("provider", "")),
            {str(k): str(v) for k, v in (g.get("environment") or {}).items()},
        )
        for g in data.get("credentials") or ()
    )
    return TerraformPolicy(providers, grants, installation_from_data(data.get("installation")))


@dataclass(frozen=True)
class Violation:
    """A stack.yaml entry the policy refuses: the rule, what and where (a key path)."""

    rule: str
    message: str
    path: tuple[str, ...]


def policy_violations(
    raw: Mapping[str, Any] | None, stack_path: str, policy: TerraformPolicy
) -> list[Violation]:
    """What of stack.yaml's ``terraform.providers`` (``raw``: the parsed file) the
    platform's policy does not allow, in file order."""
    section = (raw or {}).get(STACK_KEY)
    providers = section.get("providers") if isinstance(section, Mapping) else None
    if not isinstance(providers, Mapping):
        return []
    out: list[Violation] = []
    for name, body in providers.items():
        at = (STACK_KEY, "providers", str(name))
        offered = policy.providers.get(str(name))
        if offered is None:
            declared = ", ".join(sorted(policy.providers)) or "none"
            out.append(
                Violation(
                    POLICY_RULE,
                    f"provider configuration {name!r} is not one the platform offers "
                    f"({CONFIG_FILE} `terraform.providers` declares: {declared})",
                    at,
                )
            )
            continue
        body = body if isinstance(body, Mapping) else {}
        settings = body.get("settings")
        for argument in settings if isinstance(settings, Mapping) else {}:
            if str(argument) not in offered.settings:
                allowed = ", ".join(offered.settings) or "none"
                out.append(
                    Violation(
                        POLICY_RULE,
                        f"`{argument}` is not a setting a stack may choose for provider "
                        f"{name} (allowed: {allowed}); where OpenTofu connects and the "
                        f"credentials come from the variables {CONFIG_FILE} grants the "
                        "stack (`terraform.credentials`)",
                        (*at, "settings", str(argument)),
                    )
                )
        environment = body.get("environment")
        if not isinstance(environment, Mapping):
            continue
        granted = policy.granted(stack_path, str(name))
        for argument, variable in environment.items():
            if str(variable) in granted.get(str(argument), set()):
                continue
            mine = ", ".join(f"{a}: {v}" for a in sorted(granted) for v in sorted(granted[a]))
            out.append(
                Violation(
                    CREDENTIALS_RULE,
                    f"{variable} is not granted to {stack_path} for argument `{argument}` "
                    f"of provider {name} ({CONFIG_FILE} `terraform.credentials` grants it: "
                    f"{mine or 'nothing'})",
                    (*at, "environment", str(argument)),
                )
            )
    return out


def checked_against_policy(
    terraform: StackTerraform,
    raw: Mapping[str, Any] | None,
    stack_path: str,
    policy: TerraformPolicy,
    *,
    text: str | None = None,
) -> StackTerraform:
    """``terraform`` (stack.yaml's, parsed) held to the policy: a :class:`ConfigError`
    naming every violation with its line (``text``: stack.yaml's source), else the
    same settings with what each configuration lets references copy."""
    found = policy_violations(raw, stack_path, policy)
    if found:
        raise policy_error(found, stack_path, text)
    providers = {
        name: replace(
            config,
            references=tuple(
                a for a in policy.providers[name].references if not SECRET_ARGUMENT.search(a)
            ),
        )
        for name, config in terraform.providers.items()
    }
    return replace(terraform, providers=providers, checked=True)


def policy_error(found: Sequence[Violation], stack_path: str, text: str | None) -> ConfigError:
    """One error for every violation, the first one's line as the error's."""
    lines = _lines(text)
    file = f"{stack_path}/{STACK_FILE}"

    def line(v: Violation) -> int | None:
        from konfig.contracts.yamlpos import line_of

        return line_of(lines, v.path) if lines else None

    first = found[0]
    rest = "".join(
        f"\n  {file}" + (f":{line(v)}" if line(v) else "") + f": {v.message} [{v.rule}]"
        for v in found[1:]
    )
    return ConfigError(
        f"refused ({first.rule}): {first.message}{rest}",
        file=file,
        line=line(first),
        hint=f"the platform team declares provider configurations and grants variables in "
        f"{CONFIG_FILE} `terraform` (docs/terraform.md)",
    )


def _lines(text: str | None) -> dict[Any, int]:
    if not text:
        return {}
    from konfig.contracts.yamlpos import key_lines

    return dict(key_lines(text))


def stack_settings(stack: Stack, policy: TerraformPolicy, root: Path | None) -> StackTerraform:
    """A stack's ``terraform`` settings (stack.yaml), held to the platform's policy: what
    every command that runs OpenTofu for the stack uses. A refusal names stack.yaml's
    lines (read from ``root``, the repository, when there is one)."""
    terraform = stack_terraform(stack.raw, stack.path)
    found = policy_violations(stack.raw, stack.path, policy)
    if found:
        text = None
        if root is not None:
            from konfig.repo.yamlio import read_text

            try:
                text = read_text(root / stack.path / STACK_FILE, root=root)
            except (OSError, KonfigError):
                text = None
        raise policy_error(found, stack.path, text)
    return checked_against_policy(terraform, stack.raw, stack.path, policy)

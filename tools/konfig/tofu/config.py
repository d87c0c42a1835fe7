"""A stack's OpenTofu configuration, generated as JSON (``main.tf.json``); pure.

One working directory per stack holds::

    {
      "terraform": {"required_providers": {...}, "backend": {"kubernetes": {...}}},
      "variable": {"p_postgresql_password": {"type": "string", "sensitive": true,
                                             "ephemeral": true}, "wo_0": {...}},
      "provider": {"postgresql": [{"sslmode": "disable",
                                   "password": "${var.p_postgresql_password}"}]},
      "resource": {"postgresql_role": {"storefront": {"name": "storefront", ...}}},
      "import": [{"to": "postgresql_role.storefront", "id": "storefront"}]
    }

- every value the environment or a secret gives is an **ephemeral, sensitive
  variable**: OpenTofu keeps it out of the plan file, the plan JSON and the state, and it
  is passed again at apply (``TF_VAR_<name>``);
- a write-only argument (``password_wo``) takes such a variable; its version argument
  (``password_wo_version``) a version of the value, so the value is set again exactly
  when it changes. A value not known to this run (a preview without the decryption
  key) is left out and its version ignored (``lifecycle.ignore_changes``);
- references (:mod:`konfig.outputs`) become OpenTofu expressions; every other ``${``/``%{``
  a stack contributes (attributes and their keys, provider settings, import ids) is
  escaped (:func:`literal`): OpenTofu evaluates no expression from the repository;
  ``dependsOn`` between Terraform resources becomes ``depends_on``;
- ``import`` blocks adopt objects that an interrupted apply created but did not record.

The state lives with the stack's cluster: the ``kubernetes`` backend, a Secret
``tfstate-default-<suffix>`` and a Lease ``lock-tfstate-default-<suffix>`` in
:data:`STATE_NAMESPACE` (its own namespace: reading state means listing Secrets there).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from konfig import outputs
from konfig.ids import is_terraform_id, parse_terraform_id
from konfig.tofu import guards
from konfig.tofu.model import (
    ProviderConfig,
    StackTerraform,
    TerraformResource,
    TerraformSpecError,
)

STATE_NAMESPACE = "konfig-state"
WORKSPACE = "default"
CONFIG_FILE = "main.tf.json"


@dataclass(frozen=True)
class Backend:
    """Where the state lives: the ``kubernetes`` backend (``namespace``/``suffix``) or, for
    tests and benchmarks, a ``local`` file (``path``)."""

    kind: str = "kubernetes"
    namespace: str = STATE_NAMESPACE
    suffix: str = ""
    path: str = ""

    def block(self) -> dict[str, Any]:
        if self.kind == "local":
            return {"local": {"path": self.path}}
        return {"kubernetes": {"secret_suffix": self.suffix, "namespace": self.namespace}}

    @property
    def secret_name(self) -> str:
        return f"tfstate-{WORKSPACE}-{self.suffix}"

    @property
    def lease_name(self) -> str:
        return f"lock-tfstate-{WORKSPACE}-{self.suffix}"


@dataclass(frozen=True, order=True)
class StateProvider:
    """A provider (configuration) that resources recorded in the state use."""

    local_name: str
    source: str
    config: str


def state_providers(state: Mapping[str, Any] | None) -> list[StateProvider]:
    """From a state file's ``resources[].provider`` (``provider["<source>"][.<alias>]``)."""
    found: set[StateProvider] = set()
    for res in (state or {}).get("resources") or []:
        if not isinstance(res, Mapping) or res.get("mode") != "managed":
            continue
        match = re.match(
            r'^provider\["([^"]+)"\](?:\.([A-Za-z0-9_-]+))?$', str(res.get("provider", ""))
        )
        if match:
            source = match.group(1)
            for prefix in ("registry.opentofu.org/", "registry.terraform.io/"):
                source = source.removeprefix(prefix)
            local = source.rsplit("/", 1)[-1]
            found.add(StateProvider(local, source, match.group(2) or local))
    return sorted(found)


@dataclass(frozen=True)
class Variable:
    """An ephemeral variable and where its value comes from."""

    name: str
    env: str = ""  # an environment variable the stack names (provider argument)
    secret: str = ""  # or a Secret's key (a write-only argument)
    key: str = ""
    resource: str = ""  # the resource and argument it feeds (for messages)
    argument: str = ""


@dataclass(frozen=True)
class Configuration:
    document: dict[str, Any]
    variables: tuple[Variable, ...]


def _identifier(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def provider_variable(config: str, argument: str) -> str:
    return f"p_{_identifier(config)}_{argument}"


def _variable_block() -> dict[str, Any]:
    return {"type": "string", "sensitive": True, "ephemeral": True}


def _convert(value: Any, address_of: Any) -> Any:
    """A resource attribute's value for the JSON configuration: every string a literal
    (``${``/``%{`` escaped) but Konfig's own references, which become OpenTofu's; the
    keys of an object too (OpenTofu reads an object's keys as templates as well)."""
    if isinstance(value, str):
        return outputs.to_terraform(value, address_of)
    if isinstance(value, Mapping):
        return {outputs.escape(str(k)): _convert(v, address_of) for k, v in value.items()}
    if isinstance(value, list):
        return [_convert(v, address_of) for v in value]
    return value


def literal(value: Any) -> Any:
    """A value from the repository as OpenTofu's JSON syntax reads it literally: every
    ``${`` and ``%{`` of every string and key escaped (``$${``, ``%%{``), so OpenTofu
    evaluates no expression or template a stack wrote (a provider setting, an import
    id); Konfig's own references are not resolved here either."""
    if isinstance(value, str):
        return outputs.escape(value)
    if isinstance(value, Mapping):
        return {outputs.escape(str(k)): literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def configuration(
    resources: Sequence[TerraformResource],
    terraform: StackTerraform,
    backend: Backend,
    *,
    versions: Mapping[tuple[str, str], str | None] | None = None,
    imports: Mapping[str, str] | None = None,
    state_providers: Sequence[StateProvider] = (),
) -> Configuration:
    """The JSON configuration of one stack's Terraform resources.

    ``versions``: (resource id, write-only argument) -> the version of its value, or None
    when the value is not known to this run; ``imports``: resource id -> import id.
    ``state_providers``: the providers the state's resources use (a resource removed
    from the stack is destroyed with the provider configuration it was created with).
    """
    if not terraform.checked:
        raise TerraformSpecError(
            "the stack's provider configurations were not held to the platform's policy "
            "(konfig.yaml `terraform`): nothing is written"
        )
    refused = guards.forbidden(r.resource for r in resources)
    if refused:  # compile refuses such a Spec first; the runtime never writes one
        raise TerraformSpecError(guards.refusal(refused))
    versions = versions or {}
    by_id = {r.id: r for r in resources}

    def address_of(target: str) -> str:
        if target not in by_id:
            raise TerraformSpecError(
                f"a reference names {target}, which is not a Terraform resource of this stack"
            )
        return by_id[target].address.address

    required: dict[str, dict[str, str]] = {
        p.local_name: {"source": p.source} for p in state_providers
    }
    for r in resources:
        required[r.provider.local_name] = {
            "source": r.provider.source,
            "version": r.provider.version,
        }

    variables: list[Variable] = []
    provider_blocks: dict[str, list[dict[str, Any]]] = {}
    users = {
        (r.provider.local_name, r.provider.config): r.id
        for r in sorted(resources, key=lambda x: x.id)
    }
    for p in state_providers:
        users.setdefault((p.local_name, p.config), f"a resource in the state ({p.source})")
    for (local_name, config_name), user in sorted(users.items()):
        config = terraform.providers.get(config_name)
        if config is None:
            raise TerraformSpecError(
                f"{user} uses provider configuration {config_name!r}, which stack.yaml "
                "does not define: add `terraform.providers."
                f"{config_name}` (settings, and environment variables for credentials)"
            )
        provider_blocks.setdefault(local_name, []).append(
            _provider_block(local_name, config, variables)
        )

    resource_blocks: dict[str, dict[str, Any]] = {}
    for r in sorted(resources, key=lambda x: x.id):
        body: dict[str, Any] = {
            str(k): _convert(v, address_of) for k, v in sorted(r.resource.attributes.items())
        }
        if r.provider.config != r.provider.local_name:
            body["provider"] = f"{r.provider.local_name}.{r.provider.config}"
        deps = sorted(
            address_of(d) for d in r.resource.depends_on if is_terraform_id(d) and d != r.id
        )
        foreign = [d for d in r.resource.depends_on if not is_terraform_id(d)]
        if foreign:
            raise TerraformSpecError(
                f"{r.id} depends on {foreign[0]}: a Terraform resource may depend only on "
                "Terraform resources (they are applied before the stack's Kubernetes objects)"
            )
        if deps:
            body["depends_on"] = deps
        ignored: list[str] = []
        for w in r.write_only:
            version = versions.get((r.id, w.attribute))
            if version is None:
                if w.version:
                    ignored.append(w.version)
                continue
            name = f"wo_{len([v for v in variables if v.secret])}"
            variables.append(
                Variable(name, secret=w.secret, key=w.key, resource=r.id, argument=w.attribute)
            )
            body[w.attribute] = f"${{var.{name}}}"
            if w.version:
                body[w.version] = version
        if ignored:
            body["lifecycle"] = {"ignore_changes": sorted(ignored)}
        resource_blocks.setdefault(r.address.type, {})[r.address.name] = body

    document: dict[str, Any] = {
        "terraform": {
            "required_providers": dict(sorted(required.items())),
            "backend": backend.block(),
        }
    }
    if variables:
        document["variable"] = {v.name: _variable_block() for v in variables}
    if provider_blocks:
        document["provider"] = provider_blocks
    if resource_blocks:
        document["resource"] = {
            t: dict(sorted(n.items())) for t, n in sorted(resource_blocks.items())
        }
    if imports:
        document["import"] = [
            {"to": parse_terraform_id(rid).address, "id": literal(imports[rid])}
            for rid in sorted(imports)
        ]
    return Configuration(document, tuple(variables))


def _provider_block(
    local_name: str, config: ProviderConfig, variables: list[Variable]
) -> dict[str, Any]:
    block: dict[str, Any] = {}
    if config.name != local_name:
        block["alias"] = config.name
    for argument, value in sorted(config.settings.items()):
        block[argument] = literal(value)
    for argument, env in sorted(config.environment.items()):
        name = provider_variable(config.name, argument)
        variables.append(
            Variable(name, env=env, resource=f"provider {config.name}", argument=argument)
        )
        block[argument] = f"${{var.{name}}}"
    return block

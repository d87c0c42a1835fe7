"""References to Terraform attributes in Kubernetes objects, resolved.

A Kubernetes object may refer to a Terraform resource's attribute or to a provider
configuration's argument (:mod:`konfig.outputs`): the planned value in a preview
(``(known after apply)`` when OpenTofu does not know it yet), the applied one at apply.
A provider argument is copied into a Kubernetes object only when konfig.yaml lets
references copy it (:attr:`~konfig.tofu.model.ProviderConfig.references`, set by
:mod:`konfig.tofu.policy`), never one that is a credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from konfig import outputs
from konfig.engine.kube import Kube
from konfig.spec import Resource, Spec
from konfig.tofu.model import StackTerraform, TerraformSpecError
from konfig.tofu.policy import SECRET_ARGUMENT


def lookup_of(
    terraform: StackTerraform,
    environment: Mapping[str, str],
    values: Mapping[str, Mapping[str, Any]],
    *,
    known: set[str],
    unset_unknown: bool = False,
) -> outputs.Lookup:
    """Resolve a reference: a provider configuration's argument (its setting, or the
    environment variable stack.yaml names), or a Terraform resource's attribute in
    ``values`` (``known``: the resource ids the plan or state covers). With
    ``unset_unknown`` (a preview without the credentials) an argument whose variable is
    not set is not known yet, instead of an error."""

    def lookup(ref: outputs.Reference) -> Any:
        if ref.is_provider:
            config = terraform.providers.get(ref.config)
            argument = ref.path[0]
            if config is None:
                raise TerraformSpecError(
                    f"a reference names provider configuration {ref.config!r}, which "
                    "stack.yaml `terraform.providers` does not define"
                )
            if SECRET_ARGUMENT.search(argument):
                raise TerraformSpecError(
                    f"a reference to {ref}: the provider's {argument} is a credential and is "
                    "never copied into a Kubernetes object"
                )
            if argument not in config.references:
                raise TerraformSpecError(
                    f"a reference to {ref}: konfig.yaml does not let a reference copy "
                    f"argument {argument!r} of provider {ref.config} (its "
                    f"`terraform.providers.{ref.config}.references`: "
                    f"{', '.join(config.references) or 'none'}); a credential is never "
                    "copied into a Kubernetes object"
                )
            if argument in config.settings:
                return config.settings[argument]
            if argument in config.environment:
                value = environment.get(config.environment[argument])
                if not value and unset_unknown:
                    return outputs.UNKNOWN
                if not value:
                    raise TerraformSpecError(
                        f"a reference to {ref}: the environment variable "
                        f"{config.environment[argument]} is not set"
                    )
                return value
            raise TerraformSpecError(
                f"a reference to {ref}: provider configuration {ref.config!r} has no "
                f"argument {argument!r} (neither in settings nor environment)"
            )
        if ref.target not in known:
            raise TerraformSpecError(
                f"a reference to {ref}: {ref.target} is not a Terraform resource of this stack"
            )
        found, value = outputs.value_at(values.get(ref.target), ref.path)
        if not found:
            if ref.target not in values:
                return outputs.UNKNOWN
            raise TerraformSpecError(
                f"a reference to {ref}: {ref.target} has no attribute {ref.attribute!r}"
            )
        return outputs.UNKNOWN if value is None else value

    return lookup


def kubernetes_spec(spec: Spec, lookup: outputs.Lookup) -> Spec:
    """The Spec's Kubernetes objects with every reference resolved (UNKNOWN where not
    known yet) and the edges to Terraform resources dropped (OpenTofu runs first)."""
    terraform_ids = {r.id for r in spec.terraform()}
    out: list[Resource] = []
    for res in spec.kubernetes():
        problems = [f for f in outputs.find(res.attributes) if f.reference is None]
        if problems:
            raise TerraformSpecError(f"{res.id}: {problems[0].field}: {problems[0].problem}")
        try:
            attributes, _ = outputs.substitute(res.attributes, lookup)
        except TerraformSpecError as exc:
            raise TerraformSpecError(f"{res.id}: {exc.message}") from None
        out.append(
            replace(
                res,
                attributes=attributes,
                depends_on=tuple(d for d in res.depends_on if d not in terraform_ids),
            )
        )
    return Spec(tuple(out))


def keeplive_where_unknown(kube: Kube, spec: Spec) -> Spec:
    """The Kubernetes objects with each value not known yet replaced by the live
    object's value there (when it has one): a preview without the provider credentials
    shows neither a change nor a value it cannot know, as Secrets without the
    decryption key keep their live values."""
    out: list[Resource] = []
    for res in spec.resources:
        if not outputs.unresolved_in(res.attributes):
            out.append(res)
            continue
        live = kube.get(res.api_version, res.kind, res.name, res.namespace) or {}
        out.append(replace(res, attributes=live_where_unknown(res.attributes, live)))
    return Spec(tuple(out))


def live_where_unknown(value: Any, live: Any) -> Any:
    if isinstance(value, str):
        return live if outputs.UNKNOWN in value and isinstance(live, str) else value
    if isinstance(value, Mapping):
        return {
            k: live_where_unknown(v, live.get(k) if isinstance(live, Mapping) else None)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            live_where_unknown(v, live[i] if isinstance(live, list) and i < len(live) else None)
            for i, v in enumerate(value)
        ]
    return value

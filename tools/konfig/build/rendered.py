"""A stack's Spec as rendered manifests: what pull delivery publishes (docs/pull.md).

:func:`render` turns a compiled Spec into plain, canonical Kubernetes YAML, one file per
object with a stable name, plus a ``kustomization.yaml`` listing them, so that Flux's
kustomize-controller, Argo CD or ``kubectl apply -k`` can apply the folder as it is.
The same Spec always gives the same bytes (keys sorted, block style, one trailing
newline): a merge that changes nothing publishes nothing.

What cannot be published is refused, as :class:`Refusal` records (the rule, the
resource), never written:

- ``publish/secret``: a Secret with values (``data``, ``stringData``, or keys konfig
  fills in at apply from SOPS files or generates). The rendered
  branch is readable by whoever reads the repository, so a value in it is a value in
  plaintext; konfig resolves the stack's SOPS references only in memory, at apply.
- ``publish/terraform``: a Terraform resource (the hybrid runtime runs OpenTofu from
  CI, which no in-cluster controller does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from konfig.repo.yamlio import canonical, dump_yaml
from konfig.spec import Resource, Spec

KUSTOMIZATION = "kustomization.yaml"
SECRET_RULE = "publish/secret"
TERRAFORM_RULE = "publish/terraform"
# Resource.extensions keys whose Secret values konfig fills in only at apply
# (konfig.secrets.refs.EXTENSION, konfig.secrets.generated.EXT_GENERATED)
_FILLED_AT_APPLY = ("secrets", "generated")
_KUSTOMIZE_HEADER = {
    "apiVersion": "kustomize.config.k8s.io/v1beta1",
    "kind": "Kustomization",
}


@dataclass(frozen=True)
class Refusal:
    """A resource pull delivery will not publish, and why."""

    rule: str
    resource: str  # its id
    message: str
    hint: str


def file_name(resource: Resource) -> str:
    """The object's file: ``<kind>[.<group>]_[<namespace>_]<name>.yaml``, lower case.
    Kubernetes names hold no ``_``, so the name is unique per object and stable."""
    kind = resource.kind.lower() + (f".{resource.group}" if resource.group else "")
    namespace = f"{resource.namespace}_" if resource.namespace else ""
    return f"{kind}_{namespace}{resource.name}.yaml"


def dump(data: Any) -> bytes:
    """Canonical YAML: keys sorted at every level, block style."""
    return dump_yaml(canonical(data)).encode("utf-8")


def kustomization(resources: list[str]) -> bytes:
    """A ``kustomization.yaml`` listing ``resources`` (files or folders) in order."""
    return dump_yaml({**_KUSTOMIZE_HEADER, "resources": resources}).encode("utf-8")


def refusals(spec: Spec) -> list[Refusal]:
    """What of ``spec`` pull delivery refuses to publish, in the Spec's order."""
    found: list[Refusal] = []
    for resource in spec.resources:
        if resource.is_terraform:
            found.append(
                Refusal(
                    TERRAFORM_RULE,
                    resource.id,
                    f"{resource.id} is a Terraform resource: pull delivery publishes "
                    "Kubernetes objects only (no controller in the cluster runs OpenTofu)",
                    "keep this stack on push delivery (delete `delivery:` from stack.yaml)",
                )
            )
        elif _has_values(resource):
            found.append(
                Refusal(
                    SECRET_RULE,
                    resource.id,
                    f"{resource.id} holds Secret values: publishing them would write them "
                    "to the rendered branch in plaintext",
                    "keep this stack on push delivery (konfig apply decrypts its SOPS values "
                    "in memory), or let the cluster make the Secret (docs/pull.md, Secrets)",
                )
            )
    return found


def _has_values(resource: Resource) -> bool:
    """A Secret with values: written in it, or filled in by konfig at apply (SOPS
    references, generated keys: the ``secrets`` and ``generated`` extensions)."""
    if resource.kind != "Secret" or resource.api_version != "v1":
        return False
    attrs = resource.attributes
    filled = any(resource.extensions.get(key) for key in _FILLED_AT_APPLY)
    return filled or bool(attrs.get("data")) or bool(attrs.get("stringData"))


def render(spec: Spec) -> dict[str, bytes]:
    """The stack folder's files (name -> bytes): one per Kubernetes object and the
    ``kustomization.yaml``. The caller refuses the Spec first (:func:`refusals`)."""
    files: dict[str, bytes] = {}
    for resource in spec.kubernetes():
        files[file_name(resource)] = dump(resource.attributes)
    files[KUSTOMIZATION] = kustomization(sorted(files))
    return dict(sorted(files.items()))


def cluster_kustomization(stack_folders: Mapping[str, object]) -> bytes:
    """The cluster folder's ``kustomization.yaml``: every stack folder in it (paths
    relative to the cluster folder), sorted."""
    return kustomization(sorted(stack_folders))

"""``terraform/forbidden``: what a stack may never bring into an OpenTofu configuration.

A stack's Terraform resources are data for the platform's providers: arguments of a
resource type of the provider the resource names. Everything else OpenTofu offers runs
code, reads files or reaches a host the pull request chooses, with the credentials of
the job that runs OpenTofu, and is refused:

- **provisioners** (``local-exec``, ``remote-exec``, ``file``) and their ``connection``,
  on any resource;
- the other **meta-arguments** (``provider``: a provider override; ``lifecycle``,
  ``count``, ``for_each``, ``depends_on``: Konfig writes what it needs of them itself);
- **resource types of another provider** than the resource's own (``terraform_data``
  under a PostgreSQL provider: OpenTofu picks the provider from the type's prefix) and
  the providers whose purpose is running programs, reading and writing local files or
  fetching URLs (``terraform_data``, ``null_resource``, the ``external``, ``http`` and
  ``local`` providers);
- **configuration files** in a stack's OpenTofu working directory that Konfig did not
  write: an ``override`` file, a ``backend`` or ``terraform`` block, a ``module`` with a
  source, a ``data "external"``/``data "http"`` source, a ``.tfvars`` file that sets
  Konfig's variables (a host, a password) — OpenTofu reads every ``*.tf``, ``*.tf.json``,
  ``*.tofu``, ``*.tofu.json`` and ``*.auto.tfvars`` file of its directory
  (:func:`foreign_files`).

The one rule, three places (as ``spec/system-namespace``): compile refuses the stack
(so ``konfig check``, ``konfig preview`` and ``konfig apply`` refuse it before anything
is planned or written), ``konfig check`` reports it with the file and line, and the
OpenTofu runtime refuses to write or run a configuration that breaks it. Pure
functions on plain data, as :mod:`konfig.engine.guards`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from konfig.spec import Resource

RULE = "terraform/forbidden"

# Meta-arguments of a resource block: a stack's attributes never hold one.
META_ARGUMENTS: Mapping[str, str] = {
    "provisioner": "a provisioner runs a command or copies files (local-exec, remote-exec, "
    "file) with the credentials of the job that runs OpenTofu",
    "connection": "a connection is how a provisioner reaches a host",
    "provider": "a provider override: the provider configuration is the platform's "
    "(extensions.provider.config, declared in konfig.yaml)",
    "lifecycle": "a meta-argument Konfig sets itself",
    "count": "a meta-argument Konfig sets itself",
    "for_each": "a meta-argument Konfig sets itself",
    "depends_on": "a meta-argument Konfig sets itself (write dependsOn)",
}

# Providers (by local name, the type's prefix) that run programs, read or write local
# files or fetch URLs: never in a stack, whatever its source says.
FORBIDDEN_PROVIDERS: Mapping[str, str] = {
    "terraform": "OpenTofu's built-in provider (terraform_data runs provisioners)",
    "null": "null_resource exists to run provisioners",
    "external": "the external provider runs a program",
    "http": "the http provider fetches a URL",
    "local": "the local provider reads and writes files",
}

CONFIG_FILE = "main.tf.json"  # the one configuration file Konfig writes
# What OpenTofu reads from its working directory as configuration or variable values.
_LOADED = ("*.tf", "*.tf.json", "*.tofu", "*.tofu.json", "*.tfvars", "*.tfvars.json")


@dataclass(frozen=True)
class Forbidden:
    """One construct the rule refuses: the resource (or file) and why."""

    resource: str  # a Terraform resource id, or "" for a working-directory file
    what: str  # the attribute or type or file
    reason: str

    @property
    def message(self) -> str:
        if not self.resource:
            return f"{self.what} in the OpenTofu working directory is not Konfig's: {self.reason}"
        return f"{self.resource}: {self.what}: {self.reason}"


def forbidden_in_resource(resource: Resource) -> list[Forbidden]:
    """What of one ``type: Terraform`` resource the rule refuses (empty: nothing)."""
    out: list[Forbidden] = []
    address = resource.terraform
    prefix = address.type.split("_", 1)[0]
    local = address.provider
    if prefix in FORBIDDEN_PROVIDERS or local in FORBIDDEN_PROVIDERS:
        name = prefix if prefix in FORBIDDEN_PROVIDERS else local
        out.append(
            Forbidden(
                resource.id,
                f"resource type {address.type}",
                f"{FORBIDDEN_PROVIDERS[name]}; a stack's Terraform resources are the "
                "platform's providers' (docs/terraform.md)",
            )
        )
    elif prefix != local:
        out.append(
            Forbidden(
                resource.id,
                f"resource type {address.type}",
                f"a type of provider {prefix!r}, not of the resource's provider {local!r} "
                "(OpenTofu would run it with another provider)",
            )
        )
    for key in sorted(resource.attributes, key=str):
        reason = META_ARGUMENTS.get(str(key))
        if reason is not None:
            kinds = _provisioner_kinds(resource.attributes[key]) if key == "provisioner" else ""
            out.append(Forbidden(resource.id, f"`{key}`{kinds}", reason))
    return out


def _provisioner_kinds(value: Any) -> str:
    items = value if isinstance(value, list) else [value]
    kinds = sorted({str(k) for item in items if isinstance(item, Mapping) for k in item})
    return f" ({', '.join(kinds)})" if kinds else ""


def forbidden(resources: Iterable[Resource]) -> list[Forbidden]:
    """What of a Spec's resources the rule refuses (its ``type: Terraform`` ones)."""
    return [f for r in resources if r.is_terraform for f in forbidden_in_resource(r)]


def foreign_files(names: Iterable[str]) -> list[Forbidden]:
    """The files of a working directory (``names``, its top level) that OpenTofu would
    read as configuration or variable values and Konfig did not write: an override, a
    backend, a module, a data source or a ``.tfvars`` would run with the job's
    credentials."""
    return [
        Forbidden(
            "",
            name,
            "OpenTofu would read it (an override, backend, module, data source or variable "
            "values); remove it — Konfig writes only " + CONFIG_FILE,
        )
        for name in sorted(names)
        if name != CONFIG_FILE and any(fnmatch.fnmatchcase(name, p) for p in _LOADED)
    ]


def refusal(found: Sequence[Forbidden]) -> str:
    """Why a command refuses a stack with ``found`` (each construct named)."""
    listed = "; ".join(f.message for f in found)
    return (
        f"refused ({RULE}, as `konfig check` reports it): {listed}. Nothing of it was run "
        "or written: a stack's Terraform resources are arguments of the platform's "
        "providers, never code, files or hosts it chooses (docs/terraform.md)"
    )

"""What a stack says about its Terraform resources: the Spec's extensions, ``stack.yaml``.

A ``type: Terraform`` resource's ``extensions``::

    provider:                      # required
      source: registry.opentofu.org/cyrilgdn/postgresql   # [host/]namespace/type, as OpenTofu's
      version: 1.26.0                            # required_providers; exact version
      config: postgresql           # the provider configuration in stack.yaml (default:
                                   # the provider's type)
    importId: storefront           # optional: how OpenTofu imports the object (adopting
                                   # what an interrupted apply created)
    writeOnly:                     # optional: write-only arguments filled at apply
      - attribute: password_wo     # the write-only argument
        version: password_wo_version   # set to a version of the value (changes with it)
        secret: v1:Secret:shop-prod:shop-db   # the value is this Secret's key
        key: password
        format: scram-sha-256      # optional: OpenTofu gets a SCRAM-SHA-256 verifier

A Kubernetes Secret's ``extensions.generated`` (keys whose value Konfig generates) is
read by :mod:`konfig.secrets.generated`.

``stack.yaml``::

    terraform:
      providers:
        postgresql:                # a provider configuration (extensions.provider.config)
          settings: {sslmode: disable, connect_timeout: 10}   # plain arguments
          environment:             # arguments from the apply environment (CI secrets)
            host: SHOP_PROD_PGHOST
            password: SHOP_PROD_PGPASSWORD
      allowDestroy:                # resources apply may destroy (delete or replace);
        - cyrilgdn/postgresql:postgresql_database:shop   # ids or glob patterns

Pure functions; errors are :class:`TerraformSpecError` (a resource) or
:class:`~konfig.errors.ConfigError` (stack.yaml) naming what to fix.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from konfig.errors import ConfigError, KonfigError, UsageError
from konfig.ids import TerraformAddress
from konfig.spec import Resource, Spec

if TYPE_CHECKING:
    from konfig.repo.layout import Stack

EXT_PROVIDER = "provider"
EXT_IMPORT = "importId"
EXT_WRITE_ONLY = "writeOnly"

STACK_KEY = "terraform"
STACK_FILE = "stack.yaml"

_SOURCE = re.compile(
    r"^(?:(?P<host>[a-z0-9.-]+\.[a-z0-9.-]+(?::[0-9]+)?)/)?"
    r"(?P<ns>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)/(?P<type>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)$"
)
_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?$")
_CONFIG = re.compile(r"^[a-z][a-z0-9_-]*$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARGUMENT = re.compile(r"^[a-z][a-z0-9_]*$")


def has_terraform(stack: Stack, spec: Spec | None) -> bool:
    """Whether OpenTofu takes part for the stack: its Spec has Terraform resources, or
    its stack.yaml a ``terraform`` section (its state may still hold removed resources).
    Only then is the OpenTofu runtime imported."""
    return (spec is not None and bool(spec.terraform())) or STACK_KEY in (stack.raw or {})


class TerraformSpecError(KonfigError):
    """A Terraform resource of the Spec is not usable as written."""


@dataclass(frozen=True, order=True)
class ProviderRef:
    """A provider (``source``, exact ``version``) and the configuration a resource uses."""

    source: str
    version: str
    config: str

    @property
    def local_name(self) -> str:
        """The provider's local name in the configuration: its type (``postgresql``)."""
        return self.source.rsplit("/", 1)[1]

    @property
    def address(self) -> str:
        """``namespace/type`` (the source without its host), as in resource ids."""
        return "/".join(self.source.split("/")[-2:])


@dataclass(frozen=True)
class WriteOnly:
    """A write-only argument whose value is a Kubernetes Secret's key (never in the Spec)."""

    attribute: str
    version: str  # the argument that carries a version of the value ("" for none)
    secret: str  # the Secret's id
    key: str
    format: str = ""  # "scram-sha-256": OpenTofu gets a SCRAM verifier, not the password


FORMATS = ("", "scram-sha-256")


@dataclass(frozen=True)
class TerraformResource:
    resource: Resource
    address: TerraformAddress
    provider: ProviderRef
    import_id: str | None = None
    write_only: tuple[WriteOnly, ...] = ()

    @property
    def id(self) -> str:
        return self.resource.id


def _provider(rid: str, raw: Any) -> ProviderRef:
    where = f"{rid}: `extensions.{EXT_PROVIDER}`"
    if not isinstance(raw, Mapping):
        raise TerraformSpecError(
            f"{where} is missing: a Terraform resource names its provider "
            "({source, version, config})"
        )
    source, version = raw.get("source"), raw.get("version")
    if not isinstance(source, str) or not _SOURCE.match(source):
        raise TerraformSpecError(
            f"{where}.source must be a provider source address like "
            f"registry.opentofu.org/cyrilgdn/postgresql, got {source!r}"
        )
    if not isinstance(version, str) or not _VERSION.match(version):
        raise TerraformSpecError(
            f"{where}.version must be an exact version like 1.26.0, got {version!r}"
        )
    ref = ProviderRef(source, version, "")
    config = raw.get("config", ref.local_name)
    if not isinstance(config, str) or not _CONFIG.match(config):
        raise TerraformSpecError(
            f"{where}.config must name a provider configuration of stack.yaml "
            f"(lower-case letters, digits, '_' and '-'), got {config!r}"
        )
    unknown = sorted(set(raw) - {"source", "version", "config"})
    if unknown:
        raise TerraformSpecError(
            f"{where}: unknown key(s) {unknown} (known: source, version, config)"
        )
    return ProviderRef(source, version, config)


def _write_only(rid: str, raw: Any) -> tuple[WriteOnly, ...]:
    if raw is None:
        return ()
    where = f"{rid}: `extensions.{EXT_WRITE_ONLY}`"
    if not isinstance(raw, list):
        raise TerraformSpecError(f"{where} must be a list")
    out: list[WriteOnly] = []
    for index, entry in enumerate(raw):
        at = f"{where}[{index}]"
        if not isinstance(entry, Mapping):
            raise TerraformSpecError(f"{at} must be a mapping")
        attribute, secret, key = entry.get("attribute"), entry.get("secret"), entry.get("key")
        version = entry.get("version", "")
        for name, value in (("attribute", attribute), ("secret", secret), ("key", key)):
            if not isinstance(value, str) or not value:
                raise TerraformSpecError(f"{at} needs `{name}`")
        if not isinstance(version, str) or not (version == "" or _ARGUMENT.match(version)):
            raise TerraformSpecError(f"{at}.version must be the name of an argument")
        if not _ARGUMENT.match(str(attribute)):
            raise TerraformSpecError(f"{at}.attribute must be the name of an argument")
        fmt = entry.get("format", "")
        if fmt not in FORMATS:
            raise TerraformSpecError(
                f"{at}.format must be one of {', '.join(repr(f) for f in FORMATS)}, got {fmt!r}"
            )
        out.append(WriteOnly(str(attribute), version, str(secret), str(key), str(fmt)))
    names = [w.attribute for w in out]
    if len(set(names)) != len(names):
        raise TerraformSpecError(f"{where} lists an attribute twice")
    return tuple(out)


def terraform_resource(resource: Resource) -> TerraformResource:
    """The Terraform view of one ``type: Terraform`` resource; TerraformSpecError if unusable."""
    address = resource.terraform
    ext = resource.extensions
    provider = _provider(resource.id, ext.get(EXT_PROVIDER))
    if provider.address != f"{address.namespace}/{address.provider}":
        raise TerraformSpecError(
            f"{resource.id}: the id names provider {address.namespace}/{address.provider} but "
            f"`extensions.provider.source` is {provider.source}; they must agree"
        )
    import_id = ext.get(EXT_IMPORT)
    if import_id is not None and (not isinstance(import_id, str) or not import_id):
        raise TerraformSpecError(f"{resource.id}: `extensions.{EXT_IMPORT}` must be a string")
    unknown = sorted(set(ext) - {EXT_PROVIDER, EXT_IMPORT, EXT_WRITE_ONLY})
    if unknown:
        raise TerraformSpecError(
            f"{resource.id}: unknown extension(s) {unknown} on a Terraform resource "
            f"(known: {EXT_PROVIDER}, {EXT_IMPORT}, {EXT_WRITE_ONLY})"
        )
    return TerraformResource(
        resource, address, provider, import_id, _write_only(resource.id, ext.get(EXT_WRITE_ONLY))
    )


def terraform_resources(spec: Spec | None) -> list[TerraformResource]:
    """Every Terraform resource of the Spec, checked (TerraformSpecError on the first
    unusable one); providers of one local name must agree on source and version."""
    out = [terraform_resource(r) for r in (spec.terraform() if spec else ())]
    seen: dict[str, ProviderRef] = {}
    for item in out:
        p = item.provider
        other = seen.setdefault(p.local_name, p)
        if (other.source, other.version) != (p.source, p.version):
            raise TerraformSpecError(
                f"{item.id}: provider {p.local_name} is {p.source} {p.version} here but "
                f"{other.source} {other.version} elsewhere in the stack; use one"
            )
    return out


# --- stack.yaml ----------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderConfig:
    """A provider configuration: plain ``settings`` and arguments from the environment."""

    name: str
    settings: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)  # argument -> variable
    # the arguments a reference may copy into a Kubernetes object: konfig.yaml's
    # (konfig.tofu.policy), none until the policy was applied
    references: tuple[str, ...] = ()


@dataclass(frozen=True)
class StackTerraform:
    providers: dict[str, ProviderConfig] = field(default_factory=dict)
    allow_destroy: tuple[str, ...] = ()
    # held to the platform's policy (konfig.tofu.policy.checked_against_policy): only then does the
    # OpenTofu runtime write a configuration of it
    checked: bool = False

    def may_destroy(self, resource_id: str) -> bool:
        """Whether the stack opts in to destroying ``resource_id`` (an id or a pattern)."""
        return any(
            p == resource_id or fnmatch.fnmatchcase(resource_id, p) for p in self.allow_destroy
        )

    def missing_credentials(
        self, configs: Iterable[str], environment: Mapping[str, str]
    ) -> tuple[str, ...]:
        """The environment variables the provider configurations ``configs`` take their
        arguments from that ``environment`` does not set (names only, sorted)."""
        wanted = {
            variable
            for name in configs
            if name in self.providers
            for variable in self.providers[name].environment.values()
        }
        return tuple(sorted(v for v in wanted if not environment.get(v)))


def stack_terraform(raw: Mapping[str, Any] | None, stack_path: str) -> StackTerraform:
    """The ``terraform`` section of a stack's ``stack.yaml`` (``raw``: the parsed file)."""
    file = f"{stack_path}/{STACK_FILE}"
    section = (raw or {}).get(STACK_KEY)
    if section is None:
        return StackTerraform()
    if not isinstance(section, Mapping):
        raise ConfigError("`terraform` must be a mapping", file=file)
    unknown = sorted(set(section) - {"providers", "allowDestroy"})
    if unknown:
        raise ConfigError(
            f"unknown key(s) under `terraform`: {unknown} (known: providers, allowDestroy)",
            file=file,
        )
    providers: dict[str, ProviderConfig] = {}
    raw_providers = section.get("providers") or {}
    if not isinstance(raw_providers, Mapping):
        raise ConfigError(
            "`terraform.providers` must map configuration names to settings", file=file
        )
    for name, body in raw_providers.items():
        providers[str(name)] = _provider_config(str(name), body, file)
    allow = section.get("allowDestroy") or []
    if not isinstance(allow, list) or not all(isinstance(a, str) and a for a in allow):
        raise ConfigError(
            "`terraform.allowDestroy` must be a list of Terraform resource ids (or patterns)",
            file=file,
        )
    return StackTerraform(providers, tuple(allow))


def _provider_config(name: str, body: Any, file: str) -> ProviderConfig:
    where = f"`terraform.providers.{name}`"
    if not _CONFIG.match(name):
        raise ConfigError(
            f"{where}: a configuration name is lower-case letters, digits, '_' and '-'", file=file
        )
    if body is None:
        return ProviderConfig(name)
    if not isinstance(body, Mapping):
        raise ConfigError(f"{where} must be a mapping with settings and environment", file=file)
    unknown = sorted(set(body) - {"settings", "environment"})
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {unknown} (known: settings, environment)", file=file
        )
    settings = body.get("settings") or {}
    environment = body.get("environment") or {}
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{where}.settings must map arguments to values", file=file)
    if not isinstance(environment, Mapping) or not all(
        isinstance(v, str) and _ENV.match(v) for v in environment.values()
    ):
        raise ConfigError(
            f"{where}.environment must map arguments to environment variable names "
            "(e.g. password: SHOP_PROD_PGPASSWORD); values never go in the repository",
            file=file,
        )
    for argument in [*settings, *environment]:
        if not _ARGUMENT.match(str(argument)):
            raise ConfigError(f"{where}: {argument!r} is not a provider argument name", file=file)
    both = sorted(set(settings) & set(environment))
    if both:
        raise ConfigError(
            f"{where}: {both} set both in settings and from the environment; keep one", file=file
        )
    return ProviderConfig(
        name,
        {str(k): v for k, v in settings.items()},
        {str(k): str(v) for k, v in environment.items()},
    )


def credentials_bundle(text: str, where: str) -> dict[str, str]:
    """Provider credentials given together, as one CI secret holds them: a JSON object of
    environment variable names (those stack.yaml's ``environment`` sections name) to
    their values, strings or numbers. An error names ``where`` and the line, never a
    value (the whole text is a secret)."""
    import json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{where}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
            hint='give a JSON object of variable names to values, e.g. {"APP_PGHOST": "db"}',
        ) from None
    if not isinstance(data, Mapping):
        raise UsageError(
            f"{where}: a JSON object of variable names to values was expected, "
            f"not a {type(data).__name__}",
            hint='e.g. {"APP_PGHOST": "db", "APP_PGPASSWORD": "..."}',
        )
    out: dict[str, str] = {}
    for name, value in data.items():
        if not _ENV.match(name):
            raise UsageError(
                f"{where}: {name!r} is not an environment variable name "
                "(letters, digits and _, not starting with a digit)"
            )
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise UsageError(
                f"{where}: the value of {name} must be a string or a number, "
                f"not {'a boolean' if isinstance(value, bool) else type(value).__name__}"
            )
        out[name] = value if isinstance(value, str) else json.dumps(value)
    return out

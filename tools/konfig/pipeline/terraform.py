"""The Terraform part of a stack's preview, apply and destroy, next to its Kubernetes part.

A stack whose Spec holds ``type: Terraform`` resources is planned in two runtimes:

1. **OpenTofu** (:mod:`konfig.tofu`): the stack's resources as one JSON configuration,
   its state in the stack's cluster (the ``kubernetes`` backend: a Secret and a Lease in
   :data:`~konfig.tofu.config.STATE_NAMESPACE`), ``tofu plan`` translated into changes;
2. **Kubernetes** (:mod:`konfig.engine`): the Spec's Kubernetes objects with every
   reference to a Terraform attribute (:mod:`konfig.outputs`) replaced by its value —
   the planned value in a preview (``(known after apply)`` when OpenTofu does not know
   it yet), the applied one at apply — and every generated Secret key (the database
   password) filled in memory: the live Secret's value, else a new random one.

Both plans become one :class:`~konfig.engine.plan.StackPlan`. Apply runs OpenTofu first
(the objects it creates are what the Kubernetes objects refer to), then the Kubernetes
engine; destroy runs in the reverse order. A Terraform resource that apply would
destroy (removed from the stack, or replaced) is **refused** unless the stack lists it
under ``terraform.allowDestroy``; the preview marks it, and apply writes nothing.

The generated password reaches OpenTofu only as an ephemeral variable of a write-only
argument (never in its plan or state), and Kubernetes only in the Secret's ``data``
(masked in every report). Nothing here prints or reads the environment: the CLI builds
the :class:`TofuContext`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from konfig import outputs
from konfig.engine.drift import DriftedField, ObjectDrift
from konfig.engine.health import Health
from konfig.engine.inventory import Inventory
from konfig.engine.kube import Kube, KubeTarget
from konfig.engine.plan import Change, NotPreviewed, StackPlan, plan_differences
from konfig.engine.planner import DEFAULT_WORKERS, plan_stack
from konfig.engine.stackrun import (
    ApplyOptions,
    Event,
    EventSink,
    ObjectResult,
    Outcome,
    StackResult,
)
from konfig.engine.survey import ObjectStatus
from konfig.errors import KonfigError
from konfig.repo.files import WriteScope, remove
from konfig.repo.layout import Stack
from konfig.secrets.refs import key_refs
from konfig.spec import Resource, Spec
from konfig.tofu import credentials, plans
from konfig.tofu.config import STATE_NAMESPACE, Backend, state_providers
from konfig.tofu.model import (
    StackTerraform,
    TerraformSpecError,
    generated_keys,
    stack_terraform,
    terraform_resources,
)
from konfig.tofu.refresh import ResourceDrift, refresh_stack
from konfig.tofu.runner import Cluster, TofuSettings
from konfig.tofu.stackrun import Outcome as TofuOutcome
from konfig.tofu.stackrun import (
    PlannedStack,
    StackTofu,
    WriteOnlyValue,
    plan_from_actions,
    show_plan,
)
from konfig.tofu.stackrun import apply_stack as tofu_apply
from konfig.tofu.stackrun import plan_stack as tofu_plan
from konfig.tofu.state import addresses as state_addresses
from konfig.tofu.state import configs as state_configs
from konfig.tofu.state import decode_state
from konfig.tofu.state import ids as state_resource_ids
from konfig.words import about, plural

PREVIEW_STATE = "konfig-preview.tfstate"  # an empty state (a preview before any apply)

SecretData = Mapping[str, Mapping[str, str]]  # resource id -> data key -> base64 value

# Provider arguments a reference may not copy into a Kubernetes object: credentials.
_SECRET_ARGUMENT = re.compile(r"password|secret|token|key|cert", re.IGNORECASE)


@dataclass(frozen=True)
class TofuContext:
    """How this run drives OpenTofu (the CLI builds it from flags and the environment)."""

    settings: TofuSettings
    workroot: Path  # one working directory per stack below it (a cache folder)
    environment: Mapping[str, str] = field(default_factory=dict, repr=False)
    scope: WriteScope | None = None


def state_suffix(stack_path: str) -> str:
    """The state Secret's suffix for a stack: its path as a DNS label (hashed when long)."""
    slug = re.sub(r"[^a-z0-9]+", "-", stack_path.lower()).strip("-")
    if len(slug) > 40:
        slug = f"{slug[:30].rstrip('-')}-{hashlib.sha256(stack_path.encode()).hexdigest()[:8]}"
    return slug or "stack"


def stack_tofu(tctx: TofuContext, stack: Stack, target: KubeTarget) -> StackTofu:
    """The Terraform settings of one stack: stack.yaml's ``terraform``, its working
    directory, its state backend in the stack's cluster."""
    suffix = state_suffix(stack.path)
    kubeconfig = target.kubeconfig or str(Path("~/.kube/config").expanduser())
    return StackTofu(
        stack_path=stack.path,
        workdir=tctx.workroot / suffix,
        backend=Backend(suffix=suffix),
        settings=tctx.settings,
        cluster=Cluster(kubeconfig=kubeconfig, context=target.context),
        terraform=stack_terraform(stack.raw, stack.path),
        environment=tctx.environment,
        scope=tctx.scope,
    )


# --- generated Secret keys ---------------------------------------------------------


def generated_data(kube: Kube, spec: Spec) -> dict[str, dict[str, str]]:
    """Resource id -> {key: base64 value} of every generated Secret key: the live
    Secret's value when it has one (a password is generated once), else a new one."""
    out: dict[str, dict[str, str]] = {}
    for res in spec.kubernetes():
        keys = generated_keys(res)
        if not keys:
            continue
        live = kube.get("v1", "Secret", res.name, res.namespace) or {}
        data = live.get("data") or {}
        out[res.id] = {
            g.key: str(data.get(g.key) or "")
            or base64.b64encode(secrets.token_urlsafe(g.length)[: g.length].encode()).decode()
            for g in keys
        }
    return out


def _version(value: str) -> str:
    """A version of a write-only value: changes exactly when the value changes."""
    return str(int(hashlib.sha256(value.encode()).hexdigest()[:12], 16))


def scram_verifier(password: str, *, iterations: int = 4096) -> str:
    """PostgreSQL's SCRAM-SHA-256 verifier of ``password`` (RFC 5802/7677, as
    ``pg_authid.rolpassword`` stores it): PostgreSQL takes it as is, so the clear password
    never reaches the server, its log (a failed statement is logged with its text) or
    ``pg_stat_activity``; the role still logs in with the clear password."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def write_only_values(
    spec: Spec, data: Mapping[str, Mapping[str, str]]
) -> dict[tuple[str, str], WriteOnlyValue]:
    """(Secret id, key) -> the value and version each write-only argument takes; a key
    from an encrypted file is left out when ``data`` lacks it (a preview without the
    decryption key: OpenTofu then plans without the value and ignores its version)."""
    out: dict[tuple[str, str], WriteOnlyValue] = {}
    resources = spec.by_id()
    for item in terraform_resources(spec):
        for w in item.write_only:
            encoded = (data.get(w.secret) or {}).get(w.key)
            holder = resources.get(w.secret)
            from_file = holder is not None and w.key in {
                k.key for k in key_refs(holder.id, holder.extensions)
            }
            if encoded is None and from_file:
                continue
            if encoded is None:
                raise TerraformSpecError(
                    f"{item.id}: {w.attribute} takes its value from {w.secret} key {w.key}, "
                    "which is neither generated nor from an encrypted file in this stack"
                )
            value = base64.b64decode(encoded).decode()
            given = scram_verifier(value) if w.format == "scram-sha-256" else value
            out[(w.secret, w.key)] = WriteOnlyValue(given, _version(value))
    return out


def merged_data(*parts: SecretData | None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for part in parts:
        for rid, keys in (part or {}).items():
            out.setdefault(rid, {}).update(keys)
    return out


# --- references ----------------------------------------------------------------------


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
            if _SECRET_ARGUMENT.search(argument):
                raise TerraformSpecError(
                    f"a reference to {ref}: the provider's {argument} is a credential and is "
                    "never copied into a Kubernetes object"
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


def not_previewed(
    spec: Spec, state: Mapping[str, Any] | None, missing: tuple[str, ...]
) -> tuple[NotPreviewed, ...]:
    """Every Terraform resource of the Spec and of the state, not previewed because the
    credentials ``missing`` (variable names) are not set."""
    reason = f"not previewed: credentials {', '.join(missing)} missing"
    ids = {r.id for r in spec.terraform()} | set(state_resource_ids(state).values())
    return tuple(NotPreviewed(i, plans.RUNTIME, reason) for i in sorted(ids))


def missing_credentials(
    terraform: StackTerraform,
    spec: Spec | None,
    state: Mapping[str, Any] | None,
    environment: Mapping[str, str],
) -> tuple[str, ...]:
    """The credential variables the stack's provider configurations (those its resources
    and its state use) take from the environment and ``environment`` does not set."""
    configs = {r.provider.config for r in terraform_resources(spec)} if spec else set()
    configs |= {p.config for p in state_providers(state)}
    return terraform.missing_credentials(configs, environment)


# --- the state -----------------------------------------------------------------------


def read_state(kube: Kube, backend: Backend, *, where: str) -> dict[str, Any] | None:
    """The stack's state, from the backend's Secret (None when there is none yet)."""
    if kube.get("v1", "Namespace", backend.namespace, None) is None:
        return None
    secret = kube.get("v1", "Secret", backend.secret_name, backend.namespace)
    return decode_state(secret, where=where)


def ensure_state_namespace(kube: Kube) -> None:
    if kube.get("v1", "Namespace", STATE_NAMESPACE, None) is None:
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": STATE_NAMESPACE,
                    "labels": {"app.kubernetes.io/managed-by": "konfig"},
                },
            },
            dry_run=False,
        )


INTENT_PREFIX = "konfig-tofu-intent-"


def read_intent(kube: Kube, backend: Backend) -> list[str]:
    """The Terraform ids an apply was creating when it last stopped without finishing
    (konfig killed while OpenTofu applied): objects that may exist unrecorded."""
    found = kube.get("v1", "ConfigMap", INTENT_PREFIX + backend.suffix, backend.namespace)
    raw = ((found or {}).get("data") or {}).get("creating") or "[]"
    try:
        ids = json.loads(raw)
    except ValueError:
        return []
    return [str(i) for i in ids] if isinstance(ids, list) else []


def write_intent(kube: Kube, backend: Backend, ids: list[str]) -> None:
    """Record (before ``tofu apply``) what it is about to create, and clear it after: the
    next plan imports what the state lacks of it (OpenTofu's own state is written only
    at the end, so a killed apply leaves created objects unrecorded)."""
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": INTENT_PREFIX + backend.suffix,
                "namespace": backend.namespace,
                "labels": {"app.kubernetes.io/managed-by": "konfig"},
            },
            "data": {"creating": json.dumps(sorted(ids))},
        },
        dry_run=False,
    )


def state_values_by_id(state: Mapping[str, Any] | None, planned: PlannedStack) -> dict[str, Any]:
    by_address = plans.state_values(state or {})
    return {rid: by_address[a] for a, rid in planned.ids.items() if a in by_address}


# --- planning ------------------------------------------------------------------------


def refuse_destroys(changes: tuple[Change, ...], terraform: StackTerraform) -> tuple[Change, ...]:
    """Deletes and replaces of Terraform resources the stack does not allow, marked."""
    out: list[Change] = []
    for c in changes:
        if c.action in ("delete", "replace") and not terraform.may_destroy(c.id):
            c = replace(
                c,
                refused=f"apply refuses to {'destroy' if c.action == 'delete' else 'replace'} "
                f"{c.kind} {c.name}: add {c.id} to `terraform.allowDestroy` in stack.yaml to "
                "allow it (its data is lost)",
            )
        out.append(c)
    return tuple(out)


@dataclass
class HybridPlan:
    """A stack's plan in both runtimes (the OpenTofu plan file is in its working dir)."""

    plan: StackPlan
    tofu: PlannedStack | None  # None: nothing in the configuration nor in the state
    kube_spec: Spec
    data: dict[str, dict[str, str]] = field(repr=False)
    context: StackTofu
    state_serial: tuple[str, int] | None = None  # the state planned against (lineage, serial)
    # the Kubernetes part as planned (with ``kube_spec``): reused after OpenTofu applied
    # when the values it refers to did not change (None: planned after OpenTofu applied)
    kube_plan: StackPlan | None = None


def plan_hybrid(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    *,
    lock: bool,
    workers: int = DEFAULT_WORKERS,
    secret_data: SecretData | None = None,
    degrade: bool = False,
) -> HybridPlan:
    """Plan both runtimes; ``lock``: take OpenTofu's state lock (apply), or not (preview).

    ``degrade`` (a preview): without the provider credentials the Terraform resources are
    not planned but listed as not previewed (naming the variables), and the Kubernetes
    objects are planned with the values the state records (the live value where even
    that is unknown); otherwise a missing credential is an error naming it."""
    ctx = stack_tofu(tctx, stack, target)
    generated = generated_data(kube, spec)
    data = merged_data(secret_data, generated)
    state = read_state(kube, ctx.backend, where=stack.path)
    planned: PlannedStack | None = None
    tchanges: tuple[Change, ...] = ()
    values: Mapping[str, Mapping[str, Any]] = {}
    skipped: tuple[NotPreviewed, ...] = ()
    missing: tuple[str, ...] = ()
    if degrade and (spec.terraform() or state_addresses(state)):
        missing = missing_credentials(ctx.terraform, spec, state, tctx.environment)
    if missing:
        skipped = not_previewed(spec, state, missing)
        by_address = plans.state_values(state or {})
        values = {
            r.id: by_address[r.terraform.address]
            for r in spec.terraform()
            if r.terraform.address in by_address
        }
    elif spec.terraform() or state_addresses(state):
        if state is None and not lock:
            # A preview of a stack without state yet: plan against an empty local state
            # (the kubernetes backend would create its Secret: a preview writes nothing).
            ctx = replace(ctx, backend=Backend(kind="local", path=PREVIEW_STATE))
        planned = tofu_plan(
            ctx,
            spec,
            values=write_only_values(spec, data),
            state=state,
            lock=lock,
            members=read_intent(kube, ctx.backend),
        )
        tchanges = refuse_destroys(planned.plan.changes, ctx.terraform)
        values = planned.plan.values
    lookup = lookup_of(
        ctx.terraform,
        tctx.environment,
        values,
        known={r.id for r in spec.terraform()},
        unset_unknown=bool(missing),
    )
    kspec = kubernetes_spec(spec, lookup)
    if missing:
        kspec = keeplive_where_unknown(kube, kspec)
    kplan = plan_stack(kube, stack, kspec, prior, workers=workers, secret_data=data or None)
    plan = replace(
        kplan,
        spec_digest=spec.digest(),
        changes=tuple(sorted((*kplan.changes, *tchanges), key=lambda c: c.id)),
        not_previewed=skipped,
    )
    return HybridPlan(plan, planned, kspec, data, ctx, state_serial(state), kplan)


def state_serial(state: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """What OpenTofu tells a state's versions by: its lineage and serial (None: no state)."""
    if not state:
        return None
    return (str(state.get("lineage") or ""), int(state.get("serial") or 0))


def reuse_plan(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    saved: HybridPlan,
    *,
    workers: int = DEFAULT_WORKERS,
) -> HybridPlan | None:
    """``saved`` (the plan konfig apply showed, made moments ago without the locks) with
    its Kubernetes part planned again, now under the stack's lock; None when its OpenTofu
    plan cannot be applied as it is: it was made against an empty local state (no state
    yet), the state changed since (another lineage or serial), or an apply was
    interrupted since (its intent record). Then the caller plans again under OpenTofu's
    lock. ``tofu apply`` of the saved plan also refuses a stale plan by itself."""
    tofu = saved.tofu
    ctx = saved.context
    if tofu is None or ctx.backend.kind != "kubernetes" or saved.state_serial is None:
        return None
    if state_serial(read_state(kube, ctx.backend, where=stack.path)) != saved.state_serial:
        return None
    if read_intent(kube, ctx.backend):
        return None
    return _with_kubernetes(kube, stack, spec, prior, saved, workers=workers)


def _with_kubernetes(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    hybrid: HybridPlan,
    *,
    workers: int = DEFAULT_WORKERS,
) -> HybridPlan:
    """``hybrid`` with its Kubernetes part planned (with the OpenTofu plan's values) next
    to the Terraform changes (unallowed destroys marked)."""
    ctx = hybrid.context
    tofu = hybrid.tofu
    values = tofu.plan.values if tofu is not None else {}
    lookup = lookup_of(
        ctx.terraform, ctx.environment, values, known={r.id for r in spec.terraform()}
    )
    kspec = kubernetes_spec(spec, lookup)
    kplan = plan_stack(kube, stack, kspec, prior, workers=workers, secret_data=hybrid.data or None)
    tchanges = refuse_destroys(tofu.plan.changes, ctx.terraform) if tofu is not None else ()
    plan = replace(
        kplan,
        spec_digest=spec.digest(),
        changes=tuple(sorted((*kplan.changes, *tchanges), key=lambda c: c.id)),
    )
    return replace(hybrid, plan=plan, kube_spec=kspec, kube_plan=kplan)


def plan_terraform_first(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    tctx: TofuContext,
    target: KubeTarget,
    *,
    secret_data: SecretData | None = None,
) -> HybridPlan | None:
    """For ``konfig apply --yes`` (nothing shown to compare with): ``tofu plan`` under
    OpenTofu's lock, not read back yet: ``tofu.actions`` says what it does, the changes
    are not known yet (:func:`unread_plan` tells them from the actions when that is
    enough, else :func:`finish_plan` reads them). None for a stack without
    Terraform resources in its Spec: the caller plans as usual. What it plans with is
    what :func:`plan_hybrid` plans with under the lock: a change to one is a change to
    both."""
    if not spec.terraform():
        return None
    ctx = stack_tofu(tctx, stack, target)
    data = merged_data(secret_data, generated_data(kube, spec))
    state = read_state(kube, ctx.backend, where=stack.path)
    planned = tofu_plan(
        ctx,
        spec,
        values=write_only_values(spec, data),
        state=state,
        lock=True,
        members=read_intent(kube, ctx.backend),
        show=False,
    )
    empty = StackPlan(stack.path, None, False, None, None, None, ())
    return HybridPlan(empty, planned, Spec(()), data, ctx, state_serial(state))


def unread_plan(quick: HybridPlan) -> HybridPlan | None:
    """The plan of :func:`plan_terraform_first` told from OpenTofu's messages alone,
    without reading it back (``tofu show -json``, one more start of the provider): when
    it creates, updates or leaves alone and destroys, replaces, forgets, moves and adopts
    nothing (no destroy apply would refuse; nothing to compare). Its ``plan`` holds the
    Terraform changes only, without field changes; the Kubernetes part is planned once,
    after OpenTofu applied, with the values it applied. None: read it back
    (:func:`finish_plan`)."""
    told = plan_from_actions(quick.tofu) if quick.tofu is not None else None
    if told is None:
        return None
    return replace(quick, plan=replace(quick.plan, changes=told.plan.changes), tofu=told)


def finish_plan(
    kube: Kube, stack: Stack, spec: Spec, prior: Inventory | None, quick: HybridPlan
) -> HybridPlan:
    """A plan of :func:`plan_terraform_first` read back and translated, its Kubernetes
    part planned: what apply shows, checks and compares."""
    assert quick.tofu is not None
    return _with_kubernetes(kube, stack, spec, prior, replace(quick, tofu=show_plan(quick.tofu)))


def discard(hybrid: HybridPlan) -> None:
    """Remove the saved OpenTofu plan (a preview's)."""
    if hybrid.tofu is None:
        return
    workdir = hybrid.tofu.workdir
    remove(
        [workdir.path / hybrid.tofu.plan_file, workdir.path / PREVIEW_STATE], scope=workdir.scope
    )


def preview_hybrid(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    *,
    workers: int = DEFAULT_WORKERS,
    secret_data: SecretData | None = None,
) -> StackPlan:
    """A preview: both runtimes planned, nothing written (OpenTofu's lock not taken);
    without the provider credentials the Terraform resources are not previewed."""
    hybrid = plan_hybrid(
        kube,
        stack,
        spec,
        prior,
        tctx,
        target,
        lock=False,
        workers=workers,
        secret_data=secret_data,
        degrade=True,
    )
    discard(hybrid)
    return hybrid.plan


# --- applying ------------------------------------------------------------------------

_APPLIED: dict[str, Outcome] = {
    "create": "created",
    "update": "updated",
    "replace": "replaced",
    "delete": "deleted",
    "unchanged": "unchanged",
}


def apply_hybrid(
    kube: Kube,
    stack: Stack,
    spec: Spec,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    options: ApplyOptions,
    emit: EventSink,
    *,
    shown_entry: Mapping[str, Any] | None = None,
    secret_data: SecretData | None = None,
    lost: threading.Event | None = None,
    show_plan: Callable[[StackPlan], None] | None = None,
    stop: threading.Event | None = None,
    saved: HybridPlan | None = None,
) -> StackResult:
    """Apply both runtimes under the stack's lock (the caller holds it): plan, compare
    with the plan shown, refuse unallowed destroys, ``tofu apply``, then the Kubernetes
    objects with the applied values. Nothing is written when the plan is refused.

    ``saved``: the plan shown (:func:`plan_hybrid` without the locks, moments ago): its
    OpenTofu plan is applied as it is when the state has not changed since
    (:func:`reuse_plan`) — what was shown is what OpenTofu applies, without planning
    twice; only the Kubernetes part is planned again. Otherwise both are planned again
    under OpenTofu's lock and compared with the plan shown.

    Nothing shown nor saved (``apply --yes``): a plan that only creates and updates is
    not read back (:func:`unread_plan`); OpenTofu applies it, then the Kubernetes part is
    planned with the applied values and ``show_plan`` shows both."""
    started = time.monotonic()
    path = stack.path
    ensure_state_namespace(kube)
    hybrid = None if saved is None else reuse_plan(kube, stack, spec, prior, saved)
    unread = False  # the OpenTofu plan was told from its messages, not read back
    if hybrid is None and saved is not None:
        discard(saved)
    elif hybrid is None and shown_entry is None:
        quick = plan_terraform_first(kube, stack, spec, tctx, target, secret_data=secret_data)
        if quick is not None:
            told = unread_plan(quick)
            unread = told is not None
            hybrid = told or finish_plan(kube, stack, spec, prior, quick)
    if hybrid is None:
        hybrid = plan_hybrid(
            kube, stack, spec, prior, tctx, target, lock=True, secret_data=secret_data
        )
    plan = hybrid.plan
    if show_plan is not None and not unread:
        show_plan(plan)
    refused = plan.refusals()
    problems = [] if shown_entry is None else plan_differences(shown_entry, plan)
    if refused or problems:
        discard(hybrid)
        if refused:
            return StackResult(
                path,
                False,
                (),
                f"{path}: nothing was applied: " + "; ".join(c.refused for c in refused),
            )
        return StackResult(
            path,
            False,
            (),
            f"{path}: the cluster changed since the plan was shown; nothing was applied "
            "to this stack:\n  " + "\n  ".join(problems),
        )

    tofu = hybrid.tofu
    terraform_changes = list(tofu.plan.changes) if tofu is not None else []
    stopped = stop is not None and stop.is_set()
    if tofu is not None and tofu.plan.has_changes and stopped:
        discard(hybrid)
        return StackResult(
            path,
            False,
            (),
            f"{path}: stopped before OpenTofu applied anything; nothing was applied",
            prior,
            time.monotonic() - started,
        )
    # What OpenTofu does is reported after the plan is shown: a plan not read back is
    # shown once OpenTofu applied it and the Kubernetes part is planned with the values
    # it applied (until then its events wait).
    defer = unread and show_plan is not None
    waiting: list[Event] = []
    say: Callable[[Event], None] = waiting.append if defer else emit
    results: list[ObjectResult] = []
    outcome: TofuOutcome | None = None

    def report(kplan: StackPlan | None) -> None:
        """Show a plan not read back (with its Kubernetes part when it was planned),
        then what OpenTofu did (once: on the way out of a failure too)."""
        nonlocal defer
        if not defer or show_plan is None:
            return
        defer = False
        changes = (*(kplan.changes if kplan is not None else ()), *plan.changes)
        show_plan(
            replace(
                kplan or plan,
                spec_digest=spec.digest(),
                changes=tuple(sorted(changes, key=lambda c: c.id)),
            )
        )
        for event in waiting:
            emit(event)

    try:
        outcome = _apply_terraform(kube, hybrid, say, results)
    except BaseException:
        report(None)
        raise
    if outcome is None:
        discard(hybrid)
        results += [ObjectResult(c.id, "unchanged", c.reason) for c in terraform_changes]

    if outcome is not None and not outcome.ok:
        report(None)
        results += [
            ObjectResult(r.id, "skipped", "skipped: the Terraform resources failed")
            for r in spec.kubernetes()
        ]
        return StackResult(
            path,
            False,
            tuple(results),
            about(path, outcome.error) + "; the Kubernetes objects were not applied (re-run "
            "once the cause is fixed: OpenTofu's state records what was created)",
            prior,
            time.monotonic() - started,
        )

    # The Kubernetes objects, with the values OpenTofu applied.
    state = read_state(kube, hybrid.context.backend, where=path)
    lookup = lookup_of(
        hybrid.context.terraform,
        tctx.environment,
        state_values_by_id(state, tofu) if tofu is not None else {},
        known={r.id for r in spec.terraform()},
    )
    try:
        kspec = kubernetes_spec(spec, lookup)
        unresolved = [
            f"{r.id}: {', '.join(outputs.unresolved_in(r.attributes))}"
            for r in kspec.resources
            if outputs.unresolved_in(r.attributes)
        ]
        if unresolved:
            raise KonfigError(
                f"{path}: references still unresolved after OpenTofu applied: "
                + "; ".join(unresolved)
                + "; the Kubernetes objects were not applied"
            )
        if hybrid.kube_plan is not None and kspec == hybrid.kube_spec:
            # planned under this lock with the same values: nothing of it changed since
            kplan = hybrid.kube_plan
        else:
            kplan = plan_stack(kube, stack, kspec, prior, secret_data=hybrid.data or None)
    except BaseException:
        report(None)
        raise
    kplan = replace(kplan, spec_digest=spec.digest())
    report(kplan)
    from konfig.engine.applier import apply_stack  # networkx: only when applying

    # ``stop`` (SIGTERM/SIGINT) is honoured by the Kubernetes part; a running tofu is
    # never killed: it finishes, writes its state and releases its lock first.
    result = apply_stack(kube, kplan, kspec, prior, options, emit, lost=lost, stop=stop)
    return replace(
        result,
        objects=tuple(results) + result.objects,
        seconds=time.monotonic() - started,
    )


def _apply_terraform(
    kube: Kube, hybrid: HybridPlan, say: EventSink, results: list[ObjectResult]
) -> TofuOutcome | None:
    """``tofu apply`` of the plan when it changes something (None: nothing to apply),
    between the intent record and its clearing (only once OpenTofu succeeded: after a
    failure the next plan imports what the state lacks of it, or drops the import of
    what does not exist); each resource's result appended to ``results`` and said."""
    tofu = hybrid.tofu
    if tofu is None or not tofu.plan.has_changes:
        return None
    path = hybrid.context.stack_path
    changes = tofu.plan.changes
    say(Event(path, "level", f"OpenTofu: {len(changes)} resources"))
    backend = hybrid.context.backend
    creating = [c.id for c in changes if c.action in ("create", "replace")]
    if creating:
        write_intent(kube, backend, creating)
    outcome = tofu_apply(tofu)
    # Cleared only when OpenTofu finished: a tofu that failed may have been killed
    # before it wrote its state (what it created is then only in the record).
    if outcome.ok and (creating or read_intent(kube, backend)):
        write_intent(kube, backend, [])
    by_id = tofu.addresses
    for c in changes:
        error = outcome.errors.get(by_id.get(c.id, ""))
        if outcome.ok or (error is None and c.action == "unchanged"):
            outcome_name = _APPLIED[c.action]
            done = ObjectResult(
                c.id, outcome_name, f"{outcome_name} {c.kind} {c.name} ({c.api_version})"
            )
        elif error is not None:
            done = ObjectResult(c.id, "failed", error)
        else:
            done = ObjectResult(c.id, "failed", "not applied: OpenTofu stopped (see the error)")
        results.append(done)
        say(Event(path, "object", done.message, done))
    return outcome


# --- destroying ----------------------------------------------------------------------


def plan_destroy_hybrid(
    kube: Kube,
    stack: Stack,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    *,
    lock: bool,
) -> HybridPlan:
    """The destroy plan of both runtimes: every object the inventory owns and every
    resource OpenTofu's state records is a delete (refused without the stack's opt-in)."""
    ctx = stack_tofu(tctx, stack, target)
    state = read_state(kube, ctx.backend, where=stack.path)
    kplan = plan_stack(kube, stack, None, prior, deleted=True)
    planned: PlannedStack | None = None
    tchanges: tuple[Change, ...] = ()
    if state_addresses(state):
        planned = tofu_plan(ctx, None, values={}, state=state, lock=lock, destroy=True)
        tchanges = refuse_destroys(planned.plan.changes, ctx.terraform)
    plan = replace(kplan, changes=tuple(sorted((*kplan.changes, *tchanges), key=lambda c: c.id)))
    return HybridPlan(plan, planned, Spec(()), {}, ctx)


def destroy_hybrid(
    kube: Kube,
    stack: Stack,
    prior: Inventory | None,
    tctx: TofuContext,
    target: KubeTarget,
    options: ApplyOptions,
    emit: EventSink,
    *,
    lost: threading.Event | None = None,
    stop: threading.Event | None = None,
) -> StackResult:
    """Destroy both runtimes under the stack's lock: refused as a whole when the stack
    does not allow destroying one of its Terraform resources; else the Kubernetes objects
    first (they use the database), then ``tofu apply`` of the destroy plan."""
    from konfig.engine.destroyer import destroy_stack

    started = time.monotonic()
    path = stack.path
    hybrid = plan_destroy_hybrid(kube, stack, prior, tctx, target, lock=True)
    refused = hybrid.plan.refusals()
    if refused:
        discard(hybrid)
        listed = "; ".join(c.refused for c in refused)
        return StackResult(path, False, (), f"{path}: nothing was destroyed: {listed}")
    kplan = replace(
        hybrid.plan, changes=tuple(c for c in hybrid.plan.changes if c.runtime != "Terraform")
    )
    result = destroy_stack(kube, kplan, prior, options, emit, lost=lost, stop=stop)
    tofu = hybrid.tofu
    if tofu is None or not tofu.plan.has_changes:
        discard(hybrid)
        return result
    if not result.ok:
        discard(hybrid)
        return replace(
            result,
            error=f"{result.error}; the Terraform resources were kept (destroy again once "
            "the Kubernetes objects are gone)",
        )
    emit(Event(path, "level", f"OpenTofu: destroying {len(tofu.plan.changes)} resources"))
    outcome = tofu_apply(tofu)
    results = list(result.objects)
    by_id = tofu.addresses
    for c in tofu.plan.changes:
        error = outcome.errors.get(by_id.get(c.id, ""))
        if outcome.ok:
            message = f"deleted {c.kind} {c.name} ({c.api_version})"
            done = ObjectResult(c.id, "deleted", message, phase="destroy")
        else:
            done = ObjectResult(
                c.id, "failed", error or "not destroyed: OpenTofu stopped", phase="destroy"
            )
        results.append(done)
        emit(Event(path, "object", done.message, done))
    return replace(
        result,
        ok=result.ok and outcome.ok,
        objects=tuple(results),
        error=None if outcome.ok else about(path, outcome.error),
        seconds=time.monotonic() - started,
    )


def kept_terraform(kube: Kube, stack: Stack) -> str | None:
    """For a stack whose directory is gone: what its OpenTofu state still records (kept:
    without its stack.yaml neither the credentials nor the opt-in to destroy are known)."""
    backend = Backend(suffix=state_suffix(stack.path))
    found = sorted(state_addresses(read_state(kube, backend, where=stack.path)))
    if not found:
        return None
    return (
        f"{stack.path}: its Terraform resources are kept ({', '.join(found)}; state Secret "
        f"{backend.namespace}/{backend.secret_name}): to destroy them, restore the stack with "
        "`terraform.allowDestroy` and no resources, apply, then delete it"
    )


# --- status and drift ------------------------------------------------------------------


def terraform_objects(
    kube: Kube, stack: Stack, tctx: TofuContext, target: KubeTarget
) -> tuple[ObjectStatus, ...]:
    """The Terraform resources the stack's state records, as ``konfig status`` and
    ``konfig drift`` show objects: applied (in the state) or deleted outside Konfig, and
    their drift from ``tofu plan -refresh-only`` (read-only, no lock). Without the
    provider credentials (named, as a preview names them) or when OpenTofu fails, each
    resource's drift is unknown, with why."""
    ctx = stack_tofu(tctx, stack, target)
    state = read_state(kube, ctx.backend, where=stack.path)
    ids = state_resource_ids(state)
    if state is None or not ids:
        return ()
    missing = missing_credentials(ctx.terraform, None, state, tctx.environment)
    why = f"not checked: credentials {', '.join(missing)} missing" if missing else ""
    found: tuple[ResourceDrift, ...] = ()
    if not why:
        try:
            found = refresh_stack(ctx, state)
        except KonfigError as exc:
            why = f"not checked: {exc.message}"
    if why:
        return tuple(
            ObjectStatus(rid, _APPLIED_HEALTH, ObjectDrift(rid, "unknown", message=why))
            for rid in sorted(ids.values())
        )
    out: list[ObjectStatus] = []
    for r in found:
        if r.state == "deleted":
            gone = Health("not_found", "deleted outside Konfig (the Terraform state records it)")
            out.append(ObjectStatus(r.id, gone, ObjectDrift(r.id, "deleted", message=_GONE)))
            continue
        fields = tuple(
            DriftedField(f.path, f.after, f.after is None, keys=_field_keys(f.path))
            for f in r.fields
        )
        drift = ObjectDrift(
            r.id,
            r.state,
            fields,
            message=f"{plural(len(fields), 'field')} changed outside Konfig since the last apply"
            if fields
            else "",
        )
        out.append(ObjectStatus(r.id, _APPLIED_HEALTH, drift))
    return tuple(out)


def state_objects(kube: Kube, stack: Stack) -> tuple[ObjectStatus, ...]:
    """The Terraform resources the stack's state records, read from the state Secret
    only (no OpenTofu, no credentials): applied, their drift not checked."""
    backend = Backend(suffix=state_suffix(stack.path))
    ids = state_resource_ids(read_state(kube, backend, where=stack.path))
    return tuple(
        ObjectStatus(rid, _APPLIED_HEALTH, ObjectDrift(rid, "unknown", message=NOT_REFRESHED))
        for rid in sorted(ids.values())
    )


NOT_REFRESHED = "not checked: read from the Terraform state only, not refreshed (--terraform state)"
_APPLIED_HEALTH = Health("current", "applied (recorded in the Terraform state)")
_GONE = "deleted outside Konfig (OpenTofu's refresh no longer finds it)"


def _field_keys(path: str) -> tuple[str, ...]:
    """A top-level or dotted argument path as fieldsV1 keys (what ``value_at`` reads to
    show the repository's value); none for a path into a list."""
    parts = path.split(".")
    if all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
        return tuple(f"f:{p}" for p in parts)
    return ()


# --- before any write ------------------------------------------------------------------


def read_states(
    stacks: Sequence[Stack], kube_of: Callable[[Stack], Kube]
) -> dict[str, dict[str, Any] | None]:
    """Each stack's Terraform state (read-only: two GETs a stack, a few stacks at once),
    for :func:`require_credentials` to see the providers only the state still uses. A
    stack whose state cannot be read (its cluster does not answer) is left out: its own
    run reports that, and the other stacks go on as they would have."""
    from konfig.pipeline.concurrency import run_concurrently

    def one(stack: Stack) -> dict[str, Any] | KonfigError | None:
        backend = Backend(suffix=state_suffix(stack.path))
        try:
            return read_state(kube_of(stack), backend, where=stack.path)
        except KonfigError as exc:
            return exc

    found = zip([s.path for s in stacks], run_concurrently(stacks, one, 8), strict=True)
    return {path: state for path, state in found if not isinstance(state, KonfigError)}


def require_credentials(
    stacks: Sequence[Stack],
    specs: Mapping[str, Spec],
    environment: Mapping[str, str],
    *,
    states: Mapping[str, Mapping[str, Any] | None] | None = None,
    verb: str = "apply",
) -> None:
    """Refuse before anything is written when a stack lacks provider credentials in
    ``environment`` (each variable named, never a value): those of the provider
    configurations its Spec's Terraform resources use and, given its state (``states``,
    :func:`read_states`), those only the state's resources use (apply prunes them,
    destroy destroys them). Apply and destroy never degrade as a preview does."""
    problems: dict[str, tuple[credentials.MissingCredential, ...]] = {}
    for stack in stacks:
        spec = specs.get(stack.path)
        used = {r.provider.config for r in terraform_resources(spec)} if spec else set()
        in_state = state_configs((states or {}).get(stack.path))
        if not used and not in_state:
            continue
        terraform = stack_terraform(stack.raw, stack.path)
        found = credentials.missing(terraform, used, in_state, environment)
        if found:
            problems[stack.path] = found
    if problems:
        raise credentials.credentials_error(problems, verb=verb)

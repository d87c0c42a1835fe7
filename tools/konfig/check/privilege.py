"""Privilege rules: objects that hand out the cluster's highest powers or can stop it.

A pull request is reviewed as a diff of KCL; a binding to ``cluster-admin`` there is one
line among many. These rules make each such object a finding of `konfig check` and,
by the same function (:func:`privilege_findings`), a refusal of `konfig preview` and
`konfig apply` (one rule, three places, as ``spec/system-namespace``):

- ``spec/cluster-admin-binding``: a ClusterRoleBinding or RoleBinding whose ``roleRef``
  is the ClusterRole ``cluster-admin`` (every permission, cluster-wide or in the
  namespace: Secrets, RBAC, the power to grant more), or one with the subject Group
  ``system:masters`` (the group that bypasses authorization: a binding to it is either
  pointless or a mistake that reads as an escalation). A stack that must grant it (a
  platform stack's break-glass group) switches the rule off in its ``stack.yaml`` with
  a reason, best only for that binding (``policies: {disable: [{rule:
  spec/cluster-admin-binding, reason: ..., resources: [<id>]}]}``): the reason is in the
  reviewed diff, next to the binding.
- ``spec/catch-all-webhook``: a Validating- or MutatingWebhookConfiguration with a
  webhook that fails closed (``failurePolicy: Fail``, the default of
  ``admissionregistration.k8s.io/v1``) for every resource (a rule with ``apiGroups``
  and ``resources`` ``*``) in every namespace (no ``namespaceSelector`` nor
  ``objectSelector``): while its service is down no object can be written anywhere,
  ``kube-system`` included, not even the fix. Switched off like the one above, with a
  reason; the usual fixes are ``failurePolicy: Ignore`` or a ``namespaceSelector``
  that leaves out the system namespaces.
- ``spec/system-rbac``: a stack that declares the API server's own roles or bindings: a
  ClusterRole or ClusterRoleBinding ``cluster-admin``, ``admin``, ``edit`` or ``view``,
  or one of its bootstrap RBAC objects (:func:`is_bootstrap_rbac`: ``system:node``,
  ``system:controller:...``, ...; not every ``system:...`` name: vendors ship their own,
  as metrics-server's ``system:aggregated-metrics-reader``).
  Applying it would take the object over (server-side apply with force) and change
  what every user, controller and node may do. Always an error: there is no opt-out
  (the API server reconciles these objects itself; a cluster that needs them changed
  does so outside any application stack).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from konfig.check.findings import Finding
from konfig.check.locate import locate
from konfig.repo.layout import Stack
from konfig.spec import Resource, Spec

if TYPE_CHECKING:
    from konfig.check.structure import Exemption

CLUSTER_ADMIN_RULE = "spec/cluster-admin-binding"
CATCH_ALL_WEBHOOK_RULE = "spec/catch-all-webhook"
SYSTEM_RBAC_RULE = "spec/system-rbac"
# The rules a stack may switch off (with a reason) in stack.yaml ``policies.disable``.
SWITCHABLE = (CLUSTER_ADMIN_RULE, CATCH_ALL_WEBHOOK_RULE)

RBAC_GROUP = "rbac.authorization.k8s.io"
ADMISSION_GROUP = "admissionregistration.k8s.io"
BINDINGS = frozenset({"ClusterRoleBinding", "RoleBinding"})
RBAC_KINDS = frozenset({"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})
WEBHOOK_KINDS = frozenset({"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"})
# The API server's default user-facing roles (and the bindings of the same name)
DEFAULT_ROLES = frozenset({"cluster-admin", "admin", "edit", "view"})
SYSTEM_PREFIX = "system:"
MASTERS = "system:masters"
# The API server's bootstrap RBAC objects (Kubernetes 1.33, plugin/pkg/auth/authorizer/
# rbac/bootstrappolicy: the ones it reconciles, annotated rbac.authorization.kubernetes.io/
# autoupdate). Other system:... names are free: vendors ship their own
# (metrics-server's system:aggregated-metrics-reader, system:metrics-server).
# tools/tests/check/test_objectnames.py checks this against the control plane.
BOOTSTRAP_RBAC = frozenset(
    {
        "system:auth-delegator",
        "system:basic-user",
        "system:discovery",
        "system:heapster",
        "system:kube-aggregator",
        "system:kube-controller-manager",
        "system:kube-dns",
        "system:kube-scheduler",
        "system:kubelet-api-admin",
        "system:monitoring",
        "system:node",
        "system:node-bootstrapper",
        "system:node-problem-detector",
        "system:node-proxier",
        "system:persistent-volume-provisioner",
        "system:public-info-viewer",
        "system:service-account-issuer-discovery",
        "system:volume-scheduler",
        "extension-apiserver-authentication-reader",
    }
)
BOOTSTRAP_PREFIXES = (
    "system:controller:",
    "system:certificates.k8s.io:",
    "system:aggregate-to-",
    "system::",
)


def is_bootstrap_rbac(kind: str, name: str) -> bool:
    """Whether ``kind``/``name`` is one of the API server's own RBAC objects."""
    if kind in ("ClusterRole", "ClusterRoleBinding") and name in DEFAULT_ROLES:
        return True
    return name in BOOTSTRAP_RBAC or name.startswith(BOOTSTRAP_PREFIXES)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _cluster_admin(attributes: Mapping[str, Any]) -> str | None:
    """Why a binding grants cluster-admin (None when it does not)."""
    ref = attributes.get("roleRef")
    if isinstance(ref, Mapping) and (ref.get("kind"), ref.get("name")) == (
        "ClusterRole",
        "cluster-admin",
    ):
        return "binds the ClusterRole cluster-admin (every permission"
    subjects = attributes.get("subjects")
    for subject in subjects if isinstance(subjects, list) else ():
        if isinstance(subject, Mapping) and (subject.get("kind"), subject.get("name")) == (
            "Group",
            MASTERS,
        ):
            return f"has the subject Group {MASTERS} (the group that bypasses authorization"
    return None


def catch_all_webhooks(attributes: Mapping[str, Any], api_version: str) -> list[str]:
    """The names of the webhooks of a webhook configuration that fail closed for every
    resource in every namespace."""
    default_policy = "Fail" if api_version.endswith("/v1") else "Ignore"  # v1beta1: Ignore
    found: list[str] = []
    hooks = attributes.get("webhooks")
    for hook in hooks if isinstance(hooks, list) else ():
        if not isinstance(hook, Mapping):
            continue
        if (hook.get("failurePolicy") or default_policy) != "Fail":
            continue
        if hook.get("namespaceSelector") or hook.get("objectSelector"):
            continue  # a selector limits it (what it leaves out is the author's choice)
        rules = hook.get("rules")
        if any(_matches_everything(r) for r in (rules if isinstance(rules, list) else ())):
            found.append(str(hook.get("name") or "?"))
    return found


def _matches_everything(rule: Any) -> bool:
    if not isinstance(rule, Mapping):
        return False
    groups = rule.get("apiGroups") or []
    resources = rule.get("resources") or []
    return "*" in groups and ("*" in resources or "*/*" in resources)


def _system_rbac(r: Resource) -> bool:
    if r.kind not in RBAC_KINDS or _group(r.api_version) != RBAC_GROUP:
        return False
    return is_bootstrap_rbac(r.kind, r.name)


def _switched_off(stack: Stack) -> Mapping[str, Sequence[Exemption]]:
    """The rules the stack switches off (the structure rules' module only when it has
    any: preview and apply load no more than they need)."""
    if not stack.raw.get("policies"):
        return {}
    from konfig.check.structure import disabled_rules

    return disabled_rules(stack)


def privilege_findings(root: Path, stack: Stack, spec: Spec) -> list[Finding]:
    """The findings of the three rules for ``spec``, less those the stack switches off
    with a reason. `konfig check` reports them; preview and apply refuse the stack
    (:func:`privilege_refusal`)."""
    disabled = _switched_off(stack)
    findings: list[Finding] = []

    def add(rule: str, r: Resource, message: str) -> None:
        if rule in SWITCHABLE and any(e.covers(r.id) for e in disabled.get(rule, ())):
            return
        file, line = locate(root, stack, r)
        findings.append(Finding(rule, message, file, line, stack=stack.path, resource=r.id))

    for r in spec.resources:
        if r.is_terraform:
            continue
        group = _group(r.api_version)
        if _system_rbac(r):
            add(
                SYSTEM_RBAC_RULE,
                r,
                f"{r.id} is one of the API server's own RBAC objects: applying it would take "
                "it over and change what every user, controller and node may do; remove it "
                "from the stack (no stack may declare it)",
            )
        if r.kind in BINDINGS and group == RBAC_GROUP:
            why = _cluster_admin(r.attributes)
            if why is not None:
                where = "cluster-wide" if r.kind == "ClusterRoleBinding" else "in its namespace"
                add(
                    CLUSTER_ADMIN_RULE,
                    r,
                    f"{r.id} {why} {where}): bind a role with only the permissions needed, or "
                    "switch the rule off for this binding with a reason in stack.yaml "
                    f"(`policies: {{disable: [{{rule: {CLUSTER_ADMIN_RULE}, reason: ..., "
                    f"resources: [{r.id}]}}]}}`)",
                )
        if r.kind in WEBHOOK_KINDS and group == ADMISSION_GROUP:
            hooks = catch_all_webhooks(r.attributes, r.api_version)
            if hooks:
                add(
                    CATCH_ALL_WEBHOOK_RULE,
                    r,
                    f"{r.id}: webhook {', '.join(hooks)} fails closed (failurePolicy Fail) for "
                    "every resource in every namespace: while its service is down nothing "
                    "can be written anywhere, kube-system and the fix included; set "
                    "failurePolicy: Ignore or a namespaceSelector that leaves out the system "
                    "namespaces, or switch the rule off with a reason in stack.yaml "
                    f"(`policies: {{disable: [{{rule: {CATCH_ALL_WEBHOOK_RULE}, reason: ...}}]}}`)",
                )
    return findings


def privilege_refusal(findings: Sequence[Finding]) -> str:
    """Why preview and apply refuse a stack with ``findings`` of
    :func:`privilege_findings` (the first one's place is the stack error's; the others'
    are listed)."""
    first, rest = findings[0], findings[1:]
    return f"refused ({first.rule}, as `konfig check` reports it): {first.message}" + "".join(
        f"\n  {f.location()}: {f.message} [{f.rule}]" for f in rest
    )

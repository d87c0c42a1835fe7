"""The API server's rules for object names, per kind (``spec/invalid-name``).

Each kind's ``metadata.name`` is checked by the validation of its API group in
Kubernetes (``pkg/apis/<group>/validation``, apimachinery ``pkg/util/validation`` and
``pkg/api/validation/path``):

- most kinds, custom resources included: an RFC 1123 **subdomain** (lowercase letters,
  digits, ``-`` and ``.``, at most 253 characters);
- ``Namespace`` (and every ``metadata.namespace``) and ``StatefulSet`` (its name is
  part of its pods' host names): an RFC 1123 **label** (no ``.``, at most 63);
- ``Service``: an RFC 1035 **label** (a label that starts with a letter: ``1web`` is
  refused);
- RBAC's ``Role``, ``ClusterRole``, ``RoleBinding``, ``ClusterRoleBinding`` and a
  ``CertificateSigningRequest``: a **path segment** (anything but ``.``, ``..``, ``/``
  and ``%``: ``system:auth-delegator``, upper case);
- ``Job``: a subdomain of at most 63 characters (the name becomes the value of its pods'
  ``job-name`` label); ``CronJob``: at most 52 (its Jobs' names add 11);
- ``CustomResourceDefinition``: ``<spec.names.plural>.<spec.group>``; ``APIService``:
  ``<spec.version>.<spec.group>``.

``tools/tests/check/test_objectnames.py`` holds a table of names that the control plane
built here is asked about (server-side dry-run): the rules must agree with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from konfig.ids import group_of

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(_LABEL)
DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")

RBAC = "rbac.authorization.k8s.io"
PATH_SEGMENT_NAMED: frozenset[tuple[str, str]] = frozenset(
    {
        (RBAC, "Role"),
        (RBAC, "ClusterRole"),
        (RBAC, "RoleBinding"),
        (RBAC, "ClusterRoleBinding"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
    }
)


def subdomain(value: str, limit: int = 253) -> str | None:
    if len(value) > limit:
        return f"{len(value)} characters, more than {limit}"
    if not DNS_SUBDOMAIN.fullmatch(value):
        return (
            "not an RFC 1123 subdomain: only lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return None


def label(value: str) -> str | None:
    if len(value) > 63:
        return f"{len(value)} characters, more than the 63 of an RFC 1123 label"
    if not DNS_LABEL.fullmatch(value):
        return (
            "not an RFC 1123 label: only lowercase letters, digits and '-', starting and "
            "ending with a letter or digit"
        )
    return None


def dns1035_label(value: str) -> str | None:
    if len(value) > 63:
        return f"{len(value)} characters, more than the 63 of an RFC 1035 label"
    if not DNS1035_LABEL.fullmatch(value):
        return (
            "not an RFC 1035 label: only lowercase letters, digits and '-', starting with a "
            "letter and ending with a letter or digit"
        )
    return None


def path_segment(value: str) -> str | None:
    if value in (".", ".."):
        return f"may not be {value!r}"
    bad = [c for c in ("/", "%") if c in value]
    if bad:
        return f"may not contain {' or '.join(repr(c) for c in bad)}"
    return None


def _job(value: str, _attributes: Mapping[str, Any]) -> str | None:
    return subdomain(value, 63)


def _cronjob(value: str, _attributes: Mapping[str, Any]) -> str | None:
    return subdomain(value, 52)


def _named_after(*fields: str) -> Callable[[str, Mapping[str, Any]], str | None]:
    """A kind whose name must be ``<spec.a>.<spec.b>`` (a CRD, an APIService)."""

    def rule(value: str, attributes: Mapping[str, Any]) -> str | None:
        spec = attributes.get("spec") or {}
        parts: list[str] = []
        for f in fields:
            holder: Any = spec
            for key in f.split("."):
                holder = holder.get(key) if isinstance(holder, Mapping) else None
            if not isinstance(holder, str) or not holder:
                return subdomain(value)  # the spec is incomplete: the schema says so
            parts.append(holder)
        expected = ".".join(parts)
        if value != expected:
            shown = " + '.' + ".join(f"spec.{f}" for f in fields)
            return f"must be {shown}: {expected!r}"
        return None

    return rule


_SPECIAL: dict[tuple[str, str], Callable[[str, Mapping[str, Any]], str | None]] = {
    ("batch", "Job"): _job,
    ("batch", "CronJob"): _cronjob,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _named_after("names.plural", "group"),
    ("apiregistration.k8s.io", "APIService"): _named_after("version", "group"),
}


def name_problem(
    api_version: str, kind: str, name: str, attributes: Mapping[str, Any] | None = None
) -> str | None:
    """Why the API server would refuse ``name`` for an object of ``kind`` (None: it
    would not)."""
    key = (group_of(api_version), kind)
    if key in PATH_SEGMENT_NAMED:
        return path_segment(name)
    if key in (("", "Namespace"), ("apps", "StatefulSet")):
        return label(name)
    if key == ("", "Service"):
        return dns1035_label(name)
    special = _SPECIAL.get(key)
    if special is not None:
        return special(name, attributes or {})
    return subdomain(name)


def namespace_problem(namespace: str) -> str | None:
    """Why ``metadata.namespace`` cannot name a namespace (None when it can)."""
    return label(namespace)

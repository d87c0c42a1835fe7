"""Kubernetes API requests built as plain data; :mod:`.transport` sends them.

A :class:`Request` says everything about one call (method, path, query, body, what it
does for an error message) and nothing about how it travels: building it needs no
socket, no kubeconfig and no credentials, so every request konfig makes is tested as
data. The paths come from a kind's REST mapping (:class:`ResourceInfo`, read by
discovery).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from konfig import __version__
from konfig.ids import describe

FIELD_MANAGER = "konfig"
USER_AGENT = f"konfig/{__version__}"
# Objects per page of a list (``limit``; the rest follows ``continue``).
PAGE = 500


@dataclass(frozen=True)
class ResourceInfo:
    """A REST mapping: where objects of one kind live."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


@dataclass(frozen=True)
class Request:
    """One API request: ``what`` names it in errors ("get ConfigMap web/settings")."""

    method: str
    path: str
    what: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    content_type: str = "application/json"
    accept: str = "application/json"

    @property
    def target(self) -> str:
        """The path, quoted, with its query string (when there is one)."""
        quoted = quote(self.path, safe="/:@")
        return f"{quoted}?{urlencode(self.query)}" if self.query else quoted

    def headers(self, authorization: str | None) -> dict[str, str]:
        """The HTTP headers, with ``authorization`` (the credential's header value)."""
        headers = {"Accept": self.accept, "User-Agent": USER_AGENT}
        value = (authorization or "").strip()  # a token file's newline
        if value:
            headers["Authorization"] = value
        if self.body is not None:
            headers["Content-Type"] = self.content_type
        return headers


def read(path: str, what: str) -> Request:
    """A GET of ``path`` (discovery: ``/api``, ``/apis``, a group version)."""
    return Request("GET", path, what)


def group_version_path(api_version: str) -> str | None:
    """Where a group version's resource list is served; None for an empty apiVersion."""
    if "/" in api_version:
        return f"/apis/{api_version}"
    if api_version:
        return f"/api/{api_version}"
    return None


def object_path(info: ResourceInfo, name: str | None, namespace: str | None) -> str:
    """The path of one object (``name``) or of the collection; ``namespace`` counts only
    for a namespaced kind."""
    base = f"/apis/{info.api_version}" if info.group else f"/api/{info.api_version}"
    if info.namespaced and namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{info.plural}"
    if name:
        base += f"/{name}"
    return base


def get(info: ResourceInfo, name: str, namespace: str | None) -> Request:
    what = f"get {describe(info.api_version, info.kind, name, namespace)}"
    return Request("GET", object_path(info, name, namespace), what)


def apply(
    info: ResourceInfo,
    manifest: Mapping[str, Any],
    *,
    dry_run: bool,
    force: bool,
    field_manager: str = FIELD_MANAGER,
) -> Request:
    """Server-side apply of ``manifest`` (``application/apply-patch+yaml``)."""
    meta = manifest.get("metadata") or {}
    name = str(meta.get("name", ""))
    namespace = meta.get("namespace")
    query = {"fieldManager": field_manager}
    if force:
        query["force"] = "true"
    if dry_run:
        query["dryRun"] = "All"
    verb = "dry-run server-side apply" if dry_run else "server-side apply"
    return Request(
        "PATCH",
        object_path(info, name, namespace),
        f"{verb} of {describe(info.api_version, info.kind, name, namespace)}",
        query=query,
        body=apply_body(manifest),
        content_type="application/apply-patch+yaml",
    )


def delete(
    info: ResourceInfo, name: str, namespace: str | None, *, uid: str | None, propagation: str
) -> Request:
    """Delete one object; with ``uid`` only that incarnation of it."""
    options: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": propagation,
    }
    if uid:
        options["preconditions"] = {"uid": uid}
    return Request(
        "DELETE",
        object_path(info, name, namespace),
        f"delete {describe(info.api_version, info.kind, name, namespace)}",
        body=json.dumps(options, separators=(",", ":")).encode("utf-8"),
    )


# A list of metadata only (PartialObjectMetadataList): names, uids and resourceVersions
# without the objects' content; a server that cannot answers the full list.
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


def list_page(
    info: ResourceInfo,
    namespace: str | None,
    label_selector: str | None,
    token: str | None,
    *,
    metadata_only: bool = False,
) -> Request:
    """One page of a list (``token``: the previous page's ``continue``); ``metadata_only``:
    each item's metadata, not its content."""
    query = {"labelSelector": label_selector, "limit": str(PAGE), "continue": token}
    where = f" in namespace {namespace}" if namespace else ""
    return Request(
        "GET",
        object_path(info, None, namespace),
        f"list {info.plural} ({info.api_version}){where}",
        query={k: v for k, v in query.items() if v is not None},
        accept=METADATA_ONLY if metadata_only else "application/json",
    )


# What YAML does not take as it is: C1 controls and DEL (not printable), NEL and the
# Unicode line and paragraph separators (YAML 1.1 line breaks, which a double-quoted
# scalar folds), a BOM, non-characters and lone surrogates.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def apply_body(manifest: Mapping[str, Any]) -> bytes:
    """The body of a server-side apply (``application/apply-patch+yaml``), as UTF-8.

    JSON is YAML, but the API server's YAML parser rejects the surrogate-pair escapes
    (``\\ud83d\\ude00``) that ``json.dumps`` writes for characters beyond the Basic
    Multilingual Plane (emoji): the text goes as UTF-8, and only what YAML cannot hold
    literally is escaped (as ``\\uXXXX``, which YAML reads back as the same character).
    """
    text = json.dumps(dict(manifest), ensure_ascii=False, separators=(",", ":"))
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")

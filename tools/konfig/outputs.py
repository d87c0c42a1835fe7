"""References from attributes to Terraform outputs, the one grammar and resolver.

A string attribute of any resource may hold references, alone or inside other text::

    ${konfig:cyrilgdn/postgresql:postgresql_database:storefront.name}
    ${konfig:provider/postgresql.host}

The target is a Terraform resource of the same stack (its id) followed by one of its
attributes (``name``; ``a.b.0`` for nested values), or ``provider/<config>`` and one of
the arguments of a provider configuration the stack's ``stack.yaml`` names (where the
runtime connects: a host, a port; never a secret argument). A reference:

- adds the dependency edge target -> referrer (the database is created before the
  Secret that names it);
- inside a Terraform resource becomes OpenTofu's own expression
  (``${postgresql_role.storefront.name}``), so OpenTofu orders and resolves it;
- inside a Kubernetes object is resolved by Konfig at apply, from the applied state.
  A preview shows a value it cannot know yet as :data:`UNKNOWN`; apply refuses to send
  an object that still holds a reference (:func:`unresolved_in`).

Models write references through the backend's ``output_ref`` helper, never by hand.
Pure functions on plain data.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from konfig.ids import ResourceIdError, parse_terraform_id

PREFIX = "${konfig:"
PROVIDER = "provider/"
UNKNOWN = "(known after apply)"

_TOKEN = re.compile(r"\$\{konfig:([^}]*)\}")
_SEGMENT = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_-]*|[0-9]+)$")
_CONFIG = re.compile(r"^[a-z][a-z0-9_-]*$")


class BadReference(ValueError):
    """A reference that does not parse."""


@dataclass(frozen=True, order=True)
class Reference:
    """``target`` (a Terraform resource id or ``provider/<config>``) and an attribute path."""

    target: str
    path: tuple[str, ...]

    @property
    def token(self) -> str:
        return f"{PREFIX}{self.target}.{'.'.join(self.path)}}}"

    @property
    def is_provider(self) -> bool:
        return self.target.startswith(PROVIDER)

    @property
    def config(self) -> str:
        """The provider configuration's name (``provider/<config>`` targets only)."""
        return self.target[len(PROVIDER) :]

    @property
    def attribute(self) -> str:
        return ".".join(self.path)

    def __str__(self) -> str:
        return f"{self.target}.{self.attribute}"


def parse_reference(inner: str) -> Reference:
    """``<target>.<attribute path>`` (the text between ``${konfig:`` and ``}``)."""
    target, dot, rest = inner.partition(".")
    if not dot or not rest:
        raise BadReference(
            f"reference ${{konfig:{inner}}} names no attribute: expected "
            "${konfig:<terraform id>.<attribute>} or ${konfig:provider/<config>.<argument>}"
        )
    path = tuple(rest.split("."))
    bad = [p for p in path if not _SEGMENT.match(p)]
    if bad:
        raise BadReference(f"reference ${{konfig:{inner}}}: invalid attribute segment {bad[0]!r}")
    if target.startswith(PROVIDER):
        if not _CONFIG.match(target[len(PROVIDER) :]) or len(path) != 1:
            raise BadReference(
                f"reference ${{konfig:{inner}}}: expected provider/<config>.<argument>"
            )
        return Reference(target, path)
    try:
        parse_terraform_id(target)
    except ResourceIdError as exc:
        raise BadReference(f"reference ${{konfig:{inner}}}: {exc.message}") from None
    return Reference(target, path)


def _walk(node: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, str):
        yield where, node
    elif isinstance(node, Mapping):
        for key in sorted(node, key=str):
            yield from _walk(node[key], f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk(item, f"{where}[{index}]")


@dataclass(frozen=True)
class Found:
    """A reference and the attribute path (``stringData.dbname``) of the string holding it."""

    field: str
    reference: Reference | None  # None: malformed
    problem: str = ""


def find(attributes: Any) -> list[Found]:
    """Every reference in ``attributes`` (malformed ones with their problem), in order."""
    out: list[Found] = []
    for where, text in _walk(attributes, ""):
        if PREFIX not in text:
            continue
        for match in _TOKEN.finditer(text):
            try:
                out.append(Found(where, parse_reference(match.group(1))))
            except BadReference as exc:
                out.append(Found(where, None, str(exc)))
        if text.count(PREFIX) != len(_TOKEN.findall(text)):
            out.append(Found(where, None, f"an unterminated reference ({PREFIX}... without '}}')"))
    return out


def references(attributes: Any) -> list[Reference]:
    """The well-formed references in ``attributes``, each once, sorted."""
    return sorted({f.reference for f in find(attributes) if f.reference is not None})


def targets(attributes: Any) -> list[str]:
    """The Terraform resource ids ``attributes`` refers to (dependency edges), sorted."""
    return sorted({r.target for r in references(attributes) if not r.is_provider})


Lookup = Callable[[Reference], Any]  # the value, or UNKNOWN when not known (yet)


def substitute(attributes: Any, lookup: Lookup) -> tuple[Any, list[Reference]]:
    """A copy of ``attributes`` with every reference replaced by ``lookup(ref)`` (as text);
    and the references whose value is :data:`UNKNOWN` (their text is then UNKNOWN)."""
    unknown: list[Reference] = []

    def text_of(match: re.Match[str]) -> str:
        try:
            ref = parse_reference(match.group(1))
        except BadReference:
            return match.group(0)
        value = lookup(ref)
        if value is UNKNOWN or value == UNKNOWN:
            unknown.append(ref)
            return UNKNOWN
        return _text(value)

    def visit(node: Any) -> Any:
        if isinstance(node, str):
            return _TOKEN.sub(text_of, node) if PREFIX in node else node
        if isinstance(node, Mapping):
            return {k: visit(v) for k, v in node.items()}
        if isinstance(node, list):
            return [visit(v) for v in node]
        return node

    return visit(attributes), sorted(set(unknown))


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def unresolved_in(attributes: Any) -> list[str]:
    """Fields of ``attributes`` that still hold a reference or the UNKNOWN placeholder."""
    return [where for where, text in _walk(attributes, "") if PREFIX in text or UNKNOWN in text]


def value_at(values: Mapping[str, Any] | None, path: tuple[str, ...]) -> tuple[bool, Any]:
    """``(found, value)`` of ``path`` inside a resource's attribute values."""
    node: Any = values
    for segment in path:
        if isinstance(node, Mapping) and segment in node:
            node = node[segment]
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        else:
            return False, None
    return True, node


# --- OpenTofu's template syntax ----------------------------------------------------


def to_terraform(text: str, address_of: Callable[[str], str]) -> str:
    """A Terraform string attribute for OpenTofu's JSON configuration: literal ``${`` and
    ``%{`` escaped (``$${``, ``%%{``), each reference made OpenTofu's own expression
    (``${postgresql_role.storefront.name}``; ``address_of`` maps an id to its address)."""
    out: list[str] = []
    last = 0
    for match in _TOKEN.finditer(text):
        out.append(escape(text[last : match.start()]))
        ref = parse_reference(match.group(1))
        out.append("${" + address_of(ref.target) + "".join(_hcl_step(p) for p in ref.path) + "}")
        last = match.end()
    out.append(escape(text[last:]))
    return "".join(out)


def _hcl_step(segment: str) -> str:
    return f"[{segment}]" if segment.isdigit() else f".{segment}"


def escape(text: str) -> str:
    """``text`` as a literal of OpenTofu's template syntax: ``${`` -> ``$${``, ``%{`` ->
    ``%%{`` (an existing ``$${`` stays literal: ``$$${`` reads back as ``$${``)."""
    return text.replace("${", "$${").replace("%{", "%%{")

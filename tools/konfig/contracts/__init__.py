"""One contract per data format: the JSON Schemas of every file Konfig reads or writes.

Each format has one schema, ``konfig/contracts/<name>.schema.json``, and nothing else
describes it: the configuration files people write (``stack.yaml``, ``project.yaml``,
``konfig.yaml``, ``ci-test/settings.yaml``, ...) and the JSON every stage prints
(``konfig changed --json``, ``konfig preview --format json``, ...). The checks
(``konfig check``'s structure rules) and the readers (``konfig report``, ``konfig apply
--plan``, compiling a stack's options) validate with :func:`validate` or
:func:`violations`; ``konfig gen contracts`` renders the schemas into ``docs/contracts/``
and the editor settings (``.vscode/settings.json``) from them; tests validate every
example file and every command's JSON output against them.

A schema says what it describes in an ``x-konfig`` object:

- ``{"files": ["appops/*/*/stack.yaml", ...]}``: a configuration file, at these paths
  (globs from the repository root, ``**`` for any depth) — the editor settings and the
  test that validates the example repository use them;
- ``{"producers": [["changed", "--json"], ...]}``: a command's output, printed by
  ``konfig <argv...>``.

Adding a format is adding a file; adding a field is adding a property. Configuration
files are strict (``additionalProperties: false``: a misspelt key is an error that
names the keys allowed there); command outputs are open (readers ignore fields they
do not know, so a producer can gain fields before every reader knows them).

A :class:`Violation` carries the document path, the file and — when the text is
given — the line (:mod:`konfig.contracts.yamlpos` reads YAML, and JSON as YAML's subset).
A schema node may carry ``x-message``: the message to give instead of the generic one
(``{value}`` is the offending value), for a hint only the format's owner can give.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from konfig.errors import ConfigError

if TYPE_CHECKING:  # jsonschema takes a tenth of a second to import: only when validating
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

    # YAML positions (and PyYAML): only when a violation needs its line
    from konfig.contracts.yamlpos import KeyPath

SUFFIX = ".schema.json"
COMMON = "common"  # shared definitions ($defs) the others refer to

Problem = Literal["unknown-key", "invalid-value"]
LISTED = 10  # violations an error message lists


@dataclass(frozen=True)
class Violation:
    """One way a document breaks its contract."""

    problem: Problem
    path: KeyPath  # where in the document (the unknown key itself for unknown-key)
    message: str  # says the path, what is wrong and what is allowed
    file: str | None = None
    line: int | None = None

    @property
    def where(self) -> str:
        if self.file is None:
            return ""
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class Memo(Protocol):
    """Where :func:`validate` remembers documents found valid across processes (a cache
    the caller keeps: :func:`konfig.repo.settings.contracts_memo`), by key."""

    def known(self, key: str) -> bool:
        """Whether the document of ``key`` was found valid before."""
        ...

    def remember(self, key: str) -> None:
        """Keep ``key`` as valid (a memo that cannot be written forgets it)."""
        ...


class ContractError(ConfigError):
    """A document does not match its contract; ``violations`` lists every way."""

    def __init__(self, violations: list[Violation], *, hint: str | None = None) -> None:
        first = violations[0]
        more = "".join(f"\n  {v}" for v in violations[1:LISTED])
        if len(violations) > LISTED:
            more += f"\n  ... and {len(violations) - LISTED} more"
        super().__init__(first.message + more, file=first.file, line=first.line, hint=hint)
        self.violations = violations


# -- the schemas -------------------------------------------------------------------


def _folder() -> Path:
    """The schemas' folder: this package's own directory (konfig is installed as plain
    files; importlib.resources, which gives the same for such a package, costs every
    command a tenth of its start-up to import)."""
    return Path(__file__).parent


@cache
def names() -> tuple[str, ...]:
    """Every contract, by name (``stack``, ``preview``, ...), the shared ``common`` aside."""
    found = (
        entry.name.removesuffix(SUFFIX)
        for entry in _folder().iterdir()
        if entry.name.endswith(SUFFIX)
    )
    return tuple(sorted(n for n in found if n != COMMON))


def file_name(name: str) -> str:
    return f"{name}{SUFFIX}"


@cache
def schema(name: str) -> Mapping[str, Any]:
    """The parsed schema of contract ``name`` (``common`` for the shared definitions)."""
    if name != COMMON and name not in names():
        raise KeyError(f"no contract {name!r} (known: {', '.join(names())})")
    data: Mapping[str, Any] = json.loads(
        _folder().joinpath(file_name(name)).read_text(encoding="utf-8")
    )
    return data


def described_files(name: str) -> tuple[str, ...]:
    """The path globs of a configuration file's contract (empty for command outputs)."""
    return tuple(schema(name).get("x-konfig", {}).get("files", ()))


def for_file(rel_path: str) -> str | None:
    """The contract of the configuration file at ``rel_path`` (from the repository root)."""
    for name in names():
        if any(fnmatchcase(rel_path, pattern) for pattern in described_files(name)):
            return name
    return None


def producers(name: str) -> tuple[tuple[str, ...], ...]:
    """The command lines (after ``konfig``) whose output the contract describes."""
    return tuple(tuple(p) for p in schema(name).get("x-konfig", {}).get("producers", ()))


def produced_by(argv: Iterable[str]) -> str | None:
    """The contract of what ``konfig <argv>`` prints on stdout, if it prints JSON."""
    args = list(argv)
    for name in names():
        for command in producers(name):
            head, flags = command[0], command[1:]
            if head not in args:
                continue
            rest = args[args.index(head) + 1 :]
            if any(tuple(rest[i : i + len(flags)]) == flags for i in range(len(rest))):
                return name
    return None


@cache
def _validator(name: str) -> Validator:
    from jsonschema.validators import Draft202012Validator
    from referencing import Registry, Resource

    resources_ = [(file_name(n), Resource.from_contents(schema(n))) for n in (*names(), COMMON)]
    registry: Registry[Any] = Registry().with_resources(resources_)
    validator: Validator = Draft202012Validator(schema(name), registry=registry)
    return validator


# -- validating ----------------------------------------------------------------------


def violations(
    name: str,
    data: Any,
    *,
    file: str | None = None,
    text: str | None = None,
    ignore_unknown: bool = False,
) -> list[Violation]:
    """Every way ``data`` breaks contract ``name``, in document order.

    ``file`` names the document in messages; ``text`` (its YAML or JSON source) gives
    each violation its line. ``ignore_unknown`` leaves unknown keys out: for reading a
    file written for a newer Konfig, where ``konfig check`` reports them instead.
    """
    errors = list(_validator(name).iter_errors(data))
    if not errors:
        return []
    from konfig.contracts.yamlpos import key_lines, line_of  # PyYAML: only for a line

    lines = key_lines(text) if text is not None else {}
    # a missing key comes after what is wrong with the keys present (which often says
    # why: a different kind of document, another version), duplicates once
    ranked: dict[Violation, int] = {}
    for error in errors:
        for problem, path, message in _describe(error):
            if ignore_unknown and problem == "unknown-key":
                continue
            line = line_of(lines, path) if lines else None
            ranked.setdefault(
                Violation(problem, path, message, file, line), error.validator == "required"
            )
    order = sorted(ranked, key=lambda v: (ranked[v], v.line or 0, dotted(v.path), v.message))
    return order


def validate(
    name: str,
    data: Any,
    *,
    file: str | None = None,
    text: str | None = None,
    ignore_unknown: bool = False,
    hint: str | None = None,
    memo: Memo | None = None,
) -> None:
    """Raise :class:`ContractError` (every violation, file and line) unless ``data``
    matches contract ``name``; the arguments are those of :func:`violations`.

    With ``text`` (the source ``data`` was parsed from) a document already found valid is
    not validated again: in this process, nor, with ``memo`` (a cache directory), in
    later ones while the text and the schemas are unchanged (a memo that cannot be
    written, e.g. a cache folder that leads out of the repository, is skipped). Every command reads
    konfig.yaml and every compile each stack's settings: this keeps jsonschema, a tenth
    of a second to import, out of the commands that otherwise never need it.
    """
    key = _memo_key(name, text, ignore_unknown) if text is not None else None
    if key is not None and (key in _valid or (memo is not None and memo.known(key))):
        _valid.add(key)
        return
    found = violations(name, data, file=file, text=text, ignore_unknown=ignore_unknown)
    if found:
        raise ContractError(found, hint=hint)
    if key is not None:
        _valid.add(key)
        if memo is not None:
            memo.remember(key)


_valid: set[str] = set()  # memo keys of the documents found valid in this process


def _memo_key(name: str, text: str, ignore_unknown: bool) -> str:
    import hashlib  # only when a document is validated (not for `konfig list`)

    seed = f"{name}\0{ignore_unknown}\0{_schemas_digest()}\0{text}"
    return hashlib.sha256(seed.encode()).hexdigest()


@cache
def _schemas_digest() -> str:
    """sha256 of this package's files, the schemas and the validator: a document found
    valid by other ones is validated again."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted(_folder().iterdir()):
        if path.is_file():
            h.update(f"\0{path.name}\0".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


# -- messages ------------------------------------------------------------------------

_TYPES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}


def dotted(path: KeyPath) -> str:
    """``policies.disable[0].rule``; ``(top level)`` for the document itself."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {_short(value)}"
    if value is None:
        return "null (empty)"
    return _short(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _expected(types: Any) -> str:
    listed = [types] if isinstance(types, str) else list(types)
    return " or ".join(_TYPES.get(t, t) for t in listed)


def _describe(error: ValidationError) -> Iterator[tuple[Problem, KeyPath, str]]:
    path: KeyPath = tuple(error.absolute_path)
    here = f"`{dotted(path)}`"
    sub: Any = error.schema if isinstance(error.schema, Mapping) else {}
    custom = sub.get("x-message")
    kind = error.validator
    if kind == "additionalProperties":
        allowed = ", ".join(sorted(sub.get("properties", {}))) or "none"
        known = set(sub.get("properties", {}))
        for key in error.instance:
            if key not in known:
                where = dotted((*path, str(key)))
                yield (
                    "unknown-key",
                    (*path, str(key)),
                    f"unknown key `{where}` (allowed here: {allowed})",
                )
        return
    if isinstance(custom, str):
        yield (
            "invalid-value",
            path,
            custom.replace("{value}", _short(error.instance)).replace("{path}", here),
        )
        return
    if kind in ("anyOf", "oneOf") and error.context:
        from jsonschema.exceptions import best_match

        # null-or-object and the like: say what was wrong inside the closest alternative
        yield from _describe(best_match(error.context))
        return
    if kind == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        for key in missing:
            yield "invalid-value", (*path, key), f"`{dotted((*path, key))}` is required"
        return
    if kind == "type" and not path:
        title = f" ({sub['title']})" if isinstance(sub.get("title"), str) else ""
        expected = _expected(error.validator_value)
        message = f"expected {expected}{title}, not {_kind_of(error.instance)}"
    elif kind == "type":
        expected = _expected(error.validator_value)
        message = f"{here} must be {expected}, not {_kind_of(error.instance)}"
    elif kind == "enum":
        choices = ", ".join(_short(c) for c in error.validator_value)
        message = f"{here} must be one of {choices}, not {_short(error.instance)}"
    elif kind == "const":
        message = f"{here} must be {_short(error.validator_value)}, not {_short(error.instance)}"
    elif kind == "minLength":
        message = f"{here} must not be empty"
    elif kind == "pattern":
        message = f"{here} must match {error.validator_value}, not {_short(error.instance)}"
    else:
        text = str(error.message)
        message = f"{here}: {text if len(text) <= 200 else text[:197] + '...'}"
    yield "invalid-value", path, message

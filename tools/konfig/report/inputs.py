"""Reading the JSON the stages print, checked against their contracts.

Each input kind is the output of one command, described by one contract
(:mod:`konfig.contracts`): a document that does not match is refused with what is
wrong, where (file and line, when read from a file) and which command writes it.
After :func:`validated`, readers may rely on every required field and type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from konfig import contracts

# input kind -> the contract of the command output it is
CONTRACTS = {
    "preview": "preview",
    "changed": "changed",
    "compile": "compile",
    "test": "test",
    "check": "check",
    "apply": "apply",
    "destroy": "apply",
}


class ReportInputError(ValueError):
    """An input document does not have the shape its producer emits."""


@dataclass(frozen=True)
class Document:
    """A parsed input and where it came from (``text`` gives errors their line)."""

    data: Any
    file: str | None = None
    text: str | None = None
    # the contracts ``data`` was found to match (:func:`validated`): checked once
    matched: set[str] = field(default_factory=set, compare=False, repr=False)


def read(path: Path) -> Document | None:
    """The JSON document at ``path`` (None when the file does not exist); not yet validated."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ReportInputError(f"{path}: cannot read: {exc}") from None
    try:
        return Document(json.loads(text), str(path), text)
    except json.JSONDecodeError as exc:
        raise ReportInputError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}"
        ) from None


def validated(kind: str, item: Document | Any) -> Any:
    """The data of ``item`` (a :class:`Document` or parsed JSON) once it matches the
    contract of ``kind``; :class:`ReportInputError` naming every violation otherwise.
    A document is checked against a contract once (readers never change its data)."""
    doc = item if isinstance(item, Document) else Document(item)
    name = CONTRACTS[kind]
    if name in doc.matched:  # (a command checks a document before the report reads it)
        return doc.data
    found = contracts.violations(name, doc.data, file=doc.file, text=doc.text)
    if found:
        lines = [_line(kind, v) for v in found[:10]]
        if len(found) > 10:
            lines.append(f"... and {len(found) - 10} more")
        raise ReportInputError("\n  ".join(lines))
    doc.matched.add(name)
    return doc.data


def _line(kind: str, violation: contracts.Violation) -> str:
    text = f"{kind}: {violation.message}"
    return f"{violation.where}: {text}" if violation.where else text

"""Output formats for findings: ``text`` for people, ``json`` for programs and
``github`` for GitHub Actions workflow commands (annotations on the PR's files)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from konfig.check.findings import Finding, Severity
from konfig.repo.names import display

FORMATS = ("text", "json", "github")


def as_text(findings: Sequence[Finding]) -> str:
    """One finding a line; control and invisible characters of file names and messages
    (which come from the repository) are shown as escapes, never sent to the terminal."""
    out: list[str] = []
    for f in findings:
        where = display(f.location())
        message = display(f.message, keep_newlines=True)
        text = f"{where}: {f.severity}: {message}" if where else message
        out.append(f"{text} [{f.rule}]\n")
    return "".join(out)


def as_json(findings: Sequence[Finding]) -> str:
    data = [
        {
            "rule": f.rule,
            "severity": str(f.severity),
            "message": f.message,
            "file": f.file,
            "line": f.line,
            "stack": f.stack,
            "resource": f.resource,
        }
        for f in findings
    ]
    return json.dumps(data, indent=2) + "\n"


def _escape_data(value: str) -> str:
    # https://github.com/actions/toolkit/blob/main/packages/core/src/command.ts
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def as_github(findings: Sequence[Finding]) -> str:
    out: list[str] = []
    for f in findings:
        command = "error" if f.severity is Severity.ERROR else "warning"
        props = []
        if f.file:
            props.append(f"file={_escape_property(f.file)}")
            if f.line is not None:
                props.append(f"line={f.line}")
        props.append(f"title={_escape_property(f.rule)}")
        out.append(f"::{command} {','.join(props)}::{_escape_data(f.message)}\n")
    return "".join(out)


def render(findings: Sequence[Finding], fmt: str) -> str:
    if fmt == "json":
        return as_json(findings)
    if fmt == "github":
        return as_github(findings)
    return as_text(findings)

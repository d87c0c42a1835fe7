"""JUnit XML for CI systems that show test results (GitHub, GitLab, Jenkins).

The de-facto schema: ``<testsuites>`` holding one ``<testsuite>`` per group, each
``<testcase classname name time file line>`` with an optional ``<failure>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    classname: str
    name: str
    seconds: float = 0.0
    failure: str | None = None  # message of a failed case; None when it passed
    details: str = ""  # body of <failure>, e.g. a diff
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class Suite:
    name: str
    cases: tuple[Case, ...]


def to_xml(suites: Sequence[Suite], *, name: str = "konfig") -> str:
    """Render suites as JUnit XML text (UTF-8, with an XML declaration)."""
    root = ET.Element("testsuites", name=name)
    total = failures = 0
    total_time = 0.0
    for suite in suites:
        failed = sum(1 for c in suite.cases if c.failure is not None)
        seconds = sum(c.seconds for c in suite.cases)
        element = ET.SubElement(
            root,
            "testsuite",
            name=suite.name,
            tests=str(len(suite.cases)),
            failures=str(failed),
            errors="0",
            skipped="0",
            time=f"{seconds:.6f}",
        )
        for case in suite.cases:
            attrs = {
                "classname": case.classname,
                "name": case.name,
                "time": f"{case.seconds:.6f}",
            }
            if case.file:
                attrs["file"] = case.file
            if case.line is not None:
                attrs["line"] = str(case.line)
            tc = ET.SubElement(element, "testcase", attrs)
            if case.failure is not None:
                failure = ET.SubElement(tc, "failure", message=case.failure, type="failure")
                failure.text = case.details or case.failure
        total += len(suite.cases)
        failures += failed
        total_time += seconds
    root.set("tests", str(total))
    root.set("failures", str(failures))
    root.set("errors", "0")
    root.set("time", f"{total_time:.6f}")
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'

from __future__ import annotations

import json

from konfig.check.findings import Finding, Severity, sorted_findings
from konfig.check.formats import as_github, as_json, as_text

FINDINGS = [
    Finding(
        "schema/invalid",
        "apps/v1:Deployment:ns:web: spec.replicas: 'two' is not of type 'integer'"
        "\nsecond line 100%",
        "appops/shop/dev/main.k",
        15,
        stack="appops/shop/dev",
        resource="apps/v1:Deployment:ns:web",
    ),
    Finding("structure/appops-unexpected", "unexpected file", "appops/a,b:c.sh"),
    Finding("policy/image-tag", "no file", None, severity=Severity.WARNING),
]


def test_github_annotations_are_exact_and_escaped() -> None:
    assert as_github(FINDINGS) == (
        "::error file=appops/shop/dev/main.k,line=15,title=schema/invalid::"
        "apps/v1:Deployment:ns:web: spec.replicas: 'two' is not of type 'integer'"
        "%0Asecond line 100%25\n"
        "::error file=appops/a%2Cb%3Ac.sh,title=structure/appops-unexpected::unexpected file\n"
        "::warning title=policy/image-tag::no file\n"
    )


def test_text_has_location_severity_and_rule() -> None:
    lines = as_text(FINDINGS).splitlines()
    assert lines[0].startswith(
        "appops/shop/dev/main.k:15: error: apps/v1:Deployment:ns:web: spec.replicas"
    )
    assert lines[1] == "second line 100% [schema/invalid]"
    assert lines[2] == "appops/a,b:c.sh: error: unexpected file [structure/appops-unexpected]"
    assert lines[3] == "no file [policy/image-tag]"


def test_json_round_trips_every_field() -> None:
    data = json.loads(as_json(FINDINGS))
    assert data[0] == {
        "rule": "schema/invalid",
        "severity": "error",
        "message": FINDINGS[0].message,
        "file": "appops/shop/dev/main.k",
        "line": 15,
        "stack": "appops/shop/dev",
        "resource": "apps/v1:Deployment:ns:web",
    }
    assert data[2]["severity"] == "warning"


def test_sorted_findings_orders_by_location_and_drops_duplicates() -> None:
    a = Finding("spec/x", "m", "b.k", 3)
    b = Finding("spec/x", "m", "a.k", 9)
    c = Finding("spec/x", "m", "b.k", 1)
    assert sorted_findings([a, b, c, a]) == [b, c, a]

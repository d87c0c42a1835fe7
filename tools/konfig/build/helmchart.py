"""A stack's Spec as a Helm chart (``konfig package --helm``).

The chart's templates are the stack's rendered objects (:mod:`konfig.build.rendered`:
the same canonical YAML, one file per object), so that ``helm template`` of the chart
gives back exactly the Spec's objects. Helm reads a template as a Go template: a
``{{`` in an object (an annotation holding a Go or Jinja template, say) is written as
``{{ "{{" }}``, which Helm prints as ``{{``; nothing else is templated. ``values.yaml``
is empty: the chart has no knobs (its objects are what the stack compiled, as
reviewed). The same refusals as publishing apply (Secrets with values, Terraform).
"""

from __future__ import annotations

import re

from konfig.build.rendered import KUSTOMIZATION, render
from konfig.repo.yamlio import dump_yaml
from konfig.spec import Spec

_NAME = re.compile(r"[^a-z0-9-]+")
_OPEN = "{{"


def chart_name(short: str) -> str:
    """``<project>/<stack>`` as a chart name (lower case, ``-`` for anything else)."""
    return _NAME.sub("-", short.lower()).strip("-")[:53] or "stack"


def escape(text: str) -> str:
    """``text`` as a Go template that prints it unchanged."""
    return text.replace(_OPEN, '{{ "{{" }}')


def chart(spec: Spec, *, name: str, version: str, description: str) -> dict[str, bytes]:
    """The chart's files (path inside the chart folder -> bytes)."""
    meta = {
        "apiVersion": "v2",
        "name": name,
        "description": description or f"The objects of the Konfig stack {name}.",
        "type": "application",
        "version": version,
    }
    files = {
        "Chart.yaml": dump_yaml(meta).encode("utf-8"),
        "values.yaml": b"{}\n",
    }
    for file, data in render(spec).items():
        if file == KUSTOMIZATION:
            continue
        files[f"templates/{file}"] = escape(data.decode("utf-8")).encode("utf-8")
    return dict(sorted(files.items()))

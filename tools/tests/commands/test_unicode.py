"""Non-BMP characters (emoji) round-trip through compile, golden, preview, apply and the
comment (issue 19, item 5), against the real control plane."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from kubeutil import unique

pytestmark = pytest.mark.cluster

VALUE = "ok \U0001f600 \u00e9 \U00010348 \u4e2d"  # emoji, Latin-1, Gothic, CJK
NOTE = "deploy \U0001f680 by \U0001f9d1\u200d\U0001f4bb"  # rocket, ZWJ sequence

MAIN = """\
import base.pkg.models.frontend

extras = frontend.Manifests {{
    manifests = [
        {{apiVersion = "v1", kind = "Namespace", metadata.name = "{ns}"}}
        {{
            apiVersion = "v1"
            kind = "ConfigMap"
            metadata = {{
                name = "greeting"
                namespace = "{ns}"
                annotations = {{"example.com/note" = "{note}"}}
            }}
            data = {{message = "{value}"}}
        }}
    ]
}}
"""


def test_emoji_round_trip(
    repo_builder: RepoBuilder, konfig: KonfigRunner, cluster: Cluster, tmp_path: Path
) -> None:
    ns = unique("emoji")
    repo_builder.stack(
        "emoji",
        "dev",
        main=MAIN.format(ns=ns, note=NOTE, value=VALUE),
        stack_yaml="name: dev\nkubernetes:\n  context: admin\n",
    )
    root = repo_builder.root
    kc = f"--kubeconfig={cluster.kubeconfig}"

    compiled = konfig("compile", "emoji/dev", cwd=root)
    assert compiled.code == 0, compiled.err
    assert VALUE in compiled.out and "\\U" not in compiled.out

    updated = konfig("test", "emoji/dev", "--update", "--no-unit", cwd=root)
    assert updated.code == 0, updated.err
    golden = (root / "appops/emoji/dev/ci-test/stdout.golden.yaml").read_text(encoding="utf-8")
    assert VALUE in golden and NOTE in golden
    assert konfig("test", "emoji/dev", "--no-unit", cwd=root).code == 0

    preview = konfig("preview", "emoji/dev", kc, "--format", "json", cwd=root)
    assert preview.code == 0, preview.out + preview.err
    data = json.loads(preview.out)
    assert data["stacks"][0]["status"] == "ok", data["stacks"][0]
    assert data["counts"]["create"] == 2

    applied = konfig("apply", "emoji/dev", "--yes", "--allow-dirty", kc, cwd=root)
    assert applied.code == 0, applied.out + applied.err
    live = yaml.safe_load(
        cluster.kubectl("get", "configmap", "greeting", "-n", ns, "-o", "yaml").stdout
    )
    assert live["data"]["message"] == VALUE
    assert live["metadata"]["annotations"]["example.com/note"] == NOTE

    again = konfig("preview", "emoji/dev", kc, "--format", "json", cwd=root)
    assert again.code == 0, again.err
    assert json.loads(again.out)["counts"]["unchanged"] == 2

    # a change of the value shows in the markdown report (the PR comment) intact
    main = root / "appops/emoji/dev/main.k"
    main.write_text(main.read_text(encoding="utf-8").replace("ok ", "new "), encoding="utf-8")
    out = tmp_path / "preview.json"
    changed = konfig("preview", "emoji/dev", kc, "--format", "json", "--out", str(out), cwd=root)
    assert changed.code == 0, changed.err
    comment = tmp_path / "comment.md"
    report = konfig(
        "report", "--preview", str(out), "--sha", "0" * 40, "--out", str(comment), cwd=root
    )
    assert report.code == 0, report.err
    text = comment.read_text(encoding="utf-8")
    assert "new \U0001f600 \u00e9" in text and "\\U0001" not in text and "\\ud83d" not in text

    assert konfig("destroy", "emoji/dev", "--yes", "--allow-dirty", kc, cwd=root).code == 0

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from fleet import Fleet, set_image
from kubeutil import unique

from konfig import contracts

SHA = "abcdef0123456789abcdef0123456789abcdef01"
RAW_MAIN = """\
import base.pkg.models.frontend
import file
import yaml

extras: frontend.Manifests {
    manifests = yaml.decode_all(file.read("objects.yaml"))
}
"""
PATH = "appops/web/dev"


def preview_doc(lines: int = 3) -> dict[str, Any]:
    diff = "--- live/v1:ConfigMap:web:c\n+++ planned/v1:ConfigMap:web:c\n@@ -1 +1 @@\n"
    diff += "".join(f"+  k{i}: {'v' * 40}\n" for i in range(lines))
    counts = {"create": 0, "update": 1, "replace": 0, "delete": 0, "unchanged": 0}
    return {
        "schemaVersion": 1,
        "kind": "KonfigPreview",
        "hasChanges": True,
        "counts": counts,
        "stacks": [
            {
                "path": PATH,
                "project": "web",
                "stack": "dev",
                "context": "admin",
                "deleted": False,
                "status": "ok",
                "error": None,
                "specDigest": "d",
                "priorCommit": None,
                "priorDigest": None,
                "counts": counts,
                "changes": [
                    {
                        "id": "v1:ConfigMap:web:c",
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "namespace": "web",
                        "name": "c",
                        "action": "update",
                        "reason": "data changed",
                        "validated": True,
                        "fields": [],
                        "diff": diff,
                    }
                ],
            }
        ],
    }


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_writes_body_and_appends_summary(konfig: KonfigRunner, tmp_path: Path) -> None:
    preview = write(tmp_path / "preview.json", preview_doc())
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    out = tmp_path / "body.md"
    result = konfig(
        "report", "--preview", str(preview), "--sha", SHA, "--out", str(out),
        "--summary-file", str(summary), "--run-url", "https://ci.example/run/1",
    )  # fmt: skip
    assert result.code == 0, result.err
    body = out.read_text(encoding="utf-8")
    assert body.startswith("## Konfig preview for `abcdef012345`: 📝 changes to apply")
    assert "[Workflow run](https://ci.example/run/1)" in body
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# earlier step\n\n## Konfig preview")
    assert text.endswith(body)


def test_budget_applies_to_comment_not_summary(konfig: KonfigRunner, tmp_path: Path) -> None:
    preview = write(tmp_path / "preview.json", preview_doc(lines=400))
    summary = tmp_path / "summary.md"
    full_out = tmp_path / "full.md"
    result = konfig(
        "report", "--preview", str(preview), "--sha", SHA, "--budget", "5000",
        "--summary-file", str(summary), "--full-out", str(full_out),
    )  # fmt: skip
    assert result.code == 0, result.err
    assert full_out.read_text(encoding="utf-8") == summary.read_text(encoding="utf-8")
    assert len(result.out) <= 5000
    assert "Truncated to stay under" in result.out
    assert "report truncated" in result.err
    full = summary.read_text(encoding="utf-8")
    assert "Truncated" not in full and full.count("+  k") == 400


def test_results_directory_gathers_matrix_artifacts(konfig: KonfigRunner, tmp_path: Path) -> None:
    results = tmp_path / "results"
    write(results / "preview-1" / "preview.json", preview_doc())
    other = preview_doc()
    other["stacks"][0]["path"] = "appops/web/prod"
    write(results / "preview-2" / "preview.json", other)
    write(
        results / "changed" / "changed.json",
        {"base": "b", "head": SHA, "stacks": [{"path": PATH, "reasons": ["main.k changed"]}],
         "deleted_stacks": [], "projects": ["web"]},
    )  # fmt: skip
    result = konfig("report", "--results", str(results), "--sha", SHA)
    assert result.code == 0, result.err
    assert "| `appops/web/dev` | main.k changed | 📝 changes | 0 | 1 | 0 | 0 |" in result.out
    assert "| `appops/web/prod` |" in result.out


def test_missing_input_is_said_not_fatal(konfig: KonfigRunner, tmp_path: Path) -> None:
    compile_json = write(
        tmp_path / "compile.json",
        [{"path": PATH, "ok": True, "resources": 1, "seconds": 0.1, "error": None}],
    )
    result = konfig(
        "report", "--compile", str(compile_json), "--preview", str(tmp_path / "absent.json"),
        "--sha", SHA,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "Results missing (the job failed or was skipped): preview (absent.json)" in result.out
    assert "absent.json: not found" in result.err


def test_invalid_json_names_file_and_line(konfig: KonfigRunner, tmp_path: Path) -> None:
    bad = tmp_path / "preview.json"
    bad.write_text('{"kind":\n  oops}', encoding="utf-8")
    result = konfig("report", "--preview", str(bad), "--sha", SHA)
    assert result.code == 2
    assert f"{bad}:2:3: not valid JSON" in result.err


def test_wrong_document_is_usage_error(konfig: KonfigRunner, tmp_path: Path) -> None:
    wrong = write(tmp_path / "p.json", {"kind": "Something"})
    result = konfig("report", "--preview", str(wrong), "--sha", SHA)
    assert result.code == 2 and "KonfigPreview" in result.err


def test_no_inputs_and_placeholder(konfig: KonfigRunner, tmp_path: Path) -> None:
    none = konfig("report", "--sha", SHA)
    assert none.code == 2 and "no inputs" in none.err
    placeholder = konfig("report", "--placeholder", "--sha", SHA, "--run-url", "https://r/1")
    assert placeholder.code == 0
    assert "⏳ running" in placeholder.out and "https://r/1" in placeholder.out


def test_expected_results_that_are_absent_are_reported(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    write(results / "konfig-verify" / "compile.json", [])
    result = konfig(
        "report", "--results", str(results), "--expect", "compile,preview", "--sha", SHA
    )
    assert result.code == 0, result.err
    assert "Results missing (the job failed or was skipped): preview." in result.out
    bad = konfig("report", "--results", str(results), "--expect", "nope", "--sha", SHA)
    assert bad.code == 2 and "unknown result kind(s) nope" in bad.err


@pytest.mark.cluster
def test_real_preview_of_a_secret_never_leaks_into_report(
    konfig: KonfigRunner, repo_builder: RepoBuilder, cluster: Cluster, tmp_path: Path
) -> None:
    """The whole PR path on the real control plane: preview JSON -> comment + summary."""
    ns = unique("p8-secret")
    old, new = "CANARY-p8-old-4d1e", "CANARY-p8-new-9c3b"
    cluster.kubectl("create", "namespace", ns)
    live = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": ns}}
    stack = repo_builder.stack(
        "pay", "dev", main=RAW_MAIN, stack_yaml="name: dev\nkubernetes:\n  context: admin\n"
    )
    # the stack owns the Secret (applied with the old value), so its preview shows the
    # change masked; an object no stack owns would be shown without content at all
    (stack / "objects.yaml").write_text(yaml.safe_dump({**live, "stringData": {"password": old}}))
    applied = konfig(
        "--root", str(repo_builder.root), "apply", "pay/dev", "--yes", "--allow-dirty",
        "--kubeconfig", str(cluster.kubeconfig),
    )  # fmt: skip
    assert applied.code == 0, applied.out + applied.err
    (stack / "objects.yaml").write_text(
        yaml.safe_dump({**live, "stringData": {"password": new, "user": "app"}})
    )
    preview_json = tmp_path / "preview.json"
    previewed = konfig(
        "--root", str(repo_builder.root), "preview", "pay/dev", "--format", "json",
        "--out", str(preview_json), "--kubeconfig", str(cluster.kubeconfig),
    )  # fmt: skip
    assert previewed.code == 0, previewed.err
    summary = tmp_path / "summary.md"
    result = konfig(
        "report", "--preview", str(preview_json), "--sha", SHA, "--out", str(tmp_path / "c.md"),
        "--summary-file", str(summary),
    )  # fmt: skip
    assert result.code == 0, result.err
    body = (tmp_path / "c.md").read_text(encoding="utf-8")
    assert f"`Secret {ns}/db`" in body
    for text in (body, summary.read_text(encoding="utf-8"), preview_json.read_text()):
        for canary in (old, new):
            assert canary not in text
            assert base64.b64encode(canary.encode()).decode() not in text
    assert "***" in body, body
    assert "managed by no Konfig stack" not in body


def test_many_stacks_are_grouped_and_json_lists_the_groups(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    fleet = Fleet(20, edits=[set_image("nginx:1.27.4")])
    preview = write(tmp_path / "r" / "preview.json", fleet.preview())
    write(tmp_path / "r" / "changed.json", fleet.changed())
    summary = tmp_path / "summary.md"
    body = konfig(
        "report", "--results", str(tmp_path / "r"), "--sha", SHA, "--summary-file", str(summary)
    )
    assert body.code == 0, body.err
    assert "in 60 Deployments across 60 stacks" in body.out
    assert "| `appops/app000/dev` |" not in body.out  # no per-stack table in the comment
    full = summary.read_text(encoding="utf-8")
    assert "### Changes across stacks" in full and "### Every stack" in full
    assert "| `appops/app000/dev` | imports base/pkg/models/frontend | 📝 changes |" in full
    stacks = konfig("report", "--preview", str(preview), "--sha", SHA, "--layout", "stacks")
    assert "| `appops/app000/dev` |" in stacks.out and "Identical changes" not in stacks.out
    data = konfig("report", "--results", str(tmp_path / "r"), "--sha", SHA, "--json")
    assert data.code == 0, data.err
    doc = json.loads(data.out)
    assert contracts.violations("report", doc) == []
    assert doc["layout"] == "grouped"
    (group,) = doc["groups"]
    assert (group["number"], group["kind"], len(group["stacks"])) == (1, "Deployment", 60)
    assert len(group["productionStacks"]) == 20
    bad = konfig("report", "--preview", str(preview), "--sha", SHA, "--layout", "nope")
    assert bad.code == 2 and "--layout" in bad.err


def test_apply_report_cli(konfig: KonfigRunner, tmp_path: Path) -> None:
    applied = write(
        tmp_path / "apply.json",
        {"ok": True, "stacks": [{"path": PATH, "ok": True, "error": None,
         "counts": {"created": 2}, "seconds": 1.0, "objects": [], "inventory": None}]},
    )  # fmt: skip
    summary = tmp_path / "summary.md"
    result = konfig(
        "report", "--apply", str(applied), "--destroy", str(tmp_path / "none.json"),
        "--sha", SHA, "--summary-file", str(summary),
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "## Konfig apply of `abcdef012345`: ❌ failed" in result.out  # destroy.json missing
    assert "Results missing (the job failed before writing them): destroy (none.json)" in (
        result.out
    )
    assert summary.read_text(encoding="utf-8") == result.out
    mixed = konfig("report", "--apply", str(applied), "--preview", str(applied), "--sha", SHA)
    assert mixed.code == 2


def test_absent_results_directory_renders_what_is_missing(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    result = konfig(
        "report", "--results", str(tmp_path / "none"), "--expect", "changed", "--sha", SHA
    )
    assert result.code == 0, result.err
    assert "Results missing (the job failed or was skipped): changed." in result.out

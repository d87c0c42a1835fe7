"""``konfig report --offline-preview``: the offline preview a pull request's own run
computed is data, taken only when its mode, head and base are the ones the forge gave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fixtures.repos import KonfigRunner

BASE = "1a2b" + "0" * 36
HEAD = "5e6f" + "1" * 36
MERGE = "3c4d" + "2" * 36
ZERO = {"create": 0, "update": 0, "replace": 0, "delete": 0, "unchanged": 0, "conflict": 0}


def doc(**mode: Any) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "kind": "KonfigPreview",
        "mode": mode or {"name": "offline", "base": BASE, "head": HEAD, "merge": MERGE},
        "hasChanges": False,
        "counts": ZERO,
        "stacks": [
            {
                "path": "appops/shop/dev",
                "deleted": False,
                "status": "ok",
                "error": None,
                "counts": ZERO,
                "changes": [],
            }
        ],
    }


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_the_first_line_says_fork_render_diff(konfig: KonfigRunner, tmp_path: Path) -> None:
    offline = write(tmp_path, "offline.json", doc())
    res = konfig(
        "report", "--offline-preview", str(offline), "--base-sha", BASE, "--pr-from", "fork",
        "--sha", HEAD,
    )  # fmt: skip
    assert res.code == 0, res.err
    assert res.out.splitlines()[0] == (
        "fork PR: render diff of base `1a2b00000000…` vs merge `3c4d22222222…` (no cluster access)"
    )
    follows = konfig(
        "report", "--offline-preview", str(offline), "--pr-from", "same-repo",
        "--live-follows", "--sha", HEAD,
    )  # fmt: skip
    assert follows.code == 0, follows.err
    assert "the live preview against the clusters replaces this" in follows.out.splitlines()[0]


def test_an_offline_preview_of_another_mode_head_or_base_is_refused(
    konfig: KonfigRunner, tmp_path: Path
) -> None:
    live = write(tmp_path, "live.json", doc(name="live"))
    res = konfig("report", "--offline-preview", str(live), "--sha", HEAD)
    assert res.code == 2 and "its mode is live, not offline" in res.err
    offline = write(tmp_path, "offline.json", doc())
    other = "9" * 40
    res = konfig("report", "--offline-preview", str(offline), "--sha", other)
    assert res.code == 2 and f"not --sha {other[:12]}" in res.err
    res = konfig("report", "--offline-preview", str(offline), "--base-sha", other, "--sha", HEAD)
    assert res.code == 2 and f"not --base-sha {other[:12]}" in res.err
    res = konfig("report", "--offline-preview", str(offline), "--preview", str(live), "--sha", HEAD)
    assert res.code == 2 and "one comment shows one mode" in res.err
    broken = write(tmp_path, "broken.json", {**doc(), "mode": {"name": "offline", "base": "x"}})
    res = konfig("report", "--offline-preview", str(broken), "--sha", HEAD)
    assert res.code == 2 and "broken.json" in res.err
    assert "fork PR" not in res.out

"""The pre-commit configuration and the hooks offered to template users."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _local_hooks() -> dict[str, dict[str, Any]]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    return {h["id"]: h for repo in config["repos"] for h in repo["hooks"]}


def _offered_hooks() -> dict[str, dict[str, Any]]:
    return {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}


def test_no_hook_stages_or_rewrites_files() -> None:
    for hooks in (_local_hooks(), _offered_hooks()):
        for hook in hooks.values():
            entry = hook["entry"]
            assert "git add" not in entry and "git commit" not in entry, hook["id"]
            if "konfig fmt" in entry or "ruff format" in entry:
                assert "--check" in entry, hook["id"]


def test_konfig_hooks_run_on_the_staged_files_affected_stacks() -> None:
    local, offered = _local_hooks(), _offered_hooks()
    for hook_id, local_id in (
        ("konfig-fmt", "kcl-fmt"),
        ("konfig-check", "konfig-check"),
        ("konfig-test", "konfig-test"),
    ):
        assert offered[hook_id]["entry"].removeprefix("konfig ") == local[local_id][
            "entry"
        ].removeprefix(".venv/bin/konfig ")
    for hook_id in ("konfig-check", "konfig-test"):
        assert offered[hook_id]["entry"].endswith("--files")
        pattern = re.compile(offered[hook_id]["files"])
        assert pattern.search("appops/shop/dev/main.k")
        assert pattern.search("base/pkg/policies/rules.k")
        assert pattern.search("konfig.yaml")
        assert not pattern.search("tools/konfig/cli.py")
    fmt = re.compile(offered["konfig-fmt"]["files"])
    assert fmt.search("appops/shop/dev/main.k") and not fmt.search("tools/tests/corpus/x/main.k")

"""The ``konfig:owners`` comment: the production stacks' owners, then the policy
overrides with their reasons (a stack.yaml's reason is the pull request's text: escaped).
Golden: ``golden/owners-overrides.md``."""

from __future__ import annotations

import os
from pathlib import Path

from konfig.pipeline.approvals import Approval, Override, Requirement, verdict
from konfig.report.owners import render_owners

GOLDEN = Path(__file__).parent / "golden"
HEAD = "0123456789abcdef0123456789abcdef01234567"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.md"
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (KONFIG_UPDATE_GOLDEN=1)"


def test_the_owners_comment_lists_each_override_its_reason_and_who_approved() -> None:
    needed = (Requirement("appops/shop/prod", "appops/shop", ("ann",), ("main.k changed",)),)
    hostile = "one pod | <img src=x> @everyone\nsee `x`"
    overridden = [
        Override("appops/shop/prod", "prod-replicas", hostile, ("sam",)),
        Override("appops/data/dev", "danger/data", "PersistentVolumeClaim db deleted", ("dba",)),
    ]
    result = verdict(
        needed, [Approval("ann", HEAD), Approval("sam", HEAD)], HEAD, overridden=overridden
    )
    text = render_owners(result)
    assert text.startswith("### ⏳ Owners' approvals")
    assert "1 policy override(s) await the policy's owners: danger/data" in text
    row = next(line for line in text.splitlines() if "prod-replicas" in line)
    assert "<img" not in row and "@everyone" not in row and "\\|" in row and "✅ @sam" in row
    assert "| `appops/data/dev` | `danger/data` | PersistentVolumeClaim db deleted | @dba |" in text
    check_golden("owners-overrides", text)

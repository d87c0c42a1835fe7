"""The apply report names, per stack, the identity it applied as and the owners whose
approval of which change the inventory records (issue 32's audit, the merge's job
summary). Golden: ``golden/apply-audit.md``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from konfig.report import applied

GOLDEN = Path(__file__).parent / "golden"
SHA = "0123456789abcdef0123456789abcdef01234567"
RUN = "https://github.example/acme/config/actions/runs/42"
HEAD = "fedcba9876543210fedcba9876543210fedcba98"
SA = "system:serviceaccount:konfig-identities:"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.md"
    if os.environ.get("KONFIG_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with KONFIG_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (KONFIG_UPDATE_GOLDEN=1)"


def _stack(path: str, ok: bool, identity: str | None, approved: list[str]) -> dict[str, Any]:
    return {
        "path": path,
        "identity": identity,
        "ok": ok,
        "error": None if ok else f'user "{identity}" may not create ConfigMap x in other-dev',
        "counts": dict.fromkeys(applied.APPLY_COUNTS, 0) | {"created" if ok else "failed": 1},
        "seconds": 1.0,
        "objects": [],
        "inventory": None
        if not ok
        else {
            "name": "i",
            "applysetId": "a",
            "commit": SHA,
            "specDigest": "d",
            "members": 1,
            "appliedBy": identity or "admin",
            "approvedBy": approved,
            "approvedChange": HEAD if approved else None,
        },
    }


def test_the_apply_report_names_each_stacks_identity_and_approvers() -> None:
    doc = {
        "ok": False,
        "stacks": [
            _stack("appops/shop/prod", True, f"{SA}shop", ["ann", "bob"]),
            _stack("appops/shop/dev", True, f"{SA}shop", []),
            _stack("appops/data/dev", False, f"{SA}data", []),
            _stack("appops/plain/dev", True, None, []),  # the kubeconfig's user, no approval
        ],
    }
    text = applied.render_apply(applied.build_apply([doc], sha=SHA, run_url=RUN))
    lines = text.splitlines()
    assert f"- `appops/shop/prod` applied as {SA}shop; approved by ann, bob of {HEAD[:12]}" in lines
    assert f"- `appops/shop/dev` applied as {SA}shop" in lines
    assert f"- `appops/data/dev` apply failed as {SA}data" in lines
    assert not any(line.startswith("- `appops/plain/dev`") for line in lines)
    check_golden("apply-audit", text)
    # without identities or approvals the report has no audit section (as before)
    plain = applied.render_apply(
        applied.build_apply(
            [{"ok": True, "stacks": [_stack("appops/plain/dev", True, None, [])]}], sha=SHA
        )
    )
    assert "Identities and approvals" not in plain

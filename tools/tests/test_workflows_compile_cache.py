"""The compile cache in the pull-request workflows (issue 33 item 2): the base side of
every offline preview has a compile cache of its own, outside the checkout, so no entry
a pull request wrote (its commits, its earlier runs' artifacts) stands for a base Spec
(docs/security.md, "The compile cache across pushes")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _steps() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for name, job in (doc.get("jobs") or {}).items():
            for step in job.get("steps") or []:
                found.append((path.name, name, step))
    return found


def test_every_offline_preview_compiles_its_base_side_with_a_cache_outside_the_checkout() -> None:
    offline = [(w, j, s) for w, j, s in _steps() if "konfig preview --offline" in s.get("run", "")]
    assert offline, "no workflow runs konfig preview --offline"
    for workflow, job, step in offline:
        where = f"{workflow} job {job}"
        given = re.findall(r'--base-cache "([^"]+)"', step["run"])
        assert len(given) == 1, f"{where}: the offline preview has no --base-cache"
        assert given[0].startswith("$RUNNER_TEMP/"), f"{where}: --base-cache {given[0]}"

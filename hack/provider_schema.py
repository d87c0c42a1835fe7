#!/usr/bin/env python3
"""Bundle a provider's schema for `konfig check` (docs/terraform.md, "Adding another provider").

    eval "$(hack/tofu env)"
    .venv/bin/python hack/provider_schema.py registry.opentofu.org/cyrilgdn/postgresql 1.26.0

initialises a scratch OpenTofu working directory that requires the provider (from the
filesystem mirror), runs `tofu providers schema -json` and writes the trimmed schema to
tools/konfig/data/terraform/<source with '-'>-<version>.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from konfig.tofu.schema import file_name, trim

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source, version = argv
    tofu = os.environ.get("KONFIG_TOFU") or "tofu"
    name = source.rsplit("/", 1)[1]
    with tempfile.TemporaryDirectory() as work:
        config = {
            "terraform": {"required_providers": {name: {"source": source, "version": version}}}
        }
        Path(work, "main.tf.json").write_text(json.dumps(config), encoding="utf-8")
        for args in (["init", "-no-color", "-input=false"], ["providers", "schema", "-json"]):
            res = subprocess.run(
                [tofu, *args], cwd=work, capture_output=True, text=True, check=False
            )
            if res.returncode != 0:
                print(
                    f"hack/provider_schema.py: tofu {args[0]} failed:\n{res.stderr}",
                    file=sys.stderr,
                )
                return 1
        data = trim(json.loads(res.stdout), source, version)
    target = REPO / "tools" / "konfig" / "data" / "terraform" / file_name(source, version)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(target.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

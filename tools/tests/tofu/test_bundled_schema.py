"""The provider schema konfig check uses is the real provider's (``tofu providers schema``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.tofu import Tofu

from konfig.tofu import schema


@pytest.mark.tofu
def test_bundled_schema_matches_the_provider_in_the_mirror(tofu: Tofu, tmp_path: Path) -> None:
    name = tofu.provider_source.rsplit("/", 1)[1]
    config = {
        "terraform": {
            "required_providers": {
                name: {"source": tofu.provider_source, "version": tofu.provider_version}
            }
        }
    }
    (tmp_path / "main.tf.json").write_text(json.dumps(config))
    init = tofu.run("init", "-no-color", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    res = tofu.run("providers", "schema", "-json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    real = schema.trim(json.loads(res.stdout), tofu.provider_source, tofu.provider_version)
    bundled = schema.bundled(tofu.provider_source, tofu.provider_version)
    assert bundled == real, (
        "the bundled schema is out of date: run hack/provider_schema.py "
        f"{tofu.provider_source} {tofu.provider_version}"
    )
    assert "postgresql_role" in real["resources"]

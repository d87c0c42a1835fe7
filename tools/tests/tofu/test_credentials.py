"""Provider credentials given as one JSON object (``$KONFIG_TERRAFORM_ENV``, what the
workflows pass from one CI secret): konfig.tofu.model.credentials_bundle and how the CLI
merges it with the process environment (konfig.commands._common.tofu_context)."""

from __future__ import annotations

from pathlib import Path

import pytest

from konfig.commands._common import TERRAFORM_ENV, tofu_context
from konfig.errors import KonfigError, UsageError
from konfig.tofu.model import credentials_bundle

CANARY = "canary-0f6b2e-not-for-output"


def _canary(text: str) -> str:
    return text.replace("@@", CANARY)


def test_a_bundle_maps_names_to_strings_and_numbers() -> None:
    text = _canary('{"APP_PGHOST": "127.0.0.1", "APP_PGPORT": 5432, "APP_PGPASSWORD": "@@"}')
    assert credentials_bundle(text, "$X") == {
        "APP_PGHOST": "127.0.0.1",
        "APP_PGPORT": "5432",
        "APP_PGPASSWORD": CANARY,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            _canary('{"APP_PGPASSWORD": "@@",\n "APP_X": }'),
            "$X: not JSON (Expecting value at line 2",
        ),
        (
            _canary('["@@"]'),
            "$X: a JSON object of variable names to values was expected, not a list",
        ),
        (_canary('{"APP-PASS": "@@"}'), "$X: 'APP-PASS' is not an environment variable name"),
        (_canary('{"APP_PASS": ["@@"]}'), "$X: the value of APP_PASS must be a string or a number"),
        (
            '{"APP_PASS": true}',
            "$X: the value of APP_PASS must be a string or a number, not a boolean",
        ),
    ],
)
def test_a_bad_bundle_is_a_usage_error_that_shows_no_value(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        credentials_bundle(text, "$X")
    shown = f"{info.value} {info.value.hint or ''}"
    assert message in shown
    assert CANARY not in shown


def test_the_cli_reads_the_bundle_for_names_the_environment_does_not_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        TERRAFORM_ENV, _canary('{"APP_PGHOST": "from-bundle", "APP_PGPASSWORD": "@@"}')
    )
    monkeypatch.setenv("APP_PGHOST", "from-environment")
    monkeypatch.setenv("APP_PGUSER", "")
    monkeypatch.delenv("APP_PGPASSWORD", raising=False)
    ctx = tofu_context(tmp_path)
    assert ctx.environment["APP_PGHOST"] == "from-environment"
    assert ctx.environment["APP_PGPASSWORD"] == CANARY
    # tofu and its provider get the process environment without the bundle.
    assert TERRAFORM_ENV not in ctx.settings.environ
    assert TERRAFORM_ENV not in ctx.environment
    assert CANARY not in repr(ctx)


def test_a_bad_bundle_stops_the_cli_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TERRAFORM_ENV, CANARY)
    with pytest.raises(UsageError, match=r"\$KONFIG_TERRAFORM_ENV: not JSON") as info:
        tofu_context(tmp_path)
    assert CANARY not in str(info.value)


def test_a_working_directory_git_tracks_is_refused_before_opentofu_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull request that commits into the ignored cache folder (``git add -f``) puts
    files in OpenTofu's working directory at checkout: a provider binary and a matching
    lock file under ``.terraform/``, an override, a ``.tfvars``. Refused, named."""
    import subprocess

    monkeypatch.delenv("KONFIG_TOFU_WORKDIR", raising=False)
    monkeypatch.delenv(TERRAFORM_ENV, raising=False)
    root = tmp_path / "repo"
    planted = root / ".cache/konfig/tofu/appops-shop-prod/.terraform/providers/p"
    planted.parent.mkdir(parents=True)
    planted.write_text("#!/bin/sh\nid\n")
    (root / ".gitignore").write_text(".cache/\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", ".gitignore"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    tofu_context(root)  # nothing tracked there: fine
    subprocess.run([*git, "add", "-f", str(planted)], check=True)
    with pytest.raises(KonfigError, match=r"terraform/forbidden.*\.terraform/providers/p"):
        tofu_context(root)


def test_the_policy_comes_from_the_base_commit_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull request that grants itself another stack's variable in konfig.yaml: its
    preview (with $KONFIG_TERRAFORM_POLICY_REF, the base branch) holds it to the base's
    policy; the change takes effect once merged."""
    import subprocess

    import yaml

    monkeypatch.delenv(TERRAFORM_ENV, raising=False)
    root = tmp_path / "repo"
    root.mkdir()
    grant = {
        "stacks": ["appops/a/dev"],
        "provider": "postgresql",
        "environment": {"password": "A_PGPASSWORD"},
    }
    config = {"terraform": {"providers": {"postgresql": {}}, "credentials": [grant]}}
    (root / "konfig.yaml").write_text(yaml.safe_dump(config))
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "konfig.yaml"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    base = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    widened = {**grant, "environment": {"password": "B_PGPASSWORD"}}
    config["terraform"]["credentials"] = [grant, {**widened, "stacks": ["appops/a/dev"]}]
    (root / "konfig.yaml").write_text(yaml.safe_dump(config))
    subprocess.run([*git, "commit", "-qam", "the pull request"], check=True)
    assert tofu_context(root).policy.granted("appops/a/dev", "postgresql") == {
        "password": {"A_PGPASSWORD", "B_PGPASSWORD"}
    }
    monkeypatch.setenv("KONFIG_TERRAFORM_POLICY_REF", base)
    assert tofu_context(root).policy.granted("appops/a/dev", "postgresql") == {
        "password": {"A_PGPASSWORD"}
    }
    # or the default branch's konfig.yaml checked out beside (the tools' checkout)
    monkeypatch.delenv("KONFIG_TERRAFORM_POLICY_REF")
    default = tmp_path / "tools" / "konfig.yaml"
    default.parent.mkdir()
    default.write_text(yaml.safe_dump({"terraform": {"credentials": []}}))
    monkeypatch.setenv("KONFIG_TERRAFORM_POLICY_FILE", str(default))
    assert tofu_context(root).policy.granted("appops/a/dev", "postgresql") == {}

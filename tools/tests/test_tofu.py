"""hack/tofu: OpenTofu and the PostgreSQL provider from the mirror, against a local PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fixtures.tofu import TOFU_SCRIPT, Tofu

# Never appears in any output: it reaches tofu only as TF_VAR_password.
CANARY = "canary-9f3b2c71-pw"


def _config(tofu: Tofu, role: str, database: str) -> dict[str, Any]:
    """OpenTofu JSON configuration: a role with a password from a variable, a database it owns."""
    return {
        "terraform": {
            "required_providers": {
                "postgresql": {"source": tofu.provider_source, "version": tofu.provider_version}
            }
        },
        "variable": {"password": {"type": "string", "sensitive": True}},
        "provider": {
            "postgresql": {
                "host": tofu.pg_host,
                "port": tofu.pg_port,
                "username": tofu.pg_superuser,
                "sslmode": "disable",
                "superuser": True,
            }
        },
        "resource": {
            "postgresql_role": {role: {"name": role, "login": True, "password": "${var.password}"}},
            "postgresql_database": {
                database: {"name": database, "owner": f"${{postgresql_role.{role}.name}}"}
            },
        },
    }


def _ok(res: subprocess.CompletedProcess[str], what: str) -> str:
    assert res.returncode == 0, f"tofu {what} failed ({res.returncode}):\n{res.stdout}{res.stderr}"
    return res.stdout + res.stderr


@pytest.mark.tofu
def test_init_apply_then_plan_shows_no_changes(tofu: Tofu, tmp_path: Path) -> None:
    work = tmp_path / "stack"
    work.mkdir()
    (work / "main.tf.json").write_text(json.dumps(_config(tofu, "shop", "shop"), indent=2))
    # The provider logs in as the superuser through PGPASSFILE (set by tofu.env()).
    env = {"TF_VAR_password": CANARY}
    outputs = []

    outputs.append(_ok(tofu.run("init", "-no-color", cwd=work, env=env), "init"))
    # OpenTofu names a provider of its default registry without the host
    short = tofu.provider_source.removeprefix("registry.opentofu.org/")
    assert f"Installing {short} v{tofu.provider_version}" in outputs[-1]
    lock = (work / ".terraform.lock.hcl").read_text()
    assert f'provider "{tofu.provider_source}"' in lock
    # hack/tofu's lock file holds the hash OpenTofu itself computed for the package
    kit_hashes = re.findall(r'"(h1:[^"]+)"', tofu.lock_file.read_text())
    assert kit_hashes and all(h in lock for h in kit_hashes), (kit_hashes, lock)
    assert f'version     = "{tofu.provider_version}"' in lock

    outputs.append(_ok(tofu.run("apply", "-auto-approve", "-no-color", cwd=work, env=env), "apply"))
    assert "Apply complete! Resources: 2 added, 0 changed, 0 destroyed." in outputs[-1]

    assert tofu.psql("SELECT rolcanlogin FROM pg_roles WHERE rolname = 'shop'") == "t"
    owner = "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'shop'"
    assert tofu.psql(owner) == "shop"
    # The role logs in with the password from the variable.
    login = subprocess.run(
        ["psql", "-X", "-w", "-At", "-U", "shop", "-d", "shop", "-c", "SELECT current_user"],
        env=tofu.env({"PGPASSWORD": CANARY, "PGPASSFILE": os.devnull}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (login.returncode, login.stdout.strip()) == (0, "shop"), login.stderr

    plan = tofu.run("plan", "-detailed-exitcode", "-no-color", cwd=work, env=env)
    outputs.append(plan.stdout + plan.stderr)
    assert plan.returncode == 0, f"expected no changes (exit 0):\n{outputs[-1]}"
    assert "No changes." in outputs[-1]

    for out in outputs:
        assert CANARY not in out


@pytest.mark.tofu
def test_init_refuses_a_provider_not_in_the_mirror(tofu: Tofu, tmp_path: Path) -> None:
    (tmp_path / "main.tf.json").write_text(
        json.dumps(
            {
                "terraform": {
                    "required_providers": {"random": {"source": "hashicorp/random"}},
                }
            }
        )
    )
    res = tofu.run("init", "-no-color", cwd=tmp_path)
    assert res.returncode == 1
    out = re.sub(r"\s+", " ", res.stderr)
    assert "Failed to query available provider packages" in out
    assert "/hashicorp/random" in out


def _script(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOFU_SCRIPT), *args],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_missing_provider_source_names_the_path_and_the_variable(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    res = _script("build", KONFIG_TOFU_POSTGRESQL_SRC=str(missing))
    assert res.returncode == 1
    assert res.stdout == ""
    assert f"KONFIG_TOFU_POSTGRESQL_SRC={missing}: no such file or directory" in res.stderr
    assert "github.com/cyrilgdn/terraform-provider-postgresql" in res.stderr


def test_provider_source_without_go_mod_is_refused(tmp_path: Path) -> None:
    res = _script("build", KONFIG_TOFU_POSTGRESQL_SRC=str(tmp_path))
    assert res.returncode == 1
    assert f"{tmp_path} has no go.mod" in res.stderr


def test_missing_postgres_binaries_name_the_debian_package(tmp_path: Path) -> None:
    res = _script("up", KONFIG_TOFU_PG_BIN=str(tmp_path), KONFIG_TOFU_DIR=str(tmp_path / "run"))
    assert res.returncode == 1
    assert "no PostgreSQL server binaries (initdb, pg_ctl, postgres)" in res.stderr
    assert "Debian package `postgresql`" in res.stderr
    assert not (tmp_path / "run").exists()


def test_status_of_a_directory_without_postgres_exits_1(tmp_path: Path) -> None:
    res = _script("status", KONFIG_TOFU_DIR=str(tmp_path))
    assert (res.returncode, res.stdout) == (1, "")
    assert f"not running (dir {tmp_path})" in res.stderr


def test_unknown_command_is_a_usage_error() -> None:
    res = _script("frobnicate")
    assert res.returncode == 2
    assert "unknown command 'frobnicate'" in res.stderr


def test_a_cache_elsewhere_serves_the_pinned_build_without_its_source(
    tofu: Tofu, tmp_path: Path
) -> None:
    """What actions/setup does on a CI runner: the tools checkout has no ../shared, the
    cache (KONFIG_TOFU_CACHE) holds the pinned build; `key` says so and `build` lays out
    a mirror there without the source. An empty cache asks for the source."""
    clone = tmp_path / "tools" / "hack"
    clone.mkdir(parents=True)
    script = clone / "tofu"
    script.write_bytes(TOFU_SCRIPT.read_bytes())
    script.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "bin").symlink_to(tofu.tofu.parent.parent)

    def run(*args: str, cache_dir: Path) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "KONFIG_TOFU_POSTGRESQL_SRC"}
        return subprocess.run(
            [str(script), *args],
            env=dict(env, KONFIG_TOFU_CACHE=str(cache_dir)),
            capture_output=True,
            text=True,
            timeout=120,
        )

    key = run("key", cache_dir=cache)
    assert key.returncode == 0, key.stderr
    facts = json.loads(key.stdout)
    assert facts["built"] is True and facts["key"] == tofu.cli_config.parent.name
    build = run("build", cache_dir=cache)
    assert build.returncode == 0, build.stderr
    built = json.loads(build.stdout)
    assert built["cli_config"] == str(cache / facts["key"] / "tofurc")
    assert Path(built["tofu"]).resolve() == tofu.tofu.resolve()
    (provider,) = built["providers"]
    assert provider["built_from"].startswith("sha256:") and "(pinned)" in provider["built_from"]
    mirrored = cache / facts["key"] / "mirror" / "registry.opentofu.org" / "cyrilgdn" / "postgresql"
    assert (mirrored / tofu.provider_version / "linux_amd64").is_dir()
    # The CLI configuration names the mirror by its real path, whatever path reached it
    # (runners reach one tool cache through links of their own), and a moved cache
    # gets it rewritten.
    alias = tmp_path / "runner-1-tool-cache"
    alias.symlink_to(cache)
    again = run("build", cache_dir=alias)
    assert again.returncode == 0, again.stderr
    rc = Path(json.loads(again.stdout)["cli_config"]).read_text()
    assert f'"{(cache / facts["key"] / "mirror").resolve()}"' in rc, rc
    moved = tmp_path / "moved"
    cache.rename(moved)
    alias.unlink()
    after = run("build", cache_dir=moved)
    assert after.returncode == 0, after.stderr
    rc = Path(json.loads(after.stdout)["cli_config"]).read_text()
    assert f'"{(moved / facts["key"] / "mirror").resolve()}"' in rc, rc

    empty = tmp_path / "empty"
    assert json.loads(run("key", cache_dir=empty).stdout)["built"] is False
    missing = run("build", cache_dir=empty)
    assert missing.returncode == 1 and missing.stdout == ""
    assert "the source of the postgresql provider was not found" in missing.stderr
    assert "KONFIG_TOFU_POSTGRESQL_SRC" in missing.stderr
    assert not any(empty.glob("bin/*")), "nothing is built without the source"

"""Acceptance: a canary value in an encrypted file never leaves memory.

A real repository (git), values encrypted by Konfig and by the real sops CLI, the real
control plane. Every stage runs through the CLI: compile (with its cache), test
(golden update and compare), check, preview in text / markdown / JSON, apply, the PR
comment and the job summary (`konfig report`). Then everything the run wrote (the
working tree with goldens and the compile cache, every output and log, every git
object) is searched for the canary in plain text and base64; the cluster must hold
the real value. The failures (tampered file, wrong key, no key, unknown reference,
malformed file) are clear errors naming file and key, and write nothing.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest
from fixtures.cluster import Cluster
from fixtures.repos import AUTHOR, KonfigRunner, RepoBuilder
from fixtures.sops import SopsCli
from kubeutil import unique

from konfig.engine.kube import Kube

pytestmark = pytest.mark.cluster

CANARY = "canary-e2e-4b1d9f7c2a85"
CANARY_TLS = "canary-tls-9a3e6c0d5f12"
STACK_YAML = "name: dev\nkubernetes:\n  context: admin\n"
MAIN = (
    """\
import base.pkg.models.frontend

web: frontend.Server {{
    name = "web"
    namespace = "{ns}"
    image = "nginx:1.27.3"
    ports = [{{port = 80}}]
    env = {{API_TOKEN = {{secret = "api", key = "token"}}}}
    secrets = [
        {{name = "api", fromFile = "secrets.enc.yaml", keys = ["token", "user"]}}
        {{name = "tls", type = "kubernetes.io/tls", fromFile = "tls.enc.yaml", """
    """keys = ["tls.crt", "tls.key"]}}
    ]
}}
"""
)


def forms(value: str) -> list[str]:
    """The value and every base64 spelling a Secret or a log could carry."""
    raw = value.encode()
    out = [value, base64.b64encode(raw).decode()]
    for shift in (1, 2):  # base64 of the value inside a longer text
        out.append(base64.b64encode(b"x" * shift + raw).decode()[4:-4])
    return out


def leaks(texts: dict[str, str]) -> list[str]:
    found = []
    for name, text in texts.items():
        for canary in (CANARY, CANARY_TLS):
            for form in forms(canary):
                if form and form in text:
                    found.append(f"{name}: {form}")
    return found


def git(root: Path, *args: str) -> str:
    env = {**os.environ, **AUTHOR}
    return subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    ).stdout


class Run:
    """Every CLI call of the test, its output kept for the final search."""

    def __init__(self, konfig: KonfigRunner, root: Path, kubeconfig: Path) -> None:
        self.konfig = konfig
        self.root = root
        self.kc = f"--kubeconfig={kubeconfig}"
        self.outputs: dict[str, str] = {}

    def __call__(self, *args: str, code: int | tuple[int, ...] = 0) -> tuple[str, str]:
        result = self.konfig(*args, cwd=self.root)
        self.outputs[f"konfig {' '.join(args)} #{len(self.outputs)}"] = result.out + result.err
        wanted = code if isinstance(code, tuple) else (code,)
        assert result.code in wanted, f"konfig {' '.join(args)} -> {result.code}\n{result.err}"
        return result.out, result.err


def test_canary_never_leaves_memory(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    kube: Kube,
    sops_cli: SopsCli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = repo_builder.root
    project = unique("sec")
    ns = project
    stack = f"appops/{project}/dev"
    out = tmp_path / "out"
    out.mkdir()
    run = Run(konfig, root, cluster.kubeconfig)

    key = tmp_path / "age.key"
    recipient, _ = run("secrets", "keygen", "-o", str(key))
    recipient = recipient.strip()
    repo_builder.write(
        ".sops.yaml", f"creation_rules:\n  - path_regex: /dev/\n    age: {recipient}\n"
    )
    repo_builder.stack(project, "dev", main=MAIN.format(ns=ns), stack_yaml=STACK_YAML)
    # one file encrypted by Konfig, one by the real sops CLI
    repo_builder.write(f"{stack}/secrets.enc.yaml", f"api:\n  token: {CANARY}\n  user: shop\n")
    run("secrets", "encrypt", f"{stack}/secrets.enc.yaml")
    plain = tmp_path / "tls.yaml"
    plain.write_text(f"tls:\n  tls.crt: cert-{CANARY_TLS}\n  tls.key: {CANARY_TLS}\n")
    encrypted = sops_cli.run("encrypt", "--age", recipient, str(plain), cwd=tmp_path).stdout
    plain.unlink()
    repo_builder.write(f"{stack}/tls.enc.yaml", encrypted)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "stack with encrypted secrets")

    # --- no key anywhere: compile, test, check --------------------------------------
    monkeypatch.delenv("SOPS_AGE_KEY", raising=False)
    monkeypatch.delenv("SOPS_AGE_KEY_FILE", raising=False)
    run("compile", stack, "--json")
    spec_text, _ = run("compile", stack)
    assert "sha256:" in spec_text and f"{stack}/secrets.enc.yaml" in spec_text
    run("test", stack, "--update")
    run("test", stack)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "goldens")
    run("check", stack, "--format", "json", code=(0, 1))
    checked = run.outputs[list(run.outputs)[-1]]
    assert "secrets/plaintext-secret" not in checked
    run("secrets", "check")

    # --- no key: preview still works, says what it could not compare; apply refuses ---
    text, _ = run("preview", stack, run.kc)
    assert "could not compare" in text and "api" in text
    _, err = run("apply", stack, "--yes", run.kc, code=1)
    assert "SOPS_AGE_KEY" in err and "nothing was applied" in err
    assert kube.get("v1", "Namespace", ns, None) is None

    # --- with the key: preview in every format, apply, report --------------------------
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    run(
        "preview",
        stack,
        run.kc,
        "--format",
        "json",
        "--out",
        str(out / "preview.json"),
        code=(0, 2),
    )
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    run(
        "preview",
        stack,
        run.kc,
        "--format",
        "markdown",
        "--out",
        str(out / "preview.md"),
        code=(0, 2),
    )
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    text, _ = run("preview", stack, run.kc, "--diff")
    preview = json.loads((out / "preview.json").read_text())
    secret = next(
        c for s in preview["stacks"] for c in s["changes"] if c["id"] == f"v1:Secret:{ns}:api"
    )
    assert secret["action"] == "create"
    assert {k["key"]: k["status"] for k in secret["secrets"]} == {"token": "new", "user": "new"}
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    applied, _ = run("apply", stack, "--yes", "--json", run.kc)
    (out / "apply.json").write_text(applied)
    live = kube.get("v1", "Secret", "api", ns)
    assert live is not None and base64.b64decode(live["data"]["token"]).decode() == CANARY
    live_tls = kube.get("v1", "Secret", "tls", ns)
    assert live_tls is not None
    assert base64.b64decode(live_tls["data"]["tls.key"]).decode() == CANARY_TLS
    run(
        "report",
        "--preview",
        str(out / "preview.json"),
        "--sha",
        "abc",
        "--out",
        str(out / "comment.md"),
    )
    run(
        "report",
        "--apply",
        str(out / "apply.json"),
        "--sha",
        "abc",
        "--summary-file",
        str(out / "summary.md"),
        code=(0, 1),
    )

    # --- one value changes: only its digest, and preview says changed, never the value --
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    monkeypatch.setenv("EDITOR", "sed -i s/shop/shop2/")
    run("secrets", "edit", f"{stack}/secrets.enc.yaml")
    _, err = run("test", stack, code=1)  # the golden shows the digest moved
    run("test", stack, "--update")
    golden_diff = git(root, "diff", "--", f"{stack}/ci-test")
    added = [line for line in golden_diff.splitlines() if line.startswith("+")]
    assert [line for line in added if "digest: sha256:" in line] == added[1:]  # +++ header
    assert len(added) == 2  # one digest moved: only "user" changed
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    run(
        "preview",
        stack,
        run.kc,
        "--detailed-exitcode",
        "--format",
        "json",
        "--out",
        str(out / "preview2.json"),
        code=2,
    )
    changes = json.loads((out / "preview2.json").read_text())["stacks"][0]["changes"]
    api = next(c for c in changes if c["id"] == f"v1:Secret:{ns}:api")
    assert {k["key"]: k["status"] for k in api["secrets"]} == {
        "token": "unchanged",
        "user": "changed",
    }
    git(root, "commit", "-q", "-am", "user changed")

    # --- failures: clear errors naming file and key, nothing written -------------------
    before = kube.get("v1", "Secret", "api", ns)
    assert before is not None
    enc = root / stack / "secrets.enc.yaml"
    good = enc.read_text()
    value = good.split("token: ")[1].split("\n")[0]
    data = value.split("data:")[1].split(",")[0]
    flipped = base64.b64encode(
        bytes([base64.b64decode(data)[0] ^ 1]) + base64.b64decode(data)[1:]
    ).decode()
    enc.write_text(good.replace(data, flipped))
    # the edits below are not committed: apply runs them with --allow-dirty (else it
    # refuses the uncommitted tree before it reads a secret)
    dirty = ("apply", stack, "--yes", "--allow-dirty", run.kc)
    for args in (("preview", stack, run.kc), dirty):
        monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
        out_text, err = run(*args, code=1)
        message = out_text + err
        assert f'{stack}/secrets.enc.yaml:2 (key ["api"]["token"])' in message, message
        assert "tampered" in message
    enc.write_text(good)

    other = tmp_path / "other.key"
    run("secrets", "keygen", "-o", str(other))
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(other))
    _, err = run("apply", stack, "--yes", run.kc, code=1)
    assert f"{stack}/secrets.enc.yaml: no key in SOPS_AGE_KEY_FILE={other} can decrypt" in err

    repo_builder.write(f"{stack}/main.k", MAIN.format(ns=ns).replace('"user"]', '"missing"]'))
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    _, err = run(*dirty, code=1)
    assert f'{stack}/secrets.enc.yaml (key ["api"]["missing"]): unknown reference' in err
    repo_builder.write(f"{stack}/main.k", MAIN.format(ns=ns))

    enc.write_text("api: [unclosed\n")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key))
    _, err = run(*dirty, code=1)
    assert f"{stack}/secrets.enc.yaml:2: invalid YAML" in err
    enc.write_text(good)
    assert kube.get("v1", "Secret", "api", ns) == before  # nothing was written

    run("destroy", stack, "--yes", run.kc)

    # --- the search ------------------------------------------------------------------
    texts = dict(run.outputs)
    for path in list(root.rglob("*")) + list(out.rglob("*")):
        if path.is_file() and ".git" not in path.parts:
            texts[str(path)] = path.read_text(errors="replace")
    objects = git(root, "cat-file", "--batch-all-objects", "--batch-check").split()
    texts["git objects"] = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode(errors="replace")
    assert len(objects) > 10
    assert (root / ".cache" / "konfig").is_dir()  # the compile cache was searched too
    assert leaks(texts) == []

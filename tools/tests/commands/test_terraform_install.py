"""Where OpenTofu gets its providers, end to end: konfig.yaml ``terraform.installation``
and the repository's ``.terraform.lock.hcl``.

The registry-shaped path: a provider network mirror (OpenTofu's documented protocol:
``<host>/<namespace>/<type>/index.json`` and ``<version>.json`` with ``archives`` and
``hashes``, a zip of the package) served over https on loopback with a certificate made
here, the provider the one ``hack/tofu`` built; konfig writes the CLI configuration
from konfig.yaml and applies a database stack through it against the local PostgreSQL.
The air-gapped path: konfig.yaml names the filesystem mirror, and a lock file whose hash
is not the package's is refused before anything is planned.

No runner CLI configuration (``TF_CLI_CONFIG_FILE``) nor lock file override
(``KONFIG_TOFU_LOCK_FILE``) is set here: what konfig.yaml and the lock file at the
repository's root say is what runs."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import json
import re
import shutil
import ssl
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from fixtures.cluster import Cluster
from fixtures.repos import KonfigRunner, RepoBuilder
from fixtures.tofu import PG_ENVIRONMENT, PG_STACK_YAML, Tofu, grant_credentials
from kubeutil import unique

pytestmark = [pytest.mark.cluster, pytest.mark.tofu]

MAIN = """\
import base.pkg.models.frontend

app: frontend.Server {{
    name = "{name}"
    namespace = "{name}"
    image = "nginx:1.27.3"
    ports = [{{port = 80}}]
    database = {{extensions = ["pgcrypto"]}}
}}
"""

STACK_YAML = PG_STACK_YAML.format(name="dev")


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own trust anchor) and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "konfig test mirror")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@dataclass
class Mirror:
    url: str
    cert: Path
    requests: list[str] = field(default_factory=list)


def _lock_hashes(tofu: Tofu) -> list[str]:
    hashes = re.findall(r'"(h1:[^"]+)"', tofu.lock_file.read_text(encoding="utf-8"))
    assert hashes, tofu.lock_file
    return hashes


@pytest.fixture
def network_mirror(tofu: Tofu, tmp_path: Path) -> Iterator[Mirror]:
    """The provider of ``tofu``'s mirror served by OpenTofu's provider network mirror
    protocol over https on a free loopback port."""
    root = tmp_path / "mirror-site"
    host, namespace, name = tofu.provider_source.split("/")
    package = tofu.mirror / tofu.provider_source / tofu.provider_version / "linux_amd64"
    (binary,) = package.iterdir()
    site = root / host / namespace / name
    site.mkdir(parents=True)
    archive = f"terraform-provider-{name}_{tofu.provider_version}_linux_amd64.zip"
    with zipfile.ZipFile(site / archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(binary, binary.name)
    (site / "index.json").write_text(json.dumps({"versions": {tofu.provider_version: {}}}))
    (site / f"{tofu.provider_version}.json").write_text(
        json.dumps({"archives": {"linux_amd64": {"url": archive, "hashes": _lock_hashes(tofu)}}})
    )
    cert, key = _certificate(tmp_path)
    seen: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def do_GET(self) -> None:
            seen.append(self.path)
            super().do_GET()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Mirror(f"https://127.0.0.1:{server.server_address[1]}/", cert, seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def plain_env(tofu: Tofu, tofu_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tofu_env`` without the runner's CLI configuration and lock file: konfig.yaml
    and the repository's lock file decide."""
    monkeypatch.delenv("TF_CLI_CONFIG_FILE")
    monkeypatch.delenv("KONFIG_TOFU_LOCK_FILE")
    return tofu_env


def _repo(repo: RepoBuilder, tofu: Tofu, installation: dict[str, str]) -> str:
    """A database stack (the example's model: a Server with a database), konfig.yaml's
    installation set, the mirror's lock file at the repository's root."""
    name = unique("instdb")
    grant_credentials(
        repo.root,
        [{"stacks": ["appops/*/dev"], "provider": "postgresql", "environment": PG_ENVIRONMENT}],
    )
    path = repo.root / "konfig.yaml"
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    config["terraform"]["installation"] = installation
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    shutil.copyfile(tofu.lock_file, repo.root / ".terraform.lock.hcl")
    repo.stack(name, "dev", main=MAIN.format(name=name), stack_yaml=STACK_YAML)
    return name


def test_apply_installs_the_provider_from_a_network_mirror(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    tofu: Tofu,
    plain_env: Path,
    network_mirror: Mirror,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(network_mirror.cert))
    name = _repo(repo_builder, tofu, {"networkMirror": network_mirror.url})
    db = name.replace("-", "_")
    res = konfig(
        "apply",
        f"{name}/dev",
        "--allow-dirty",
        "--yes",
        "--json",
        f"--kubeconfig={cluster.kubeconfig}",
        cwd=repo_builder.root,
    )
    assert res.code == 0, res.out + res.err
    applied = {o["id"]: o["outcome"] for o in json.loads(res.out)["stacks"][0]["objects"]}
    assert applied[f"cyrilgdn/postgresql:postgresql_role:{db}"] == "created", applied
    assert tofu.psql(f"SELECT rolcanlogin FROM pg_roles WHERE rolname = '{db}'") == "t"
    # OpenTofu asked the mirror, by its protocol, and downloaded the package from it
    base = f"/{tofu.provider_source}"
    assert f"{base}/index.json" in network_mirror.requests, network_mirror.requests
    assert f"{base}/{tofu.provider_version}.json" in network_mirror.requests
    assert any(r.endswith("_linux_amd64.zip") for r in network_mirror.requests)
    # konfig wrote the CLI configuration from konfig.yaml: that mirror, nothing else
    rc = (plain_env / ".konfig-tofurc").read_text(encoding="utf-8")
    assert f'url = "{network_mirror.url}"' in rc and "direct" not in rc, rc
    # and verified the package against the repository's lock file
    (workdir,) = [p for p in plain_env.iterdir() if p.is_dir()]
    lock = (workdir / ".terraform.lock.hcl").read_text(encoding="utf-8")
    assert all(h in lock for h in _lock_hashes(tofu)), lock


def test_a_package_not_in_the_lock_file_is_refused(
    repo_builder: RepoBuilder,
    konfig: KonfigRunner,
    cluster: Cluster,
    tofu: Tofu,
    plain_env: Path,
) -> None:
    name = _repo(repo_builder, tofu, {"filesystemMirror": str(tofu.mirror)})
    db = name.replace("-", "_")
    lock = repo_builder.root / ".terraform.lock.hcl"
    # the hash of another package (as the registry's would be, for this local build)
    other = "h1:" + "A" * 43 + "="
    lock.write_text(
        re.sub(r'"h1:[^"]+"', f'"{other}"', lock.read_text(encoding="utf-8")), encoding="utf-8"
    )
    kc = f"--kubeconfig={cluster.kubeconfig}"
    res = konfig("apply", f"{name}/dev", "--allow-dirty", "--yes", kc, cwd=repo_builder.root)
    text = res.out + res.err
    assert res.code == 1, text
    assert "refused: the provider package registry.opentofu.org/cyrilgdn/postgresql 1.26.0" in text
    assert "does not match the hashes in" in text and ".terraform.lock.hcl" in text, text
    assert "tofu providers lock" in text, text
    assert tofu.psql(f"SELECT count(*) FROM pg_roles WHERE rolname = '{db}'") == "0"
    # konfig's CLI configuration is the filesystem mirror konfig.yaml names
    rc = (plain_env / ".konfig-tofurc").read_text(encoding="utf-8")
    assert f'path = "{tofu.mirror.resolve()}"' in rc, rc

    # a lock file without the provider: refused before OpenTofu runs, naming the command
    lock.write_text("# no providers\n", encoding="utf-8")
    res = konfig("apply", f"{name}/dev", "--allow-dirty", "--yes", kc, cwd=repo_builder.root)
    text = res.out + res.err
    assert res.code == 1, text
    assert "holds no entry for provider registry.opentofu.org/cyrilgdn/postgresql" in text, text
    assert "tofu providers lock -platform=linux_amd64" in text, text

    # the right hashes: the same apply goes through the filesystem mirror
    shutil.copyfile(tofu.lock_file, lock)
    res = konfig("apply", f"{name}/dev", "--allow-dirty", "--yes", kc, cwd=repo_builder.root)
    assert res.code == 0, res.out + res.err
    assert tofu.psql(f"SELECT rolcanlogin FROM pg_roles WHERE rolname = '{db}'") == "t"

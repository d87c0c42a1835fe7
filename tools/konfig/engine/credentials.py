"""Kubeconfig ``exec`` credential plugins, run by konfig with a time limit.

A kubeconfig user may get its credentials from a plugin (``aws eks get-token``,
``gke-gcloud-auth-plugin``, ``kubelogin``, ...). The ``kubernetes`` client runs such a
plugin without a time limit and logs its failures to the root logger; konfig runs it
itself, the way client-go does (the ``ExecCredential`` protocol of
``client.authentication.k8s.io``), with a timeout, in a process group of its own that
is killed as a whole when the plugin does not answer or konfig is stopped, and turns
every failure into a :class:`CredentialError` that names the plugin, the kubeconfig user
and how to check the plugin by hand. Never interactive: konfig runs in CI.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from konfig.errors import KonfigError

DEFAULT_TIMEOUT = 30.0
KIND = "ExecCredential"


class CredentialError(KonfigError):
    """A credential plugin did not answer in time, failed, or printed no credential."""


@dataclass(frozen=True)
class Credential:
    """What a plugin returned: a bearer token, or a client certificate and key (PEM)."""

    token: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None
    expires: datetime | None = None

    def expired(self, now: datetime, *, margin: float = 10.0) -> bool:
        return self.expires is not None and now.timestamp() >= self.expires.timestamp() - margin


@dataclass(frozen=True)
class Plugin:
    """A kubeconfig user's ``exec`` section, checked."""

    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    api_version: str
    provide_cluster_info: bool
    install_hint: str
    user: str
    kubeconfig: str

    @property
    def command_line(self) -> str:
        return shlex.join([self.command, *self.args])

    def exec_info(self, cluster: Mapping[str, Any] | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"interactive": False}
        if self.provide_cluster_info and cluster is not None:
            spec["cluster"] = _cluster_info(cluster)
        return {"apiVersion": self.api_version, "kind": KIND, "spec": spec}

    def how_to_check(self, cluster: Mapping[str, Any] | None) -> str:
        info = json.dumps(self.exec_info(cluster), separators=(",", ":"))
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        prefix = f"{env} " if env else ""
        return f"KUBERNETES_EXEC_INFO={shlex.quote(info)} {prefix}{self.command_line}"


def plugin_of(user: str, exec_config: Any, kubeconfig: str) -> Plugin:
    """Check a user's ``exec`` section; CredentialError when it is malformed."""
    where = f"user {user!r} in kubeconfig {kubeconfig}"
    if not isinstance(exec_config, Mapping):
        raise CredentialError(f"{where}: `exec` must be a mapping")
    command = exec_config.get("command")
    api_version = exec_config.get("apiVersion")
    if not isinstance(command, str) or not command:
        raise CredentialError(f"{where}: `exec.command` must name the credential plugin")
    if not isinstance(api_version, str) or not api_version:
        raise CredentialError(
            f"{where}: `exec.apiVersion` is required (e.g. client.authentication.k8s.io/v1)"
        )
    args = exec_config.get("args") or []
    if not isinstance(args, list):
        raise CredentialError(f"{where}: `exec.args` must be a list of strings")
    env: list[tuple[str, str]] = []
    for item in exec_config.get("env") or []:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise CredentialError(f"{where}: `exec.env` entries need `name` and `value`")
        env.append((str(item["name"]), str(item.get("value", ""))))
    return Plugin(
        command=command,
        args=tuple(str(a) for a in args),
        env=tuple(env),
        api_version=api_version,
        provide_cluster_info=bool(exec_config.get("provideClusterInfo")),
        install_hint=str(exec_config.get("installHint") or ""),
        user=user,
        kubeconfig=kubeconfig,
    )


def _cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for key, name in (
        ("server", "server"),
        ("tls-server-name", "tls-server-name"),
        ("insecure-skip-tls-verify", "insecure-skip-tls-verify"),
        ("certificate-authority-data", "certificate-authority-data"),
        ("proxy-url", "proxy-url"),
    ):
        if key in cluster:
            info[name] = cluster[key]
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, Mapping) and ext.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = ext.get("extension")
    return info


def run(
    plugin: Plugin,
    *,
    timeout: float,
    cwd: str | None,
    cluster: Mapping[str, Any] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> Credential:
    """Run the plugin once and return its credential; CredentialError on any failure.

    The plugin inherits ``base_env`` (default: this process's environment, as kubectl
    passes it on); the kubeconfig's ``exec.env`` and ``KUBERNETES_EXEC_INFO`` are added.
    """
    env = dict(os.environ if base_env is None else base_env)
    env.update(plugin.env)
    env["KUBERNETES_EXEC_INFO"] = json.dumps(plugin.exec_info(cluster))
    who = (
        f"the credential plugin `{plugin.command_line}` of user {plugin.user!r} "
        f"(kubeconfig {plugin.kubeconfig})"
    )
    check = f"check it by running it yourself: {plugin.how_to_check(cluster)}"
    try:
        proc = subprocess.Popen(
            [plugin.command, *plugin.args],
            cwd=cwd or None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed as a whole
        )
    except FileNotFoundError:
        hint = plugin.install_hint.strip() or "install it, or fix `exec.command` in the kubeconfig"
        raise CredentialError(f"{who} is not installed (not found)", hint=hint) from None
    except OSError as exc:
        raise CredentialError(f"{who} cannot be started: {exc.strerror}", hint=check) from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CredentialError(
            f"{who} did not answer within {timeout:g}s",
            hint=f"{check}\n  a plugin that waits for a login must be logged in first (konfig "
            "never prompts); if it is only slow, raise --credential-timeout "
            "(or KONFIG_CREDENTIAL_TIMEOUT)",
        ) from None
    except BaseException:
        _kill_group(proc)  # interrupted: never leave the plugin running
        raise
    _kill_group(proc)  # whatever it left behind in its group
    stderr = _tail(err)
    if proc.returncode != 0:
        said = f": {stderr}" if stderr else " (it printed nothing on stderr)"
        raise CredentialError(f"{who} exited with {proc.returncode}{said}", hint=check)
    return _credential(out, plugin, who, check)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
        pass
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _tail(data: bytes, lines: int = 5) -> str:
    text = data.decode("utf-8", errors="replace").strip()
    kept = text.splitlines()[-lines:]
    return " / ".join(line.strip() for line in kept if line.strip())[:500]


def _credential(out: bytes, plugin: Plugin, who: str, check: str) -> Credential:
    expected = (
        f"expected JSON with apiVersion {plugin.api_version}, kind {KIND} and a status "
        "holding a token or a client certificate and key"
    )
    text = out.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        shown = text[:120] + ("…" if len(text) > 120 else "")
        raise CredentialError(
            f"{who} did not print an {KIND} ({expected}); it printed: {shown!r}", hint=check
        ) from None
    if not isinstance(data, Mapping) or data.get("kind") != KIND:
        raise CredentialError(f"{who} did not print an {KIND} ({expected})", hint=check)
    if data.get("apiVersion") != plugin.api_version:
        raise CredentialError(
            f"{who} answered with apiVersion {data.get('apiVersion')!r}, but the kubeconfig "
            f"asks for {plugin.api_version!r}",
            hint="set `exec.apiVersion` in the kubeconfig to what the plugin speaks",
        )
    status = data.get("status")
    if not isinstance(status, Mapping):
        raise CredentialError(f"{who} printed an {KIND} without a status ({expected})", hint=check)
    expires = _time(status.get("expirationTimestamp"))
    token = status.get("token")
    if isinstance(token, str) and token:
        return Credential(token=token, expires=expires)
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if isinstance(cert, str) and cert and isinstance(key, str) and key:
        return Credential(client_certificate=cert, client_key=key, expires=expires)
    raise CredentialError(
        f"{who} printed an {KIND} with neither a token nor a client certificate and key",
        hint=check,
    )


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def user_entry(credential: Credential, user: Mapping[str, Any]) -> dict[str, Any]:
    """A kubeconfig ``user`` section with the plugin's credential in place of ``exec``."""
    entry = {k: v for k, v in user.items() if k != "exec"}
    if credential.token is not None:
        entry["token"] = credential.token
    else:
        assert credential.client_certificate is not None and credential.client_key is not None
        entry["client-certificate-data"] = base64.b64encode(
            credential.client_certificate.encode()
        ).decode()
        entry["client-key-data"] = base64.b64encode(credential.client_key.encode()).decode()
    return entry

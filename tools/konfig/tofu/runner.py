"""The one module that runs ``tofu``: init, plan, show, apply, providers schema.

A :class:`Workdir` is one stack's OpenTofu working directory. Every run gets an
environment built here from what the CLI passed (:class:`TofuSettings`): the caller's
base environment without ``TF_*``, ``PG*`` and ``KUBE_*`` variables, the CLI
configuration that installs providers only from the filesystem mirror
(``TF_CLI_CONFIG_FILE``), the cluster for the ``kubernetes`` backend
(``KUBE_CONFIG_PATHS``, ``KUBE_CTX``: by environment, never ``-backend-config``, which
OpenTofu records in ``.terraform/``) and the ephemeral variables (``TF_VAR_<name>``).

``tofu`` runs in a session of its own. On SIGINT/SIGTERM the command forwards the
signal (:func:`forward_signal`) and waits: OpenTofu then finishes what is in flight,
writes the state and releases its lock; it is never killed. Its output is scrubbed of
every secret value of the run before it reaches an error message. Failures are
:class:`TofuError`; a held state lock is :class:`StateLocked` with the command that
releases it; an import of an object that does not exist is :class:`ImportMissing`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from konfig.errors import KonfigError
from konfig.masking import scrub
from konfig.repo.files import WriteScope, atomic_write_text

# What the caller's environment may not pass on to tofu: the runtime sets these itself.
_DROPPED = ("TF_", "PG", "KUBE_", "KUBECONFIG", "SOPS_")
INIT_STAMP = ".konfig-init"
LOG_PREFIX = ".konfig-tofu-"  # a run's output, removed once read
TAIL = 40  # lines of tofu's output quoted in an error


class TofuError(KonfigError):
    """tofu failed; ``output`` is its (scrubbed) output."""

    def __init__(self, message: str, *, hint: str | None = None, output: str = "") -> None:
        super().__init__(message, hint=hint)
        self.output = output


@dataclass(frozen=True)
class LockInfo:
    id: str
    who: str = ""
    operation: str = ""
    created: str = ""


class StateLocked(TofuError):
    """Another tofu client holds the state's lock."""

    def __init__(self, message: str, lock: LockInfo, *, hint: str, output: str = "") -> None:
        super().__init__(message, hint=hint, output=output)
        self.lock = lock


class ImportMissing(TofuError):
    """An ``import`` block names an object that does not exist."""

    def __init__(self, message: str, addresses: Sequence[str], *, output: str = "") -> None:
        super().__init__(message, output=output)
        self.addresses = tuple(addresses)


@dataclass(frozen=True)
class TofuSettings:
    """How to run tofu: the binary, the CLI configuration (how providers are installed),
    the dependency lock file providers are verified against, the base environment."""

    binary: str = "tofu"
    cli_config: str | None = None
    environ: Mapping[str, str] = field(default_factory=dict)
    lock_timeout: float = 0.0  # seconds tofu waits for its state lock
    # the repository's .terraform.lock.hcl (konfig.tofu.installation): `tofu init` runs
    # with -lockfile=readonly on its entries; None only for callers that verify nothing
    # (the commands always give one)
    lock_file: str | None = None

    def base_environment(self) -> dict[str, str]:
        env = {k: v for k, v in self.environ.items() if not k.startswith(_DROPPED)}
        env.update(TF_IN_AUTOMATION="1", TF_INPUT="0")
        if self.cli_config:
            env["TF_CLI_CONFIG_FILE"] = self.cli_config
        return env


@dataclass(frozen=True)
class Cluster:
    """The cluster the ``kubernetes`` backend keeps the state in."""

    kubeconfig: str | None = None  # a path or a ':'-separated list
    context: str | None = None

    def environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        if self.kubeconfig:
            env["KUBE_CONFIG_PATHS"] = self.kubeconfig
        if self.context:
            env["KUBE_CTX"] = self.context
        return env


@dataclass(frozen=True)
class Run:
    code: int
    output: str  # stdout then stderr, scrubbed


_LOCK = threading.Lock()
_RUNNING: set[subprocess.Popen[str]] = set()


def forward_signal(signum: int) -> int:
    """Send ``signum`` to every running tofu process; returns how many were running."""
    with _LOCK:
        running = list(_RUNNING)
    for proc in running:
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass
    return len(running)


def running() -> int:
    with _LOCK:
        return len(_RUNNING)


class Workdir:
    """One stack's working directory (``what`` names the stack in messages)."""

    def __init__(
        self,
        settings: TofuSettings,
        path: Path,
        *,
        what: str,
        cluster: Cluster | None = None,
        secrets: set[str] | None = None,
        scope: WriteScope | None = None,
    ) -> None:
        self.settings = settings
        self.path = path
        self.scope = scope or WriteScope.named(path, "the OpenTofu working directory", folder=True)
        self.what = what
        self.cluster = cluster or Cluster()
        self.secrets: set[str] = set(secrets or ())

    # --- running ---------------------------------------------------------------------

    def _env(self, variables: Mapping[str, str] | None) -> dict[str, str]:
        env = self.settings.base_environment()
        env.update(self.cluster.environment())
        for name, value in (variables or {}).items():
            env[f"TF_VAR_{name}"] = value
        return env

    def run(
        self,
        *args: str,
        variables: Mapping[str, str] | None = None,
        timeout: float | None = None,
        data: bool = False,
    ) -> Run:
        """Run ``tofu ARGS`` in the working directory and wait (forwarding signals).

        Its output is scrubbed of the run's secret values, except ``data`` (JSON that
        the caller parses and masks structurally; never shown as it is)."""
        command = [self.settings.binary, *args]
        # tofu writes its progress to a file, not a pipe: if konfig dies (kill -9), tofu
        # is not killed by SIGPIPE mid-apply; it finishes, writes its state and releases
        # its lock. Data (JSON holding values in clear) only ever goes through a pipe.
        log_path = self.path / f"{LOG_PREFIX}{os.getpid()}-{threading.get_ident()}.log"
        log = None
        if not data:
            self.path.mkdir(parents=True, exist_ok=True)
            self.scope.check(log_path)
            log = log_path.open("w+", encoding="utf-8")
        try:
            proc = subprocess.Popen(
                command,
                cwd=self.path,
                env=self._env(variables),
                stdin=subprocess.DEVNULL,
                stdout=log or subprocess.PIPE,
                stderr=subprocess.STDOUT if log else subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except FileNotFoundError:
            _close(log, log_path)
            raise TofuError(
                f"{self.what}: cannot run OpenTofu: {self.settings.binary!r} not found",
                hint="install OpenTofu (hack/tofu build) and put it on PATH or set "
                "KONFIG_TOFU to its path",
            ) from None
        except OSError as exc:
            _close(log, log_path)
            raise TofuError(f"{self.what}: cannot run {self.settings.binary}: {exc}") from None
        with _LOCK:
            _RUNNING.add(proc)
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=timeout)
                    break
                except KeyboardInterrupt:
                    # Ctrl-C reached us, not tofu (its own session): pass it on and
                    # wait for tofu to finish what is in flight and write its state.
                    proc.send_signal(signal.SIGINT)
                    proc.communicate()
                    raise
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate()
            raise TofuError(
                f"{self.what}: tofu {args[0]} did not finish within {timeout:.0f}s; it was "
                "stopped with SIGTERM (state written, lock released)",
                output=self.scrub((out or "") + (err or "") + _close(log, log_path)),
            ) from None
        finally:
            with _LOCK:
                _RUNNING.discard(proc)
        if log is not None:
            out, err = _close(log, log_path), ""
        if data and proc.returncode == 0:
            return Run(0, out or "")
        return Run(proc.returncode, self.scrub((out or "") + (err or "")))

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    def check(self, run: Run, what: str) -> str:
        if run.code == 0:
            return run.output
        raise self.failure(run, what)

    def failure(self, run: Run, what: str) -> TofuError:
        """The error for a failed run: the state lock, a missing import, or tofu's words."""
        text = run.output
        if "Error acquiring the state lock" in text:
            lock = _lock_info(text)
            return StateLocked(
                f"{self.what}: the Terraform state is locked by another tofu client "
                f"(lock {lock.id or '?'}, {lock.operation or 'operation ?'} by "
                f"{lock.who or '?'} since {lock.created or '?'}); nothing was changed",
                lock,
                hint=self.unlock_hint(lock),
                output=text,
            )
        if "Cannot import non-existent remote object" in text:
            # "While attempting to import an existing object to "<address>", ..." (the
            # diagnostic may also name it in a "with <address>," line)
            missing = re.findall(r'import an existing object to\s+"([^"]+)"', text) or re.findall(
                r"^[│\s]*with ([A-Za-z0-9_]+\.[A-Za-z0-9_-]+),", text, re.MULTILINE
            )
            return ImportMissing(
                f"{self.what}: an object to import does not exist", missing, output=text
            )
        errors = _errors(text)
        return TofuError(
            f"{self.what}: tofu {what} failed" + (f": {errors}" if errors else ""),
            output=_tail(text),
        )

    def unlock_hint(self, lock: LockInfo) -> str:
        return (
            "if no other apply of this stack is running (a killed one leaves its lock held: "
            "OpenTofu's locks in Kubernetes never expire), release it with "
            f"`tofu -chdir={self.path} force-unlock -force {lock.id}` or clear the Lease's "
            "holder: `kubectl"
            + (f" --context {self.cluster.context}" if self.cluster.context else "")
            + " -n <state namespace> patch lease <lock lease> --type=json "
            '-p \'[{"op":"remove","path":"/spec/holderIdentity"}]\'`, then run again'
        )

    # --- the working directory -------------------------------------------------------

    def write_config(self, document: Mapping[str, Any], file: str) -> None:
        """Write the configuration, refusing a directory that holds another file OpenTofu
        would read (``terraform/forbidden``: an override, a backend, a module, a
        ``.tfvars`` Konfig did not write, e.g. one a pull request committed there)."""
        from konfig.tofu import guards

        self.path.mkdir(parents=True, exist_ok=True)
        foreign = guards.foreign_files(p.name for p in self.path.iterdir() if p.is_file())
        if foreign:
            raise TofuError(f"{self.path}: {guards.refusal(foreign)}")
        text = json.dumps(document, indent=2, sort_keys=True) + "\n"
        target = self.path / file
        if _file_text(str(target)) != text:
            atomic_write_text(target, text, scope=self.scope)

    def lock(self, terraform_block: Mapping[str, Any]) -> str | None:
        """The lock file this directory's configuration is verified against: the
        repository lock file's entries for its required providers (None without one)."""
        from konfig.tofu.installation import lock_for

        file = self.settings.lock_file
        if file is None:
            return None
        required = terraform_block.get("required_providers") or {}
        sources = [str(body.get("source", name)) for name, body in required.items()]
        text = _file_text(file) if Path(file).is_file() else None
        try:
            return lock_for(text, file, sources)
        except KonfigError as exc:
            raise TofuError(f"{self.what}: {exc.message}", hint=exc.hint) from None

    def init(self, terraform_block: Mapping[str, Any]) -> bool:
        """``tofu init`` unless the directory was initialised for the same providers,
        backend, CLI configuration, lock file and binary (a stamp file); True when it
        ran. With a lock file, its entries are written first and OpenTofu verifies every
        provider package against them (``-lockfile=readonly``)."""
        from konfig.tofu.installation import LOCK_FILE

        lock = self.lock(terraform_block)
        stamp = self._stamp(lock, terraform_block)
        stamp_file = self.path / INIT_STAMP
        if (self.path / ".terraform").is_dir() and _file_text(str(stamp_file)) == stamp:
            return False
        stamp_file.unlink(missing_ok=True)
        args = ["init", "-input=false", "-no-color", "-reconfigure"]
        if lock is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path / LOCK_FILE, lock, scope=self.scope)
            args.append("-lockfile=readonly")
        run = self.run(*args)
        if run.code != 0:
            text = run.output
            flat = " ".join(text.replace("│", " ").split())  # OpenTofu wraps its messages
            mismatch = re.search(
                r"the (?:local )?package for (\S+ \S+) doesn't match any of the checksums", flat
            )
            if mismatch:
                raise TofuError(
                    f"{self.what}: refused: the provider package {mismatch.group(1)} does not "
                    f"match the hashes in {self.settings.lock_file}; nothing was planned or "
                    "applied",
                    hint="if the provider's installation changed (another registry or "
                    "mirror, a new build), record its hashes with `tofu providers lock` "
                    'and have the change reviewed (docs/terraform.md, "The lock file"); '
                    "otherwise the package is not the one the repository trusts",
                    output=_tail(text),
                )
            if "Provider dependency changes detected" in flat:
                raise TofuError(
                    f"{self.what}: refused: the providers the configuration requires "
                    f"differ from what {self.settings.lock_file} records (version or "
                    "constraints); nothing was planned or applied",
                    hint="record the provider's version and hashes with `tofu providers "
                    'lock` (docs/terraform.md, "The lock file")',
                    output=_tail(text),
                )
            if "Failed to query available provider packages" in text or (
                "Failed to install provider" in text
            ):
                raise TofuError(
                    f"{self.what}: a provider could not be installed: "
                    + (_errors(text) or "tofu init failed"),
                    hint="check the resource's extensions.provider source and version, and "
                    "that the installation konfig.yaml `terraform.installation` names "
                    "(the registry, a network or filesystem mirror) offers it; a mirror "
                    "built here: hack/tofu build (hack/tofu.d/README.md, 'Adding another "
                    "provider')",
                    output=_tail(text),
                )
            raise self.failure(run, "init")
        atomic_write_text(stamp_file, stamp, scope=self.scope)
        return True

    def install_stamp(self, terraform_block: Mapping[str, Any]) -> str:
        """What ``tofu init`` of this directory installs and verifies with, as one
        sha256: the lock file's entries for its providers, the providers and backend,
        the binary, the CLI configuration (its path and text: where providers come
        from) and the cluster. :meth:`init` runs again when it changes, and a
        preview's reuse key covers it (:mod:`konfig.tofu.reuse`). Raises as
        :meth:`lock` does."""
        return self._stamp(self.lock(terraform_block), terraform_block)

    def _stamp(self, lock: str | None, terraform_block: Mapping[str, Any]) -> str:
        return hashlib.sha256(
            json.dumps(
                [
                    lock,
                    terraform_block,
                    self.settings.binary,
                    self.settings.cli_config,
                    _file_text(self.settings.cli_config),
                    self.cluster.context,
                    self.cluster.kubeconfig,
                ],
                sort_keys=True,
                default=str,
            ).encode()
        ).hexdigest()

    def plan(
        self,
        out: str,
        variables: Mapping[str, str],
        *,
        lock: bool,
        destroy: bool = False,
        refresh_only: bool = False,
        json_into: str | None = None,
    ) -> int:
        """``tofu plan -out``: exit 0 (no changes) or 2 (changes); TofuError otherwise.
        ``json_into``: a file for OpenTofu's machine-readable messages too."""
        args = ["plan", "-input=false", "-no-color", "-detailed-exitcode", f"-out={out}"]
        if json_into:
            args.append(f"-json-into={json_into}")
        args.append("-lock=true" if lock else "-lock=false")
        if lock and self.settings.lock_timeout:
            args.append(f"-lock-timeout={int(self.settings.lock_timeout)}s")
        if destroy:
            args.append("-destroy")
        if refresh_only:
            args.append("-refresh-only")
        run = self.run(*args, variables=variables)
        if run.code in (0, 2):
            return run.code
        raise self.failure(run, "plan")

    def show(self, plan: str | None = None) -> dict[str, Any]:
        """``tofu show -json [PLAN]``: the plan or the state, parsed (never written)."""
        run = self.run("show", "-json", "-no-color", *([plan] if plan else []), data=True)
        text = self.check(run, "show")
        try:
            data = json.loads(text.strip().splitlines()[0] if text.strip() else "{}")
        except (ValueError, IndexError) as exc:
            raise TofuError(f"{self.what}: tofu show -json printed no JSON: {exc}") from None
        if not isinstance(data, dict):
            raise TofuError(f"{self.what}: tofu show -json printed no JSON object")
        return data

    def apply(self, plan: str, variables: Mapping[str, str]) -> Run:
        """``tofu apply PLAN`` (the saved plan, exactly); the run, failed or not."""
        args = ["apply", "-input=false", "-no-color", "-auto-approve"]
        if self.settings.lock_timeout:
            args.append(f"-lock-timeout={int(self.settings.lock_timeout)}s")
        return self.run(*args, plan, variables=variables)


def _close(log: Any, path: Path) -> str:
    """The text of a run's log file, which is then closed and removed ("" without one)."""
    if log is None or log.closed:
        return ""
    log.seek(0)
    text = str(log.read())
    log.close()
    path.unlink(missing_ok=True)
    return text


def _file_text(path: str | None) -> str:
    if not path:
        return ""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return ""


def _lock_info(text: str) -> LockInfo:
    def field_of(name: str) -> str:
        match = re.search(rf"^\s*{name}:\s*(.*?)\s*$", text, re.MULTILINE)
        return match.group(1) if match else ""

    return LockInfo(field_of("ID"), field_of("Who"), field_of("Operation"), field_of("Created"))


def _errors(text: str) -> str:
    """OpenTofu's ``Error: ...`` lines and the line after each, joined."""
    found: list[str] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip().lstrip("│").strip()
        if stripped.startswith("Error: "):
            detail = ""
            for nxt in lines[index + 1 : index + 8]:
                body = nxt.strip().lstrip("│").strip()
                if body and not body.startswith(("with ", "on ", "Error: ")):
                    detail = body
                    break
            found.append(stripped[len("Error: ") :] + (f" ({detail})" if detail else ""))
    return "; ".join(dict.fromkeys(found))


def _tail(text: str) -> str:
    return "\n".join(text.splitlines()[-TAIL:])
